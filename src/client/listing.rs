//! `tools/list` walked to the end on an open session, and what a failed call says.

use serde_json::Value;

use super::failure::{PreflightError, describe};
use crate::metrics::outcome::Outcome;
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::transport::{CallSpec, Session};

/// The most `tools/list` pages walked.
const MAX_PAGES: usize = 1000;

/// Walks every `tools/list` page of an open session: each tool's name and definition.
pub async fn list_tools<S: Session>(
    s: &mut S,
    revision: Revision,
    timeout: std::time::Duration,
) -> Result<Vec<(String, Value)>, PreflightError> {
    let spec = CallSpec::new("tools/list", None, revision);
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let c = cursor.take();
        let call = s.call(&spec, |out, id| {
            mcp::write_tools_list(out, id, revision, c.as_deref())
        });
        let reply = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| PreflightError::List(describe(Outcome::Timeout)))?;
        if reply.outcome != Outcome::Ok {
            return Err(PreflightError::List(describe(reply.outcome)));
        }
        let v: Value = serde_json::from_slice(s.last_message())
            .map_err(|_| PreflightError::List("the result is not JSON".into()))?;
        let result = &v["result"];
        let Some(page) = result["tools"].as_array() else {
            return Err(PreflightError::List("the result has no tools array".into()));
        };
        for t in page {
            if let Some(n) = t["name"].as_str() {
                tools.push((n.to_string(), t.clone()));
            }
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
    }
    Ok(tools)
}
