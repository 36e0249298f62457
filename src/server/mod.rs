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
//! credentials which credentials reached the server (fingerprints, GET /seen-credentials)
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
//! recorder    `mcpbench record`: every tools/list and tools/call written to a trace
//!             (crate::trace) as it completes (only with Config::record)
//! dispatch    transport-independent JSON-RPC: begin/run a request, batches, notifications
//! response    HTTP responses every endpoint shares (statuses, SSE headers, bounded bodies)
//! session     Streamable HTTP sessions (bound to their tenant), tenants' session caps
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
pub mod credentials;
mod dispatch;
mod embedded;
mod fixture_methods;
mod fixtures;
mod h1;
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
pub mod trace_recorder;
mod websocket;
mod wire;

#[cfg(test)]
mod conformance_tests;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use hyper::service::service_fn;
use mock_backend::accept::{Admission, HttpLimits, serve_connections_limited, serve_http_with};
use response::ReqBody;
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
    /// The largest message: an HTTP request body (`413` beyond it, also when a chunked body
    /// grows past it), a WebSocket message (closed with `1009`), a stdio line (`-32600`, the
    /// line skipped). Default 4 MiB.
    pub max_body: usize,
    /// Sessions open at once, Streamable HTTP and legacy HTTP+SSE each: `initialize` (or
    /// `GET /sse`) beyond it is answered `503` with `Retry-After`. Default 100 000.
    pub max_sessions: usize,
    /// A Streamable HTTP session no request has named for this long is ended (its calls
    /// cancelled) by the reaper, which runs every `session_idle / 2` (at most every 10 s), so
    /// sessions a client never deletes do not fill the table. Default 10 minutes.
    pub session_idle: Duration,
    /// Connections open at once (WebSockets included, for as long as they live): one beyond it
    /// is sent `503` with `Retry-After` and closed (a TLS listener closes it without a word),
    /// instead of waiting in the backlog or running the process out of file descriptors.
    /// Counted with one atomic per connection. Default 10 000 (`mcpbench serve`: what its
    /// open-file limit holds).
    pub max_connections: usize,
    /// Listen with `SO_REUSEPORT` (Linux; elsewhere ignored): other processes may listen on
    /// the same address, and the kernel spreads new connections over them. Default off.
    pub reuse_port: bool,
    /// How long a client may take to show its protocol and to send a whole HTTP/1 request head
    /// (slowloris); the connection is then closed. hyper also closes an idle keep-alive
    /// connection after it. Default 30 s (hyper's own default).
    pub header_read_timeout: Duration,
    /// How long a request body may take to arrive once its head has: `408` and the connection
    /// closed after it. The timer is armed only for a body not complete at once, so a small
    /// request pays nothing. Default 30 s.
    pub body_read_timeout: Duration,
    /// How long a response may wait for a client that stopped reading (its receive window
    /// and our socket buffer full): the connection is then closed and the response dropped —
    /// with it an SSE stream's call and a WebSocket's session. Until then nothing grows: a
    /// stream's messages wait in a bounded channel, and its call is paused with it (the
    /// stream's body drives the call). Default 30 s.
    pub write_stall_timeout: Duration,
    /// Requests in flight per session: a Streamable HTTP session's tool calls, or a stdio,
    /// WebSocket or legacy HTTP+SSE connection's (counted until the response is queued for
    /// the writer). One more is refused with `-32029` (HTTP: `429` with `Retry-After`).
    /// Default 100 000, mcpbench's own ceiling on concurrency, so no run of it is refused.
    pub max_in_flight: usize,
    /// HTTP/2 streams open at once per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`; a
    /// client queues the rest). Default 200 (hyper's own default).
    pub max_streams: u32,
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
    /// Gateway mode: upstream servers whose tools are listed (namespaced) and called through —
    /// the only tools the server lists, unless [`local_tools`](Self::local_tools).
    pub proxy: Option<Arc<dyn proxy::Proxy>>,
    /// Gateway mode: list the reference server's own tools (echo, sleep…, synthetic, fixtures)
    /// beside the upstreams'. Off by default, so that a workload that forgot a target's
    /// `tool_prefix` fails its preflight instead of measuring the gateway's local `echo`.
    pub local_tools: bool,
    /// Serve another program's tools under its name instead of the reference server's
    /// (`mcpbench mcp`: mcpbench's own tools for agents): the catalog is then `proxy`'s tools
    /// alone (no built-in, synthetic or fixture tools, so no REST backend), and `initialize`,
    /// `server/discover` and 2026-07-28 `_meta` name this identity (not with `conformance`).
    pub identity: Option<Identity>,
    /// Tenants: bearer token → tenant, tools each may list and call, rate limits.
    pub policy: Option<Arc<policy::Policy>>,
    /// Audit events as JSON lines.
    pub audit: Option<Arc<audit::Audit>>,
    /// `mcpbench record`: the trace every `tools/list` and `tools/call` is written to. `None`
    /// costs one check per request.
    pub record: Option<Arc<trace_recorder::Recorder>>,
    /// An extra delay before every tool call (to check what a comparison reports).
    pub call_delay: Duration,
    /// A test fixture for the session-leak check (`serve --leak-sessions`): a Streamable HTTP
    /// DELETE answers 200 but the session stays for ever, holding [`LEAK_PER_SESSION`] bytes
    /// more. Off by default.
    pub leak_sessions: bool,
}

