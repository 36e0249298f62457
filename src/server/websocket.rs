//! MCP over WebSocket at `GET /ws` — a non-standard transport (mcp-protocol.md §3.5), kept
//! for gateways that speak it: subprotocol `mcp` (required, echoed), one JSON-RPC message per
//! text frame, the connection is one session (see [`Conn`]). Binary frames close the
//! connection with 1003, a message larger than `Config::max_body` with 1009.
//!
//! The upgrade is hyper's (so WebSockets share the listener, TLS included); frames are coded by
//! tungstenite's sans-IO [`WebSocketContext`] over in-memory buffers, and one task per
//! connection reads the socket and is its only writer.

use std::io::{self, Read, Write};
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{CloseFrame, Frame};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig, WebSocketContext};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::State;
use super::body::Body;
use super::conn::{Conn, Received};
use super::response::{Req, http_error, method_not_allowed, respond};
use super::session::seat;
use crate::protocol::jsonrpc::code;

/// The subprotocol clients must offer.
pub(crate) const SUBPROTOCOL: &str = "mcp";

/// True if a comma-separated header (any of its instances) lists `token` (case-insensitive).
fn lists(h: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    tokens(h, name).any(|t| t.eq_ignore_ascii_case(token))
}

fn tokens(h: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = &str> {
    h.get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

fn bad_request(message: &str) -> Response<Body> {
    http_error(StatusCode::BAD_REQUEST, code::INVALID_REQUEST, message)
}

/// `GET /ws`: checks the upgrade request, answers 101 and serves the connection on a task.
pub(crate) fn upgrade(state: &Arc<State>, mut req: Req, tenant: Option<u16>) -> Response<Body> {
    if req.method() != Method::GET {
        return method_not_allowed("GET");
    }
    let h = req.headers();
    if req.version() != Version::HTTP_11
        || !lists(h, header::UPGRADE, "websocket")
        || !lists(h, header::CONNECTION, "upgrade")
    {
        return bad_request(
            "Bad Request: /ws is a WebSocket endpoint (HTTP/1.1 upgrade to websocket, subprotocol mcp)",
        );
    }
    if h.get(header::SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        let mut r = bad_request("Bad Request: WebSocket version 13 is required");
        *r.status_mut() = StatusCode::UPGRADE_REQUIRED;
        r.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return r;
    }
    let Some(key) = h.get(header::SEC_WEBSOCKET_KEY) else {
        return bad_request("Bad Request: Sec-WebSocket-Key is missing");
    };
    // Subprotocol names are case-sensitive (RFC 6455 §4.1).
    if !tokens(h, header::SEC_WEBSOCKET_PROTOCOL).any(|t| t == SUBPROTOCOL) {
        return bad_request(
            "Bad Request: the WebSocket subprotocol `mcp` is required (Sec-WebSocket-Protocol: mcp)",
        );
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let Ok(accept) = HeaderValue::from_str(&accept) else {
        return bad_request("Bad Request: invalid Sec-WebSocket-Key");
    };
    // The connection is the session: it holds its tenant's seat for as long as it lives.
    let seat = match seat(state, tenant) {
        Ok(seat) => seat,
        Err(refused) => return *refused,
    };
    let upgraded = hyper::upgrade::on(&mut req);
    let state = state.clone();
    tokio::spawn(async move {
        let _seat = seat;
        match upgraded.await {
            Ok(io) => serve(state, TokioIo::new(io), tenant).await,
            Err(error) => tracing::debug!(%error, "WebSocket upgrade failed"),
        }
    });
    let mut r = respond(StatusCode::SWITCHING_PROTOCOLS, None, Body::empty());
    let rh = r.headers_mut();
    rh.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    rh.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    rh.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    rh.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SUBPROTOCOL),
    );
    r
}

/// The byte buffers tungstenite reads frames from and writes frames to.
#[derive(Debug, Default)]
struct Buffers {
    input: Vec<u8>,
    pos: usize,
    output: Vec<u8>,
}

impl Read for Buffers {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = &self.input[self.pos..];
        if rest.is_empty() {
            self.input.clear();
            self.pos = 0;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Buffers {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One text frame, without re-validating UTF-8 (the server writes only JSON it produced from
/// valid UTF-8).
fn text(ctx: &mut WebSocketContext, bufs: &mut Buffers, msg: Bytes) {
    let frame = Frame::message(msg, OpCode::Data(Data::Text), true);
    // Fails only once the connection is closing; the message then has no reader.
    let _ = ctx.write(bufs, Message::Frame(frame));
}

/// What reading the buffered input led to.
enum After {
    Continue,
    Stop,
}

/// Decodes every complete frame in the input and acts on it.
fn read_frames(ctx: &mut WebSocketContext, bufs: &mut Buffers, conn: &Arc<Conn>) -> After {
    loop {
        match ctx.read(bufs) {
            Ok(Message::Text(t)) => match conn.receive(Bytes::from(t)) {
                Received::Reply(b) | Received::Invalid(b) => text(ctx, bufs, b),
                Received::Nothing => {}
            },
            Ok(Message::Binary(_)) => {
                let close = CloseFrame {
                    code: CloseCode::Unsupported,
                    reason:
                        "binary frames are not supported: send JSON-RPC messages as text frames"
                            .into(),
                };
                let _ = ctx.close(bufs, Some(close));
            }
            // Pings are answered and close frames echoed by tungstenite itself.
            Ok(_) => {}
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return After::Continue,
            Err(WsError::Capacity(error)) => {
                // A message (or frame) over `Config::max_body`: say so (1009), then close.
                tracing::debug!(%error, "WebSocket message too big");
                let close = CloseFrame {
                    code: CloseCode::Size,
                    reason: "message too big: larger than the server's limit".into(),
                };
                let _ = ctx.close(bufs, Some(close));
                return After::Stop;
            }
            Err(error) => {
                tracing::debug!(%error, "WebSocket connection ends");
                return After::Stop;
            }
        }
    }
}

async fn serve<IO: AsyncRead + AsyncWrite>(state: Arc<State>, io: IO, tenant: Option<u16>) {
    let (mut rd, mut wr) = tokio::io::split(io);
    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    let conn = Conn::new(state.clone(), tx, tenant);
    let config = WebSocketConfig::default()
        .max_message_size(Some(state.config.max_body))
        .max_frame_size(Some(state.config.max_body));
    let mut ctx = WebSocketContext::new(Role::Server, Some(config));
    let mut bufs = Buffers::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let after = tokio::select! {
            read = rd.read(&mut chunk) => match read {
                Ok(0) | Err(_) => After::Stop,
                Ok(n) => {
                    bufs.input.extend_from_slice(&chunk[..n]);
                    read_frames(&mut ctx, &mut bufs, &conn)
                }
            },
            Some(msg) = rx.recv() => {
                text(&mut ctx, &mut bufs, msg);
                while let Ok(msg) = rx.try_recv() {
                    text(&mut ctx, &mut bufs, msg);
                }
                After::Continue
            }
            () = state.closing.cancelled() => {
                let close = CloseFrame { code: CloseCode::Away, reason: "server shutting down".into() };
                let _ = ctx.close(&mut bufs, Some(close));
                After::Stop
            }
        };
        let _ = ctx.flush(&mut bufs);
        if !bufs.output.is_empty() {
            let written = wr.write_all(&bufs.output).await;
            bufs.output.clear();
            if written.is_err() {
                break;
            }
        }
        if let After::Stop = after {
            break;
        }
    }
    let _ = wr.shutdown().await;
    conn.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_token_lists() {
        let mut h = HeaderMap::new();
        h.append(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert!(lists(&h, header::CONNECTION, "upgrade"));
        h.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("chat, superchat"),
        );
        h.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("mcp"),
        );
        let offered: Vec<&str> = tokens(&h, header::SEC_WEBSOCKET_PROTOCOL).collect();
        assert_eq!(offered, ["chat", "superchat", "mcp"]);
    }
}
