//! The WebSocket opening handshake, client side: the upgrade request, and the 101 response
//! checked (accept key, the one subprotocol, no extension) with the bytes after it kept.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rand::RngExt as _;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::ws_reader::WsReader;
use super::ws_writer::{TextFramer, WsWriter};
use super::{MAX_HEAD, WsError};
use crate::transport::http1_client::parse_head;

/// Performs the opening handshake over an already-connected stream split into halves (the
/// caller splits: `TcpStream::into_split` for plain TCP, `tokio::io::split` for TLS).
///
/// `host` is the `Host` header value (with the port when not the scheme's default), `path` the
/// request target, `extra_headers` pre-rendered `Name: value\r\n` lines (e.g. `Authorization`),
/// and `subprotocol` the one protocol to ask for (`mcp`; empty asks for none). The server must
/// answer 101 with the right `Sec-WebSocket-Accept` and select exactly that subprotocol. Bytes
/// that arrive after the 101 head are kept: they belong to the first frames.
pub async fn handshake<R, W>(
    reader: R,
    mut writer: W,
    host: &str,
    path: &str,
    extra_headers: &[u8],
    subprotocol: &str,
) -> Result<(WsReader<R>, WsWriter<W>), WsError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let has_ctl = |s: &[u8]| s.iter().any(|&b| b == b'\r' || b == b'\n');
    if host.is_empty() || has_ctl(host.as_bytes()) {
        return Err(WsError::Handshake("invalid host"));
    }
    if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_whitespace()) {
        return Err(WsError::Handshake("invalid request path"));
    }
    if has_ctl(subprotocol.as_bytes()) || subprotocol.contains(',') {
        return Err(WsError::Handshake("invalid subprotocol"));
    }
    if !extra_headers.is_empty() && !extra_headers.ends_with(b"\r\n") {
        return Err(WsError::Handshake("extra headers must end with CRLF"));
    }

    let mut framer = TextFramer::new();
    let nonce: [u8; 16] = framer.rng.random();
    let mut key = [0u8; 24];
    let n = BASE64
        .encode_slice(nonce, &mut key)
        .expect("16 bytes encode to 24");
    debug_assert_eq!(n, key.len());
    let accept = derive_accept_key(&key);

    let mut req = Vec::with_capacity(256 + host.len() + path.len() + extra_headers.len());
    req.extend_from_slice(b"GET ");
    req.extend_from_slice(path.as_bytes());
    req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(
        b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ",
    );
    req.extend_from_slice(&key);
    req.extend_from_slice(b"\r\n");
    if !subprotocol.is_empty() {
        req.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        req.extend_from_slice(subprotocol.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(extra_headers);
    req.extend_from_slice(b"\r\n");
    writer.write_all(&req).await?;
    writer.flush().await?;

    let mut reader = WsReader::new(reader);
    reader
        .read_upgrade(accept.as_bytes(), subprotocol.as_bytes())
        .await?;
    let writer = WsWriter {
        io: writer,
        buf: Vec::new(),
        framer,
    };
    Ok((reader, writer))
}

impl<R: AsyncRead + Unpin> WsReader<R> {
    /// Reads and checks the 101 response head, leaving any bytes after it buffered.
    async fn read_upgrade(&mut self, accept: &[u8], subprotocol: &[u8]) -> Result<(), WsError> {
        loop {
            if self.len > self.pos {
                let parsed = parse_head(&self.buf[self.pos..self.len], |resp| {
                    check_upgrade(resp, accept, subprotocol)
                });
                match parsed {
                    // A head over the bound is refused even when it arrived whole, so the
                    // verdict does not depend on how the bytes were cut.
                    Ok(Some((n, _))) if n > MAX_HEAD => {
                        return Err(WsError::Handshake("response head too large"));
                    }
                    Ok(Some((n, checked))) => {
                        checked?;
                        self.pos += n;
                        return Ok(());
                    }
                    Ok(None) => {
                        if self.len - self.pos > MAX_HEAD {
                            return Err(WsError::Handshake("response head too large"));
                        }
                    }
                    Err(_) => return Err(WsError::Handshake("malformed HTTP response")),
                }
            }
            let need = self.len - self.pos + 1;
            if self.fill(need).await? == 0 {
                return Err(WsError::Closed);
            }
        }
    }
}

/// Checks a complete response head for a valid upgrade to a WebSocket with our subprotocol.
fn check_upgrade(
    resp: &httparse::Response<'_, '_>,
    accept: &[u8],
    subprotocol: &[u8],
) -> Result<(), WsError> {
    let status = resp
        .code
        .ok_or(WsError::Handshake("malformed HTTP response"))?;
    if status != 101 {
        return Err(WsError::Status(status));
    }
    let (mut upgrade, mut connection, mut accepted) = (false, false, false);
    let mut protocol: Option<&[u8]> = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= has_token(h.value, b"websocket");
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= has_token(h.value, b"upgrade");
        } else if name.eq_ignore_ascii_case(b"sec-websocket-accept") {
            if trim(h.value) != accept {
                return Err(WsError::Handshake("wrong Sec-WebSocket-Accept"));
            }
            accepted = true;
        } else if name.eq_ignore_ascii_case(b"sec-websocket-protocol") {
            if protocol.is_some() {
                return Err(WsError::Handshake("more than one subprotocol selected"));
            }
            protocol = Some(trim(h.value));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-extensions")
            && !trim(h.value).is_empty()
        {
            return Err(WsError::Handshake(
                "extension selected that was not offered",
            ));
        }
    }
    if !upgrade {
        return Err(WsError::Handshake("missing Upgrade: websocket"));
    }
    if !connection {
        return Err(WsError::Handshake("missing Connection: Upgrade"));
    }
    if !accepted {
        return Err(WsError::Handshake("missing Sec-WebSocket-Accept"));
    }
    match protocol {
        None if subprotocol.is_empty() => Ok(()),
        None => Err(WsError::Handshake("server did not select the subprotocol")),
        Some(p) if p == subprotocol => Ok(()),
        Some(_) => Err(WsError::Handshake("server selected another subprotocol")),
    }
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token))
}

/// A header value without surrounding whitespace.
fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}
