//! mcpbench: a load generator and reference server for MCP servers and gateways.
//!
//! # Layout
//!
//! The top-level modules in their layers, top first: each names modules of lower layers only
//! (`tests/architecture.rs` holds the same list and checks it; ARCHITECTURE.md has the
//! file-by-file map).
//!
//! ```text
//! cli         the command line: a file per command (run, serve, recording, results, inspect),
//!             signals; scenario overrides; exit codes 0/1/2
//! doctor      `mcpbench doctor`: what would make measurements on this machine unreliable
//! agent       `mcpbench mcp`: probe, run and compare as MCP tools for AI agents
//! fuzzing     (hidden) the checks of every network parser tests/fuzz.rs and fuzz/ share
//! driver      a run: check (limits, resolve, preflight) → prepare → start (worker threads,
//!             each a current-thread runtime of virtual users) → load (collected) → finish
//!             (summary, reports); A/B slices, find-max, repeats, agreed starts
//! gateway     the reference gateway's upstream side: pooled client sessions per thread
//!             behind server::proxy::Proxy
//! probe       `mcpbench probe URL`, `probe --tenants FILE`, and `mcpbench init`
//! otlp        the live view pushed as OTLP/HTTP metrics once per interval
//! ui          watchers of a run, fed only by the live view: the dashboard, progress lines
//! client      the MCP client: endpoints, sessions over every transport (the one match),
//!             the handshake, tools/list walked, request templates, the workload fitted
//! report      the one result model (summary) and every rendering of it; compare, merge
//! scenario    TOML → the finished Plan (overrides, shard, tool prefixes applied there)
//! transport   the Session trait and the client transports: Streamable HTTP (HTTP/1.1 and
//!             HTTP/2), stdio, WebSocket, legacy HTTP+SSE; the one SSE decoder
//! server      the reference MCP server: every transport and revision, tenants, audit
//! metrics     outcome classes, per-worker histogram shards, the interval grid, the collector
//! protocol    JSON-RPC envelopes decoded lazily, MCP messages, revisions, input schemas
//! trace       the trace format (record and replay), and `mcpbench trace`
//! ```
//!
//! # Data flow of `mcpbench run`
//!
//! ```text
//! scenario.toml ─▶ scenario::load_finished ─▶ Plan ─▶ driver::run
//!   driver::run: check: resolve target [embedded servers] → client::connect + workload_fit
//!                (reachability, revision, tools, arguments) → N worker threads
//!     worker thread (current-thread runtime): virtual users (driver::user, sessions from
//!       client::sessions) ─▶ Session ─▶ target
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
