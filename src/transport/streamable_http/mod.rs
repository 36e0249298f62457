//! MCP over Streamable HTTP: the handshake era (sessions made by `initialize`) and 2026-07-28
//! (stateless: `server/discover`, `_meta` and `Mcp-*` headers on every request), over
//! HTTP/1.1 (the hot-path client in `http1`) or HTTP/2 (the `h2` crate, each virtual user
//! awaiting its own stream: no task or channel message per request), plain or TLS.
//!
//! One `HttpSession` is one MCP session. Over HTTP/1.1 it owns one keep-alive connection
//! (reopened when the server closes it); requests are rendered into reused buffers from a
//! pre-rendered head. Responses are JSON or SSE; only the envelope is decoded.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::http1_client::{Captured, ContentKind, Http1Conn, HttpError, IDLE_PROBE, content_kind};
use super::mux::OpenLatch;
use super::net::{self, Stream};
use super::sse_decoder::SseDecoder;
use super::{CallSpec, Endpoint, Reply, Session, classify, discover_supports, negotiated_revision};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::jsonrpc;
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How much of a non-200 response body is kept (to say what the server said).
const SAID: usize = 512;

/// How long to wait for a server to end an SSE response stream after the response arrived
/// before dropping the connection instead of reusing it.
const LINGER: Duration = Duration::from_millis(200);

/// Resumptions (GET with Last-Event-ID) of one response stream, at most.
const MAX_RESUMES: u32 = 3;

enum Conn {
    H1(Http1Conn<Stream>),
    H2(H2Conn),
}

/// An MCP session over Streamable HTTP.
pub struct HttpSession {
    ep: Arc<Endpoint>,
    conn: Option<Conn>,
    /// HTTP/1.1 request head up to the per-request headers (no `Content-Length` yet).
    head: Vec<u8>,
    /// HTTP/2: the request URI.
    uri: hyper::Uri,
    out: Vec<u8>,
    body: Vec<u8>,
    resp: Vec<u8>,
    /// The answer to a server request received on a stream.
    answer: Vec<u8>,
    sse: SseDecoder,
    captured: Captured,
    session_id: Option<Vec<u8>>,
    revision: Option<Revision>,
    next_id: u64,
    /// The id of the last request sent (for `notifications/cancelled`).
    last_id: Option<u64>,
    /// An exchange was interrupted (timeout, cancellation): the connection state is unknown.
    dirty: bool,
    /// What arrived that belongs to no request (duplicates after a response on its stream)
    /// and the server requests answered.
    stats: TransportCounts,
    /// The last response came as an SSE stream (what follows it is read for duplicates).
    streamed: bool,
    /// The last round trip found its reused HTTP/1.1 connection closed by the server before
    /// any byte of a response: the request never reached the server's handling.
    stale: bool,
    /// Shared session mode: the session all virtual users of a worker use (each on its own
    /// connection), and the generation of it this one has adopted.
    shared: Option<Rc<HttpShared>>,
    seen: u64,
    /// When the last exchange on `conn` ended.
    idle_since: Option<Instant>,
    /// A bearer token of this user's own (OAuth), sent as `Authorization` on every request.
    bearer: Option<String>,
    /// Replicas: the one the current connection goes to, and the others' connections.
    replica: usize,
    parked: Vec<Option<Conn>>,
}

/// One MCP session shared by the virtual users of a worker thread over Streamable HTTP.
#[derive(Debug, Default)]
pub struct HttpShared {
    /// Session id (if the server assigned one) and revision, once open.
    state: RefCell<Option<(Option<Vec<u8>>, Revision)>>,
    /// Bumped whenever the shared session changes.
    generation: Cell<u64>,
    /// Request ids must be unique within a session, so they come from one counter.
    next_id: Cell<u64>,
    latch: OpenLatch,
    /// Virtual users on the session not yet closed: the last to close ends it (DELETE).
    users: Cell<usize>,
}

impl std::fmt::Debug for HttpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSession")
            .field("revision", &self.revision)
            .finish()
    }
}

/// Where the response body comes from.
enum Body<'a> {
    H1(&'a mut Http1Conn<Stream>),
    H2(h2::RecvStream),
    /// No body (between a stream's end and its resumption).
    Empty,
}

