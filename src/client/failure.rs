//! What went wrong, in a person's words: why a target cannot be used ([`PreflightError`]), an
//! outcome described ([`describe`]), why a server that answered opened no session, with the
//! one likely fix ([`refusal`]), a content type MCP does not use ([`unexpected_type`]), what
//! a failed call says ([`failure_text`]).

use serde_json::Value;

use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::version::Revision;
use crate::transport::{Endpoint, TransportKind};

/// Why the target cannot be load-tested.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PreflightError {
    /// Nothing to talk to (nothing listens, no answer, TLS, a host name that does not resolve,
    /// a command that does not start): the one likely cause, and what to check.
    #[error("{why}{}", hint_line(.hint))]
    Unreachable { why: String, hint: Option<String> },
    /// Something answered, but no session opened: what it answered, and the likely fix.
    #[error("cannot open an MCP session: {why}{}", hint_line(.hint))]
    Open { why: String, hint: Option<String> },
    #[error("tools/list failed: {0}")]
    List(String),
}

impl PreflightError {
    /// No session, for this reason (no hint).
    pub fn open(why: impl Into<String>) -> Self {
        PreflightError::Open {
            why: why.into(),
            hint: None,
        }
    }
}

/// A hint on a line of its own, as scenario diagnostics show theirs.
fn hint_line(hint: &Option<String>) -> String {
    hint.as_ref()
        .map_or(String::new(), |h| format!("\n  hint: {h}"))
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

/// What a response of a type MCP does not use was: the type that arrived (`None`: no
/// `Content-Type` at all).
pub fn unexpected_type(got: Option<&str>) -> String {
    format!(
        "expected application/json or text/event-stream, got {}",
        got.unwrap_or("no Content-Type")
    )
}

/// Why a server that answered opened no session: what it answered (the status and content
/// type, the revision it speaks, the first words of its body) and the one likely fix (the
/// path, the transport, credentials). `content_type` is the answer's, where the transport
/// knows it.
pub fn refusal(
    outcome: Outcome,
    said: &[u8],
    content_type: Option<&str>,
    ep: &Endpoint,
) -> PreflightError {
    let json: Option<Value> = serde_json::from_slice(said).ok();
    let result = json.as_ref().and_then(|v| v.get("result"));
    let (mut why, hint) = match outcome {
        Outcome::Protocol(ProtocolKind::Handshake) => (revisions(result, ep.protocol), None),
        _ => answered(outcome, json.as_ref(), content_type, ep),
    };
    if result.is_none()
        && let Some(text) = snippet(said)
    {
        why.push_str(&format!("; the server said: {text}"));
    }
    PreflightError::Open { why, hint }
}

/// The revision offered and the one the server answered (or that it named none mcpbench
/// speaks).
fn revisions(result: Option<&Value>, offered: Revision) -> String {
    let speaks = Revision::ALL.map(|r| r.to_string()).join(", ");
    let answered = result
        .and_then(|r| {
            r.get("protocolVersion")
                .or_else(|| r.get("supportedVersions"))
        })
        .map(Value::to_string);
    format!(
        "{}: {}",
        describe(Outcome::Protocol(ProtocolKind::Handshake)),
        match answered {
            Some(v) => format!(
                "offered {offered}, the server answered protocol version {v}; mcpbench speaks {speaks}"
            ),
            None => format!(
                "offered {offered}, the answer names no protocol version mcpbench speaks ({speaks})"
            ),
        }
    )
}

/// An HTTP answer that opened no session, and the one likely fix: TLS (an answer that is no
/// HTTP), credentials (401, 403), the transport (a POST refused where an HTTP+SSE server
/// streams, or the other way round), the path (not MCP at all, or nothing there).
fn answered(
    outcome: Outcome,
    json: Option<&Value>,
    content_type: Option<&str>,
    ep: &Endpoint,
) -> (String, Option<String>) {
    let path = ep.path.as_str();
    let status = match outcome {
        Outcome::Http(s) => s,
        Outcome::Protocol(ProtocolKind::BadContentType) => 200,
        Outcome::Protocol(ProtocolKind::BadHttp)
            if ep.net.as_ref().is_some_and(|n| n.tls.is_none()) =>
        {
            return (
                format!("the answer is not HTTP ({})", describe(outcome)),
                Some("does the server speak TLS there? then the URL starts with https:// (or wss://)".into()),
            );
        }
        _ => return (describe(outcome), None),
    };
    let bad_type = status == 200;
    let json_rpc = json.is_some_and(|v| v.get("jsonrpc").is_some());
    let hint = |h: &str| Some(h.to_string());
    match (ep.kind, status) {
        (_, 401) => (
            "HTTP 401: the server wants credentials".into(),
            hint(
                "send them: `-H 'Authorization: Bearer …'`, or `[target.headers]` in the \
                 scenario (`Authorization = \"Bearer ${TOKEN}\"`)",
            ),
        ),
        (_, 403) => (
            "HTTP 403: the server refused these credentials".into(),
            hint("check what the token may do (its scopes, its tenant)"),
        ),
        (TransportKind::StreamableHttp, 405) => (
            format!("HTTP 405: {path} takes no POST"),
            hint(
                "an HTTP+SSE (2024-11-05) endpoint? add `transport = \"sse\"` to [target] \
                 (a gateway upstream: `sse+http://…`); a Streamable HTTP server usually \
                 answers at /mcp",
            ),
        ),
        (TransportKind::LegacySse, _) => (
            if bad_type {
                format!("GET {path} was answered with no event stream")
            } else {
                format!("GET {path} was answered HTTP {status}")
            },
            hint(
                "a Streamable HTTP endpoint? remove `transport = \"sse\"` from [target]; an \
                 HTTP+SSE server usually streams at /sse",
            ),
        ),
        (TransportKind::StreamableHttp, _) if !json_rpc => (
            format!(
                "this does not look like an MCP endpoint (HTTP {status} {}{})",
                content_type.unwrap_or("without a Content-Type"),
                if bad_type {
                    ": expected application/json or text/event-stream"
                } else {
                    ""
                }
            ),
            if path == "/mcp" {
                hint("is this the MCP server's address and port?")
            } else {
                hint("is the path /mcp?")
            },
        ),
        (_, 404) => (
            format!("HTTP 404: nothing is served at {path}"),
            hint("is the path right? MCP servers usually answer at /mcp (HTTP+SSE ones at /sse)"),
        ),
        (_, _) if bad_type => (unexpected_type(content_type), None),
        (_, _) => (describe(outcome), None),
    }
}

/// The first words of what the server said, for a message: a JSON body as written, an HTML
/// page as its text (tags, scripts and styles left out), at most 160 characters.
fn snippet(said: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&said[..said.len().min(4096)]);
    let html = text.trim_start().starts_with('<');
    let text = if html {
        page_text(&text)
    } else {
        text.into_owned()
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let line: String = words
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if line.is_empty() {
        return None;
    }
    let mut out: String = line.chars().take(160).collect();
    if line.chars().count() > 160 || said.len() > 4096 {
        out.push('…');
    }
    Some(out)
}

/// The text of an HTML page: its tags, and what `<script>` and `<style>` hold, left out.
fn page_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        out.push(' ');
        let tag = &rest[open..];
        let lower = tag.get(..7).unwrap_or(tag).to_ascii_lowercase();
        let end = ["<script", "<style"]
            .iter()
            .find(|t| lower.starts_with(*t))
            .and_then(|t| tag.to_ascii_lowercase().find(&format!("</{}", &t[1..])))
            .unwrap_or(0);
        rest = match tag[end..].find('>') {
            Some(close) => &tag[end + close + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_shown_as_its_text() {
        let page = b"<!DOCTYPE html><html><head><style>p { color: red }</style>\
            <script>var x = '<b>';</script><title>Error response</title></head>\
            <body><h1>Error</h1>\n<p>Unsupported method ('POST')</p></body></html>";
        assert_eq!(
            snippet(page).unwrap(),
            "Error response Error Unsupported method ('POST')"
        );
        let long = format!("<p>{}</p>", "word ".repeat(100));
        let s = snippet(long.as_bytes()).unwrap();
        assert!(s.ends_with('…') && s.chars().count() == 161, "{s}");
        assert_eq!(
            snippet(b"{\"error\": \"not found\"}\n").unwrap(),
            "{\"error\": \"not found\"}"
        );
        assert_eq!(snippet(b" \r\n"), None);
    }

    #[test]
    fn an_unexpected_type_is_named() {
        assert_eq!(
            unexpected_type(Some("text/plain; charset=utf-8")),
            "expected application/json or text/event-stream, got text/plain; charset=utf-8"
        );
        assert!(unexpected_type(None).ends_with("got no Content-Type"));
    }
}
