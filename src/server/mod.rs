//! The reference MCP server: `serve(listener, config, shutdown)`.
//!
//! It is the best-case baseline a gateway is compared with, so its costs are visible in plain
//! code: hyper for HTTP, pre-rendered `tools/list` pages, one JSON parse per request, tool
//! results written straight to bytes. `dispatch` is transport-independent; `http` is the
//! Streamable HTTP transport; `tools` holds the tools and `backend` the pooled REST client.

pub mod backend;
pub mod dispatch;
mod embedded;
pub mod http;
pub mod schema;
pub mod session;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use tokio::net::TcpListener;

pub use embedded::{EmbeddedError, EmbeddedServers, Launch};

/// How request responses are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseMode {
    /// `Content-Type: application/json`.
    #[default]
    Json,
    /// `Content-Type: text/event-stream`, one `message` event.
    Sse,
}

impl std::str::FromStr for ResponseMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "json" => Ok(ResponseMode::Json),
            "sse" => Ok(ResponseMode::Sse),
            o => Err(format!(
                "unknown response mode `{o}` (expected json or sse)"
            )),
        }
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The MCP endpoint path.
    pub path: String,
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: "/mcp".into(),
            response: ResponseMode::Json,
            catalog: 0,
            page_size: 100,
            backend: None,
            backend_timeout: Duration::from_secs(30),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            max_body: 4 * 1024 * 1024,
            max_sessions: 100_000,
            session_idle: Duration::from_secs(600),
        }
    }
}

/// Shared state of a running server.
#[derive(Debug)]
pub struct State {
    pub config: Config,
    pub registry: tools::Registry,
    pub backend: Option<backend::Backend>,
    pub sessions: session::Sessions,
}

impl State {
    pub fn new(config: Config) -> Self {
        State {
            registry: tools::Registry::new(config.catalog, config.page_size),
            backend: config
                .backend
                .as_deref()
                .map(|b| backend::Backend::new(b, config.backend_timeout)),
            sessions: session::Sessions::new(config.max_sessions, config.session_idle),
            config,
        }
    }
}

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, config: Config, shutdown: impl Future<Output = ()>) {
    let state = Arc::new(State::new(config));
    let reaper_state = state.clone();
    let reaper = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        loop {
            tick.tick().await;
            reaper_state.sessions.reap();
        }
    });
    mock_backend::accept::serve_connections(listener, shutdown, move |stream, _peer, down| {
        let state = state.clone();
        async move {
            let svc = service_fn(move |req| {
                let state = state.clone();
                async move { http::handle(&state, req).await }
            });
            mock_backend::accept::serve_http(stream, svc, down).await;
        }
    })
    .await;
    reaper.abort();
}
