//! Response bodies of the reference server: a complete buffer, or an SSE stream.
//!
//! A stream frames each JSON-RPC message it receives on a channel as one `message` event
//! (optionally with per-session event ids, 2025-11-25), sends comment keep-alives while idle,
//! and can *drive* the work that produces its messages: the future is polled by the body
//! itself, so no task is spawned and dropping the body (the client closed the stream) drops
//! the work — which is exactly the 2026-07-28 rule "closing the stream cancels the request".
//! Messages are compact JSON (no raw newline), so each fits one `data:` line.
//!
//! A stream given a [`Park`] hook supports SEP-1699 polling (2025-11-25): when its work sends
//! [`PARK`] (an empty message), the stream writes a `retry:` field and ends the HTTP response
//! *without* ending the MCP stream — everything still to come (channel, event ids, the work
//! itself, paused) is handed to the hook, and a GET with `Last-Event-ID` picks it up again.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Work a stream drives until it completes.
pub(crate) type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a stream goes when its work parks it (see the module doc).
pub(crate) type Park = Box<dyn FnOnce(SseStream) + Send>;

/// The message that parks a stream with a [`Park`] hook; other streams ignore it.
pub(crate) const PARK: Bytes = Bytes::new();

/// The `retry` (ms) sent before the server closes a parked stream's connection: how long the
/// client waits before it resumes.
pub(crate) const RETRY_MS: u64 = 200;

/// A response body.
pub(crate) struct Body(Inner);

enum Inner {
    Full(Option<Bytes>),
    Stream(Box<SseStream>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Inner::Full(b) => write!(f, "Body::Full({} bytes)", b.as_ref().map_or(0, Bytes::len)),
            Inner::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

impl Body {
    pub(crate) fn full(b: impl Into<Bytes>) -> Self {
        Body(Inner::Full(Some(b.into())))
    }

    pub(crate) fn empty() -> Self {
        Body(Inner::Full(None))
    }

    pub(crate) fn stream(s: SseStream) -> Self {
        Body(Inner::Stream(Box::new(s)))
    }
}

/// Event ids of one SSE stream: `<stream>-<n>`, unique within the session that numbered the
/// stream (2025-11-25 resumability ids; this server does not replay).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventIds {
    stream: u64,
    next: u64,
}

impl EventIds {
    pub(crate) fn new(stream: u64) -> Self {
        EventIds { stream, next: 0 }
    }

    /// The stream's number (the part before `-` in its event ids).
    pub(crate) fn stream(&self) -> u64 {
        self.stream
    }

    /// The sequence number of the last id written, if any.
    pub(crate) fn last(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    fn write_next(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(itoa::Buffer::new().format(self.stream).as_bytes());
        out.push(b'-');
        out.extend_from_slice(itoa::Buffer::new().format(self.next).as_bytes());
        out.push(b'\n');
        self.next += 1;
    }

    /// The priming event (an id and empty data) that opens a 2025-11-25 stream.
    pub(crate) fn priming(&mut self, out: &mut Vec<u8>) {
        self.write_next(out);
        out.extend_from_slice(b"data:\n\n");
    }
}

/// Appends `msg` as one SSE `message` event.
pub(crate) fn write_event(out: &mut Vec<u8>, ids: Option<&mut EventIds>, msg: &[u8]) {
    if let Some(ids) = ids {
        ids.write_next(out);
    }
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(msg);
    out.extend_from_slice(b"\n\n");
}

const KEEPALIVE: &[u8] = b": keepalive\n\n";

/// An SSE response stream (see the module doc).
pub(crate) struct SseStream {
    first: Option<Bytes>,
    rx: mpsc::Receiver<Bytes>,
    ids: Option<EventIds>,
    work: Option<Work>,
    keepalive: Option<Interval>,
    closing: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    _guard: Option<Box<dyn Send>>,
    park: Option<Park>,
    /// Parked: the response ends here.
    ended: bool,
}

impl std::fmt::Debug for SseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseStream")
            .field("last_event", &self.last_event())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl SseStream {
    /// A stream of the messages received on `rx`; it ends when every sender is gone.
    pub(crate) fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        SseStream {
            first: None,
            rx,
            ids: None,
            work: None,
            keepalive: None,
            closing: None,
            _guard: None,
            park: None,
            ended: false,
        }
    }

    /// Lets the work park the stream (see the module doc).
    pub(crate) fn park(mut self, hook: Park) -> Self {
        self.park = Some(hook);
        self
    }

    /// The stream number and sequence number of the last event id written.
    pub(crate) fn last_event(&self) -> Option<(u64, u64)> {
        let ids = self.ids.as_ref()?;
        Some((ids.stream(), ids.last()?))
    }

    /// Everything but the parked response: what a resumed stream continues with.
    fn take_rest(&mut self) -> SseStream {
        let (_, closed) = mpsc::channel(1);
        SseStream {
            first: None,
            rx: std::mem::replace(&mut self.rx, closed),
            ids: self.ids.take(),
            work: self.work.take(),
            keepalive: self.keepalive.take(),
            closing: self.closing.take(),
            _guard: self._guard.take(),
            park: None,
            ended: false,
        }
    }

    /// Bytes sent before any message (the priming event, the legacy `endpoint` event).
    pub(crate) fn first(mut self, b: impl Into<Bytes>) -> Self {
        self.first = Some(b.into());
        self
    }

