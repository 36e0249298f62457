//! A minimal WebSocket client (RFC 6455) for MCP's WebSocket transport.
//!
//! MCP over WebSocket (the convention of the TypeScript and Python SDKs): the client asks for
//! subprotocol `mcp`, and every JSON-RPC message is one text message. Many requests are in
//! flight per connection, so one task reads (demultiplexing responses by id) while writes go
//! through the [`WsWriter`] half.
//!
//! Why not tungstenite's `Message` API here: it allocates a buffer per message, and splitting
//! tokio-tungstenite's stream into read and write halves puts a lock between them. Like
//! [`super::http1_client`], this module frames messages itself over reused buffers: a text frame from
//! the server is handed out in place (mutable, so a JSON parser can work in situ), fragmented
//! messages are reassembled in a second reused buffer, and outgoing frames are masked into a
//! reused write buffer. Buffers grow to the largest message seen; after warm-up nothing is
//! allocated per message.
//!
//! No extensions are offered (so no permessage-deflate: compression would cost the load
//! generator more CPU than the servers under test), and binary messages are a protocol error,
//! because MCP uses text only.

mod ws_handshake;
mod ws_reader;
mod ws_writer;

use std::io;

pub use ws_handshake::handshake;
pub use ws_reader::{WsEvent, WsReader};
pub use ws_writer::{TextFramer, WsWriter};

/// Default bound on one (possibly reassembled) message.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Bound on the handshake response head.
const MAX_HEAD: usize = 64 * 1024;
/// Initial read buffer, and the unit it grows by.
const READ_CHUNK: usize = 16 * 1024;
/// Below this much free space at the buffer's end, unread bytes move to its front first.
const MIN_READ: usize = 4 * 1024;
/// Largest frame header: 2 bytes, 8 of extended length, 4 of mask key.
const MAX_HEADER: usize = 14;
/// Largest control frame payload (RFC 6455 §5.5).
const MAX_CONTROL: usize = 125;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// What went wrong on the wire. Small and allocation-free: it is returned on the hot path.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection (at a frame boundary), or the reader already returned a
    /// close frame or an error.
    #[error("websocket connection closed")]
    Closed,
    /// The server answered the upgrade request with this status instead of 101.
    #[error("websocket upgrade refused with HTTP status {0}")]
    Status(u16),
    #[error("websocket handshake failed: {0}")]
    Handshake(&'static str),
    #[error("websocket protocol violation: {0}")]
    Protocol(&'static str),
    /// A message (after reassembly) would exceed the reader's bound; carries its size.
    #[error("websocket message of {0} bytes exceeds the limit")]
    TooLarge(usize),
}

#[cfg(test)]
mod tests;
