# syntax=docker/dockerfile:1
# The mcpbench image: docker build -t mcpbench . (BuildKit, for the cache mounts).
# Run: docker run --rm mcpbench run /scenarios/quickstart.toml --no-tui --output /tmp/run
# Kubernetes: deploy/kubernetes/README.md.

# The crate's rust-version is 1.88 (edition 2024, and the newest rust-version among the
# dependencies); CI builds with 1.95. Bookworm, to match the glibc of the runtime image.
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src
# Only what the build reads, so that edits to docs, scenarios or tests keep the cache.
# benches/: Cargo.toml declares the benches, and cargo wants their files to exist.
COPY Cargo.toml Cargo.lock ./
COPY knobs knobs
COPY mock-backend mock-backend
COPY benches benches
COPY src src
# The registry and target/ live in cache mounts: a source edit recompiles mcpbench, not its
# dependencies. The binary is copied out of the cache mount in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p mcpbench --bin mcpbench \
    && install -D target/release/mcpbench /out/mcpbench

# glibc and libgcc, CA certificates (for https targets), no shell; user nonroot (65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/mcpbench /usr/local/bin/mcpbench
COPY scenarios /scenarios
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mcpbench"]
CMD ["--help"]
