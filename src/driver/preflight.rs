//! Before load: is the target reachable, which revision does it speak, and does it have the
//! tools the workload calls? One clear error here beats a million identical failures later.

use std::sync::Arc;

use crate::metrics::outcome::Outcome;
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::transport::mux::MuxSession;
use crate::transport::sse_legacy::SseConnector;
use crate::transport::stdio::StdioConnector;
use crate::transport::streamable_http::HttpSession;
use crate::transport::websocket::WsConnector;
use crate::transport::{CallSpec, Endpoint, Session, TransportKind};

/// What the preflight learned.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub revision: Revision,
    /// Tools the target lists (all pages): name and input schema.
    pub tools: Vec<(String, serde_json::Value)>,
}

/// Why the target cannot be load-tested.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PreflightError {
    #[error("cannot open an MCP session: {0}")]
    Open(String),
    #[error("tools/list failed: {0}")]
    List(String),
}

/// Describes an outcome for a person.
pub fn describe(o: Outcome) -> String {
    match o {
        Outcome::Connect => {
            "cannot connect (refused, unreachable, TLS failure, or the command could not start)"
                .into()
        }
        Outcome::Timeout => "no answer within the timeout".into(),
        Outcome::Io => "the connection broke before a complete response".into(),
        Outcome::Http(s) => format!("HTTP {s}"),
        Outcome::RpcError(c) => format!("JSON-RPC error {c}"),
        Outcome::InputRequired => {
            "the server asked for client input (resultType input_required), which a load generator does not give".into()
        }
        Outcome::Protocol(k) => format!("protocol violation ({})", k.name()),
        other => other.to_string(),
    }
}

const MAX_PAGES: usize = 1000;

/// Opens a session on the endpoint's transport, lists the tools, closes.
pub async fn run(ep: Arc<Endpoint>) -> Result<Preflight, PreflightError> {
    match ep.kind {
        TransportKind::StreamableHttp => probe(HttpSession::new(ep.clone()), &ep).await,
        TransportKind::Stdio => {
            probe(keeping(MuxSession::<StdioConnector>::new(ep.clone())), &ep).await
        }
        TransportKind::WebSocket => {
            probe(keeping(MuxSession::<WsConnector>::new(ep.clone())), &ep).await
        }
        TransportKind::LegacySse => {
            probe(keeping(MuxSession::<SseConnector>::new(ep.clone())), &ep).await
        }
    }
}

fn keeping<C: crate::transport::mux::Connector>(mut s: MuxSession<C>) -> MuxSession<C> {
    s.keep_responses();
    s
}

async fn probe<S: Session>(mut s: S, ep: &Endpoint) -> Result<Preflight, PreflightError> {
    let timeout = ep.timeout;
    match tokio::time::timeout(timeout, s.open()).await {
        Err(_) => return Err(PreflightError::Open(describe(Outcome::Timeout))),
        Ok(r) if r.outcome != Outcome::Ok || !s.is_open() => {
            return Err(PreflightError::Open(describe(r.outcome)));
        }
        Ok(_) => {}
    }
    let revision = s.revision().unwrap_or(ep.protocol);
    let spec = CallSpec {
        method: "tools/list".into(),
        name: None,
        h1_headers: if revision.has_handshake() {
            Vec::new()
        } else {
            mcp::modern_headers("tools/list", None)
        },
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let c = cursor.take();
        let reply = tokio::time::timeout(
            timeout,
            s.call(&spec, |out, id| {
                mcp::write_tools_list(out, id, revision, c.as_deref())
            }),
        )
        .await
        .map_err(|_| PreflightError::List(describe(Outcome::Timeout)))?;
        if reply.outcome != Outcome::Ok {
            s.close().await;
            return Err(PreflightError::List(describe(reply.outcome)));
        }
        let v: serde_json::Value = serde_json::from_slice(s.last_message())
            .map_err(|_| PreflightError::List("the result is not JSON".into()))?;
        let result = &v["result"];
        for t in result["tools"].as_array().into_iter().flatten() {
            if let Some(n) = t["name"].as_str() {
                tools.push((n.to_string(), t["inputSchema"].clone()));
            }
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
    }
    s.close().await;
    Ok(Preflight { revision, tools })
}
