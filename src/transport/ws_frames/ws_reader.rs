//! The receiving half of the WebSocket client: frames parsed in place out of one reused
//! buffer, fragmented text messages reassembled, control frames and close codes checked.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::{
    DEFAULT_MAX_MESSAGE, MAX_CONTROL, MIN_READ, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING,
    OP_PONG, OP_TEXT, READ_CHUNK, WsError,
};

/// One event from the server.
#[derive(Debug, PartialEq, Eq)]
pub enum WsEvent<'a> {
    /// A complete text message, validated as UTF-8. Mutable so a JSON parser can work in place;
    /// valid until the next call to [`WsReader::next`].
    Text(&'a mut [u8]),
    /// A ping; answer it with [`WsWriter::send_pong`](super::WsWriter::send_pong) and this payload.
    Ping(&'a [u8]),
    Pong,
    /// The server's close frame, with its status code if it sent one. Answer with
    /// [`WsWriter::send_close`](super::WsWriter::send_close); the reader returns [`WsError::Closed`] from now on.
    Close {
        code: Option<u16>,
    },
}

/// The receiving half: parses frames in place out of one reused buffer.
#[derive(Debug)]
pub struct WsReader<R> {
    io: R,
    pub(super) buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    pub(super) pos: usize,
    /// End of filled bytes in `buf`.
    pub(super) len: usize,
    /// Reassembly buffer for fragmented messages.
    frag: Vec<u8>,
    /// A fragmented message has started and not yet finished.
    in_message: bool,
    /// A close frame or an error was returned; nothing more is read.
    done: bool,
    max_message: usize,
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy)]
struct Header {
    fin: bool,
    rsv: u8,
    opcode: u8,
    masked: bool,
    header_len: usize,
    payload_len: u64,
}

enum Parsed {
    /// At least this many bytes (from the frame start) are needed to parse the header.
    Need(usize),
    Frame(Header),
}

/// What [`WsReader::next`] returns, as positions, so the borrow starts after the read loop.
enum Ready {
    Text { start: usize, end: usize },
    Reassembled,
    Ping { start: usize, end: usize },
    Pong,
    Close(Option<u16>),
}

impl<R> WsReader<R> {
    /// Wraps the read half of a stream whose handshake is already done.
    pub fn new(io: R) -> Self {
        WsReader {
            io,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            len: 0,
            frag: Vec::new(),
            in_message: false,
            done: false,
            max_message: DEFAULT_MAX_MESSAGE,
        }
    }

    /// Sets the bound on one (reassembled) message; larger ones fail with
    /// [`WsError::TooLarge`] as soon as their frame header arrives.
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
    }

    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// The read buffer's length and the reassembled message's, in bytes: at most one frame
    /// under the bound rounded up to the read chunk, and the bound. For the property tests and
    /// fuzz targets.
    #[doc(hidden)]
    pub fn buffered(&self) -> (usize, usize) {
        (self.buf.len(), self.frag.len())
    }

    /// Gives back the stream.
    pub fn into_inner(self) -> R {
        self.io
    }

    /// Checks a frame header against the protocol and the connection's state; returns the
    /// payload length, now known to fit in memory.
    fn check(&self, h: &Header) -> Result<usize, WsError> {
        if h.masked {
            return Err(WsError::Protocol("masked frame from the server"));
        }
        if h.rsv != 0 {
            return Err(WsError::Protocol("reserved bits set without an extension"));
        }
        let too_large = |size: u64| WsError::TooLarge(usize::try_from(size).unwrap_or(usize::MAX));
        match h.opcode {
            OP_CONTINUATION | OP_TEXT => {
                let so_far = match (h.opcode, self.in_message) {
                    (OP_CONTINUATION, false) => {
                        return Err(WsError::Protocol(
                            "continuation frame without a started message",
                        ));
                    }
                    (OP_TEXT, true) => {
                        return Err(WsError::Protocol("new message inside a fragmented message"));
                    }
                    (OP_TEXT, false) => 0,
                    _ => self.frag.len() as u64,
                };
                let size = so_far.saturating_add(h.payload_len);
                if size > self.max_message as u64 {
                    return Err(too_large(size));
                }
                Ok(h.payload_len as usize)
            }
            OP_BINARY => Err(WsError::Protocol("binary message")),
            OP_CLOSE | OP_PING | OP_PONG => {
                if !h.fin {
                    return Err(WsError::Protocol("fragmented control frame"));
                }
                if h.payload_len > MAX_CONTROL as u64 {
                    return Err(WsError::Protocol("control frame payload over 125 bytes"));
                }
                Ok(h.payload_len as usize)
            }
            _ => Err(WsError::Protocol("reserved opcode")),
        }
    }

    /// Acts on a complete frame whose payload is `buf[start..end]`; `None` when it only
    /// advanced a fragmented message.
    fn consume(&mut self, h: &Header, start: usize, end: usize) -> Result<Option<Ready>, WsError> {
        let payload = &self.buf[start..end];
        match h.opcode {
            OP_TEXT if h.fin => {
                check_utf8(payload)?;
                Ok(Some(Ready::Text { start, end }))
            }
            OP_TEXT => {
                self.frag.clear();
                self.frag.extend_from_slice(payload);
                self.in_message = true;
                Ok(None)
            }
            OP_CONTINUATION => {
                self.frag.extend_from_slice(payload);
                if !h.fin {
                    return Ok(None);
                }
                self.in_message = false;
                check_utf8(&self.frag)?;
                Ok(Some(Ready::Reassembled))
            }
            OP_PING => Ok(Some(Ready::Ping { start, end })),
            OP_PONG => Ok(Some(Ready::Pong)),
            OP_CLOSE => {
                let code = parse_close(payload)?;
                self.done = true;
                Ok(Some(Ready::Close(code)))
            }
            _ => Err(WsError::Protocol("reserved opcode")),
        }
    }
}

