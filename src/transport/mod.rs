//! Client transports. `http1` is the hot-path HTTP/1.1 connection, `sse` the one SSE decoder,
//! `streamable_http` the MCP session over Streamable HTTP.

pub mod http1;
pub mod sse;
pub mod streamable_http;
