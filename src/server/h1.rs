//! The server's own HTTP/1.1 loop, for the request an MCP client sends all the time: a `POST`
//! with a `Content-Length` body on a keep-alive connection (every call, every notification).
//!
//! hyper's HTTP/1 server costs a proxied call about 15 000 instructions (its dispatcher, the
//! head parsed into its own state and then a `HeaderMap`, buffers, one write per part); this
//! loop reads the head and body into one buffer, parses the head once (httparse), hands the
//! handler a request whose headers and body are slices of that buffer, and writes each
//! complete response in one `write`. Anything else — another method, a chunked or expected
//! body, an upgrade (WebSocket), an HTTP/2 preface, a head too large or malformed — goes to
//! hyper with the bytes already read, and hyper serves the rest of the connection, so every
//! rule hyper enforces still holds there.
//!
//! What the loop keeps of hyper's behaviour:
//! - the head timeout ([`HttpLimits::header_read_timeout`]) bounds each head, an idle
//!   keep-alive connection's wait included; the body timeout (`Config::body_read_timeout`)
//!   bounds the body and is answered `408` with `Connection: close`, as the handler does (both
//!   kept by the connection's one lazily moved timer, `mock_backend::watchdog`, not a timer
//!   entry per request);
//! - a client that closes its connection while its request runs drops the request (its call
//!   is cancelled), as hyper does without half-close; so does one that closes a streamed (SSE)
//!   response;
//! - a stalled client fails the write after [`HttpLimits::write_stall`] ([`Guarded`]);
//! - on shutdown the request in flight is answered with `Connection: close`, an idle
//!   connection is closed;
//! - a body the handler streams is sent chunked, one chunk per message, as it comes.

use std::cell::RefCell;
use std::error::Error as StdError;
use std::future::{Future, poll_fn};
use std::io::Write as _;
use std::ops::Range;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::service::Service;
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::{rt::TokioExecutor, server::conn::auto::HttpServerConnExec};
use mock_backend::accept::{
    Guarded, HttpLimits, Protocol, Replay, Shutdown, Slot, peek_protocol, serve_h1, serve_http_with,
};
use mock_backend::watchdog::Watchdog;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::body::Body;
use super::response::{BodyError, ReqBody, SESSION, VERSION, http_error};
use super::{State, http};
use crate::protocol::jsonrpc::code;

/// A head longer than this goes to hyper (which takes more, or answers `431`).
const MAX_HEAD: usize = 16 * 1024;
/// Headers of one request this loop takes; a request with more goes to hyper.
const MAX_HEADERS: usize = 32;
/// A complete body at most this long is copied behind its head, so the response is one write.
const INLINE: usize = 16 * 1024;
/// Buffer capacity a connection keeps between requests (see `Conn::trim`).
const KEEP: usize = 32 * 1024;
/// Bytes a client may send ahead (pipelined) while its request runs before the loop stops
/// reading (and so stops noticing a close) until the response is written.
const AHEAD: usize = 64 * 1024;

/// Serves a plain TCP connection: HTTP/1.1 by this loop while its requests are ones it takes,
/// then by hyper (`service`, which must answer as [`http::handle`] does); HTTP/2 by hyper.
pub(crate) async fn serve<S, B>(
    state: Arc<State>,
    stream: TcpStream,
    shutdown: Shutdown,
    limits: HttpLimits,
    slot: Slot,
    service: S,
) where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: HttpServerConnExec<S::Future, B>,
{
    match peek_protocol(&stream, &limits).await {
        None => {}
        Some(Protocol::Http2) => {
            Box::pin(serve_http_with(
                stream,
                service,
                shutdown,
                limits,
                Some(slot),
            ))
            .await;
        }
        Some(Protocol::Http1) => {
            let mut conn = Conn {
                io: Guarded::with_protocol_known(stream, Some(slot), &limits),
                buf: BytesMut::new(),
                out: Vec::new(),
                timer: None,
                down: Box::pin(shutdown.owned_trigger()),
            };
            if let End::Hyper = conn.run(&state, &shutdown, &limits).await {
                let Conn { io, buf, .. } = conn;
                // Boxed: a connection this loop serves does not carry hyper's state.
                let io = Replay::new(buf.freeze(), io);
                Box::pin(serve_h1(io, service, shutdown, &limits)).await;
            }
        }
    }
}

/// How the loop ended.
enum End {
    /// The connection is done (closed by either side, an error, a timeout, shutdown).
    Closed,
    /// The request at the start of the buffer is hyper's, and so is the rest of the connection.
    Hyper,
}

