//! MCP on the wire: JSON-RPC envelopes (`jsonrpc`) and protocol revisions (`version`).

pub mod jsonrpc;
pub mod version;
