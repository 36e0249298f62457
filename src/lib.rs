//! mcpbench: a load generator and reference server for MCP servers and gateways.
//!
//! # Layout
//!
//! ```text
//! cli         clap definitions: run | init | report | compare | merge | serve | record | trace
//!             | validate [--connect] | probe | doctor | mcp | completions | man | schema;
//!             scenario overrides; exit codes
//! scenario/   TOML as written (raw) → validated Plan (plan), built by concern (target, load,
//!             workload, replay of a trace) with shared checks (check) and locations (locate); argument
//!             generators (args); command-line overrides (overrides); thresholds; compare
//!             budgets (budget). Knows no
//!             server: tools are checked in preflight
//! protocol/   JSON-RPC envelopes decoded lazily (jsonrpc, scan); client messages (mcp);
//!             protocol revisions (version); tool input schemas (schema)
//! transport/  the Session trait; TCP/TLS (net); hot-path HTTP/1.1 (http1); one request on a
//!             fresh connection, off the hot path (exchange); the one SSE
//!             decoder (sse); WebSocket framing (ws); sessions over Streamable HTTP
//!             (streamable_http) and over multiplexed connections (mux: stdio, websocket,
//!             sse_legacy)
//! driver/     orchestration: target resolved (resolve), preflight (reachability, revision,
//!             tools, argument schemas), the one generic runner (runner: steady load, timed
//!             replays, first_call and cold_start rounds), divergence checks (divergence), arrival schedules
//!             (schedule), find-max (findmax), repeated runs (repeat), request templates
//!             (workload), the machine's limits checked before load (limits)
//! metrics/    Outcome classes (outcome); per-worker histogram shards and the counters
//!             transports fill (recorder); the interval grid (grid); interval merging,
//!             HdrHistogram interval log, time series (collector); the target's own
//!             processes read from /proc per interval (target). Knows no transport
//! report/     the one result model (summary), built from totals + plan + run facts (build),
//!             rendered as text (text) and files (files); thresholds judged (verdict); a
//!             finished run read back (run) and rendered as report.md / report.html
//!             (document, svg); two runs compared (compare); runs merged (merge);
//!             Prometheus and JUnit (export); the live view of a running test (live). Knows no driver
//! ui/         watchers of a run, fed only by the live view: the ratatui dashboard (view,
//!             terminal, format) or progress lines / JSON on stderr
//! otlp/       `--otlp-endpoint`: the live view pushed once per interval as OTLP/HTTP
//!             metrics (encode: the view as an OTLP request) from a thread of its own; export
//!             failures become one note of the run
//! init        `mcpbench init`: a starter scenario from a server's tools
//! doctor      `mcpbench doctor`: what would make measurements on this machine unreliable
//!             (limits for the planned load, timer, clock, CPU scaling and quota, other load),
//!             each finding with its fix; uses driver::limits' arithmetic
//! server/     the reference MCP server: every transport and revision, serve(listener,
//!             config, shutdown) and serve_stdio; wire, context and response helpers below
//!             dispatch, tools, sessions (each its tenant's) and the transports; TLS;
//!             tenants (policy), audit, credentials that reached it (credentials)
//! gateway     the reference gateway's upstream side (`serve --upstream`): pooled client
//!             sessions to upstream servers over any transport on their own I/O threads,
//!             behind server::proxy::Proxy
//! agent/      `mcpbench mcp`: probe, run and compare as MCP tools for AI agents, served by
//!             the reference server's stdio transport (its Proxy seam, its own Identity);
//!             targets on an allow-list, runs within bounds (guard), results under a root
//! probe/      `mcpbench probe URL`: one session with the client transport, tools listed and
//!             called, one-line report (the conformance suite's client scenarios); a gateway's
//!             tenant isolation checked as a hostile tenant would (tenants: --tenants FILE)
//! trace       the trace format (versioned JSON Lines of tools/list and tools/call: arrival,
//!             session, params, result digest, latency, outcome), read, written, redacted
//! record      `mcpbench record` (the gateway in front of one upstream, tools unprefixed, the
//!             server's recorder writing the trace) and `mcpbench trace`: header, audit log →
//!             trace (from_audit), summary (show)
//! fuzzing     (hidden) the checks of every network parser that tests/fuzz.rs and the
//!             cargo-fuzz targets in fuzz/ share
//! ```
//!
//! ARCHITECTURE.md has the file-by-file map and the layering `tests/architecture.rs` checks.
//!
//! # Data flow of `mcpbench run`
//!
//! ```text
//! scenario.toml ─▶ scenario::load ─▶ Plan ─▶ driver::run
//!   driver::run: resolve target [embedded servers] → preflight (reachability, tools,
//!                arguments) → N worker threads
//!     worker thread (current-thread runtime): virtual users ─▶ Session ─▶ target
//!       each request: Recorder (thread-local shard: histograms + counters)
//!     every interval of the grid: shard ─(one message per worker)─▶ collector
//!       ─▶ IntervalSnapshot ─▶ latency.hlog, timeseries.csv
//!       ─▶ report::live::Live ─(watch channel)─▶ ui thread (dashboard or progress)
//!                             └─(watch channel)─▶ otlp thread ─▶ OTel collector
//!   end: totals + plan + run facts ─▶ report::build ─▶ Summary ─▶ table, summary.json
//! ```
//!
//! The mock REST backend lives in the `mock-backend` workspace crate; the grammar of durations,
//! latency distributions and route knobs both use lives in `mcpbench-knobs` (`knobs/`).

pub mod agent;
pub mod cli;
pub mod client;
pub mod doctor;
pub mod driver;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod metrics;
pub mod otlp;
pub mod probe;
pub mod protocol;
pub mod report;
pub mod scenario;
pub mod server;
pub mod trace;
pub mod transport;
pub mod ui;
