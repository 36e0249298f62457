//! MCP over Streamable HTTP: the handshake era (sessions made by `initialize`) and 2026-07-28
//! (stateless: `server/discover`, `_meta` and `Mcp-*` headers on every request), over
//! HTTP/1.1 (the hot-path client in `http1_client`) or HTTP/2 (the `h2` crate, each virtual user
//! awaiting its own stream: no task or channel message per request), plain or TLS.
//!
//! One `HttpSession` is one MCP session. Over HTTP/1.1 it owns one keep-alive connection
//! (reopened when the server closes it); requests are rendered into reused buffers from a
//! pre-rendered head. Responses are JSON or SSE; only the envelope is decoded.
//!
//! Here: the session, its shared mode, opening and closing it. One POST is `round_trip` (the
//! hot path), or `plain` when a worker's event loop drives it; a reply's body is read in `reply_body`, an SSE reply in `sse_reply`; the HTTP/2
//! connection and request heads are `h2_conn`'s.

mod h2_conn;
mod plain;
mod reply_body;
mod round_trip;
mod sse_reply;

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use h2_conn::{H2Conn, build_h2};
pub use h2_conn::{H2Lanes, SharedH2};
pub use plain::Begun;
use reply_body::Body;

use super::http1_client::{Captured, Http1Conn, IDLE_PROBE};
use super::mux::OpenLatch;
use super::net::{self, Stream};
use super::spare;
use super::sse_decoder::SseDecoder;
use super::{
    CallSpec, Endpoint, NotificationHook, Reply, Session, discover_supports, negotiated_revision,
};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::mcp;
use crate::protocol::version::Revision;

/// The connection a session's requests go on.
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
    /// The request as sent, its body, and the response message: spare buffers (`spare`) while
    /// the session is busy, given back when it rests.
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
    /// HTTP/2 with `sessions_per_connection`: the connection this session shares.
    lane: Option<Rc<SharedH2>>,
    /// The caller lets the session rest between exchanges (`Session::rest`): the request
    /// buffer goes back as soon as it is sent. (A session that never rests keeps its buffers,
    /// and its hot path stays as it was.)
    rests: bool,
    /// Where notifications on a response stream go (`Session::set_notification_hook`).
    hook: Option<NotificationHook>,
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
            head: Vec::new(),
            uri,
            out: Vec::new(),
            body: Vec::new(),
            resp: Vec::new(),
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
            lane: None,
            rests: false,
            hook: None,
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

    /// Puts this session's requests on a shared HTTP/2 connection (its MCP session stays its
    /// own).
    pub fn on_lane(mut self, lane: Rc<SharedH2>) -> Self {
        self.lane = Some(lane);
        self
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

    /// Connects (or takes the shared HTTP/2 connection); true if a new connection was opened.
    async fn connect(&mut self) -> Result<bool, Outcome> {
        if let Some(lane) = self.lane.clone() {
            return self.connect_lane(&lane).await;
        }
        self.conn = Some(self.open_conn().await?);
        Ok(true)
    }

    /// A new connection to the current replica (or the target).
    async fn open_conn(&self) -> Result<Conn, Outcome> {
        let target = match self.ep.replicas.get(self.replica) {
            Some(r) => r,
            None => self.ep.net.as_ref().ok_or(Outcome::Connect)?,
        };
        let stream = net::connect(target).await.map_err(|e| e.outcome())?;
        let h2 = self.ep.http2 || stream.alpn() == Some(b"h2");
        Ok(if h2 {
            Conn::H2(
                H2Conn::handshake(stream)
                    .await
                    .map_err(|_| Outcome::Connect)?,
            )
        } else {
            Conn::H1(Http1Conn::new(stream))
        })
    }

    /// The shared HTTP/2 connection: taken if alive, else (re)opened by this session, or
    /// waited for while another one opens it.
    async fn connect_lane(&mut self, lane: &SharedH2) -> Result<bool, Outcome> {
        if let Some(c) = lane.live() {
            self.conn = Some(Conn::H2(c));
            return Ok(false);
        }
        if !lane.claim() {
            lane.wait().await;
            let c = lane.live().ok_or(Outcome::Connect)?;
            self.conn = Some(Conn::H2(c));
            return Ok(false);
        }
        // Released however this ends (a timeout drops the future mid-way).
        let mut guard = LaneOpening(Some(lane));
        let opened = self.open_conn().await;
        guard.0 = None;
        match opened {
            Ok(Conn::H2(c)) => {
                lane.opened(Some(&c));
                self.conn = Some(Conn::H2(c));
                Ok(true)
            }
            Ok(Conn::H1(_)) => {
                lane.opened(None);
                Err(Outcome::Protocol(ProtocolKind::BadHttp))
            }
            Err(o) => {
                lane.opened(None);
                Err(o)
            }
        }
    }

    /// After `IDLE_PROBE` of idleness: has the server closed the HTTP/1.1 connection? (Then
    /// it is replaced before sending, not failed as `io`.)
    fn closed_while_idle(&mut self, now: Instant) -> bool {
        match (&mut self.conn, self.idle_since) {
            (Some(Conn::H1(c)), Some(t)) if now.saturating_duration_since(t) >= IDLE_PROBE => {
                c.peer_closed()
            }
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
        if self.closed_while_idle(Instant::now()) || !self.conn_usable() {
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

/// Ends a shared HTTP/2 connection's opening (as failed) if the opener is dropped mid-way.
struct LaneOpening<'a>(Option<&'a SharedH2>);

impl Drop for LaneOpening<'_> {
    fn drop(&mut self) {
        if let Some(lane) = self.0 {
            lane.opened(None);
        }
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

    fn content_type(&self) -> Option<String> {
        self.captured.content_type()
    }

    fn take_stats(&mut self) -> TransportCounts {
        std::mem::take(&mut self.stats)
    }

    fn rest(&mut self) {
        self.rests = true;
        for b in [
            &mut self.out,
            &mut self.body,
            &mut self.resp,
            &mut self.answer,
        ] {
            spare::give(b);
        }
        let parked = self.parked.iter_mut().flatten();
        for conn in self.conn.iter_mut().chain(parked) {
            if let Conn::H1(c) = conn {
                c.rest();
            }
        }
    }

    fn set_bearer(&mut self, token: Option<&str>) {
        self.bearer = token.map(str::to_string);
        self.render_head();
    }

    fn set_notification_hook(&mut self, hook: Option<NotificationHook>) {
        self.hook = hook;
    }
}
