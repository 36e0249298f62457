//! MCP on the wire: JSON-RPC envelopes (`jsonrpc`, with the `scan` codec), client messages
//! (`mcp`), protocol revisions (`version`) and tool input schemas (`schema`).

pub mod jsonrpc;
pub mod mcp;
pub mod scan;
pub mod schema;
pub mod version;

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
