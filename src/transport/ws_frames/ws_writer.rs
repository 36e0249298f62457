//! The sending half of the WebSocket client: final client frames, each masked with a fresh
//! key, into one reused buffer or a caller's own.

use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{MAX_CONTROL, MAX_HEADER, OP_CLOSE, OP_PONG, OP_TEXT, WsError};

/// Encodes client frames: final, masked with a fresh key per frame. It holds no buffer, so it
/// can sit inside a caller's own combining writer (it is `mux`'s framer for WebSocket);
/// [`WsWriter`] pairs it with a stream and a reused buffer.
#[derive(Debug)]
pub struct TextFramer {
    /// Mask keys need only be unpredictable to scripts in a browser (RFC 6455 §10.3), not
    /// cryptographic: a small generator seeded once per connection.
    pub(super) rng: SmallRng,
}

impl Default for TextFramer {
    fn default() -> Self {
        TextFramer::new()
    }
}

impl TextFramer {
    pub fn new() -> Self {
        TextFramer {
            rng: SmallRng::from_rng(&mut rand::rng()),
        }
    }

    /// Appends a text frame (FIN, opcode 1) for `payload` to `out`.
    pub fn text(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        encode_frame(&mut self.rng, OP_TEXT, payload, out);
    }

    /// Appends a pong answering a ping with this payload. Control payloads are at most 125
    /// bytes, as [`WsReader`](super::WsReader) enforces for pings; anything beyond that is left out.
    pub fn pong(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let payload = &payload[..payload.len().min(MAX_CONTROL)];
        encode_frame(&mut self.rng, OP_PONG, payload, out);
    }

    /// Appends a close frame with a status code and no reason.
    pub fn close(&mut self, code: u16, out: &mut Vec<u8>) {
        encode_frame(&mut self.rng, OP_CLOSE, &code.to_be_bytes(), out);
    }
}

impl crate::transport::mux::Framer for TextFramer {
    fn frame(&mut self, msg: &[u8], out: &mut Vec<u8>) {
        self.text(msg, out);
    }
}

/// The sending half: masks and frames messages into one reused buffer.
///
/// Not cancel-safe: dropping a send future mid-write leaves a partial frame on the wire, after
/// which the connection is unusable (as with any `write_all`).
#[derive(Debug)]
pub struct WsWriter<W> {
    pub(super) io: W,
    pub(super) buf: Vec<u8>,
    pub(super) framer: TextFramer,
}

impl<W> WsWriter<W> {
    /// Wraps the write half of a stream whose handshake is already done.
    pub fn new(io: W) -> Self {
        WsWriter {
            io,
            buf: Vec::new(),
            framer: TextFramer::new(),
        }
    }

    /// Appends a masked text frame (FIN, opcode 1) for `payload` to `out`, so a caller can
    /// batch several frames into one [`WsWriter::write_raw`].
    pub fn encode_text(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        self.framer.text(payload, out);
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.io
    }

    /// Gives back the stream (e.g. to shut it down).
    pub fn into_inner(self) -> W {
        self.io
    }

    /// Gives back the stream and the framer, for a caller that writes through its own buffer.
    pub fn into_parts(self) -> (W, TextFramer) {
        (self.io, self.framer)
    }
}

impl<W: AsyncWrite + Unpin> WsWriter<W> {
    /// Sends `payload` as one masked text frame, written with one `write_all`.
    pub async fn send_text(&mut self, payload: &[u8]) -> Result<(), WsError> {
        self.send_frame(OP_TEXT, payload).await
    }

    /// Answers a ping (RFC 6455 §5.5.3: with the ping's payload).
    pub async fn send_pong(&mut self, payload: &[u8]) -> Result<(), WsError> {
        if payload.len() > MAX_CONTROL {
            return Err(WsError::Protocol("control frame payload over 125 bytes"));
        }
        self.send_frame(OP_PONG, payload).await
    }

    /// Starts (or answers) the closing handshake with a status code and a short reason.
    pub async fn send_close(&mut self, code: u16, reason: &str) -> Result<(), WsError> {
        if reason.len() > MAX_CONTROL - 2 {
            return Err(WsError::Protocol("close reason over 123 bytes"));
        }
        let mut payload = [0u8; MAX_CONTROL];
        payload[..2].copy_from_slice(&code.to_be_bytes());
        payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
        self.send_frame(OP_CLOSE, &payload[..2 + reason.len()])
            .await
    }

    /// Writes bytes as they are, e.g. frames batched with [`WsWriter::encode_text`].
    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), WsError> {
        self.io.write_all(bytes).await?;
        self.io.flush().await?;
        Ok(())
    }

    async fn send_frame(&mut self, opcode: u8, payload: &[u8]) -> Result<(), WsError> {
        self.buf.clear();
        encode_frame(&mut self.framer.rng, opcode, payload, &mut self.buf);
        self.io.write_all(&self.buf).await?;
        // A no-op for TCP; pushes out buffered TLS records.
        self.io.flush().await?;
        Ok(())
    }
}

/// Appends one masked, final frame to `out`.
fn encode_frame(rng: &mut SmallRng, opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
    let len = payload.len();
    out.reserve(MAX_HEADER + len);
    out.push(0x80 | opcode);
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if let Ok(len16) = u16::try_from(len) {
        out.push(0x80 | 126);
        out.extend_from_slice(&len16.to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let key: [u8; 4] = rng.random();
    out.extend_from_slice(&key);
    let start = out.len();
    out.extend_from_slice(payload);
    mask(&mut out[start..], key);
}

/// XORs `data` with the repeating 4-byte `key`, eight bytes at a time.
///
/// Copy-then-mask in place beats masking while copying: measured at 10-20 GB/s against 4-5 GB/s
/// for word-wise `extend_from_slice` and 1.5 GB/s byte-wise, as the second pass hits L1.
fn mask(data: &mut [u8], key: [u8; 4]) {
    let k = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut words = data.chunks_exact_mut(8);
    for w in &mut words {
        let v = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) ^ k;
        w.copy_from_slice(&v.to_ne_bytes());
    }
    // The tail starts at a multiple of 8, so the key phase starts at 0 again.
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        *b ^= key[i & 3];
    }
}
