//! MCP over the 2024-11-05 HTTP+SSE transport: a GET opens an event stream whose first event
//! (`endpoint`) names where to POST messages; every POST is answered `202 Accepted`, and every
//! response arrives on the stream, matched by id.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Endpoint;
use super::http1_client::{Captured, ContentKind, Http1Conn, IDLE_PROBE};
use super::mux::{Connector, MuxConn, MuxSession, Outbound};
use super::net::{self, Stream};
use super::sse_decoder::SseDecoder;
use crate::metrics::outcome::{Outcome, ProtocolKind};

/// The way out: POSTs to the session's message endpoint over a small pool of keep-alive
/// connections (one per concurrent sender; reused, so no allocation after warm-up).
pub struct PostOut {
    ep: Arc<Endpoint>,
    /// `POST <endpoint> HTTP/1.1` … up to `Content-Length: `.
    head: Vec<u8>,
    idle: RefCell<Vec<IdlePost>>,
}

/// An idle POST connection, its request buffer, and when it went idle.
type IdlePost = (Http1Conn<Stream>, Vec<u8>, Instant);

impl Outbound for PostOut {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        // The most recently used first; one idle for a while may have been closed by the server.
        let taken = loop {
            let Some((mut c, buf, since)) = self.idle.borrow_mut().pop() else {
                break None;
            };
            if since.elapsed() < IDLE_PROBE || !c.peer_closed() {
                break Some((c, buf));
            }
        };
        let (mut conn, mut buf) = match taken {
            Some(c) => c,
            None => {
                let target = self.ep.net.as_ref().ok_or(())?;
                let s = net::connect(target).await.map_err(|_| ())?;
                (Http1Conn::new(s), Vec::with_capacity(1024))
            }
        };
        buf.clear();
        buf.extend_from_slice(&self.head);
        buf.extend_from_slice(itoa::Buffer::new().format(msg.len()).as_bytes());
        buf.extend_from_slice(b"\r\n\r\n");
        buf.extend_from_slice(msg);
        conn.send(&buf).await.map_err(|_| ())?;
        let head = conn
            .read_head(&mut Captured::default())
            .await
            .map_err(|_| ())?;
        conn.discard_body().await.map_err(|_| ())?;
        if !matches!(head.status, 200 | 202 | 204) {
            return Err(());
        }
        if conn.is_reusable() {
            self.idle.borrow_mut().push((conn, buf, Instant::now()));
        }
        Ok(())
    }
}

/// Opens legacy HTTP+SSE sessions.
#[derive(Debug)]
pub struct SseConnector;

/// An MCP session over legacy HTTP+SSE.
pub type LegacySseSession = MuxSession<SseConnector>;

/// Resolves the `endpoint` event's URI against the SSE URL; refuses another origin.
pub fn resolve_endpoint(sse_path: &str, data: &str, origin: &str) -> Option<String> {
    let data = data.trim();
    if let Some(rest) = data
        .strip_prefix("http://")
        .or_else(|| data.strip_prefix("https://"))
    {
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if !authority.eq_ignore_ascii_case(origin) {
            return None;
        }
        return Some(if path.is_empty() {
            "/".into()
        } else {
            path.into()
        });
    }
    if data.starts_with('/') {
        return Some(data.into());
    }
    let base = sse_path.split('?').next().unwrap_or(sse_path);
    let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
    Some(format!("{}{data}", if dir.is_empty() { "/" } else { dir }))
}

impl Connector for SseConnector {
    type Out = PostOut;