/// What the leaking fixture keeps per session deleted, beyond the session itself.
pub const LEAK_PER_SESSION: usize = 16 * 1024;

/// A session the leaking fixture kept, with its buffer.
type Leaked = (Arc<session::Session>, Box<[u8]>);

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
            max_connections: 10_000,
            reuse_port: false,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            write_stall_timeout: Duration::from_secs(30),
            max_in_flight: 100_000,
            max_streams: 200,
            keepalive: Duration::from_secs(15),
            drain: mock_backend::accept::DEFAULT_GRACE,
            tls: None,
            conformance: false,
            proxy: None,
            local_tools: false,
            identity: None,
            policy: None,
            audit: None,
            record: None,
            call_delay: Duration::ZERO,
            leak_sessions: false,
        }
    }
}

/// Who a server that is not the reference server says it is ([`Config::identity`]).
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub title: String,
    /// `instructions` of `initialize` and `server/discover`: what the server is for.
    pub instructions: String,
}

impl Identity {
    /// `serverInfo` (the version is mcpbench's).
    fn server_info(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "title": self.title,
            "version": env!("CARGO_PKG_VERSION"),
        })
    }
}

/// Shared state of a running server.
#[derive(Debug)]
pub struct State {
    pub config: Config,
    pub(crate) registry: tools::Registry,
    /// `instructions` of `initialize` and `server/discover`, from the catalog.
    instructions: String,
    /// `serverInfo` of `initialize` as JSON: with `title` (2025-06-18 on), then without.
    info: [Vec<u8>; 2],
    /// The `server/discover` result (2026-07-28).
    discover: Vec<u8>,
    backend: Option<backend::Backend>,
    /// Streamable HTTP sessions.
    pub(crate) sessions: session::Sessions,
    /// Legacy HTTP+SSE sessions.
    pub(crate) legacy: legacy_sse::LegacySessions,
    /// Credentials that reached the server (only without a policy: see `credentials`).
    pub(crate) seen: Option<credentials::Seen>,
    /// Fires when the server shuts down: long-lived streams and WebSockets end.
    pub closing: CancellationToken,
    active: AtomicUsize,
    /// Open connections, under `Config::max_connections` (shared by every accept loop).
    connections: Arc<mock_backend::accept::Connections>,
    /// Sessions numbered so far (for audit lines and traces: `State::session_number`).
    numbered: std::sync::atomic::AtomicU64,
    /// The number shared by requests without a session (2026-07-28 over HTTP).
    sessionless: std::sync::OnceLock<u64>,
    /// Accept loops serving this state (a gateway runs one per thread): the last to finish
    /// its drain ends the sessions.
    serving: AtomicUsize,
    /// The leaking fixture's sessions ([`Config::leak_sessions`]), each with its buffer.
    leaked: std::sync::Mutex<Vec<Leaked>>,
}

impl State {
    pub fn new(config: Config) -> Self {
        let reference = config.identity.is_none();
        // A gateway lists its upstreams' tools only, unless asked for its own too.
        let local = reference && (config.proxy.is_none() || config.local_tools);
        let conformance = config.conformance && local;
        let mut catalog = Vec::new();
        if local {
            catalog.extend(tools::builtin());
            if conformance {
                catalog.extend(fixtures::tools());
            }
            catalog.extend(tools::synthetic(config.catalog));
        }
        let upstream_tools = config.proxy.as_ref().map(|p| p.tools()).unwrap_or_default();
        catalog.extend(tools::proxied(&upstream_tools));
        let (instructions, info) = match &config.identity {
            Some(id) => (id.instructions.clone(), id.server_info()),
            None => (tools::instructions(&catalog), wire::server_info()),
        };
        let capabilities = if conformance {
            fixtures::discover_capabilities()
        } else {
            serde_json::json!({"tools": {"listChanged": false}})
        };
        let mut untitled = info.clone();
        if let Some(o) = untitled.as_object_mut() {
            o.remove("title");
        }
        State {
            discover: wire::discover(capabilities, &instructions, &info),
            info: [&info, &untitled].map(|i| serde_json::to_vec(i).unwrap_or_default()),
            instructions,
            registry: tools::Registry::with_policy(
                catalog,
                config.page_size,
                config.policy.as_deref(),
                &info,
            ),
            backend: config
                .backend
                .as_deref()
                .map(|b| backend::Backend::new(b, config.backend_timeout)),
            sessions: session::Sessions::new(
                config.max_sessions,
                config.session_idle,
                config.max_in_flight,
            ),
            legacy: legacy_sse::LegacySessions::new(config.max_sessions),
            seen: config.policy.is_none().then(credentials::Seen::new),
            closing: CancellationToken::new(),
            active: AtomicUsize::new(0),
            connections: mock_backend::accept::Connections::new(config.max_connections),
            numbered: std::sync::atomic::AtomicU64::new(0),
            sessionless: std::sync::OnceLock::new(),
            serving: AtomicUsize::new(0),
            leaked: std::sync::Mutex::default(),
            config,
        }
    }
}

