//! MCP on the wire: JSON-RPC envelopes (`jsonrpc`, with the `scan` codec) and protocol
//! revisions (`version`).

pub mod jsonrpc;
pub mod mcp;
pub mod scan;
pub mod version;
