//! The reference MCP server: `serve(listener, config, shutdown)`, and `serve_stdio`.
//!
//! It is the best-case baseline a gateway is compared with, so its costs are visible in plain
//! code: hyper for HTTP, pre-rendered `tools/list` pages, one JSON parse per request (envelope
//! with raw params, then the params fields it reads), results written straight to bytes, no
//! task spawned for a Streamable HTTP request.
//!
//! # Layout
//!
//! Each module imports only those above it in this list (the parent holds the shared
//! [`State`] and [`Config`]); `tests/architecture.rs` checks it.
//!
//! ```text
//! wire        JSON-RPC on the wire: envelopes, params, responses and errors as bytes,
//!             2026-07-28 _meta checks, server info and result tail, result_json, discover
//! body        response bodies: complete, or SSE streams (event ids, keep-alives, driven work)
//! cancel      in-flight requests per session (notifications/cancelled, server requests)
//! peer        what a session knows about its client: capabilities, log level, subscriptions
//! context     what a running call reaches: its Sink, its session's in-flight table (Io, Peer)
//! backend     pooled REST client for the REST-backed tools
//! tools       the catalog (Tool, Registry, pre-rendered tools/list pages per revision), the
//!             built-in and synthetic tools and their bodies; arguments checked against the
//!             compiled input schema (protocol::schema)
//! fixtures    the conformance suite's fixtures: test_* tools, prompts, resources, completions
//!             (only with Config::conformance)
//! dispatch    transport-independent JSON-RPC: begin/run a request, batches, notifications
//! response    HTTP responses every endpoint shares (statuses, SSE headers, bounded bodies)
//! session     Streamable HTTP sessions
//! conn        one session over an ordered message stream (stdio, WebSocket, legacy SSE)
//! stateless   Streamable HTTP at /mcp for 2026-07-28 (headers, statuses)
//! legacy_sse  HTTP+SSE (2024-11-05) at /sse + /messages
//! ws          WebSocket at /ws (subprotocol `mcp`, non-standard)
//! http        routing, Host/Origin checks, Streamable HTTP at /mcp (handshake era; GET only
//!             resumes a parked stream)
//! stdio       serve_stdio: one session over a byte stream, one message per line
//! tls         PEM loading; HTTPS/WSS with ALPN h2 and http/1.1 on the same listener
//! embedded    server + mock backend on their own runtime (run, serve)
//! ```
//!
//! Every transport reads a frame, lets `dispatch` answer it or hand back a tool call, and writes
//! the bytes; progress notifications go through a `context::Sink` the transport drains in
//! order, so none follows the response.

pub mod audit;
mod backend;
mod body;
mod cancel;
mod conn;
mod context;
mod dispatch;
mod embedded;
mod fixtures;
mod http;
mod legacy_sse;
mod peer;
pub mod policy;
pub mod proxy;
mod response;
mod session;
mod stateless;
mod stdio;
pub mod tls;
mod tools;
mod wire;
mod ws;

#[cfg(test)]
mod conformance_tests;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::protocol::ResponseMode;
pub use embedded::{EmbeddedError, EmbeddedServers, Launch, run_stdio};
pub use stdio::{serve_stdio, serve_stdio_with};
pub use tools::BUILTIN as BUILTIN_TOOLS;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Streamable HTTP endpoint path.
    pub path: String,
    /// Legacy HTTP+SSE: the stream (GET) and the message endpoint (POST).
    pub sse_path: String,
    pub messages_path: String,
    /// WebSocket endpoint.
    pub ws_path: String,
    pub response: ResponseMode,
    /// Synthetic tools added to the catalog.
    pub catalog: usize,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Base URL of the REST backend; REST-backed tools fail cleanly without one.
    pub backend: Option<String>,
    pub backend_timeout: Duration,
    /// Host names accepted in `Host` and `Origin` (`*` accepts any).
    pub allowed_hosts: Vec<String>,
    pub max_body: usize,
    pub max_sessions: usize,
    pub session_idle: Duration,
    /// Comment keep-alive interval on SSE streams.
    pub keepalive: Duration,
    /// How long stdio waits for requests in flight after stdin's EOF before cancelling them.
    pub drain: Duration,
    /// Serve HTTPS/WSS (ALPN `h2`, `http/1.1`) instead of plain HTTP; see [`tls::load_pem`].
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Also serve the official conformance suite's fixtures (the `fixtures` module): `test_*` tools
    /// in `tools/list`, prompts, resources, completions, logging. Off by default, so the
    /// benchmark catalog, its `tools/list` pages and the declared capabilities are unchanged.
    pub conformance: bool,
    /// Gateway mode: upstream servers whose tools are listed (namespaced) and called through.
    pub proxy: Option<Arc<dyn proxy::Proxy>>,
    /// Tenants: bearer token → tenant, tools each may list and call, rate limits.
    pub policy: Option<Arc<policy::Policy>>,
    /// Audit events as JSON lines.
    pub audit: Option<Arc<audit::Audit>>,
    /// An extra delay before every tool call (to check what a comparison reports).
    pub call_delay: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: "/mcp".into(),
            sse_path: "/sse".into(),
            messages_path: "/messages".into(),
            ws_path: "/ws".into(),
            response: ResponseMode::Json,
            catalog: 0,
            page_size: 100,
            backend: None,
            backend_timeout: Duration::from_secs(30),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            max_body: 4 * 1024 * 1024,
            max_sessions: 100_000,
            session_idle: Duration::from_secs(600),
            keepalive: Duration::from_secs(15),
            drain: mock_backend::accept::DEFAULT_GRACE,
            tls: None,
            conformance: false,
            proxy: None,
            policy: None,
            audit: None,
            call_delay: Duration::ZERO,
        }
    }
}