impl State {
    /// Streamable HTTP sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Streamable HTTP sessions ended for being idle ([`Config::session_idle`]) since start.
    pub fn expired_sessions(&self) -> u64 {
        self.sessions.expired()
    }

    /// Legacy HTTP+SSE sessions open now.
    pub fn legacy_sessions(&self) -> usize {
        self.legacy.len()
    }

    /// The leaking fixture's DELETE: keeps `session`, and a buffer written through (so it is
    /// resident), for ever.
    pub(crate) fn leak(&self, session: Arc<session::Session>) {
        let held = vec![0x5a_u8; LEAK_PER_SESSION].into_boxed_slice();
        let mut leaked = self.leaked.lock().unwrap_or_else(|e| e.into_inner());
        leaked.push((session, held));
    }

    /// Connections open now (see [`Config::max_connections`]).
    pub fn open_connections(&self) -> usize {
        self.connections.open()
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

/// The complete HTTP/1.1 response a connection over [`Config::max_connections`] gets before it
/// is closed.
fn refusal(max: usize) -> bytes::Bytes {
    let mut body = Vec::with_capacity(160);
    let message =
        format!("Service Unavailable: too many connections (this server takes {max}); retry later");
    wire::write_error(
        &mut body,
        None,
        crate::protocol::jsonrpc::code::INTERNAL_ERROR,
        &message,
        None,
    );
    let mut r = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(&body);
    r.into()
}

/// [`serve`] with state made by the caller (who can then watch it, e.g.
/// [`State::active_calls`]).
pub async fn serve_state(
    listener: TcpListener,
    state: Arc<State>,
    shutdown: impl Future<Output = ()>,
) {
    state
        .serving
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    let s = state.clone();
    let ending = state.clone();
    let reaper = tokio::spawn(async move {
        let mut flush = tokio::time::interval(Duration::from_secs(1));
        let mut reap = tokio::time::interval(s.sessions.reap_every());
        loop {
            tokio::select! {
                _ = flush.tick() => {
                    if let Some(a) = &s.config.audit {
                        a.flush();
                    }
                }
                _ = reap.tick() => {
                    s.sessions.reap();
                }
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
    let c = &state.config;
    let limits = HttpLimits {
        header_read_timeout: Some(c.header_read_timeout),
        write_stall: Some(c.write_stall_timeout),
        max_streams: Some(c.max_streams),
    };
    let admission = Admission {
        connections: state.connections.clone(),
        // A TLS client expects a handshake, not a plain-text response.
        refusal: tls.is_none().then(|| refusal(c.max_connections)),
        // A gateway thread's upstream calls run in its LocalSet: its connections too.
        local: c.proxy.as_ref().is_some_and(|p| p.has_lane()),
    };
    let grace = mock_backend::accept::DEFAULT_GRACE;
    let on_conn = move |stream, peer, down, slot| {
        let state = state.clone();
        let tls = tls.clone();
        async move {
            let lean = state.clone();
            // The names of the client's certificate (mutual TLS), for the policy.
            let svc = |names: Option<Arc<[String]>>| {
                service_fn(move |req| {
                    let state = state.clone();
                    let names = names.clone();
                    async move { http::handle(&state, req.map(ReqBody::Hyper), names.as_deref()).await }
                })
            };
            let Some(acceptor) = tls else {
                return h1::serve(lean, stream, down, limits, slot, svc(None)).await;
            };
            // Boxed: a plain connection's task does not carry the TLS session's size.
            Box::pin(async move {
                match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let names = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .map(|c| Arc::from(tls::client_names(c)));
                        serve_http_with(tls, svc(names), down, limits, Some(slot)).await
                    }
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            })
            .await
        }
    };
    serve_connections_limited(listener, shutdown, grace, admission, on_conn).await;
    reaper.abort();
    // Parked streams (SEP-1699) hold calls that hold the state: end them with the sessions —
    // once no other accept loop on this state is still draining calls of those sessions.
    if ending
        .serving
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
        == 1
    {
        ending.sessions.clear();
    }
    if let Some(a) = &ending.config.audit {
        a.flush();
    }
}
