//! The HTTP/2 side of a Streamable HTTP session: the connection (on the `h2` crate, each
//! virtual user awaiting its own stream), shared by several sessions if asked
//! (`sessions_per_connection`), request heads, and what a response head says.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::reply_body::{BodySource, Head};
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::transport::http1_client::Captured;
use crate::transport::mux::OpenLatch;
use crate::transport::{CallSpec, Endpoint, TimingHeader};

/// An HTTP/2 connection: the handle streams are opened on, and whether the task driving the
/// connection has ended (closed by either side). A clone is another handle on the same
/// connection.
#[derive(Clone)]
pub(super) struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

/// Windows as hyper's client sets them (h2's own 64 KiB would throttle large results).
const H2_STREAM_WINDOW: u32 = 2 << 20;
const H2_CONNECTION_WINDOW: u32 = 5 << 20;

impl H2Conn {
    /// The HTTP/2 handshake over a connected stream; a task drives the connection from then on.
    pub(super) async fn handshake(
        stream: crate::transport::net::Stream,
    ) -> Result<Self, h2::Error> {
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

    /// Whether the connection has ended (its driving task returned).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// One request on a new stream (waiting for the server's stream limit), its body sent
    /// whole; the response head.
    pub(super) async fn request(
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

/// One HTTP/2 connection shared by several sessions of a worker (`sessions_per_connection`):
/// opened by the first session that needs it, reopened by the first that finds it closed,
/// while the others wait for that opening (and take the new connection, or fail if it failed).
#[derive(Default)]
pub struct SharedH2 {
    conn: RefCell<Option<H2Conn>>,
    latch: OpenLatch,
}

impl SharedH2 {
    /// The connection, while it is alive.
    pub(super) fn live(&self) -> Option<H2Conn> {
        self.conn
            .borrow()
            .as_ref()
            .filter(|c| !c.is_closed())
            .cloned()
    }

    /// Claims the (re)opening; false while another session is opening.
    pub(super) fn claim(&self) -> bool {
        self.latch.claim()
    }

    /// Ends a claimed opening: the new connection (if it opened) for everyone.
    pub(super) fn opened(&self, conn: Option<&H2Conn>) {
        *self.conn.borrow_mut() = conn.cloned();
        self.latch.release();
    }

    /// Waits while another session opens the connection.
    pub(super) async fn wait(&self) {
        self.latch.wait().await;
    }
}

/// Hands out the sessions of a worker to shared HTTP/2 connections, `per` sessions each.
pub struct H2Lanes {
    per: usize,
    next: RefCell<(Rc<SharedH2>, usize)>,
}

impl H2Lanes {
    pub fn new(per: usize) -> Self {
        H2Lanes {
            per: per.max(1),
            next: RefCell::new((Rc::default(), 0)),
        }
    }

    /// The connection the next session goes on.
    pub fn next(&self) -> Rc<SharedH2> {
        let mut n = self.next.borrow_mut();
        if n.1 == self.per {
            *n = (Rc::default(), 0);
        }
        n.1 += 1;
        n.0.clone()
    }
}

/// What an HTTP/2 response head says (status, content type; the session id, `Retry-After`
/// and the timing header captured as the HTTP/1.1 head parser captures them), and its body.
pub(super) fn response_head(
    resp: hyper::http::Response<h2::RecvStream>,
    captured: &mut Captured,
    timing: Option<&TimingHeader>,
) -> (Head, BodySource) {
    let status = resp.status().as_u16();
    let content =
        captured.set_content_type(resp.headers().get("content-type").map(|v| v.as_bytes()));
    captured.set_session_id(resp.headers().get("mcp-session-id").map(|v| v.as_bytes()));
    captured.set_retry_after(resp.headers().get("retry-after").map(|v| v.as_bytes()));
    if let Some(t) = timing {
        captured.set_timing(resp.headers().get(&t.name).map(|v| v.as_bytes()));
    }
    (Head { status, content }, BodySource::H2(resp.into_body()))
}

/// An HTTP/2 request head (a POST, its body sent by [`H2Conn::request`], or the session's
/// DELETE).
pub(super) fn build_h2(
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