/// Shared state of a running server.
#[derive(Debug)]
pub struct State {
    pub config: Config,
    pub(crate) registry: tools::Registry,
    /// `instructions` of `initialize` and `server/discover`, from the catalog.
    instructions: String,
    /// The `server/discover` result (2026-07-28).
    discover: Vec<u8>,
    backend: Option<backend::Backend>,
    /// Streamable HTTP sessions.
    pub(crate) sessions: session::Sessions,
    /// Legacy HTTP+SSE sessions.
    pub(crate) legacy: legacy_sse::LegacySessions,
    /// Fires when the server shuts down: long-lived streams and WebSockets end.
    pub closing: CancellationToken,
    active: AtomicUsize,
}

impl State {
    pub fn new(config: Config) -> Self {
        let mut catalog = tools::builtin();
        if config.conformance {
            catalog.extend(fixtures::tools());
        }
        catalog.extend(tools::synthetic(config.catalog));
        let upstream_tools = config.proxy.as_ref().map(|p| p.tools()).unwrap_or_default();
        catalog.extend(tools::proxied(&upstream_tools));
        let instructions = tools::instructions(&catalog);
        let capabilities = if config.conformance {
            fixtures::discover_capabilities()
        } else {
            serde_json::json!({"tools": {"listChanged": false}})
        };
        State {
            discover: wire::discover(capabilities, &instructions),
            instructions,
            registry: tools::Registry::with_policy(
                catalog,
                config.page_size,
                config.policy.as_deref(),
            ),
            backend: config
                .backend
                .as_deref()
                .map(|b| backend::Backend::new(b, config.backend_timeout)),
            sessions: session::Sessions::new(config.max_sessions, config.session_idle),
            legacy: legacy_sse::LegacySessions::new(config.max_sessions),
            closing: CancellationToken::new(),
            active: AtomicUsize::new(0),
            config,
        }
    }
}

impl State {
    /// Streamable HTTP sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Legacy HTTP+SSE sessions open now.
    pub fn legacy_sessions(&self) -> usize {
        self.legacy.len()
    }

    /// The tenant of a transport without credentials (stdio): the policy's anonymous tenant.
    pub(crate) fn anonymous_tenant(&self) -> Option<u16> {
        match self.config.policy.as_ref()?.authenticate(None) {
            policy::Auth::Tenant(t) => Some(t),
            _ => None,
        }
    }

    /// Tool patterns of the policy that match no tool of the catalog (a typo denies silently).
    pub fn unmatched_policy_patterns(&self) -> Vec<String> {
        let names = self.registry.names();
        self.config.policy.as_ref().map_or_else(Vec::new, |p| {
            p.unmatched(&names)
                .into_iter()
                .map(|(t, g)| format!("tenant `{t}`: `{g}`"))
                .collect()
        })
    }

    /// Every tool name the server lists (to anyone).
    pub fn tool_names(&self) -> Vec<String> {
        self.registry
            .names()
            .into_iter()
            .map(str::to_string)
            .collect()
    }
}

/// Serves MCP over HTTP (Streamable HTTP, legacy HTTP+SSE, WebSocket; TLS if configured) on
/// `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, config: Config, shutdown: impl Future<Output = ()>) {
    serve_state(listener, Arc::new(State::new(config)), shutdown).await;
}

/// How long a client gets to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// [`serve`] with state made by the caller (who can then watch it, e.g.
/// [`State::active_calls`]).
pub async fn serve_state(
    listener: TcpListener,
    state: Arc<State>,
    shutdown: impl Future<Output = ()>,
) {
    let reaper_state = state.clone();
    let ending = state.clone();
    let reaper = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        for n in 0u64.. {
            tick.tick().await;
            if let Some(a) = &reaper_state.config.audit {
                a.flush();
            }
            if n % 10 == 0 {
                reaper_state.sessions.reap();
            }
        }
    });
    let closing = state.closing.clone();
    let shutdown = async move {
        shutdown.await;
        closing.cancel();
    };
    let tls = state
        .config
        .tls
        .clone()
        .map(tokio_rustls::TlsAcceptor::from);
    mock_backend::accept::serve_connections(listener, shutdown, move |stream, peer, down| {
        let state = state.clone();
        let tls = tls.clone();
        async move {
            // The names of the client's certificate (mutual TLS), for the policy.
            let svc = |names: Option<Arc<[String]>>| {
                service_fn(move |req| {
                    let state = state.clone();
                    let names = names.clone();
                    async move { http::handle(&state, req, names.as_deref()).await }
                })
            };
            match tls {
                None => mock_backend::accept::serve_http(stream, svc(None), down).await,
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(tls)) => {
                            let names = tls
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|c| c.first())
                                .map(|c| Arc::from(tls::client_names(c)));
                            mock_backend::accept::serve_http(tls, svc(names), down).await
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        }
    })
    .await;
    reaper.abort();
    // Parked streams (SEP-1699) hold calls that hold the state: end them with the sessions.
    ending.sessions.clear();
    if let Some(a) = &ending.config.audit {
        a.flush();
    }
}
