//! MCP client over Streamable HTTP (handshake era), on the hot-path HTTP/1.1 connection.
//!
//! One `StreamableHttp` is one MCP session on one keep-alive connection (reopened when the
//! server closes it). Requests are rendered into reused buffers: a pre-rendered head (with the
//! session id and protocol version spliced in once per session), the `Content-Length`, and the
//! body the caller writes. Responses are JSON or SSE; only the envelope is decoded.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::http1::{Captured, ContentKind, Http1Conn, HttpError};
use super::sse::SseDecoder;
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::jsonrpc::{self, Codec, DecodeError, Incoming};
use crate::protocol::version::Revision;

/// How long to wait for a server to end an SSE response stream after the response arrived
/// before dropping the connection instead of reusing it.
const LINGER: Duration = Duration::from_millis(200);

/// Everything about the endpoint that is the same for every session.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// The `Host` header value.
    pub host: String,
    /// Path and query.
    pub path: String,
    /// Pre-rendered extra header lines (`Name: value\r\n`); may hold secrets.
    pub extra_headers: Vec<u8>,
    /// The revision offered in `initialize`.
    pub protocol: Revision,
    pub codec: Codec,
    /// Largest response body or SSE event accepted.
    pub max_body: usize,
    pub connect_timeout: Duration,
}

/// The end of one exchange, with stream metrics when the response came as SSE.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub outcome: Outcome,
    /// When the response was complete (the latency end point).
    pub done: Instant,
    /// First non-empty SSE event, for streamed responses.
    pub first_event: Option<Instant>,
    /// Non-empty SSE events received (including the response).
    pub events: u32,
    pub streamed: bool,
    /// The server forgot the session (404): the caller should open a new one.
    pub session_expired: bool,
    /// A connection was opened for this exchange.
    pub connected: bool,
    /// The server kept the SSE stream open after the response; the connection was dropped.
    pub lingered: bool,
}

/// An MCP session over Streamable HTTP.
#[derive(Debug)]
pub struct StreamableHttp {
    ep: std::sync::Arc<Endpoint>,
    conn: Option<Http1Conn<TcpStream>>,
    /// Request head up to and including `Content-Length: `.
    head: Vec<u8>,
    out: Vec<u8>,
    body: Vec<u8>,
    resp: Vec<u8>,
    sse: SseDecoder,
    captured: Captured,
    session_id: Option<Vec<u8>>,
    revision: Option<Revision>,
    next_id: u64,
    /// An exchange was interrupted (timeout, cancellation): the connection state is unknown.
    dirty: bool,
}

/// The response to `initialize` was not usable.
#[derive(Debug, Clone, Copy)]
pub struct OpenFailed(pub Reply);

impl StreamableHttp {
    pub fn new(ep: std::sync::Arc<Endpoint>) -> Self {
        let max = ep.max_body;
        let mut s = StreamableHttp {
            ep,
            conn: None,
            head: Vec::with_capacity(512),
            out: Vec::with_capacity(1024),
            body: Vec::with_capacity(4096),
            resp: Vec::new(),
            sse: SseDecoder::new(max),
            captured: Captured::default(),
            session_id: None,
            revision: None,
            next_id: 1,
            dirty: false,
        };
        s.render_head();
        s
    }

    /// The negotiated revision, once open.
    pub fn revision(&self) -> Option<Revision> {
        self.revision
    }

    pub fn is_open(&self) -> bool {
        self.revision.is_some()
    }

    /// The bytes of the last response message (the JSON body, or the SSE event's data).
    pub fn last_message(&self) -> &[u8] {
        &self.resp
    }

    /// Forgets the session (after the server expired it); the next exchange reconnects.
    pub fn reset(&mut self) {
        self.session_id = None;
        self.revision = None;
        self.render_head();
    }

