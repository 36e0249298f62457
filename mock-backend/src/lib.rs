//! A mock REST backend for mcpbench load tests.
//!
//! The reference MCP server's REST-backed tools call this backend over HTTP. Load tests then read
//! its `/stats` counters to prove that every call the load generator counted as successful really
//! reached a backend, so the counters must be exact and the hot path must be cheap.
//!
//! # Layout
//!
//! - [`accept`]: the one TCP accept loop of the project (TCP_NODELAY, accept-error backoff,
//!   bounded graceful drain, optionally a cap on open connections) and
//!   [`accept::serve_http`], which drives one HTTP/1.1 or HTTP/2 connection (with
//!   [`accept::serve_http_with`]: head timeout, write-stall limit, HTTP/2 stream limit). The
//!   root crate's servers reuse both.
//! - [`knobs`]: [`Route`] and the `--route` overrides; the knobs themselves ([`Latency`],
//!   [`Knobs`], durations) come from the `mcpbench-knobs` crate, shared with mcpbench.
//! - [`data`]: the deterministic data sets: contacts (searchable, pre-rendered) and invoices
//!   (generated on demand from the seed).
//! - [`query`]: percent-decoding of query strings.
//! - [`stats`]: lock-free per-route counters behind `/stats`.
//! - [`watchdog`]: the lazy deadline timer of connections and sessions (one `Sleep` each, moved
//!   on once per timeout period instead of a timer-wheel entry per request); the root crate's
//!   servers, gateway and virtual users share it.
//! - [`server`]: [`Config`], [`Backend`] (routing and handlers) and [`serve`].
//! - [`cli`]: the `mock-backend` command line; the binary that runs it belongs to the root
//!   `mcpbench` package, so `cargo install` of mcpbench installs both programs.
//!
//! # Data flow
//!
//! `serve` → `accept::serve_connections` → `accept::serve_http` → [`Backend::handle`]: route by
//! path, count the request, check the method, read the body (bounded by `max_body`), sleep for the
//! route's latency, maybe inject a 500, run the handler, add padding, count the outcome.

pub mod accept;
pub mod cli;
pub mod data;
pub mod knobs;
pub mod query;
pub mod server;
pub mod stats;
pub mod watchdog;

pub use knobs::{KnobError, Knobs, Latency, Route, RouteError, RouteKnobs, RouteOverride};
pub use server::{Backend, Config, Error, serve};
pub use stats::{RouteStats, RoutesSnapshot, StatsSnapshot};