struct Conn {
    io: Guarded<TcpStream>,
    /// Bytes read and not yet taken: the next request (or part of it), maybe more behind it.
    buf: BytesMut,
    /// The response being written.
    out: Vec<u8>,
    /// The head and body timer, made at the first wait for either.
    timer: Option<Watchdog>,
    /// Completes at shutdown; made once, so an idle wait does not register anew each request.
    down: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Where a part of a head is in the buffer (a head is at most [`MAX_HEAD`] long, so two
/// `u16`s: a connection's task keeps this table while its request runs).
#[derive(Debug, Clone, Copy, Default)]
struct Span(u16, u16);

impl Span {
    fn range(self) -> Range<usize> {
        usize::from(self.0)..usize::from(self.1)
    }
}

/// A head this loop takes: where its parts are in the buffer, and what it says of the body.
struct Head {
    len: usize,
    path: Span,
    headers: [(Span, Span); MAX_HEADERS],
    count: usize,
    body: usize,
    close: bool,
}

impl Conn {
    async fn run(&mut self, state: &Arc<State>, shutdown: &Shutdown, limits: &HttpLimits) -> End {
        loop {
            let head = match self
                .read_head(state, shutdown, limits.header_read_timeout)
                .await
            {
                Ok(h) => h,
                Err(end) => return end,
            };
            let c = &state.config;
            if self
                .read_body(head.len + head.body, c.body_read_timeout)
                .await
                .is_err()
            {
                // The rest of the body may still come: answered, and closed.
                let _ = self.respond(BodyError::Timeout.response(), true).await;
                return End::Closed;
            }
            let Some(req) = self.request(&head) else {
                let refused = http_error(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_REQUEST,
                    "Bad Request: a header value is not valid",
                );
                let _ = self.respond(refused, true).await;
                return End::Closed;
            };
            // Pinned where it is made: the handler's future is a few KiB, not moved again.
            let handled = pin!(http::handle(state, req, None));
            let Some(response) = self.call(handled).await else {
                return End::Closed;
            };
            let close = head.close || shutdown.is_triggered();
            match self.respond(response, close).await {
                Ok(false) => self.trim(),
                Ok(true) | Err(()) => return End::Closed,
            }
        }
    }

    /// Waits for a complete head this loop takes (`Err(Hyper)` for one it does not).
    async fn read_head(
        &mut self,
        state: &State,
        shutdown: &Shutdown,
        timeout: Option<Duration>,
    ) -> Result<Head, End> {
        let mut deadline = None;
        loop {
            if !self.buf.is_empty() {
                match parse(&self.buf, state.config.max_body) {
                    Parse::Take(head) => return Ok(head),
                    Parse::Partial if self.buf.len() <= MAX_HEAD => {}
                    Parse::Partial | Parse::Hyper => return Err(End::Hyper),
                }
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(4096);
            }
            let idle_now = self.buf.is_empty();
            let mut read = pin!(self.io.read_buf(&mut self.buf));
            let n = match poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                Poll::Ready(n) => n,
                Poll::Pending => {
                    if shutdown.is_triggered() && idle_now {
                        return Err(End::Closed);
                    }
                    // The deadline is set once per head, at its first wait: a head that
                    // arrives in pieces keeps the deadline of its first. The connection's
                    // watchdog is moved to it lazily (one reset per timeout period).
                    let idle = timeout.map(|t| {
                        let at = *deadline.get_or_insert_with(|| Instant::now() + t);
                        (self.timer.get_or_insert_with(Watchdog::new), at)
                    });
                    let expired = async {
                        match idle {
                            Some((idle, at)) => idle.until(at).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        n = read => n,
                        () = expired => {
                            tracing::debug!("no request head within the header read timeout");
                            return Err(End::Closed);
                        }
                        () = self.down.as_mut(), if idle_now => return Err(End::Closed),
                    }
                }
            };
            match n {
                Ok(0) | Err(_) => return Err(End::Closed),
                Ok(_) => {}
            }
        }
    }

    /// Reads until the buffer holds `want` bytes (the head and its body), within `timeout`.
    async fn read_body(&mut self, want: usize, timeout: Duration) -> Result<(), ()> {
        let mut deadline = None;
        while self.buf.len() < want {
            self.buf.reserve(want - self.buf.len());
            let mut read = pin!(self.io.read_buf(&mut self.buf));
            let n = match poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                Poll::Ready(n) => n,
                Poll::Pending => {
                    let at = *deadline.get_or_insert_with(|| Instant::now() + timeout);
                    let timer = self.timer.get_or_insert_with(Watchdog::new);
                    tokio::select! {
                        n = read => n,
                        () = timer.until(at) => return Err(()),
                    }
                }
            };
            match n {
                Ok(0) | Err(_) => return Err(()),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// The request at the start of the buffer, taken out of it (`None`: a header value that
    /// `http` refuses).
    fn request(&mut self, head: &Head) -> Option<hyper::Request<ReqBody>> {
        let msg = self.buf.split_to(head.len + head.body).freeze();
        let mut req = Request::new(ReqBody::Whole(msg.slice(head.len..)));
        *req.method_mut() = Method::POST;
        *req.version_mut() = Version::HTTP_11;
        *req.uri_mut() = Uri::from_maybe_shared(msg.slice(head.path.range())).ok()?;
        let headers = req.headers_mut();
        headers.reserve(head.count);
        for (name, value) in &head.headers[..head.count] {
            let name = header_name(&msg[name.range()])?;
            let value = HeaderValue::from_maybe_shared(msg.slice(value.range())).ok()?;
            headers.append(name, value);
        }
        Some(req)
    }

    /// Runs the handler's future while watching the socket: `None` if the client closed (the
    /// future is dropped, and with it the call).
    async fn call<F>(&mut self, mut call: Pin<&mut F>) -> Option<Response<Body>>
    where
        F: Future<Output = Result<Response<Body>, std::convert::Infallible>>,
    {
        loop {
            tokio::select! {
                biased;
                r = call.as_mut() => return Some(r.unwrap_or_else(|e| match e {})),
                n = self.io.read_buf(&mut self.buf), if self.buf.len() < AHEAD => match n {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                },
            }
        }
    }

    /// Writes `response`; `Ok(true)` if the connection is to be closed after it.
    async fn respond(&mut self, response: Response<Body>, close: bool) -> Result<bool, ()> {
        let (parts, mut body) = response.into_parts();
        let close = close
            || parts
                .headers
                .get(header::CONNECTION)
                .is_some_and(|v| has_token(v.as_bytes(), b"close"));
        let bodiless = parts.status.is_informational()
            || parts.status == StatusCode::NO_CONTENT
            || parts.status == StatusCode::NOT_MODIFIED;
        let exact = body.size_hint().exact();
        self.out.clear();
        write_head(&mut self.out, &parts, (!bodiless).then_some(exact), close);
        if bodiless {
            self.write_out().await?;
        } else if exact.is_some() {
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.unwrap_or_else(|e| match e {}).into_data() else {
                    continue;
                };
                if self.out.len() + data.len() <= INLINE {
                    self.out.extend_from_slice(&data);
                } else {
                    self.write_out().await?;
                    self.io.write_all(&data).await.map_err(drop)?;
                }
            }
            self.write_out().await?;
        } else {
            self.write_out().await?;
            self.stream(body).await?;
        }
        if close {
            let _ = self.io.shutdown().await;
        }
        Ok(close)
    }

    /// Sends a streamed body chunk by chunk as it comes, until it ends or the client closes.
    async fn stream(&mut self, body: Body) -> Result<(), ()> {
        let mut body = pin!(body);
        loop {
            let frame = tokio::select! {
                biased;
                f = body.frame() => f,
                n = self.io.read_buf(&mut self.buf), if self.buf.len() < AHEAD => match n {
                    Ok(0) | Err(_) => return Err(()),
                    Ok(_) => continue,
                },
            };
            self.out.clear();
            match frame {
                None => {
                    self.out.extend_from_slice(b"0\r\n\r\n");
                    return self.write_out().await;
                }
                Some(frame) => {
                    let Ok(data) = frame.unwrap_or_else(|e| match e {}).into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    // Into the reused buffer: no string per chunk.
                    let _ = write!(self.out, "{:x}\r\n", data.len());
                    self.out.extend_from_slice(&data);
                    self.out.extend_from_slice(b"\r\n");
                    self.write_out().await?;
                }
            }
        }
    }

    /// Between requests: buffers a large request or response grew are let go, so an idle
    /// connection holds no more than a small one's (memory per idle session).
    fn trim(&mut self) {
        if self.out.capacity() > KEEP {
            self.out = Vec::new();
        }
        if self.buf.is_empty() && self.buf.capacity() > KEEP {
            self.buf = BytesMut::new();
        }
    }

    async fn write_out(&mut self) -> Result<(), ()> {
        let r = self.io.write_all(&self.out).await;
        self.out.clear();
        r.map_err(|error| tracing::debug!(%error, "connection ended with an error"))
    }
}

// Unboxed: boxing the head would allocate on every request; it lives on the stack a moment.
#[allow(clippy::large_enum_variant)]
enum Parse {
    Take(Head),
    Partial,
    Hyper,
}

/// Parses the head at the start of `buf` and decides who serves it.
fn parse(buf: &[u8], max_body: usize) -> Parse {
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut raw);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parse::Partial,
        // Malformed, or more headers than fit: hyper answers (or takes) it.
        Err(_) => return Parse::Hyper,
    };
    if req.method != Some("POST") || req.version != Some(1) {
        return Parse::Hyper;
    }
    if len > MAX_HEAD {
        return Parse::Hyper;
    }
    // Within the head, so within u16.
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - buf.as_ptr() as usize;
        Span(start as u16, (start + s.len()) as u16)
    };
    let mut head = Head {
        len,
        path: at(req.path.unwrap_or_default().as_bytes()),
        headers: [(Span::default(), Span::default()); MAX_HEADERS],
        count: 0,
        body: 0,
        close: false,
    };
    let mut length = None;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            if length.is_some() {
                return Parse::Hyper;
            }
            length = Some(decimal(h.value));
        } else if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"upgrade")
            || name.eq_ignore_ascii_case(b"expect")
        {
            return Parse::Hyper;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    head.close = true;
                } else if !token.eq_ignore_ascii_case(b"keep-alive") && !token.is_empty() {
                    return Parse::Hyper;
                }
            }
        }
        head.headers[head.count] = (at(name), at(h.value));
        head.count += 1;
    }
    match length {
        Some(Some(n)) if n <= max_body => head.body = n,
        // No length, a bad one, or a body over the cap (the handler refuses it as it reads).
        _ => return Parse::Hyper,
    }
    Parse::Take(head)
}