    fn render_head(&mut self) {
        let h = &mut self.head;
        h.clear();
        h.extend_from_slice(b"POST ");
        h.extend_from_slice(self.ep.path.as_bytes());
        h.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        h.extend_from_slice(self.ep.host.as_bytes());
        h.extend_from_slice(b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nUser-Agent: mcpbench/");
        h.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        h.extend_from_slice(b"\r\n");
        h.extend_from_slice(&self.ep.extra_headers);
        if let Some(sid) = &self.session_id {
            h.extend_from_slice(b"Mcp-Session-Id: ");
            h.extend_from_slice(sid);
            h.extend_from_slice(b"\r\n");
        }
        if let Some(rev) = self.revision.filter(|r| r.sends_version_header()) {
            h.extend_from_slice(b"MCP-Protocol-Version: ");
            h.extend_from_slice(rev.as_str().as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        h.extend_from_slice(b"Content-Length: ");
    }

    /// Connects, sends `initialize` and `notifications/initialized`. The reply's timing covers
    /// the `initialize` exchange.
    pub async fn open(&mut self) -> Result<Reply, OpenFailed> {
        self.session_id = None;
        self.revision = None;
        self.render_head();
        let protocol = self.ep.protocol;
        let reply = self
            .exchange(true, |out, id| {
                out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
                out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
                out.extend_from_slice(br#","method":"initialize","params":{"protocolVersion":""#);
                out.extend_from_slice(protocol.as_str().as_bytes());
                out.extend_from_slice(
                    br#"","capabilities":{},"clientInfo":{"name":"mcpbench","version":""#,
                );
                out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
                out.extend_from_slice(br#""}}}"#);
            })
            .await;
        if reply.outcome != Outcome::Ok {
            return Err(OpenFailed(reply));
        }
        let negotiated = serde_json::from_slice::<serde_json::Value>(&self.resp)
            .ok()
            .and_then(|v| {
                v.pointer("/result/protocolVersion")?
                    .as_str()?
                    .parse::<Revision>()
                    .ok()
            })
            .filter(|r| r.has_handshake());
        let Some(rev) = negotiated else {
            return Err(OpenFailed(Reply {
                outcome: Outcome::Protocol(ProtocolKind::Handshake),
                ..reply
            }));
        };
        self.session_id = self.captured.session_id.take();
        self.revision = Some(rev);
        self.render_head();
        let note = self
            .exchange(false, |out, _| {
                out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            })
            .await;
        if note.outcome != Outcome::Ok {
            self.revision = None;
            return Err(OpenFailed(Reply {
                outcome: note.outcome,
                ..reply
            }));
        }
        Ok(reply)
    }

    /// Sends one request whose body `write` renders for the given id, and waits for its
    /// response.
    #[inline]
    pub async fn call<W: FnOnce(&mut Vec<u8>, u64)>(&mut self, write: W) -> Reply {
        self.exchange(true, write).await
    }

    /// Ends the session: `DELETE` with the session id (405 and errors are fine), then closes.
    pub async fn close(&mut self, timeout: Duration) {
        if let (Some(sid), Some(conn)) = (
            &self.session_id,
            self.conn.as_mut().filter(|c| c.is_reusable()),
        ) {
            let mut req = Vec::with_capacity(256);
            req.extend_from_slice(b"DELETE ");
            req.extend_from_slice(self.ep.path.as_bytes());
            req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
            req.extend_from_slice(self.ep.host.as_bytes());
            req.extend_from_slice(b"\r\n");
            req.extend_from_slice(&self.ep.extra_headers);
            req.extend_from_slice(b"Mcp-Session-Id: ");
            req.extend_from_slice(sid);
            req.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
            let cap = &mut self.captured;
            let _ = tokio::time::timeout(timeout, async {
                conn.send(&req).await?;
                conn.read_head(cap).await?;
                conn.discard_body().await
            })
            .await;
        }
        self.conn = None;
        self.session_id = None;
        self.revision = None;
    }
}

fn reply(outcome: Outcome) -> Reply {
    Reply {
        outcome,
        done: Instant::now(),
        first_event: None,
        events: 0,
        streamed: false,
        session_expired: false,
        connected: false,
        lingered: false,
    }
}

impl StreamableHttp {
    async fn connect(&mut self) -> Result<(), Outcome> {
        let stream =
            match tokio::time::timeout(self.ep.connect_timeout, TcpStream::connect(self.ep.addr))
                .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(_)) | Err(_) => return Err(Outcome::Connect),
            };
        let _ = stream.set_nodelay(true);
        self.conn = Some(Http1Conn::new(stream));
        Ok(())
    }

    /// One POST. `expect_response` is false for notifications (202 expected).
    async fn exchange<W: FnOnce(&mut Vec<u8>, u64)>(
        &mut self,
        expect_response: bool,
        write: W,
    ) -> Reply {
        if self.dirty {
            self.conn = None;
            self.dirty = false;
        }
        let mut connected = false;
        if !self.conn.as_ref().is_some_and(|c| c.is_reusable()) {
            if let Err(o) = self.connect().await {
                return reply(o);
            }
            connected = true;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.body.clear();
        write(&mut self.body, id);
        self.out.clear();
        self.out.extend_from_slice(&self.head);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(self.body.len()).as_bytes());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(&self.body);

        self.dirty = true;
        let mut reply = self.round_trip(id, expect_response).await;
        self.dirty = false;
        reply.connected = connected;
        if !self
            .conn
            .as_ref()
            .is_some_and(|c| c.is_reusable() || c.body_pending())
        {
            self.conn = None;
        }
        reply
    }

    async fn round_trip(&mut self, id: u64, expect_response: bool) -> Reply {
        let conn = self.conn.as_mut().expect("connected above");
        if conn.send(&self.out).await.is_err() {
            self.conn = None;
            return reply(Outcome::Io);
        }
        let head = match conn.read_head(&mut self.captured).await {
            Ok(h) => h,
            Err(e) => return reply(http_failure(&e)),
        };
        if !expect_response {
            // Notifications: 202 (or 200/204 with no JSON-RPC content) means accepted.
            let ok = matches!(head.status, 200 | 202 | 204);
            let drained = conn.discard_body().await;
            let outcome = match (ok, drained) {
                (true, Ok(())) => Outcome::Ok,
                (false, _) => Outcome::Http(head.status),
                (true, Err(e)) => http_failure(&e),
            };
            return reply(outcome);
        }
        if head.status != 200 {
            let drained = bounded_discard(conn, self.ep.max_body).await;
            let mut r = reply(Outcome::Http(head.status));
            r.session_expired = head.status == 404 && self.session_id.is_some();
            if drained.is_err() {
                self.conn = None;
            }
            return r;
        }
        match head.content {
            ContentKind::Json => self.read_json(id).await,
            ContentKind::EventStream => self.read_sse(id).await,
            ContentKind::Other | ContentKind::Missing => {
                self.conn = None;
                reply(Outcome::Protocol(ProtocolKind::BadContentType))
            }
        }
    }

    async fn read_json(&mut self, id: u64) -> Reply {
        let conn = self.conn.as_mut().expect("connected");
        self.resp.clear();
        let max = self.ep.max_body;
        let mut too_large = false;
        let resp = &mut self.resp;
        let r = conn
            .read_body(|chunk| {
                if resp.len() + chunk.len() > max {
                    too_large = true;
                    return ControlFlow::Break(());
                }
                resp.extend_from_slice(chunk);
                ControlFlow::Continue(())
            })
            .await;
        let done = Instant::now();
        let outcome = match r {
            Err(e) => http_failure(&e),
            Ok(_) if too_large => {
                self.conn = None;
                Outcome::Protocol(ProtocolKind::TooLarge)
            }
            Ok(_) => classify(jsonrpc::decode(self.ep.codec, &mut self.resp), id)
                .unwrap_or(Outcome::Protocol(ProtocolKind::NoResponse)),
        };
        Reply {
            done,
            ..reply(outcome)
        }
    }

    async fn read_sse(&mut self, id: u64) -> Reply {
        let conn = self.conn.as_mut().expect("connected");
        self.sse.reset();
        let codec = self.ep.codec;
        let mut found: Option<Outcome> = None;
        let mut first_event = None;
        let mut events = 0u32;
        let mut sse_error = false;
        let sse = &mut self.sse;
        let resp = &mut self.resp;
        resp.clear();
        let r = conn
            .read_body(|chunk| {
                let flow = sse.feed(chunk, |ev| {
                    if ev.data.is_empty() || !ev.is_message() {
                        return ControlFlow::Continue(());
                    }
                    events += 1;
                    first_event.get_or_insert_with(Instant::now);
                    resp.clear();
                    resp.extend_from_slice(ev.data);
                    match classify(jsonrpc::decode(codec, ev.data), id) {
                        Some(o) => {
                            found = Some(o);
                            ControlFlow::Break(())
                        }
                        None => ControlFlow::Continue(()),
                    }
                });
                match flow {
                    Ok(f) => f,
                    Err(_) => {
                        sse_error = true;
                        ControlFlow::Break(())
                    }
                }
            })
            .await;
        let done = Instant::now();
        let base = Reply {
            done,
            first_event,
            events,
            streamed: true,
            ..reply(Outcome::Ok)
        };
        if sse_error {
            self.conn = None;
            return Reply {
                outcome: Outcome::Protocol(ProtocolKind::TooLarge),
                ..base
            };
        }
        let outcome = match (r, found) {
            (_, Some(o)) => o,
            (Err(e), None) => http_failure(&e),
            (Ok(_), None) => Outcome::Protocol(ProtocolKind::NoResponse),
        };
        // The server SHOULD end the stream after the response; give it a moment, then give up
        // on reusing the connection.
        let mut lingered = false;
        if let Some(conn) = self.conn.as_mut().filter(|c| c.body_pending()) {
            match tokio::time::timeout(LINGER, conn.discard_body()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => self.conn = None,
                Err(_) => {
                    lingered = true;
                    self.conn = None;
                }
            }
        }
        Reply {
            outcome,
            lingered,
            ..base
        }
    }
}

/// Discards a body of bounded size (error bodies); larger bodies poison the connection.
async fn bounded_discard(conn: &mut Http1Conn<TcpStream>, max: usize) -> Result<(), ()> {
    let mut seen = 0usize;
    let r = conn
        .read_body(|chunk| {
            seen += chunk.len();
            if seen > max {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await;
    match r {
        Ok(ControlFlow::Continue(())) => Ok(()),
        _ => Err(()),
    }
}

fn http_failure(e: &HttpError) -> Outcome {
    match e {
        HttpError::Io(_) | HttpError::Closed => Outcome::Io,
        HttpError::Malformed(_) | HttpError::HeadTooLarge => {
            Outcome::Protocol(ProtocolKind::BadHttp)
        }
    }
}

/// The outcome a decoded message gives the request `id`; `None` if the message is not a
/// response (a notification or a server request preceding it on a stream).
fn classify(m: Result<Incoming<'_>, DecodeError>, id: u64) -> Option<Outcome> {
    match m {
        Err(DecodeError::Json) => Some(Outcome::Protocol(ProtocolKind::BadJson)),
        Err(DecodeError::Batch | DecodeError::Shape) => {
            Some(Outcome::Protocol(ProtocolKind::NotJsonRpc))
        }
        Ok(Incoming::Result {
            id: rid, is_error, ..
        }) => Some(if !rid.is(id) {
            Outcome::Protocol(ProtocolKind::WrongId)
        } else if is_error {
            Outcome::ToolError
        } else {
            Outcome::Ok
        }),
        Ok(Incoming::Error { id: rid, code }) => Some(match rid {
            jsonrpc::IdRef::Null => Outcome::RpcError(code),
            r if r.is(id) => Outcome::RpcError(code),
            _ => Outcome::Protocol(ProtocolKind::WrongId),
        }),
        Ok(Incoming::Request { .. } | Incoming::Notification { .. }) => None,
    }
}
