//! mcpbench: a load generator and reference server for MCP servers and gateways.
//!
//! # Layout
//!
//! ```text
//! cli         clap definitions: run | serve | validate | probe
//! scenario/   TOML as written (raw) → validated Plan (plan); argument generators (args)
//! protocol/   JSON-RPC envelopes decoded lazily (jsonrpc, scan); client messages (mcp);
//!             protocol revisions (version)
//! transport/  the Session trait; TCP/TLS (net); hot-path HTTP/1.1 (http1); the one SSE
//!             decoder (sse); WebSocket framing (ws); sessions over Streamable HTTP
//!             (streamable_http) and over multiplexed connections (mux: stdio, websocket,
//!             sse_legacy)
//! driver/     the one generic runner: worker threads, virtual users, stop and warm-up;
//!             preflight (reachability, revision, tools)
//! metrics/    Outcome classes (outcome); per-worker histogram shards (recorder);
//!             interval merging, HdrHistogram interval log (collector)
//! report/     the one result model (summary) rendered as text, JSON and files
//! server/     the reference MCP server: every transport and revision, serve(listener,
//!             config, shutdown) and serve_stdio, tools, sessions, TLS
//! probe       `mcpbench probe URL`: one session with the client transport, tools listed and
//!             called, one-line report (the conformance suite's client scenarios)
//! ```
//!
//! # Data flow of `mcpbench run`
//!
//! ```text
//! scenario.toml ─▶ scenario::load ─▶ Plan ─▶ driver::run
//!   driver::run: [embedded servers] → preflight (reachability, tools) → N worker threads
//!     worker thread (current-thread runtime): virtual users ─▶ Session ─▶ target
//!       each request: Recorder (thread-local shard: histograms + counters)
//!     every interval: shard ─(one message per worker)─▶ collector ─▶ latency.hlog, progress
//!   end: totals ─▶ report::Summary ─▶ table on stdout, summary.json
//! ```
//!
//! The mock REST backend lives in the `mock-backend` workspace crate.

pub mod cli;
pub mod driver;
pub mod metrics;
pub mod probe;
pub mod protocol;
pub mod report;
pub mod scenario;
pub mod server;
pub mod transport;