impl<R: AsyncRead + Unpin> WsReader<R> {
    /// Reads until the next complete event. Fragmented text messages (possibly interleaved
    /// with control frames, which are returned as they come) are reassembled; unfragmented
    /// ones are returned in place.
    ///
    /// Cancel-safe: nothing is consumed until a whole frame is buffered, so this can be a
    /// branch of `tokio::select!`. After an error or a close frame it returns
    /// [`WsError::Closed`].
    pub async fn next(&mut self) -> Result<WsEvent<'_>, WsError> {
        if self.done {
            return Err(WsError::Closed);
        }
        let ready = match self.next_ready().await {
            Ok(ready) => ready,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        Ok(match ready {
            Ready::Text { start, end } => WsEvent::Text(&mut self.buf[start..end]),
            Ready::Reassembled => WsEvent::Text(&mut self.frag[..]),
            Ready::Ping { start, end } => WsEvent::Ping(&self.buf[start..end]),
            Ready::Pong => WsEvent::Pong,
            Ready::Close(code) => WsEvent::Close { code },
        })
    }

    async fn next_ready(&mut self) -> Result<Ready, WsError> {
        loop {
            let avail = self.len - self.pos;
            let need = match parse_header(&self.buf[self.pos..self.len])? {
                Parsed::Need(n) => n,
                Parsed::Frame(h) => {
                    let payload_len = self.check(&h)?;
                    let total = h.header_len.saturating_add(payload_len);
                    if avail >= total {
                        let start = self.pos + h.header_len;
                        let end = self.pos + total;
                        self.pos = end;
                        if let Some(ready) = self.consume(&h, start, end)? {
                            return Ok(ready);
                        }
                        continue;
                    }
                    total
                }
            };
            if self.fill(need).await? == 0 {
                return Err(if self.pos == self.len {
                    WsError::Closed
                } else {
                    WsError::Io(io::ErrorKind::UnexpectedEof.into())
                });
            }
        }
    }

    /// Reads once, first making room for `need` bytes from `pos` (moving unread bytes to the
    /// front, growing the buffer to hold a whole frame). Returns the bytes read; 0 is EOF.
    pub(super) async fn fill(&mut self, need: usize) -> Result<usize, WsError> {
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        }
        if self.pos > 0
            && (self.pos + need > self.buf.len() || self.buf.len() - self.len < MIN_READ)
        {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if need > self.buf.len() {
            self.buf.resize(need.next_multiple_of(READ_CHUNK), 0);
        }
        let n = self.io.read(&mut self.buf[self.len..]).await?;
        self.len += n;
        Ok(n)
    }
}

/// Parses a frame header from the start of `b` (RFC 6455 §5.2).
fn parse_header(b: &[u8]) -> Result<Parsed, WsError> {
    if b.len() < 2 {
        return Ok(Parsed::Need(2));
    }
    let masked = b[1] & 0x80 != 0;
    let len7 = b[1] & 0x7F;
    let ext = match len7 {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let header_len = 2 + ext + if masked { 4 } else { 0 };
    if b.len() < header_len {
        return Ok(Parsed::Need(header_len));
    }
    let payload_len = match len7 {
        126 => u64::from(u16::from_be_bytes([b[2], b[3]])),
        127 => {
            let n = u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]);
            if n >> 63 != 0 {
                return Err(WsError::Protocol(
                    "64-bit payload length with the high bit set",
                ));
            }
            n
        }
        n => u64::from(n),
    };
    Ok(Parsed::Frame(Header {
        fin: b[0] & 0x80 != 0,
        rsv: b[0] & 0x70,
        opcode: b[0] & 0x0F,
        masked,
        header_len,
        payload_len,
    }))
}

/// Checks that a text payload is UTF-8.
fn check_utf8(b: &[u8]) -> Result<(), WsError> {
    std::str::from_utf8(b)
        .map(|_| ())
        .map_err(|_| WsError::Protocol("text message is not valid UTF-8"))
}

/// The status code of a close frame (RFC 6455 §5.5.1, §7.4).
fn parse_close(payload: &[u8]) -> Result<Option<u16>, WsError> {
    match payload {
        [] => Ok(None),
        [_] => Err(WsError::Protocol("close frame with a 1-byte payload")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            // 1004-1006 and 1015 are reserved for reporting, never sent; 1016-2999 are
            // reserved for future RFCs; below 1000 is unused.
            if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                return Err(WsError::Protocol("invalid close code"));
            }
            if std::str::from_utf8(reason).is_err() {
                return Err(WsError::Protocol("close reason is not valid UTF-8"));
            }
            Ok(Some(code))
        }
    }
}
