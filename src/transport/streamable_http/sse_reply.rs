//! Reading a reply that comes as an SSE stream: events until the response to our request,
//! answering the server's requests on the way (on a side connection), and resuming a stream
//! the server ended early (GET with `Last-Event-ID`).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::HttpSession;
use super::reply_body::{Body, BodySource, http_failure};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::version::Revision;
use crate::protocol::{jsonrpc, mcp};
use crate::transport::http1_client::{Captured, ContentKind, Http1Conn, HttpError};
use crate::transport::net::{self, Stream};
use crate::transport::sse_decoder::SseDecoder;
use crate::transport::{Endpoint, NotificationHook, Reply, classify};

/// Resumptions (GET with Last-Event-ID) of one response stream, at most.
const MAX_RESUMES: u32 = 3;

impl HttpSession {
    /// Reads an SSE reply until the response to request `id`. Server requests met on the way
    /// are answered aside; a stream the server ends before the response is resumed on a
    /// connection of its own, kept in `resumed` (it stays open until the exchange is over).
    pub(super) async fn read_event_stream(
        &mut self,
        source: BodySource,
        id: u64,
        resumed: &mut Option<Http1Conn<Stream>>,
    ) -> Reply {
        self.streamed = true;
        self.sse.reset();
        let mut progress = SseProgress::default();
        let mut resumes = 0;
        let mut body = source.open(&mut self.conn);
        loop {
            let part = read_sse_part(
                &mut body,
                &mut self.sse,
                &mut self.resp,
                &mut self.answer,
                (self.ep.codec, id),
                &mut progress,
                &mut self.hook,
            )
            .await;
            match part {
                SsePart::Found(o) => return progress.reply(o),
                SsePart::TooLarge => {
                    return progress.reply(Outcome::Protocol(ProtocolKind::TooLarge));
                }
                SsePart::Ended(Err(e)) => return progress.reply(http_failure(&e)),
                SsePart::ServerRequest(supported) => {
                    self.stats.server_requests += 1;
                    self.stats.unsupported_requests += u64::from(!supported);
                    answer_aside(&self.ep, &self.head, &self.answer).await;
                }
                SsePart::Ended(Ok(())) => {
                    if !self.may_resume(resumes) {
                        return progress.reply(Outcome::Protocol(ProtocolKind::NoResponse));
                    }
                    resumes += 1;
                    match self.resume().await {
                        Ok(c) => body = Body::H1(resumed.insert(c)),
                        Err(o) => return progress.reply(o),
                    }
                }
            }
        }
    }

    /// Whether a stream that ended without our response may be resumed: 2025-11-25 (SEP-1699)
    /// lets a server close the stream after a priming event and `retry`, over HTTP/1.1, a few
    /// times at most.
    fn may_resume(&self, resumes: u32) -> bool {
        self.revision
            .is_some_and(|r| r >= Revision::V2025_03_26 && r.has_handshake())
            && !self.sse.last_id().is_empty()
            && !self.ep.http2
            && resumes < MAX_RESUMES
    }

    /// Resumes the stream after the server's `retry` delay: GET with `Last-Event-ID` on a
    /// fresh connection, whose head must announce an event stream.
    async fn resume(&mut self) -> Result<Http1Conn<Stream>, Outcome> {
        let wait = Duration::from_millis(self.sse.retry_ms().unwrap_or(0).min(10_000));
        tokio::time::sleep(wait).await;
        let mut get = Vec::with_capacity(self.head.len() + 64);
        self.request_head(&mut get, "GET", b"Accept: text/event-stream\r\n");
        get.extend_from_slice(b"Last-Event-ID: ");
        get.extend_from_slice(self.sse.last_id());
        get.extend_from_slice(b"\r\n");
        let mut c = side_request(&self.ep, &get, b"")
            .await
            .map_err(|e| http_failure(&e))?;
        match c.read_head(&mut self.captured).await {
            Ok(h) if h.status == 200 && h.content == ContentKind::EventStream => Ok(c),
            Ok(h) => Err(Outcome::Http(h.status)),
            Err(e) => Err(http_failure(&e)),
        }
    }
}

/// How far an SSE response got.
#[derive(Default)]
struct SseProgress {
    first_event: Option<Instant>,
    events: u32,
}

impl SseProgress {
    /// The reply to the request, with the events seen before (and with) the response.
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
    (codec, id): (jsonrpc::Codec, u64),
    progress: &mut SseProgress,
    hook: &mut Option<NotificationHook>,
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
        let notification = matches!(decoded, Ok(jsonrpc::Incoming::Notification { .. }));
        match classify(decoded, id) {
            Some(o) => {
                found = Some(o);
                ControlFlow::Break(())
            }
            None => {
                if notification && let Some(h) = hook.as_mut() {
                    h(resp);
                }
                ControlFlow::Continue(())
            }
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

/// Answers a server request on another request while the reply's stream stays open (the
/// server may wait for the answer before it answers us). Rare: a fresh HTTP/1.1 connection
/// each time, and none over HTTP/2.
async fn answer_aside(ep: &Endpoint, post_head: &[u8], answer: &[u8]) {
    if !ep.http2
        && let Ok(mut side) = side_request(ep, post_head, answer).await
    {
        let _ = tokio::time::timeout(ep.timeout, async {
            side.read_head(&mut Captured::default()).await?;
            side.discard_body().await
        })
        .await;
    }
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
