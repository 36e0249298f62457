//! The `mcpbench` binary: parse the command line, set up logging, hand over to the library.

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, not the system's malloc: a connection costs the reference server hyper's two 8 KiB
/// buffers, mostly unwritten. jemalloc keeps each size in its own slabs, so the unwritten pages
/// of those buffers are never touched and stay out of resident memory; glibc's malloc splits
/// freed buffers for small objects and touches them. Measured with 5 000 idle HTTP/1.1
/// sessions: 13 KiB per session against 18 (docs/performance.md, "Sessions at scale"), and the
/// closed-loop CPU per request unchanged.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    mcpbench::cli::execute(mcpbench::cli::Cli::parse())
}
