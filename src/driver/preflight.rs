//! Before load: is the target reachable, which revision does it speak, and does it have the
//! tools the workload calls? One clear error here beats a million identical failures later.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::outcome::Outcome;
use crate::protocol::version::Revision;
use crate::transport::streamable_http::{Endpoint, StreamableHttp};

/// What the preflight learned.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub revision: Revision,
    /// Tool names the target lists (all pages).
    pub tools: Vec<String>,
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
            "cannot connect (refused, unreachable, or no answer to the connection attempt)".into()
        }
        Outcome::Timeout => "no answer within the timeout".into(),
        Outcome::Io => "the connection broke before a complete response".into(),
        Outcome::Http(s) => format!("HTTP {s}"),
        Outcome::RpcError(c) => format!("JSON-RPC error {c}"),
        Outcome::Protocol(k) => format!("protocol violation ({})", k.name()),
        other => other.to_string(),
    }
}

const MAX_PAGES: usize = 1000;

pub async fn run(ep: Arc<Endpoint>, timeout: Duration) -> Result<Preflight, PreflightError> {
    let mut s = StreamableHttp::new(ep);
    let opened = tokio::time::timeout(timeout, s.open()).await;
    match opened {
        Err(_) => return Err(PreflightError::Open(describe(Outcome::Timeout))),
        Ok(Err(f)) => return Err(PreflightError::Open(describe(f.0.outcome))),
        Ok(Ok(_)) => {}
    }
    let revision = s.revision().expect("open succeeded");
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let c = cursor.take();
        let reply = tokio::time::timeout(
            timeout,
            s.call(|out, id| {
                out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/list","#);
                if let Some(c) = &c {
                    out.extend_from_slice(br#""params":{"cursor":"#);
                    crate::protocol::jsonrpc::write_json_str(out, c);
                    out.extend_from_slice(b"},");
                }
                out.extend_from_slice(br#""id":"#);
                out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
                out.push(b'}');
            }),
        )
        .await
        .map_err(|_| PreflightError::List(describe(Outcome::Timeout)))?;
        if reply.outcome != Outcome::Ok {
            return Err(PreflightError::List(describe(reply.outcome)));
        }
        let v: serde_json::Value = serde_json::from_slice(s.last_message())
            .map_err(|_| PreflightError::List("the result is not JSON".into()))?;
        let result = &v["result"];
        for t in result["tools"].as_array().into_iter().flatten() {
            if let Some(n) = t["name"].as_str() {
                tools.push(n.to_string());
            }
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
    }
    s.close(timeout).await;
    Ok(Preflight { revision, tools })
}