impl Body<'_> {
    async fn read<F: FnMut(&[u8]) -> ControlFlow<()>>(
        &mut self,
        mut sink: F,
    ) -> Result<ControlFlow<()>, HttpError> {
        match self {
            Body::H1(c) => c.read_body(sink).await,
            Body::H2(b) => {
                while let Some(data) = b.data().await {
                    let data = data.map_err(|e| HttpError::Io(std::io::Error::other(e)))?;
                    // Read: the peer may send that much more (flow control).
                    let _ = b.flow_control().release_capacity(data.len());
                    if sink(&data).is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(ControlFlow::Continue(()))
            }
            Body::Empty => Ok(ControlFlow::Continue(())),
        }
    }
}

struct Head {
    status: u16,
    content: ContentKind,
}

/// An HTTP/2 connection: the handle streams are opened on, and whether the task driving the
/// connection has ended (closed by either side).
struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

/// Windows as hyper's client sets them (h2's own 64 KiB would throttle large results).
const H2_STREAM_WINDOW: u32 = 2 << 20;
const H2_CONNECTION_WINDOW: u32 = 5 << 20;

impl H2Conn {
    async fn handshake(stream: Stream) -> Result<Self, h2::Error> {
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(H2_STREAM_WINDOW)
            .initial_connection_window_size(H2_CONNECTION_WINDOW)
            .handshake(stream)
            .await?;
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        tokio::spawn(async move {
            let _ = conn.await;
            flag.store(true, Ordering::Relaxed);
        });
        Ok(H2Conn { send, closed })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// One request on a new stream (waiting for the server's stream limit), its body sent
    /// whole; the response head.
    async fn request(
        &mut self,
        req: hyper::http::Request<()>,
        body: &[u8],
    ) -> Result<hyper::http::Response<h2::RecvStream>, h2::Error> {
        std::future::poll_fn(|cx| self.send.poll_ready(cx)).await?;
        let (response, mut out) = self.send.send_request(req, body.is_empty())?;
        if !body.is_empty() {
            out.send_data(Bytes::copy_from_slice(body), true)?;
        }
        response.await
    }
}

impl HttpSession {
    pub fn new(ep: Arc<Endpoint>) -> Self {
        let captured = Captured::with_timing(ep.timing.clone());
        let max = ep.max_body;
        let scheme = if ep.net.as_ref().is_some_and(|n| n.tls.is_some()) {
            "https"
        } else {
            "http"
        };
        let uri = format!("{scheme}://{}{}", ep.host, ep.path)
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        let first_id = ep.id_base + 1;
        let mut s = HttpSession {
            ep,
            conn: None,
            head: Vec::with_capacity(512),
            uri,
            out: Vec::with_capacity(1024),
            body: Vec::with_capacity(1024),
            resp: Vec::with_capacity(4096),
            answer: Vec::new(),
            sse: SseDecoder::new(max),
            captured,
            session_id: None,
            revision: None,
            next_id: first_id,
            last_id: None,
            dirty: false,
            stale: false,
            stats: TransportCounts::default(),
            streamed: false,
            shared: None,
            seen: 0,
            idle_since: None,
            bearer: None,
            replica: 0,
            parked: Vec::new(),
        };
        s.parked.resize_with(s.ep.replicas.len(), || None);
        s.render_head();
        s
    }

    /// Replicas: the next call goes to the next replica (its connection, if it has one); a
    /// session opens on the replica the last call went to.
    fn rotate(&mut self) {
        let n = self.parked.len();
        if n > 1 {
            let next = (self.replica + 1) % n;
            std::mem::swap(&mut self.conn, &mut self.parked[self.replica]);
            std::mem::swap(&mut self.conn, &mut self.parked[next]);
            self.replica = next;
            self.idle_since = None;
        }
    }

    /// A handle on a session shared with other virtual users of this worker.
    pub fn shared(ep: Arc<Endpoint>, shared: Rc<HttpShared>) -> Self {
        let mut s = HttpSession::new(ep);
        shared.users.set(shared.users.get() + 1);
        s.shared = Some(shared);
        s
    }

    /// Shared mode: takes over the current shared session, if it changed.
    fn adopt(&mut self) {
        let Some(sh) = &self.shared else { return };
        if self.seen == sh.generation.get() {
            return;
        }
        self.seen = sh.generation.get();
        let state = sh.state.borrow().clone();
        match state {
            Some((sid, rev)) => {
                self.session_id = sid;
                self.revision = Some(rev);
            }
            None => {
                self.session_id = None;
                self.revision = None;
            }
        }
        self.render_head();
    }