/// A `Content-Length` value: decimal digits only.
fn decimal(v: &[u8]) -> Option<usize> {
    if v.is_empty() || v.len() > 15 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, &d| n * 10 + usize::from(d - b'0')))
}

/// A request header's name; the MCP headers every call carries are matched here, without the
/// copy `HeaderName::from_bytes` makes of a name it does not know (`None`: not a valid name).
fn header_name(raw: &[u8]) -> Option<HeaderName> {
    for known in [SESSION, VERSION] {
        if raw.eq_ignore_ascii_case(known.as_str().as_bytes()) {
            return Some(known);
        }
    }
    HeaderName::from_bytes(raw).ok()
}

/// Whether a comma-separated header value lists `token` (any case).
fn has_token(v: &[u8], token: &[u8]) -> bool {
    v.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The status line and headers of a response: `length` is `None` for a response without a
/// body, `Some(None)` for a streamed (chunked) one.
fn write_head(
    out: &mut Vec<u8>,
    parts: &hyper::http::response::Parts,
    length: Option<Option<u64>>,
    close: bool,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING
            || name == header::CONNECTION
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match length {
        Some(Some(n)) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Some(None) => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        None => {}
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"date: ");
    date(out);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Appends the current time as an HTTP date (IMF-fixdate), formatted once a second per thread.
fn date(out: &mut Vec<u8>) {
    thread_local! {
        static CACHED: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHED.with_borrow_mut(|(secs, text)| {
        if *secs != now {
            *secs = now;
            *text = http_date(now);
        }
        out.extend_from_slice(text.as_bytes());
    });
}

fn http_date(secs: u64) -> String {
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(format).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Parse {
        parse(raw.as_bytes(), 1024)
    }

    #[test]
    fn a_post_with_a_length_is_taken_and_everything_else_goes_to_hyper() {
        let post = "POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}";
        let Parse::Take(h) = head(post) else {
            panic!("not taken")
        };
        assert_eq!(
            (h.len, h.body, h.count, h.close),
            (post.len() - 2, 2, 2, false)
        );
        assert_eq!(&post[h.path.range()], "/mcp");
        let closing = "POST / HTTP/1.1\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            head(closing),
            Parse::Take(Head { close: true, .. })
        ));
        assert!(matches!(
            head("POST /mcp HTTP/1.1\r\nhost: a\r\n"),
            Parse::Partial
        ));
        for other in [
            "GET /mcp HTTP/1.1\r\n\r\n",
            "POST /mcp HTTP/1.0\r\ncontent-length: 0\r\n\r\n",
            "POST /mcp HTTP/1.1\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 1\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ncontent-length: +1\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ncontent-length: 1025\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ncontent-length: 0\r\nexpect: 100-continue\r\n\r\n",
            "POST /mcp HTTP/1.1\r\ncontent-length: 0\r\nconnection: upgrade\r\n\r\n",
            "POST /mcp HTTP/1.1\r\nbad header\r\n\r\n",
        ] {
            assert!(matches!(head(other), Parse::Hyper), "{other:?}");
        }
    }

    #[test]
    fn dates_are_imf_fixdates() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    /// The names matched up front are the names `HeaderName` parses, in any case; the rest too.
    #[test]
    fn known_header_names_are_what_http_parses() {
        for raw in [
            "Host",
            "content-TYPE",
            "Content-Length",
            "ACCEPT",
            "User-Agent",
            "authorization",
            "Mcp-Session-Id",
            "MCP-Protocol-Version",
            "X-Other",
            "Accept-Encoding",
            "Hos",
            "bad name",
            "",
        ] {
            let ours = header_name(raw.as_bytes());
            assert_eq!(ours, HeaderName::from_bytes(raw.as_bytes()).ok(), "{raw}");
        }
    }
}
