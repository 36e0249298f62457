//! One POST of a Streamable HTTP session, the hot path: the connection made usable, the
//! request sent (HTTP/1.1 from the pre-rendered head, or an HTTP/2 stream), the reply read as
//! its head says (a notification's acceptance, a refusal, JSON or an SSE stream), and the
//! connection left reusable.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::h2_conn::{self, build_h2};
use super::reply_body::{
    BodySource, Head, http_failure, notification_outcome, read_json, read_refusal,
};
use super::{Conn, HttpSession};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::jsonrpc;
use crate::transport::http1_client::{ContentKind, Http1Conn, HttpError};
use crate::transport::net::Stream;
use crate::transport::{CallSpec, Reply, spare};

/// How long to wait for a server to end an SSE response stream after the response arrived
/// before dropping the connection instead of reusing it.
const LINGER: Duration = Duration::from_millis(200);

impl HttpSession {
    /// One POST, on a fresh connection if the current one is unusable (and once more on a fresh
    /// one if it met a stale connection). `expect_response` is false for notifications (202
    /// expected). The response message is left in `resp`.
    pub(super) async fn exchange<W: FnOnce(&mut Vec<u8>, u64)>(
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
        if self.closed_while_idle(Instant::now()) || !self.conn_usable() {
            let t0 = Instant::now();
            match self.connect().await {
                Err(o) => return Reply::new(o),
                Ok(opened) => connected = opened,
            }
            connect = connected.then(|| t0.elapsed());
        }
        spare::ensure(&mut self.body);
        let id = self.take_id();
        if expect_response {
            self.last_id = Some(id);
        }
        self.body.clear();
        write(&mut self.body, id);
        self.dirty = true;
        let mut reply = self
            .exchange_sent(spec, id, expect_response, 0, connected)
            .await;
        reply.connect = reply.connect.or(connect);
        reply
    }

    /// The rest of an exchange whose request is rendered (in `body`, and in `out` if
    /// `written` > 0: its first `written` bytes are sent): the answer, and the request sent
    /// again once if it met a stale connection.
    pub(super) async fn exchange_sent(
        &mut self,
        spec: Option<&CallSpec>,
        id: u64,
        expect_response: bool,
        written: usize,
        mut connected: bool,
    ) -> Reply {
        let mut reply = self.round_trip(spec, id, expect_response, written).await;
        if std::mem::take(&mut self.stale) && !connected {
            // The server closed this keep-alive connection (after its last response, with or
            // without `Connection: close`) before the request reached it: sent again, once,
            // on a fresh connection. Never an error, and the new connection is counted.
            reply = match self.connect().await {
                Err(o) => Reply::new(o),
                Ok(opened) => {
                    connected = opened;
                    self.round_trip(spec, id, expect_response, 0).await
                }
            };
            self.stale = false;
        }
        self.dirty = false;
        self.idle_since = Some(reply.done);
        reply.connected = connected;
        reply
    }

    /// Sends the request in `body` and reads the reply as its head says: a notification's
    /// acceptance, a refusal, or the response to request `id` as JSON or an SSE stream.
    async fn round_trip(
        &mut self,
        spec: Option<&CallSpec>,
        id: u64,
        expect_response: bool,
        written: usize,
    ) -> Reply {
        // A stream resumed on another connection (GET with Last-Event-ID) reads from here.
        let mut resumed: Option<Http1Conn<Stream>> = None;
        let (head, source) = match self.send(spec, written).await {
            Ok(sent) => sent,
            Err(reply) => return reply,
        };
        // Held from the answer on, not while it is awaited.
        spare::ensure(&mut self.resp);
        if !expect_response {
            return self.notification_reply(head.status, source).await;
        }
        if head.status != 200 {
            return self.refusal_reply(head.status, source).await;
        }
        let reply = match head.content {
            ContentKind::Json => {
                let mut body = source.open(&mut self.conn);
                read_json(
                    &mut body,
                    &mut self.resp,
                    self.ep.max_body,
                    self.ep.codec,
                    id,
                )
                .await
            }
            ContentKind::EventStream => self.read_event_stream(source, id, &mut resumed).await,
            ContentKind::Other | ContentKind::Missing => {
                // Not an MCP answer: read as a refusal is, its first bytes kept for messages.
                let mut reply = self.refusal_reply(head.status, source).await;
                reply.outcome = Outcome::Protocol(ProtocolKind::BadContentType);
                return reply;
            }
        };
        self.after_body(reply).await
    }