    pub(crate) fn ids(mut self, ids: Option<EventIds>) -> Self {
        self.ids = ids;
        self
    }

    /// Work polled by the body; dropped with it.
    pub(crate) fn drive(mut self, work: Work) -> Self {
        self.work = Some(work);
        self
    }

    /// A `: keepalive` comment every `every` while the stream is open.
    pub(crate) fn keepalive(mut self, every: Duration) -> Self {
        let every = every.max(Duration::from_millis(1));
        let mut i = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.keepalive = Some(i);
        self
    }

    /// Ends the stream when `token` is cancelled (server shutdown).
    pub(crate) fn until(mut self, token: CancellationToken) -> Self {
        self.closing = Some(Box::pin(token.cancelled_owned()));
        self
    }

    /// Dropped with the body: cleans up when the client goes away.
    pub(crate) fn guard(mut self, g: impl Send + 'static) -> Self {
        self._guard = Some(Box::new(g));
        self
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Some(b) = self.first.take() {
            return Poll::Ready(Some(b));
        }
        if let Some(w) = self.work.as_mut()
            && w.as_mut().poll(cx).is_ready()
        {
            self.work = None;
        }
        loop {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(msg)) if msg.is_empty() => {
                    if let Some(park) = self.park.take() {
                        park(self.take_rest());
                        self.ended = true;
                        let retry = format!("retry: {RETRY_MS}\n\n");
                        return Poll::Ready(Some(Bytes::from(retry)));
                    }
                }
                Poll::Ready(Some(msg)) => {
                    let mut ev = Vec::with_capacity(msg.len() + 40);
                    write_event(&mut ev, self.ids.as_mut(), &msg);
                    return Poll::Ready(Some(Bytes::from(ev)));
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        if let Some(c) = self.closing.as_mut()
            && c.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(None);
        }
        if let Some(k) = self.keepalive.as_mut()
            && k.poll_tick(cx).is_ready()
        {
            return Poll::Ready(Some(Bytes::from_static(KEEPALIVE)));
        }
        Poll::Pending
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().0 {
            Inner::Full(b) => Poll::Ready(
                b.take()
                    .filter(|b| !b.is_empty())
                    .map(|b| Ok(Frame::data(b))),
            ),
            Inner::Stream(s) => s.poll(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.0, Inner::Full(b) if b.as_ref().is_none_or(Bytes::is_empty))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn streams_frame_messages_and_drive_their_work() {
        let (tx, rx) = mpsc::channel(1);
        let mut ids = EventIds::new(3);
        let mut priming = Vec::new();
        ids.priming(&mut priming);
        let work: Work = Box::pin(async move {
            for i in 0..3 {
                let _ = tx.send(Bytes::from(format!("{{\"n\":{i}}}"))).await;
            }
        });
        let body = Body::stream(SseStream::new(rx).first(priming).ids(Some(ids)).drive(work));
        let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert_eq!(
            text,
            "id: 3-0\ndata:\n\nid: 3-1\nevent: message\ndata: {\"n\":0}\n\n\
             id: 3-2\nevent: message\ndata: {\"n\":1}\n\nid: 3-3\nevent: message\ndata: {\"n\":2}\n\n"
        );
    }

    #[tokio::test]
    async fn idle_streams_send_keepalives_and_end_on_shutdown() {
        let (_tx, rx) = mpsc::channel::<Bytes>(1);
        let stop = CancellationToken::new();
        let mut body = Body::stream(
            SseStream::new(rx)
                .keepalive(Duration::from_millis(5))
                .until(stop.clone()),
        );
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), KEEPALIVE);
        stop.cancel();
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn parking_ends_the_response_and_hands_over_the_rest() {
        let (tx, rx) = mpsc::channel(4);
        let parked = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = parked.clone();
        let mut ids = EventIds::new(7);
        let mut priming = Vec::new();
        ids.priming(&mut priming);
        let work: Work = Box::pin(async move {
            let _ = tx.send(PARK).await;
            let _ = tx.send(Bytes::from_static(b"{\"after\":1}")).await;
        });
        let body = Body::stream(
            SseStream::new(rx)
                .first(priming)
                .ids(Some(ids))
                .drive(work)
                .park(Box::new(move |s| *slot.lock().unwrap() = Some(s))),
        );
        let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert_eq!(text, format!("id: 7-0\ndata:\n\nretry: {RETRY_MS}\n\n"));
        let rest = parked.lock().unwrap().take().expect("the rest was parked");
        assert_eq!(rest.last_event(), Some((7, 0)));
        let text = String::from_utf8(
            Body::stream(rest)
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
        .unwrap();
        assert_eq!(text, "id: 7-1\nevent: message\ndata: {\"after\":1}\n\n");
        // Without a hook the park message is ignored.
        let (tx, rx) = mpsc::channel(4);
        tx.send(PARK).await.unwrap();
        tx.send(Bytes::from_static(b"{}")).await.unwrap();
        drop(tx);
        let text = Body::stream(SseStream::new(rx))
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(text, "event: message\ndata: {}\n\n");
    }

    #[tokio::test]
    async fn full_bodies_have_exact_sizes() {
        use hyper::body::Body as _;
        let b = Body::full(Bytes::from_static(b"abc"));
        assert_eq!(b.size_hint().exact(), Some(3));
        assert!(Body::empty().is_end_stream());
        assert_eq!(b.collect().await.unwrap().to_bytes(), "abc");
    }
}
