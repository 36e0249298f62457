//! Calls that a worker's event loop drives (`driver::event_loop`): begun, and — when the answer
//! comes in the plain shape (status 200, JSON delimited by `Content-Length`, on a kept-alive
//! HTTP/1.1 connection) — read and classified without a task or a future of their own. Any
//! other answer, and any failure, is left where it stands for [`HttpSession::finish_call`],
//! which goes on exactly as [`Session::call`](crate::transport::Session::call) would have.

use std::os::fd::AsRawFd;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use mio::unix::SourceFd;

use super::reply_body::json_outcome;
use super::round_trip::render_post;
use super::{Conn, HttpSession};
use crate::transport::http1_client::Buffered;
use crate::transport::net::Stream;
use crate::transport::{CallSpec, Reply, spare};

/// A call begun by [`HttpSession::begin_call`].
#[derive(Debug, Clone, Copy)]
pub struct Begun {
    id: u64,
    /// How much of the request is sent.
    written: usize,
}

impl HttpSession {
    /// Whether the next call can be begun here: the session open on a kept-alive HTTP/1.1
    /// connection that has not idled long enough to need a check, not resting, with one
    /// replica and no notification hook. Otherwise the call is made with `Session::call`.
    /// `now` is the caller's clock reading (one per request).
    pub fn can_begin(&mut self, now: Instant) -> bool {
        use crate::transport::Session;
        if self.rests || self.dirty || self.parked.len() > 1 || self.hook.is_some() {
            return false;
        }
        self.adopt();
        self.is_open()
            && !self.closed_while_idle(now)
            && matches!(&self.conn, Some(Conn::H1(c)) if c.is_reusable())
    }

    /// Begins a call (after [`HttpSession::can_begin`]): the request rendered for its id by
    /// `write` and ready to go.
    pub fn begin_call<W: FnOnce(&mut Vec<u8>, u64)>(&mut self, spec: &CallSpec, write: W) -> Begun {
        spare::ensure(&mut self.body);
        spare::ensure(&mut self.out);
        let id = self.take_id();
        self.last_id = Some(id);
        self.body.clear();
        write(&mut self.body, id);
        self.dirty = true;
        render_post(&mut self.out, &self.head, Some(spec), &self.body);
        Begun { id, written: 0 }
    }

