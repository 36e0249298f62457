//! MCP on the wire: JSON-RPC envelopes (`jsonrpc`, with the `scan` codec; what both return in
//! `rpc_message`; replies read before in `reply_memo`), client messages (`mcp`), protocol revisions (`version`) and tool input
//! schemas (`schema`).

pub mod jsonrpc;
pub mod mcp;
pub mod reply_memo;
pub mod rpc_message;
pub mod scan;
pub mod schema;
pub mod version;

/// Percent-encodes a query or form value (RFC 3986 unreserved characters kept).
pub fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[test]
fn percent_encodes_values() {
    assert_eq!(
        percent_encode("Leanne Graham&x=1"),
        "Leanne%20Graham%26x%3D1"
    );
}

/// How a Streamable HTTP server frames its answers to requests.
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
