//! What went wrong, in a person's words: why a target cannot be used ([`PreflightError`]), an
//! outcome described ([`describe`]), why a server refused a session ([`refusal`]), what a
//! failed call says ([`failure_text`]).

use serde_json::Value;

use crate::metrics::outcome::Outcome;
use crate::protocol::version::Revision;

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

/// Why a session could not be opened, with what the server did: the revision it answered
/// and those mcpbench speaks, or the first bytes of what it sent.
pub fn refusal(outcome: Outcome, said: &[u8], offered: Revision) -> String {
    let mut why = describe(outcome);
    let json: Option<Value> = serde_json::from_slice(said).ok();
    let result = json.as_ref().and_then(|v| v.get("result"));
    if outcome == Outcome::Protocol(crate::metrics::outcome::ProtocolKind::Handshake) {
        let speaks = Revision::ALL.map(|r| r.to_string()).join(", ");
        let answered = result
            .and_then(|r| {
                r.get("protocolVersion")
                    .or_else(|| r.get("supportedVersions"))
            })
            .map(Value::to_string);
        why.push_str(&match answered {
            Some(v) => format!(
                ": offered {offered}, the server answered protocol version {v}; mcpbench speaks {speaks}"
            ),
            None => format!(
                ": offered {offered}, the answer names no protocol version mcpbench speaks ({speaks})"
            ),
        });
    }
    if !said.is_empty() && result.is_none() {
        let text = String::from_utf8_lossy(&said[..said.len().min(200)]);
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        why.push_str(&format!("; the server said: {}", text.trim()));
        if said.len() > 200 {
            why.push('…');
        }
    }
    why
}

/// What a failed response says: `error.message`, or the text of an `isError` result.
pub fn failure_text(message: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(message).ok()?;
    let text = v["error"]["message"]
        .as_str()
        .or_else(|| v["result"]["content"][0]["text"].as_str())?;
    let mut t: String = text.chars().filter(|c| !c.is_control()).take(160).collect();
    if text.chars().count() > 160 {
        t.push('…');
    }
    Some(t)
}