    async fn connect(ep: &Arc<Endpoint>, capacity: usize) -> Result<Rc<MuxConn<PostOut>>, Outcome> {
        let target = ep.net.as_ref().ok_or(Outcome::Connect)?;
        let stream = net::connect(target).await.map_err(|e| e.outcome())?;
        let mut get = Http1Conn::new(stream);
        let mut req = Vec::with_capacity(256);
        req.extend_from_slice(b"GET ");
        req.extend_from_slice(ep.path.as_bytes());
        req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        req.extend_from_slice(ep.host.as_bytes());
        req.extend_from_slice(
            b"\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\nUser-Agent: mcpbench/",
        );
        req.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(&ep.extra_headers);
        req.extend_from_slice(b"\r\n");
        let mut sse = SseDecoder::new(ep.max_body);
        let endpoint = tokio::time::timeout(ep.timeout, async {
            get.send(&req).await.map_err(|_| Outcome::Io)?;
            let head = get
                .read_head(&mut Captured::default())
                .await
                .map_err(|_| Outcome::Io)?;
            if head.status != 200 {
                return Err(Outcome::Http(head.status));
            }
            if head.content != ContentKind::EventStream {
                return Err(Outcome::Protocol(ProtocolKind::BadContentType));
            }
            let mut endpoint: Option<String> = None;
            let mut bad = false;
            let r = get
                .read_body(|chunk| {
                    sse.feed_bounded(chunk, &mut bad, |ev| {
                        if ev.event == b"endpoint" {
                            endpoint = std::str::from_utf8(ev.data).ok().map(str::to_string);
                            return ControlFlow::Break(());
                        }
                        ControlFlow::Continue(())
                    })
                })
                .await;
            match (endpoint, r) {
                (Some(e), _) => Ok(e),
                (None, _) if bad => Err(Outcome::Protocol(ProtocolKind::TooLarge)),
                (None, Ok(_)) => Err(Outcome::Protocol(ProtocolKind::Handshake)),
                (None, Err(_)) => Err(Outcome::Io),
            }
        })
        .await
        .map_err(|_| Outcome::Timeout)??;
        let post_path = resolve_endpoint(&ep.path, &endpoint, &ep.host)
            .ok_or(Outcome::Protocol(ProtocolKind::Handshake))?;
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(b"POST ");
        head.extend_from_slice(post_path.as_bytes());
        head.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        head.extend_from_slice(ep.host.as_bytes());
        head.extend_from_slice(b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n");
        head.extend_from_slice(&ep.extra_headers);
        head.extend_from_slice(b"Content-Length: ");
        let out = PostOut {
            ep: ep.clone(),
            head,
            idle: RefCell::new(Vec::new()),
        };
        let conn = Rc::new(MuxConn::new(capacity, ep, out));
        let weak = Rc::downgrade(&conn);
        conn.hold(tokio::task::spawn_local(async move {
            let mut msg = Vec::with_capacity(4096);
            let mut answer = Vec::new();
            loop {
                // Take one message event at a time out of the stream, then route it (which may
                // POST an answer); the body read resumes where it stopped.
                msg.clear();
                let mut got = false;
                let mut bad = false;
                let r = get
                    .read_body(|chunk| {
                        sse.feed_messages(chunk, &mut bad, |data| {
                            msg.extend_from_slice(data);
                            got = true;
                            ControlFlow::Break(())
                        })
                    })
                    .await;
                let Some(conn) = weak.upgrade() else { return };
                if got {
                    conn.incoming(&mut msg, &mut answer).await;
                }
                if bad || r.is_err() || matches!(r, Ok(ControlFlow::Continue(()))) && !got {
                    conn.mux.close(Outcome::Io);
                    return;
                }
            }
        }));
        Ok(conn)
    }

    async fn shutdown(conn: Rc<MuxConn<PostOut>>, _within: Duration) {
        // Closing the stream ends the session.
        drop(conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_resolution() {
        assert_eq!(
            resolve_endpoint("/sse", "/messages?sessionId=1", "h:1").as_deref(),
            Some("/messages?sessionId=1")
        );
        assert_eq!(
            resolve_endpoint("/a/sse", "messages/?session_id=2", "h:1").as_deref(),
            Some("/a/messages/?session_id=2")
        );
        assert_eq!(
            resolve_endpoint("/sse", "http://h:1/m?x", "h:1").as_deref(),
            Some("/m?x")
        );
        assert_eq!(resolve_endpoint("/sse", "http://evil:1/m", "h:1"), None);
    }
}