    /// Drives a begun call without waiting: `Ready(Some(reply))` once a plain answer is read,
    /// `Ready(None)` when the rest needs [`HttpSession::finish_call`] (another answer, a
    /// failure), `Pending` while the connection has nothing more to read (`cx` is woken when
    /// it has).
    pub fn poll_call(&mut self, cx: &mut Context<'_>, b: &mut Begun) -> Poll<Option<Reply>> {
        let Some(Conn::H1(c)) = self.conn.as_mut() else {
            return Poll::Ready(None);
        };
        let sending = b.written < self.out.len();
        match c.poll_send(cx, &self.out, &mut b.written) {
            // Just sent on a lent stream: no answer can be there yet, and the loop's epoll says
            // when one is (a read now would only find nothing).
            Poll::Ready(Ok(()))
                if sending && c.nothing_received() && matches!(c.io(), Stream::Polled(_)) =>
            {
                return Poll::Pending;
            }
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => return Poll::Ready(None),
            // A lent stream is watched for reading only: the rest of a request too large for
            // the socket's buffer is written by `finish_call`, on Tokio.
            Poll::Pending if matches!(c.io(), Stream::Polled(_)) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
        spare::ensure(&mut self.resp);
        loop {
            let resp = &mut self.resp;
            let found = c.take_plain(&mut self.captured, self.ep.max_body, |body| {
                resp.clear();
                resp.extend_from_slice(body);
            });
            match found {
                Buffered::Plain => break,
                Buffered::Other => return Poll::Ready(None),
                Buffered::Wait => match ready!(c.poll_fill(cx)) {
                    Ok(n) if n > 0 => {}
                    // Closed or failed: `finish_call` tells which, as a read would.
                    _ => return Poll::Ready(None),
                },
            }
        }
        let done = Instant::now();
        let outcome = json_outcome(self.ep.codec, &mut self.resp, b.id);
        if !c.is_reusable() {
            self.conn = None;
        }
        self.dirty = false;
        self.idle_since = Some(done);
        Poll::Ready(Some(Reply {
            upstream: self.captured.timing(),
            retry_after: self.captured.retry_after(),
            ..Reply::at(outcome, done)
        }))
    }

    /// Lends the session's connection to the event loop's epoll (`registry`, as `token`): it
    /// becomes a [`Stream::Polled`], which Tokio no longer watches. Whether it is lent now
    /// (false: there is none, or it is TLS or HTTP/2, which Tokio keeps watching).
    pub fn lend(&mut self, registry: &mio::Registry, token: mio::Token) -> bool {
        let Some(Conn::H1(c)) = &self.conn else {
            return false;
        };
        match c.io() {
            Stream::Polled(_) => return true,
            Stream::Tcp(_) => {}
            Stream::Tls(_) => return false,
        }
        let Some(Conn::H1(c)) = self.conn.take() else {
            return false;
        };
        let lent = c.map_io(|s| {
            let Stream::Tcp(t) = s else { return None };
            let t = t.into_std().ok()?;
            let fd = t.as_raw_fd();
            registry
                .register(&mut SourceFd(&fd), token, mio::Interest::READABLE)
                .ok()?;
            Some(Stream::Polled(t))
        });
        let ok = lent.is_some();
        self.conn = lent.map(Conn::H1);
        ok
    }

    /// Takes the connection back from the event loop's epoll (`registry`) for Tokio; nothing
    /// to do if it is not lent. (If Tokio cannot take it, the connection is dropped: the next
    /// request opens another.)
    pub fn take_back(&mut self, registry: &mio::Registry) {
        let Some(Conn::H1(c)) = &self.conn else {
            return;
        };
        if !matches!(c.io(), Stream::Polled(_)) {
            return;
        }
        let Some(Conn::H1(c)) = self.conn.take() else {
            return;
        };
        self.conn = c
            .map_io(|s| {
                let Stream::Polled(t) = s else { return None };
                let _ = registry.deregister(&mut SourceFd(&t.as_raw_fd()));
                tokio::net::TcpStream::from_std(t).ok().map(Stream::Tcp)
            })
            .map(Conn::H1);
    }

    /// The rest of a begun call, as `Session::call` makes it: the request's unsent rest, the
    /// answer whatever its shape (the bytes already read are in the connection's buffer), a
    /// stale connection's resend.
    pub async fn finish_call(&mut self, spec: &CallSpec, b: Begun) -> Reply {
        self.exchange_sent(Some(spec), b.id, true, b.written, false)
            .await
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use crate::transport::http1_client::{Buffered, Captured, Http1Conn};

    /// Feeds `response` in `step`-byte pieces, asking `take_plain` after each: what it said
    /// last, the body it took, and what a full reader then finds in the buffer.
    async fn plain_in_pieces(response: &[u8], step: usize) -> (Buffered, Vec<u8>, Option<u16>) {
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let mut conn = Http1Conn::new(client);
        let mut cap = Captured::default();
        let mut took = Vec::new();
        let mut last = Buffered::Wait;
        let mut sent = 0;
        for piece in response.chunks(step) {
            server.write_all(piece).await.unwrap();
            sent += piece.len();
            std::future::poll_fn(|cx| conn.poll_fill(cx)).await.unwrap();
            last = conn.take_plain(&mut cap, 1 << 20, |b| took.extend_from_slice(b));
            if last != Buffered::Wait {
                break;
            }
        }
        server.write_all(&response[sent..]).await.unwrap();
        drop(server);
        let status = match last {
            Buffered::Other => conn.read_head(&mut cap).await.ok().map(|h| h.status),
            _ => None,
        };
        (last, took, status)
    }

    /// The plain answer is taken whole however it arrives; anything else is left untouched
    /// for the full reader, which then reads it from the start.
    #[tokio::test]
    async fn take_plain_takes_only_the_plain_answer_and_leaves_the_rest() {
        let json: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        for step in [1, 5, json.len()] {
            let (found, took, _) = plain_in_pieces(json, step).await;
            assert_eq!(
                (found, &took[..]),
                (Buffered::Plain, &b"{\"a\":1}"[..]),
                "step {step}"
            );
        }
        for (other, status) in [
            (&b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"[..], 404),
            (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 3\r\n\r\n:\n\n", 200),
            (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 200),
            (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}", 200),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200),
        ] {
            let (found, took, read) = plain_in_pieces(other, 4).await;
            assert_eq!(found, Buffered::Other, "{}", String::from_utf8_lossy(other));
            assert!(took.is_empty());
            assert_eq!(read, Some(status), "the full reader reads it from the start");
        }
        let close: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
        let (client, mut server) = tokio::io::duplex(1 << 16);
        server.write_all(close).await.unwrap();
        let mut conn = Http1Conn::new(client);
        std::future::poll_fn(|cx| conn.poll_fill(cx)).await.unwrap();
        let found = conn.take_plain(&mut Captured::default(), 1 << 20, |_| {});
        assert_eq!(found, Buffered::Plain);
        assert!(!conn.is_reusable(), "Connection: close is honoured");
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let mut c = Http1Conn::new(client);
        server.write_all(close).await.unwrap();
        std::future::poll_fn(|cx| c.poll_fill(cx)).await.unwrap();
        let too_big = c.take_plain(&mut Captured::default(), 1, |_| {});
        assert_eq!(
            too_big,
            Buffered::Other,
            "over the bound: the full reader says so"
        );
    }
}