    /// Sends the request in `body` on the current connection (over HTTP/1.1 the rest of it,
    /// when its first `written` bytes are already sent) and reads the response head. A
    /// connection that failed is dropped; an HTTP/1.1 one closed before a single byte of the
    /// response is `stale` (the request never reached the server's handling).
    #[inline]
    async fn send(
        &mut self,
        spec: Option<&CallSpec>,
        written: usize,
    ) -> Result<(Head, BodySource), Reply> {
        let header_rev = self.header_revision();
        match self.conn.as_mut() {
            Some(Conn::H1(c)) => {
                if written == 0 {
                    spare::ensure(&mut self.out);
                    render_post(&mut self.out, &self.head, spec, &self.body);
                }
                let sent = c.send(&self.out[written..]).await;
                if self.rests {
                    // Not held while the answer is awaited (a session that rests).
                    spare::give(&mut self.out);
                }
                if sent.is_err() {
                    self.conn = None;
                    self.stale = true;
                    return Err(Reply::new(Outcome::Io));
                }
                match c.read_head(&mut self.captured).await {
                    Ok(h) => Ok((
                        Head {
                            status: h.status,
                            content: h.content,
                        },
                        BodySource::H1,
                    )),
                    Err(e) => {
                        // Closed or reset before a single byte of the response: stale.
                        self.stale = c.nothing_received()
                            && matches!(&e, HttpError::Closed | HttpError::Io(_));
                        self.conn = None;
                        Err(Reply::new(http_failure(&e)))
                    }
                }
            }
            Some(Conn::H2(h2)) => {
                let Ok(req) = build_h2(
                    &self.ep,
                    self.bearer.as_deref(),
                    &self.uri,
                    hyper::http::Method::POST,
                    self.session_id.as_deref(),
                    header_rev,
                    spec,
                ) else {
                    return Err(Reply::new(Outcome::Protocol(ProtocolKind::BadHttp)));
                };
                match h2.request(req, &self.body).await {
                    Ok(resp) => Ok(h2_conn::response_head(
                        resp,
                        &mut self.captured,
                        self.ep.timing.as_ref(),
                    )),
                    Err(_) => {
                        self.conn = None;
                        Err(Reply::new(Outcome::Io))
                    }
                }
            }
            None => Err(Reply::new(Outcome::Connect)),
        }
    }

    /// A notification's reply; a connection whose answer was not a clean acceptance is dropped
    /// (HTTP/1.1).
    async fn notification_reply(&mut self, status: u16, source: BodySource) -> Reply {
        let outcome = notification_outcome(status, source.open(&mut self.conn)).await;
        if outcome != Outcome::Ok {
            self.drop_if_h1();
        }
        Reply::new(outcome)
    }

    /// A reply that is no MCP answer (a status other than 200, or a 200 neither JSON nor SSE):
    /// the status as the outcome, what the server said kept in `resp`,
    /// whether the session expired (404), `Retry-After` and the timing header. A body not read
    /// to its end costs the (HTTP/1.1) connection.
    async fn refusal_reply(&mut self, status: u16, source: BodySource) -> Reply {
        let body = source.open(&mut self.conn);
        let drained = read_refusal(body, &mut self.resp, self.ep.max_body).await;
        let mut r = Reply::new(Outcome::Http(status));
        r.session_expired = status == 404 && self.session_id.is_some();
        r.retry_after = self.captured.retry_after();
        r.upstream = self.captured.timing();
        if !matches!(drained, Ok(ControlFlow::Continue(()))) {
            self.drop_if_h1();
        }
        r
    }

    /// Drops the connection if it is HTTP/1.1 (an HTTP/2 one survives a failed stream).
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

/// Renders an HTTP/1.1 POST into `out`: the pre-rendered head, the call's own headers, the
/// length and the body.
#[inline]
pub(super) fn render_post(out: &mut Vec<u8>, head: &[u8], spec: Option<&CallSpec>, body: &[u8]) {
    out.clear();
    out.extend_from_slice(head);
    if let Some(s) = spec {
        out.extend_from_slice(&s.h1_headers);
    }
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}