    fn take_id(&mut self) -> u64 {
        match &self.shared {
            Some(sh) => {
                let id = sh.next_id.get().max(self.ep.id_base + 1);
                sh.next_id.set(id + 1);
                id
            }
            None => {
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    fn publish(&mut self) {
        if let Some(sh) = &self.shared {
            *sh.state.borrow_mut() = self.revision.map(|r| (self.session_id.clone(), r));
            sh.generation.set(sh.generation.get() + 1);
            self.seen = sh.generation.get();
        }
    }

    fn modern(&self) -> bool {
        !self.ep.protocol.has_handshake()
    }

    /// The revision whose headers apply now: the negotiated one, or 2026-07-28 throughout.
    fn header_revision(&self) -> Option<Revision> {
        if self.modern() {
            Some(self.ep.protocol)
        } else {
            self.revision
        }
    }

    /// Writes an HTTP/1.1 request head up to its request-specific headers: the request line,
    /// Host, User-Agent, `fixed` header lines, the endpoint's extra headers, the session id and
    /// the protocol version header.
    fn request_head(&self, out: &mut Vec<u8>, method: &str, fixed: &[u8]) {
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.ep.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.ep.host.as_bytes());
        out.extend_from_slice(b"\r\nUser-Agent: mcpbench/");
        out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(fixed);
        out.extend_from_slice(&self.ep.extra_headers);
        if let Some(t) = &self.bearer {
            out.extend_from_slice(b"Authorization: Bearer ");
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(sid) = &self.session_id {
            out.extend_from_slice(b"Mcp-Session-Id: ");
            out.extend_from_slice(sid);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(rev) = self.header_revision().filter(|r| r.sends_version_header()) {
            out.extend_from_slice(b"MCP-Protocol-Version: ");
            out.extend_from_slice(rev.as_str().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Pre-renders the POST head (everything but the per-request headers and length).
    fn render_head(&mut self) {
        let mut head = std::mem::take(&mut self.head);
        head.clear();
        self.request_head(
            &mut head,
            "POST",
            b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
        );
        self.head = head;
    }

    async fn connect(&mut self) -> Result<(), Outcome> {
        let target = match self.ep.replicas.get(self.replica) {
            Some(r) => r,
            None => self.ep.net.as_ref().ok_or(Outcome::Connect)?,
        };
        let stream = net::connect(target).await.map_err(|e| e.outcome())?;
        let h2 = self.ep.http2 || stream.alpn() == Some(b"h2");
        self.conn = Some(if h2 {
            Conn::H2(
                H2Conn::handshake(stream)
                    .await
                    .map_err(|_| Outcome::Connect)?,
            )
        } else {
            Conn::H1(Http1Conn::new(stream))
        });
        Ok(())
    }

    /// After `IDLE_PROBE` of idleness: has the server closed the HTTP/1.1 connection? (Then
    /// it is replaced before sending, not failed as `io`.)
    fn closed_while_idle(&mut self) -> bool {
        match (&mut self.conn, self.idle_since) {
            (Some(Conn::H1(c)), Some(t)) if t.elapsed() >= IDLE_PROBE => c.peer_closed(),
            _ => false,
        }
    }

    /// Ends the session on the server: DELETE with its id (and the protocol version header), on
    /// this user's connection or, if that one is unusable, a new one.
    async fn delete(&mut self) -> Result<(), ()> {
        if self.dirty && matches!(self.conn, Some(Conn::H1(_))) {
            self.conn = None;
        }
        self.dirty = false;
        if self.closed_while_idle() || !self.conn_usable() {
            self.connect().await.map_err(drop)?;
        }
        let mut req = Vec::with_capacity(256);
        self.request_head(&mut req, "DELETE", b"Content-Length: 0\r\n");
        req.extend_from_slice(b"\r\n");
        let rev = self.header_revision();
        let sid = self.session_id.as_deref();
        match self.conn.as_mut() {
            Some(Conn::H1(conn)) => {
                conn.send(&req).await.map_err(drop)?;
                conn.read_head(&mut self.captured).await.map_err(drop)?;
                conn.discard_body().await.map_err(drop)
            }
            Some(Conn::H2(h2)) => {
                let req = build_h2(
                    &self.ep,
                    self.bearer.as_deref(),
                    &self.uri,
                    hyper::http::Method::DELETE,
                    sid,
                    rev,
                    None,
                )
                .map_err(drop)?;
                let resp = h2.request(req, &[]).await.map_err(drop)?;
                let mut body = Body::H2(resp.into_body());
                body.read(|_| ControlFlow::Continue(()))
                    .await
                    .map(drop)
                    .map_err(drop)
            }
            None => Err(()),
        }
    }

    fn conn_usable(&self) -> bool {
        match &self.conn {
            Some(Conn::H1(c)) => c.is_reusable(),
            Some(Conn::H2(h2)) => !h2.is_closed(),
            None => false,
        }
    }

    /// One POST. `expect_response` is false for notifications (202 expected). `keep` keeps the
    /// response message in `resp`.
    async fn exchange<W: FnOnce(&mut Vec<u8>, u64)>(
        &mut self,
        spec: Option<&CallSpec>,
        expect_response: bool,
        write: W,
    ) -> Reply {
        if self.dirty {
            // An HTTP/1.1 connection interrupted mid-exchange is in an unknown state; an HTTP/2
            // stream was reset when its future was dropped, and the connection is fine.
            if matches!(self.conn, Some(Conn::H1(_))) {
                self.conn = None;
            }
            self.dirty = false;
        }
        let mut connected = false;
        let mut connect = None;
        if self.closed_while_idle() || !self.conn_usable() {
            let t0 = Instant::now();
            if let Err(o) = self.connect().await {
                return Reply::new(o);
            }
            connected = true;
            connect = Some(t0.elapsed());
        }
        let id = self.take_id();
        if expect_response {
            self.last_id = Some(id);
        }
        self.body.clear();
        write(&mut self.body, id);
        self.dirty = true;
        let mut reply = self.round_trip(spec, id, expect_response).await;
        if std::mem::take(&mut self.stale) && !connected {
            // The server closed this keep-alive connection (after its last response, with or
            // without `Connection: close`) before the request reached it: sent again, once,
            // on a fresh connection. Never an error, and the new connection is counted.
            reply = match self.connect().await {
                Err(o) => Reply::new(o),
                Ok(()) => {
                    connected = true;
                    self.round_trip(spec, id, expect_response).await
                }
            };
            self.stale = false;
        }
        self.dirty = false;
        self.idle_since = Some(reply.done);
        reply.connected = connected;
        reply.connect = reply.connect.or(connect);
        reply
    }

    async fn round_trip(
        &mut self,
        spec: Option<&CallSpec>,
        id: u64,
        expect_response: bool,
    ) -> Reply {
        // A stream resumed on another connection (GET with Last-Event-ID) reads from here.
        let mut resumed: Option<Http1Conn<Stream>> = None;
        let mut resumes = 0;
        let header_rev = self.header_revision();
        let (head, mut body) = match self.conn.as_mut() {
            Some(Conn::H1(c)) => {
                self.out.clear();
                self.out.extend_from_slice(&self.head);
                if let Some(s) = spec {
                    self.out.extend_from_slice(&s.h1_headers);
                }
                self.out.extend_from_slice(b"Content-Length: ");
                self.out
                    .extend_from_slice(itoa::Buffer::new().format(self.body.len()).as_bytes());
                self.out.extend_from_slice(b"\r\n\r\n");
                self.out.extend_from_slice(&self.body);
                if c.send(&self.out).await.is_err() {
                    self.conn = None;
                    self.stale = true;
                    return Reply::new(Outcome::Io);
                }
                match c.read_head(&mut self.captured).await {
                    Ok(h) => (
                        Head {
                            status: h.status,
                            content: h.content,
                        },
                        Body::H1(c),
                    ),
                    Err(e) => {
                        // Closed or reset before a single byte of the response: stale.
                        self.stale = c.nothing_received()
                            && matches!(&e, HttpError::Closed | HttpError::Io(_));
                        self.conn = None;
                        return Reply::new(http_failure(&e));
                    }
                }
            }
            Some(Conn::H2(h2)) => {
                let req = match build_h2(
                    &self.ep,
                    self.bearer.as_deref(),
                    &self.uri,
                    hyper::http::Method::POST,
                    self.session_id.as_deref(),
                    header_rev,
                    spec,
                ) {
                    Ok(r) => r,
                    Err(_) => return Reply::new(Outcome::Protocol(ProtocolKind::BadHttp)),
                };
                match h2.request(req, &self.body).await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let content = resp
                            .headers()
                            .get("content-type")
                            .map_or(ContentKind::Missing, |v| content_kind(v.as_bytes()));
                        self.captured.set_session_id(
                            resp.headers().get("mcp-session-id").map(|v| v.as_bytes()),
                        );
                        self.captured.set_retry_after(
                            resp.headers().get("retry-after").map(|v| v.as_bytes()),
                        );
                        if let Some(t) = &self.ep.timing {
                            self.captured
                                .set_timing(resp.headers().get(&t.name).map(|v| v.as_bytes()));
                        }
                        (Head { status, content }, Body::H2(resp.into_body()))
                    }
                    Err(_) => {
                        self.conn = None;
                        return Reply::new(Outcome::Io);
                    }
                }
            }
            None => return Reply::new(Outcome::Connect),
        };
        if !expect_response {
            // Notifications: 202 (or 200/204 with no JSON-RPC content) means accepted.
            let ok = matches!(head.status, 200 | 202 | 204);
            let drained = body.read(|_| ControlFlow::Continue(())).await;
            let outcome = match (ok, drained) {
                (true, Ok(_)) => Outcome::Ok,
                (false, _) => Outcome::Http(head.status),
                (true, Err(e)) => http_failure(&e),
            };
            drop(body);
            if outcome != Outcome::Ok {
                self.drop_if_h1();
            }
            return Reply::new(outcome);
        }
        if head.status != 200 {
            let max = self.ep.max_body;
            let mut seen = 0usize;
            // The first bytes are kept: what the server said, for a refusal before load.
            self.resp.clear();
            let resp = &mut self.resp;
            let drained = body
                .read(|chunk| {
                    let room = SAID.saturating_sub(resp.len()).min(chunk.len());
                    resp.extend_from_slice(&chunk[..room]);
                    seen += chunk.len();
                    if seen > max {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })
                .await;
            drop(body);
            let mut r = Reply::new(Outcome::Http(head.status));
            r.session_expired = head.status == 404 && self.session_id.is_some();
            r.retry_after = self.captured.retry_after();
            r.upstream = self.captured.timing();
            if !matches!(drained, Ok(ControlFlow::Continue(()))) {
                self.drop_if_h1();
            }
            return r;
        }
        let reply = match head.content {
            ContentKind::Json => {
                read_json(
                    &mut body,
                    &mut self.resp,
                    self.ep.max_body,
                    self.ep.codec,
                    id,
                )
                .await
            }
            ContentKind::EventStream => {
                self.streamed = true;
                self.sse.reset();
                let mut progress = SseProgress::default();
                loop {
                    match read_sse_part(
                        &mut body,
                        &mut self.sse,
                        &mut self.resp,
                        &mut self.answer,
                        self.ep.codec,
                        id,
                        &mut progress,
                    )
                    .await
                    {
                        SsePart::Found(o) => break progress.reply(o),
                        SsePart::TooLarge => {
                            break progress.reply(Outcome::Protocol(ProtocolKind::TooLarge));
                        }
                        SsePart::Ended(Err(e)) => break progress.reply(http_failure(&e)),
                        SsePart::ServerRequest(supported) => {
                            self.stats.server_requests += 1;
                            self.stats.unsupported_requests += u64::from(!supported);
                            // Answer on another request while this stream stays open (the server
                            // may wait for it before it answers us). Rare: a fresh HTTP/1.1
                            // connection each time.
                            if !self.ep.http2
                                && let Ok(mut side) =
                                    side_request(&self.ep, &self.head, &self.answer).await
                            {
                                let _ = tokio::time::timeout(self.ep.timeout, async {
                                    side.read_head(&mut Captured::default()).await?;
                                    side.discard_body().await
                                })
                                .await;
                            }
                        }
                        SsePart::Ended(Ok(())) => {
                            // 2025-11-25 (SEP-1699): a server may close the stream after a priming
                            // event and `retry`; resume with GET and Last-Event-ID.
                            let resumable = self
                                .revision
                                .is_some_and(|r| r >= Revision::V2025_03_26 && r.has_handshake())
                                && !self.sse.last_id().is_empty()
                                && !self.ep.http2
                                && resumes < MAX_RESUMES;
                            if !resumable {
                                break progress.reply(Outcome::Protocol(ProtocolKind::NoResponse));
                            }
                            resumes += 1;
                            let wait =
                                Duration::from_millis(self.sse.retry_ms().unwrap_or(0).min(10_000));
                            tokio::time::sleep(wait).await;
                            let mut get = Vec::with_capacity(self.head.len() + 64);
                            self.request_head(&mut get, "GET", b"Accept: text/event-stream\r\n");
                            get.extend_from_slice(b"Last-Event-ID: ");
                            get.extend_from_slice(self.sse.last_id());
                            get.extend_from_slice(b"\r\n");
                            body = Body::Empty;
                            let mut c = match side_request(&self.ep, &get, b"").await {
                                Ok(c) => c,
                                Err(e) => break progress.reply(http_failure(&e)),
                            };
                            match c.read_head(&mut self.captured).await {
                                Ok(h)
                                    if h.status == 200 && h.content == ContentKind::EventStream => {
                                }
                                Ok(h) => break progress.reply(Outcome::Http(h.status)),
                                Err(e) => break progress.reply(http_failure(&e)),
                            }
                            body = Body::H1(resumed.insert(c));
                        }
                    }
                }
            }
            ContentKind::Other | ContentKind::Missing => {
                Reply::new(Outcome::Protocol(ProtocolKind::BadContentType))
            }
        };
        drop(body);
        self.after_body(reply).await
    }

    fn drop_if_h1(&mut self) {
        if matches!(self.conn, Some(Conn::H1(_))) {
            self.conn = None;
        }
    }

    /// Leaves an HTTP/1.1 connection reusable: finish a body the server is still sending
    /// (briefly), or drop the connection.
    async fn after_body(&mut self, mut reply: Reply) -> Reply {
        reply.upstream = self.captured.timing();
        reply.retry_after = self.captured.retry_after();
        let streamed = std::mem::take(&mut self.streamed);
        // The rest of a stream is read for what should not be there: another response to
        // this request (a duplicate), or one to a request never sent here.
        let (sse, stats, codec, id) = (&mut self.sse, &mut self.stats, self.ep.codec, self.last_id);
        let mut too_large = false;
        let mut stray = |m: &mut [u8]| {
            match jsonrpc::decode(codec, m) {
                Ok(jsonrpc::Incoming::Result { id: r, .. })
                | Ok(jsonrpc::Incoming::Error { id: r, .. }) => {
                    if id.is_some_and(|id| r.is(id)) {
                        stats.duplicates += 1;
                    } else {
                        stats.unmatched += 1;
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        };
        if streamed && sse.has_unread() {
            let _ = sse.feed_messages(&[], &mut too_large, &mut stray);
        }
        if let Some(Conn::H1(c)) = self.conn.as_mut() {
            if c.body_pending() {
                let rest = c.read_body(|chunk| {
                    if streamed {
                        let _ = sse.feed_messages(chunk, &mut too_large, &mut stray);
                    }
                    ControlFlow::Continue(())
                });
                match tokio::time::timeout(LINGER, rest).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(_)) => self.conn = None,
                    Err(_) => {
                        reply.lingered = true;
                        self.conn = None;
                    }
                }
            } else if !c.is_reusable() {
                self.conn = None;
            }
        }
        reply
    }
}

/// An HTTP/2 request head (a POST, its body sent by [`H2Conn::request`], or the session's
/// DELETE).
fn build_h2(
    ep: &Endpoint,
    bearer: Option<&str>,
    uri: &hyper::Uri,
    method: hyper::http::Method,
    session: Option<&[u8]>,
    rev: Option<Revision>,
    spec: Option<&CallSpec>,
) -> Result<hyper::http::Request<()>, hyper::http::Error> {
    use hyper::http::header::{self, HeaderName, HeaderValue};
    // Set in place (the request builder moves the whole request at every header); appended,
    // as the builder does.
    let post = method == hyper::http::Method::POST;
    let mut req = hyper::http::Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri.clone();
    let h = req.headers_mut();
    h.append(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("mcpbench/", env!("CARGO_PKG_VERSION"))),
    );
    if post {
        h.append(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.append(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
    }
    for (n, v) in &ep.headers {
        if !n.eq_ignore_ascii_case("host") {
            h.append(
                HeaderName::try_from(n.as_str())?,
                HeaderValue::try_from(v.as_str())?,
            );
        }
    }
    if let Some(t) = bearer {
        h.append(
            header::AUTHORIZATION,
            HeaderValue::try_from(format!("Bearer {t}"))?,
        );
    }
    if let Some(s) = session {
        h.append(
            HeaderName::from_static("mcp-session-id"),
            HeaderValue::from_bytes(s)?,
        );
    }
    if let Some(r) = rev.filter(|r| r.sends_version_header()) {
        h.append(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static(r.as_str()),
        );
        if !r.has_handshake()
            && let Some(spec) = spec
        {
            h.append(
                HeaderName::from_static("mcp-method"),
                HeaderValue::try_from(spec.method.as_str())?,
            );
            if let Some(n) = &spec.name {
                h.append(
                    HeaderName::from_static("mcp-name"),
                    HeaderValue::try_from(mcp::header_value(n))?,
                );
            }
        }
    }
    Ok(req)
}

async fn read_json(
    body: &mut Body<'_>,
    resp: &mut Vec<u8>,
    max: usize,
    codec: jsonrpc::Codec,
    id: u64,
) -> Reply {
    resp.clear();
    let mut too_large = false;
    let r = body
        .read(|chunk| {
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
        Ok(_) if too_large => Outcome::Protocol(ProtocolKind::TooLarge),
        Ok(_) => classify(jsonrpc::decode(codec, resp), id)
            .unwrap_or(Outcome::Protocol(ProtocolKind::NoResponse)),
    };
    Reply {
        done,
        ..Reply::new(outcome)
    }
}

/// How far an SSE response got.
#[derive(Default)]
struct SseProgress {
    first_event: Option<Instant>,
    events: u32,
}

impl SseProgress {
    fn reply(&self, outcome: Outcome) -> Reply {
        Reply {
            first_event: self.first_event,
            events: self.events,
            streamed: true,
            ..Reply::new(outcome)
        }
    }
}

/// Where reading an SSE response stopped.
enum SsePart {
    /// The response to our request arrived.
    Found(Outcome),
    /// The server sent a request (e.g. `ping`); its answer is in the answer buffer.
    /// A request from the server (answered in `answer`): whether it is supported.
    ServerRequest(bool),
    /// The stream ended (or broke) without our response.
    Ended(Result<(), HttpError>),
    TooLarge,
}

/// Reads events until the response, a server request, or the end of the stream. Resumable:
/// the decoder and body keep their state between calls.
async fn read_sse_part(
    body: &mut Body<'_>,
    sse: &mut SseDecoder,
    resp: &mut Vec<u8>,
    answer: &mut Vec<u8>,
    codec: jsonrpc::Codec,
    id: u64,
    progress: &mut SseProgress,
) -> SsePart {
    let mut found: Option<Outcome> = None;
    let mut server_request = None;
    let mut too_large = false;
    let mut on_message = |data: &mut [u8]| {
        progress.events += 1;
        progress.first_event.get_or_insert_with(Instant::now);
        resp.clear();
        resp.extend_from_slice(data);
        let decoded = jsonrpc::decode(codec, data);
        if let Ok(jsonrpc::Incoming::Request { id: rid, method }) = &decoded {
            server_request = Some(mcp::answer_server_request(answer, rid, method));
            return ControlFlow::Break(());
        }
        match classify(decoded, id) {
            Some(o) => {
                found = Some(o);
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    };
    // What the last break left of a chunk comes first (the decoder kept it).
    let r = if sse.has_unread()
        && sse
            .feed_messages(&[], &mut too_large, &mut on_message)
            .is_break()
    {
        Ok(ControlFlow::Break(()))
    } else {
        body.read(|chunk| sse.feed_messages(chunk, &mut too_large, &mut on_message))
            .await
    };
    if too_large {
        return SsePart::TooLarge;
    }
    if let Some(o) = found {
        return SsePart::Found(o);
    }
    if let Some(supported) = server_request {
        return SsePart::ServerRequest(supported);
    }
    SsePart::Ended(r.map(|_| ()))
}

/// Sends one message on a fresh HTTP/1.1 connection (answers to server requests, resumption
/// GETs): rare, so simplicity beats reuse.
async fn side_request(
    ep: &Endpoint,
    head: &[u8],
    body: &[u8],
) -> Result<Http1Conn<Stream>, HttpError> {
    let target = ep.net.as_ref().ok_or(HttpError::Closed)?;
    let stream = net::connect(target)
        .await
        .map_err(|e| HttpError::Io(std::io::Error::other(e.to_string())))?;
    let mut conn = Http1Conn::new(stream);
    let mut req = Vec::with_capacity(head.len() + body.len() + 32);
    req.extend_from_slice(head);
    if !body.is_empty() || head.starts_with(b"POST") {
        req.extend_from_slice(b"Content-Length: ");
        req.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    conn.send(&req).await?;
    Ok(conn)
}

fn http_failure(e: &HttpError) -> Outcome {
    match e {
        HttpError::Io(_) | HttpError::Closed => Outcome::Io,
        HttpError::Malformed(_) | HttpError::HeadTooLarge => {
            Outcome::Protocol(ProtocolKind::BadHttp)
        }
    }
}

impl HttpSession {
    /// The handshake on this virtual user's own connection.
    async fn open_own(&mut self) -> Reply {
        self.session_id = None;
        self.revision = None;
        self.render_head();
        let rev = self.ep.protocol;
        if !rev.has_handshake() {
            let spec = CallSpec {
                method: "server/discover".into(),
                name: None,
                h1_headers: mcp::modern_headers("server/discover", None),
            };
            let reply = self
                .exchange(Some(&spec), true, |out, id| {
                    mcp::write_discover(out, id, rev)
                })
                .await;
            if reply.outcome != Outcome::Ok {
                return reply;
            }
            if !discover_supports(&self.resp, rev) {
                return Reply {
                    outcome: Outcome::Protocol(ProtocolKind::Handshake),
                    ..reply
                };
            }
            self.revision = Some(rev);
            return reply;
        }
        let reply = self
            .exchange(None, true, |out, id| mcp::write_initialize(out, id, rev))
            .await;
        if reply.outcome != Outcome::Ok {
            return reply;
        }
        let Some(negotiated) = negotiated_revision(&self.resp) else {
            return Reply {
                outcome: Outcome::Protocol(ProtocolKind::Handshake),
                ..reply
            };
        };
        self.session_id = self.captured.session_id().map(<[u8]>::to_vec);
        self.revision = Some(negotiated);
        self.render_head();
        let note = self
            .exchange(None, false, |out, _| mcp::write_initialized(out))
            .await;
        if note.outcome != Outcome::Ok {
            self.revision = None;
            return Reply {
                outcome: note.outcome,
                ..reply
            };
        }
        reply
    }
}

/// Releases a shared session's open latch however `open` ends (a timeout drops it).
struct ReleaseLatch(Option<Rc<HttpShared>>);

impl Drop for ReleaseLatch {
    fn drop(&mut self) {
        if let Some(sh) = &self.0 {
            sh.latch.release();
        }
    }
}

impl Session for HttpSession {
    fn session_id(&self) -> Option<String> {
        self.session_id
            .as_deref()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }

    async fn open(&mut self) -> Reply {
        let _release = ReleaseLatch(self.shared.clone());
        let reply = self.open_own().await;
        self.publish();
        reply
    }

    fn claim_open(&mut self) -> bool {
        self.shared.as_ref().is_none_or(|sh| sh.latch.claim())
    }

    async fn wait_open(&mut self) {
        if let Some(sh) = self.shared.clone() {
            sh.latch.wait().await;
            self.adopt();
        }
    }

    fn is_open(&self) -> bool {
        match &self.shared {
            Some(sh) => sh.state.borrow().is_some(),
            None => self.revision.is_some(),
        }
    }

    fn revision(&self) -> Option<Revision> {
        self.revision
    }

    #[inline]
    async fn call<W: FnOnce(&mut Vec<u8>, u64)>(&mut self, spec: &CallSpec, write: W) -> Reply {
        self.adopt();
        self.rotate();
        self.exchange(Some(spec), true, write).await
    }

    async fn cancel_last(&mut self) -> bool {
        // 2026-07-28: closing the response stream is the cancellation, and the connection of a
        // timed-out request is never reused (`dirty`).
        if self.modern() || !self.is_open() {
            return false;
        }
        let Some(id) = self.last_id.take() else {
            return false;
        };
        let timeout = self.ep.timeout;
        tokio::time::timeout(
            timeout,
            self.exchange(None, false, |out, _| mcp::write_cancelled(out, id)),
        )
        .await
        .is_ok_and(|r| r.outcome == Outcome::Ok)
    }

    async fn close(&mut self) {
        if let Some(sh) = self.shared.clone() {
            let left = sh.users.get().saturating_sub(1);
            sh.users.set(left);
            if left > 0 {
                // A shared session outlives each user of it: the last one ends it.
                self.conn = None;
                return;
            }
            self.adopt();
        }
        if self.session_id.is_some() {
            let timeout = self.ep.timeout.min(Duration::from_secs(1));
            let _ = tokio::time::timeout(timeout, self.delete()).await;
        }
        self.conn = None;
        self.session_id = None;
        self.revision = None;
    }

    fn reset(&mut self) {
        if let Some(sh) = &self.shared
            && self.seen == sh.generation.get()
        {
            // The shared session is gone (expired): everyone reopens, one of them first.
            *sh.state.borrow_mut() = None;
            sh.generation.set(sh.generation.get() + 1);
        }
        self.session_id = None;
        self.revision = None;
        self.render_head();
    }

    fn last_message(&self) -> &[u8] {
        &self.resp
    }

    fn take_stats(&mut self) -> TransportCounts {
        std::mem::take(&mut self.stats)
    }

    fn set_bearer(&mut self, token: Option<&str>) {
        self.bearer = token.map(str::to_string);
        self.render_head();
    }
}
