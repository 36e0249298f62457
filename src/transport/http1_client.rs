//! A minimal HTTP/1.1 client connection for the load generator's hot path.
//!
//! Why not hyper's client here: a request through hyper builds a `Request`, a `HeaderMap` and
//! boxed body frames, and hands the connection to a background task — several allocations and a
//! task hop per request. A load generator sends the same request shape millions of times, so
//! like wrk and h2load it writes a pre-rendered head, parses the response head in place with
//! `httparse`, and streams the body (Content-Length, chunked or close-delimited) out of one
//! reused buffer. After warm-up it allocates nothing per request. (The reference server, which
//! must be a realistic best case rather than a trick, uses hyper.)

use std::io;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::spare;

/// Bound on a response head.
const MAX_HEAD: usize = 64 * 1024;
const READ_CHUNK: usize = 16 * 1024;

/// A keep-alive connection idle this long is checked with [`Http1Conn::peer_closed`] before
/// reuse.
pub const IDLE_PROBE: std::time::Duration = std::time::Duration::from_millis(250);

/// What went wrong on the wire.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection before a complete response.
    #[error("connection closed before the response was complete")]
    Closed,
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
    #[error("response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
}

/// Parses a response head at the start of `buf` and hands it to `f`: `Ok(None)` while
/// incomplete, else the head's length and `f`'s answer. Header slots are left uninitialised:
/// an initialised array would be a 2 KiB memset per parse attempt.
pub(crate) fn parse_head<T>(
    buf: &[u8],
    f: impl FnOnce(&httparse::Response<'_, '_>) -> T,
) -> Result<Option<(usize, T)>, httparse::Error> {
    let mut headers = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; 64];
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    )? {
        httparse::Status::Complete(n) => Ok(Some((n, f(&resp)))),
        httparse::Status::Partial => Ok(None),
    }
}

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// The response's media type, as far as MCP cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    Json,
    EventStream,
    Other,
    Missing,
}

/// The parts of a response head the generator uses.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead {
    pub status: u16,
    pub content: ContentKind,
    pub framing: Framing,
    pub keep_alive: bool,
}

/// Headers whose values the caller wants copied out of the last response head, into buffers
/// reused from one response to the next (servers may repeat `Mcp-Session-Id` on every response).
#[derive(Debug, Default)]
pub struct Captured {
    session_id: Vec<u8>,
    has_session_id: bool,
    /// The timing header to read, and what the last head's said (ms).
    timing: Option<super::TimingHeader>,
    timing_ms: Option<f64>,
    /// `Retry-After` of the last head, in seconds (the delta-seconds form).
    retry_after: Option<u64>,
    /// The last head's media type, and its `Content-Type` as written when it is one MCP does
    /// not use (copied then only: for messages).
    content: Option<ContentKind>,
    other_type: Vec<u8>,
}

impl Captured {
    /// `Mcp-Session-Id` of the last response head, if it had one.
    pub fn session_id(&self) -> Option<&[u8]> {
        self.has_session_id.then_some(&self.session_id[..])
    }

    /// Also reads this timing header from every response head.
    pub fn with_timing(timing: Option<super::TimingHeader>) -> Self {
        Captured {
            timing,
            ..Captured::default()
        }
    }

    /// The time the last response head's timing header reported.
    pub fn timing(&self) -> Option<std::time::Duration> {
        self.timing_ms
            .map(|ms| std::time::Duration::from_secs_f64(ms / 1000.0))
    }

    /// `Retry-After` of the last response head (a 429's or 503's advice), in its delta-seconds
    /// form; an HTTP date is not read.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after.map(std::time::Duration::from_secs)
    }

    /// Records the `Retry-After` of a response head (HTTP/2).
    pub fn set_retry_after(&mut self, value: Option<&[u8]>) {
        self.retry_after = value.and_then(retry_seconds);
    }

    /// Records the timing header of a response head (HTTP/2, whose heads are parsed by hyper).
    pub fn set_timing(&mut self, value: Option<&[u8]>) {
        self.timing_ms = match (&self.timing, value) {
            (Some(t), Some(v)) => t.value_ms(v),
            _ => None,
        };
    }

    /// The `Content-Type` of the last response head, for messages: `None` when it had none.
    pub fn content_type(&self) -> Option<String> {
        match self.content? {
            ContentKind::Json => Some("application/json".into()),
            ContentKind::EventStream => Some("text/event-stream".into()),
            ContentKind::Other => Some(String::from_utf8_lossy(&self.other_type).into_owned()),
            ContentKind::Missing => None,
        }
    }

    /// Records the `Content-Type` of a response head (`None`: it had none).
    pub fn set_content_type(&mut self, value: Option<&[u8]>) -> ContentKind {
        let kind = value.map_or(ContentKind::Missing, content_kind);
        self.content = Some(kind);
        self.other_type.clear();
        if kind == ContentKind::Other {
            self.other_type
                .extend_from_slice(trim(value.unwrap_or_default()));
        }
        kind
    }

    /// Records the `Mcp-Session-Id` of a response head (`None`: it had none).
    pub fn set_session_id(&mut self, value: Option<&[u8]>) {
        self.session_id.clear();
        self.session_id.extend_from_slice(value.unwrap_or_default());
        self.has_session_id = value.is_some();
    }
}

/// What [`Http1Conn::take_plain`] found in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffered {
    /// A plain answer, consumed.
    Plain,
    /// The start of what may be a plain answer: read on.
    Wait,
    /// Something else (another status, type or framing, an interim or malformed head): left
    /// for the reader that handles everything.
    Other,
}

/// One HTTP/1.1 connection over any byte stream (TCP, TLS).
#[derive(Debug)]
pub struct Http1Conn<S> {
    io: S,
    /// The read buffer: a spare one (see `spare`) taken when a read needs it, given back
    /// when the connection rests with nothing buffered.
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    reusable: bool,
    /// The body of the last response, while not fully read.
    body: Option<BodyState>,
}

/// How much of the current body is left.
#[derive(Debug, Clone)]
enum BodyState {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Http1Conn<S> {
    pub fn new(io: S) -> Self {
        Http1Conn {
            io,
            buf: Vec::new(),
            pos: 0,
            len: 0,
            reusable: true,
            body: None,
        }
    }

    /// False once the connection must not carry another request (closed, `Connection:
    /// close`, a body left unread).
    pub fn is_reusable(&self) -> bool {
        self.reusable && self.body.is_none()
    }

    /// No byte of a response is buffered (after a failed [`Http1Conn::read_head`]: the peer
    /// closed or reset the connection before answering at all).
    pub fn nothing_received(&self) -> bool {
        self.len == self.pos
    }

    /// True while the last response's body has not been read to its end.
    pub fn body_pending(&self) -> bool {
        self.body.is_some()
    }

    /// Checks, without blocking, whether the peer has closed (or reset) this idle connection.
    /// Servers close idle keep-alive connections (Node after 5 s, hyper's header-read timeout
    /// after 30 s, nginx after 75 s); a request sent on one would fail through no fault of the
    /// server's request handling. Bytes that arrived unasked are kept for the next read.
    pub fn peer_closed(&mut self) -> bool {
        if !self.is_reusable() {
            return true;
        }
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        }
        let lent = self.buf.is_empty();
        if lent {
            self.buf = spare::take_read(READ_CHUNK);
        }
        if self.len == self.buf.len() {
            return false;
        }
        let closed = self.poll_idle();
        if lent {
            self.rest();
        }
        closed
    }

    /// One non-blocking read of an idle connection: true if the peer closed (or reset) it.
    fn poll_idle(&mut self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut rb = tokio::io::ReadBuf::new(&mut self.buf[self.len..]);
        match std::pin::Pin::new(&mut self.io).poll_read(&mut cx, &mut rb) {
            std::task::Poll::Pending => false,
            std::task::Poll::Ready(Ok(())) if !rb.filled().is_empty() => {
                self.len += rb.filled().len();
                false
            }
            std::task::Poll::Ready(_) => {
                self.reusable = false;
                true
            }
        }
    }

    /// Gives the read buffer back to the thread's spares if nothing is buffered in it (the
    /// connection waits between exchanges); the next read takes one again.
    pub fn rest(&mut self) {
        if self.pos == self.len && self.body.is_none() {
            self.pos = 0;
            self.len = 0;
            spare::give_read(std::mem::take(&mut self.buf));
        }
    }

    /// Writes a complete, pre-rendered request.
    pub async fn send(&mut self, request: &[u8]) -> Result<(), HttpError> {
        if let Err(e) = self.io.write_all(request).await {
            self.reusable = false;
            return Err(e.into());
        }
        Ok(())
    }

    async fn fill(&mut self) -> Result<usize, HttpError> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// One read into the buffer (0: the peer closed). A resting connection (no buffer held)
    /// first waits for the stream to be readable with a read of nothing (TCP; a TLS stream
    /// returns at once), then takes a spare buffer.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, HttpError>> {
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        }
        if self.buf.is_empty() {
            let mut none = tokio::io::ReadBuf::new(&mut []);
            if let Err(e) = ready!(Pin::new(&mut self.io).poll_read(cx, &mut none)) {
                self.reusable = false;
                return Poll::Ready(Err(e.into()));
            }
            self.buf = spare::take_read(READ_CHUNK);
        }
        if self.buf.len() - self.len < READ_CHUNK / 2 {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.len, 0);
                self.len -= self.pos;
                self.pos = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let mut rb = tokio::io::ReadBuf::new(&mut self.buf[self.len..]);
        match ready!(Pin::new(&mut self.io).poll_read(cx, &mut rb)) {
            Ok(()) => {
                let n = rb.filled().len();
                self.len += n;
                Poll::Ready(Ok(n))
            }
            Err(e) => {
                self.reusable = false;
                Poll::Ready(Err(e.into()))
            }
        }
    }

    /// Writes what is left of `request` after its first `*written` bytes, as far as the stream
    /// takes it without waiting.
    pub fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        request: &[u8],
        written: &mut usize,
    ) -> Poll<Result<(), HttpError>> {
        while *written < request.len() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &request[*written..])) {
                Ok(n) if n > 0 => *written += n,
                Ok(_) => {
                    self.reusable = false;
                    return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
                }
                Err(e) => {
                    self.reusable = false;
                    return Poll::Ready(Err(e.into()));
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// The plain answer, if the buffer holds it whole: a final head with status 200, a JSON
    /// body delimited by `Content-Length` (at most `max` bytes) and the body itself. Then
    /// head and body are consumed, the body handed to `take`, and the connection stays
    /// reusable as the head says. Anything else is left in the buffer for
    /// [`Http1Conn::read_head`]: `Other`; or `Wait` while such an answer is incomplete.
    pub fn take_plain(
        &mut self,
        captured: &mut Captured,
        max: usize,
        take: impl FnOnce(&[u8]),
    ) -> Buffered {
        let avail = &self.buf[self.pos..self.len];
        let parsed = parse_head(avail, |resp| {
            (resp.code.unwrap_or(0), interpret(resp, captured))
        });
        let (n, head) = match parsed {
            Ok(None) if avail.len() <= MAX_HEAD => return Buffered::Wait,
            Ok(Some((n, (200, Ok(head))))) if n <= MAX_HEAD => (n, head),
            _ => return Buffered::Other,
        };
        let Framing::Length(len) = head.framing else {
            return Buffered::Other;
        };
        if head.content != ContentKind::Json || len > max as u64 {
            return Buffered::Other;
        }
        let len = len as usize;
        if avail.len() - n < len {
            return Buffered::Wait;
        }
        take(&avail[n..n + len]);
        self.pos += n + len;
        if !head.keep_alive {
            self.reusable = false;
        }
        Buffered::Plain
    }

    /// Reads the response head (skipping interim 1xx responses). Header values listed in
    /// [`Captured`] are copied into `captured`.
    pub async fn read_head(&mut self, captured: &mut Captured) -> Result<ResponseHead, HttpError> {
        loop {
            if self.len > self.pos {
                let parsed = parse_head(&self.buf[self.pos..self.len], |resp| {
                    (resp.code.unwrap_or(0), interpret(resp, captured))
                });
                match parsed {
                    // The same bound whether the head came in one read or in pieces.
                    Ok(Some((n, _))) if n > MAX_HEAD => {
                        self.reusable = false;
                        return Err(HttpError::HeadTooLarge);
                    }
                    Ok(Some((n, (status, head)))) => {
                        self.pos += n;
                        let head = head?;
                        if (100..200).contains(&status) && status != 101 {
                            continue;
                        }
                        if !head.keep_alive {
                            self.reusable = false;
                        }
                        self.body = match head.framing {
                            Framing::None => None,
                            Framing::Length(n) => Some(BodyState::Length(n)),
                            Framing::Chunked => Some(BodyState::Chunked(Chunked::default())),
                            Framing::UntilClose => Some(BodyState::UntilClose),
                        };
                        return Ok(head);
                    }
                    Ok(None) => {
                        if self.len - self.pos > MAX_HEAD {
                            self.reusable = false;
                            return Err(HttpError::HeadTooLarge);
                        }
                    }
                    Err(_) => {
                        self.reusable = false;
                        return Err(HttpError::Malformed("bad status line or header"));
                    }
                }
            }
            if self.fill().await? == 0 {
                self.reusable = false;
                return Err(HttpError::Closed);
            }
        }
    }

    /// Streams the rest of the current body to `sink`. If `sink` breaks, reading stops there
    /// and can be resumed by another call (e.g. [`Http1Conn::discard_body`]).
    pub async fn read_body<F>(&mut self, mut sink: F) -> Result<ControlFlow<()>, HttpError>
    where
        F: FnMut(&[u8]) -> ControlFlow<()>,
    {
        let r = self.read_body_inner(&mut sink).await;
        if r.is_err() {
            self.reusable = false;
            self.body = None;
        }
        r
    }

    /// Reads the rest of the current body and throws it away.
    pub async fn discard_body(&mut self) -> Result<(), HttpError> {
        self.read_body(|_| ControlFlow::Continue(()))
            .await
            .map(|_| ())
    }

    async fn read_body_inner<F>(&mut self, sink: &mut F) -> Result<ControlFlow<()>, HttpError>
    where
        F: FnMut(&[u8]) -> ControlFlow<()>,
    {
        loop {
            let Some(state) = self.body.as_mut() else {
                return Ok(ControlFlow::Continue(()));
            };
            if self.pos < self.len {
                let avail = &self.buf[self.pos..self.len];
                let (used, done, flow) = match state {
                    BodyState::Length(remaining) => {
                        let take = (*remaining).min(avail.len() as u64) as usize;
                        let flow = sink(&avail[..take]);
                        *remaining -= take as u64;
                        (take, *remaining == 0, flow)
                    }
                    BodyState::UntilClose => (avail.len(), false, sink(avail)),
                    BodyState::Chunked(dec) => {
                        let (used, status) = dec.decode(avail, sink)?;
                        let flow = if status == ChunkStatus::Break {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        };
                        (used, status == ChunkStatus::Done, flow)
                    }
                };
                self.pos += used;
                if done {
                    self.body = None;
                    return Ok(ControlFlow::Continue(()));
                }
                if flow.is_break() {
                    return Ok(flow);
                }
            }
            if self.fill().await? == 0 {
                let until_close = matches!(self.body, Some(BodyState::UntilClose));
                self.body = None;
                self.reusable = false;
                return if until_close {
                    Ok(ControlFlow::Continue(()))
                } else {
                    Err(HttpError::Closed)
                };
            }
        }
    }

    /// Gives back the stream (e.g. to shut it down).
    pub fn into_inner(self) -> S {
        self.io
    }

    /// The stream.
    pub fn io(&self) -> &S {
        &self.io
    }

    /// The same connection (its buffered bytes, the state of its response) over the stream
    /// `f` makes of this one; `None` if it cannot (the connection is then gone).
    pub fn map_io<T>(self, f: impl FnOnce(S) -> Option<T>) -> Option<Http1Conn<T>> {
        Some(Http1Conn {
            io: f(self.io)?,
            buf: self.buf,
            pos: self.pos,
            len: self.len,
            reusable: self.reusable,
            body: self.body,
        })
    }
}

fn interpret(
    resp: &httparse::Response<'_, '_>,
    captured: &mut Captured,
) -> Result<ResponseHead, HttpError> {
    let status = resp.code.ok_or(HttpError::Malformed("no status"))?;
    let mut content = captured.set_content_type(None);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut keep_alive = resp.version == Some(1);
    captured.set_session_id(None);
    captured.timing_ms = None;
    captured.retry_after = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(HttpError::Malformed("bad content-length"))?;
            if length.is_some_and(|l| l != v) {
                return Err(HttpError::Malformed("conflicting content-length"));
            }
            length = Some(v);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"content-type") {
            content = captured.set_content_type(Some(h.value));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|&b| b == b',') {
                let t = trim(token);
                if t.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case(b"mcp-session-id") {
            captured.set_session_id(Some(h.value));
        } else if name.eq_ignore_ascii_case(b"retry-after") {
            captured.retry_after = retry_seconds(h.value);
        } else if let Some(t) = &captured.timing
            && name.eq_ignore_ascii_case(t.name.as_bytes())
        {
            captured.timing_ms = t.value_ms(h.value);
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        if n == 0 {
            Framing::None
        } else {
            Framing::Length(n)
        }
    } else {
        keep_alive = false;
        Framing::UntilClose
    };
    Ok(ResponseHead {
        status,
        content,
        framing,
        keep_alive,
    })
}

/// A `Retry-After` in delta-seconds.
fn retry_seconds(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(trim(v)).ok()?.parse().ok()
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

fn last_token(v: &[u8]) -> &[u8] {
    trim(v.rsplit(|&b| b == b',').next().unwrap_or(v))
}

/// Classifies a `Content-Type` value by its media type (parameters ignored).
pub fn content_kind(v: &[u8]) -> ContentKind {
    let media = trim(v.split(|&b| b == b';').next().unwrap_or(v));
    if media.eq_ignore_ascii_case(b"application/json") {
        ContentKind::Json
    } else if media.eq_ignore_ascii_case(b"text/event-stream") {
        ContentKind::EventStream
    } else {
        ContentKind::Other
    }
}

/// Progress of a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkStatus {
    NeedMore,
    Done,
    Break,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size { n: u64, digits: u8, ext: bool },
    SizeLf,
    Data(u64),
    DataCr,
    DataLf,
    Trailer { line_start: bool },
    Done,
}

/// Incremental decoder for `Transfer-Encoding: chunked`.
#[derive(Debug, Clone)]
pub struct Chunked {
    state: ChunkState,
    size: u64,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked {
            state: ChunkState::Size {
                n: 0,
                digits: 0,
                ext: false,
            },
            size: 0,
        }
    }
}

impl Chunked {
    /// Decodes what it can of `input`, passing data to `sink`; returns the bytes used.
    pub fn decode<F>(
        &mut self,
        input: &[u8],
        sink: &mut F,
    ) -> Result<(usize, ChunkStatus), HttpError>
    where
        F: FnMut(&[u8]) -> ControlFlow<()>,
    {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                ChunkState::Size { n, digits, ext } => {
                    i += 1;
                    match b {
                        b'\r' if digits > 0 => {
                            self.size = n;
                            self.state = ChunkState::SizeLf;
                        }
                        b'\n' if digits > 0 => self.end_size(n),
                        _ if ext => {}
                        b';' | b' ' | b'\t' if digits > 0 => {
                            self.state = ChunkState::Size {
                                n,
                                digits,
                                ext: true,
                            }
                        }
                        _ => {
                            let d = (b as char)
                                .to_digit(16)
                                .ok_or(HttpError::Malformed("bad chunk size"))?;
                            // At most 15 significant hex digits; leading zeros are fine.
                            if n >= 1 << 56 {
                                return Err(HttpError::Malformed("chunk size too large"));
                            }
                            self.state = ChunkState::Size {
                                n: n * 16 + d as u64,
                                digits: digits.saturating_add(1),
                                ext,
                            };
                        }
                    }
                }
                ChunkState::SizeLf => {
                    i += 1;
                    if b != b'\n' {
                        return Err(HttpError::Malformed("bad chunk size line"));
                    }
                    self.end_size(self.size);
                }
                ChunkState::Data(rem) => {
                    let take = rem.min((input.len() - i) as u64) as usize;
                    let flow = sink(&input[i..i + take]);
                    i += take;
                    let rem = rem - take as u64;
                    self.state = if rem == 0 {
                        ChunkState::DataCr
                    } else {
                        ChunkState::Data(rem)
                    };
                    if flow.is_break() {
                        return Ok((i, ChunkStatus::Break));
                    }
                }
                ChunkState::DataCr => {
                    i += 1;
                    self.state = match b {
                        b'\r' => ChunkState::DataLf,
                        b'\n' => ChunkState::Size {
                            n: 0,
                            digits: 0,
                            ext: false,
                        },
                        _ => return Err(HttpError::Malformed("chunk data not followed by CRLF")),
                    };
                }
                ChunkState::DataLf => {
                    i += 1;
                    if b != b'\n' {
                        return Err(HttpError::Malformed("chunk data not followed by CRLF"));
                    }
                    self.state = ChunkState::Size {
                        n: 0,
                        digits: 0,
                        ext: false,
                    };
                }
                ChunkState::Trailer { line_start } => {
                    i += 1;
                    match b {
                        b'\n' if line_start => {
                            self.state = ChunkState::Done;
                            return Ok((i, ChunkStatus::Done));
                        }
                        b'\n' => self.state = ChunkState::Trailer { line_start: true },
                        b'\r' => {}
                        _ => self.state = ChunkState::Trailer { line_start: false },
                    }
                }
                ChunkState::Done => return Ok((i, ChunkStatus::Done)),
            }
        }
        let status = if self.state == ChunkState::Done {
            ChunkStatus::Done
        } else {
            ChunkStatus::NeedMore
        };
        Ok((i, status))
    }

    fn end_size(&mut self, n: u64) {
        self.state = if n == 0 {
            ChunkState::Trailer { line_start: true }
        } else {
            ChunkState::Data(n)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn dechunk(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), HttpError> {
        let mut d = Chunked::default();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut fed_to = 0;
        while fed_to < input.len() {
            fed_to = (fed_to + step).min(input.len());
            // feed everything not yet consumed, as a real buffer would
            let (used, st) = d.decode(&input[pos..fed_to], &mut |b: &[u8]| {
                out.extend_from_slice(b);
                ControlFlow::Continue(())
            })?;
            pos += used;
            if st == ChunkStatus::Done {
                return Ok((out, pos));
            }
        }
        Err(HttpError::Closed)
    }

    #[test]
    fn chunked_in_every_step_size() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        for step in 1..body.len() {
            let (out, used) = dechunk(body, step).unwrap();
            assert_eq!(out, b"hello, world");
            assert_eq!(&body[used..], b"NEXT", "step {step}");
        }
    }

    #[test]
    fn chunked_rejects_garbage() {
        assert!(dechunk(b"zz\r\nhello\r\n0\r\n\r\n", 64).is_err());
        assert!(dechunk(b"5\r\nhelloXX0\r\n\r\n", 64).is_err());
        assert!(dechunk(b"ffffffffffffffffff\r\n", 64).is_err());
    }

    /// Found by the fuzz targets: leading zeros in a chunk size are valid (httparse agrees).
    #[test]
    fn chunk_sizes_may_have_leading_zeros() {
        let body = b"0000000000000005\r\nhello\r\n00000000000000000000\r\n\r\n";
        assert_eq!(dechunk(body, 3).unwrap().0, b"hello");
        assert!(
            dechunk(b"1000000000000000\r\n", 64).is_err(),
            "16 significant digits"
        );
    }

    /// Found by the fuzz targets: a head over the bound is refused whether it arrives in one
    /// read or in pieces.
    #[tokio::test]
    async fn a_head_over_the_bound_is_refused_however_it_arrives() {
        let mut head = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        head.resize(head.len() + MAX_HEAD, b'a');
        head.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
        let (client, mut server) = tokio::io::duplex(1 << 20);
        server.write_all(&head).await.unwrap();
        let mut conn = Http1Conn::new(client);
        let r = conn.read_head(&mut Captured::default()).await;
        assert!(matches!(r, Err(HttpError::HeadTooLarge)), "{r:?}");
    }

    #[test]
    fn content_kinds() {
        assert_eq!(
            content_kind(b"application/json; charset=utf-8"),
            ContentKind::Json
        );
        assert_eq!(content_kind(b"Text/Event-Stream"), ContentKind::EventStream);
        assert_eq!(content_kind(b"text/plain"), ContentKind::Other);
    }

    async fn roundtrip(
        response: &'static [u8],
    ) -> (Result<ResponseHead, HttpError>, Vec<u8>, Captured) {
        let (client, mut server) = tokio::io::duplex(64);
        tokio::spawn(async move {
            let mut sink = [0u8; 256];
            let _ = server.read(&mut sink).await;
            for piece in response.chunks(7) {
                if server.write_all(piece).await.is_err() {
                    return;
                }
            }
        });
        let mut conn = Http1Conn::new(client);
        conn.send(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut cap = Captured::default();
        let head = conn.read_head(&mut cap).await;
        let mut body = Vec::new();
        if head.is_ok() {
            let _ = conn
                .read_body(|b| {
                    body.extend_from_slice(b);
                    ControlFlow::Continue(())
                })
                .await;
        }
        (head, body, cap)
    }

    #[tokio::test]
    async fn captured_headers_are_those_of_the_last_head() {
        let (client, mut server) = tokio::io::duplex(4096);
        server
            .write_all(b"HTTP/1.1 200 OK\r\nMcp-Session-Id: s-1\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nmcp-session-id: s-22\r\nContent-Length: 0\r\n\r\n")
            .await
            .unwrap();
        let mut conn = Http1Conn::new(client);
        let mut cap = Captured::default();
        let mut seen = Vec::new();
        for _ in 0..3 {
            conn.read_head(&mut cap).await.unwrap();
            seen.push(cap.session_id().map(<[u8]>::to_vec));
        }
        assert_eq!(seen, [Some(b"s-1".to_vec()), None, Some(b"s-22".to_vec())]);
    }

    #[tokio::test]
    async fn reads_length_chunked_and_close_delimited_bodies() {
        let (h, b, c) = roundtrip(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: abc\r\nContent-Length: 4\r\n\r\n{}{}",
        )
        .await;
        let h = h.unwrap();
        assert_eq!(
            (h.status, h.content, h.keep_alive),
            (200, ContentKind::Json, true)
        );
        assert_eq!(b, b"{}{}");
        assert_eq!(c.session_id(), Some(&b"abc"[..]));

        let (h, b, _) = roundtrip(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        )
        .await;
        assert_eq!(h.unwrap().framing, Framing::Chunked);
        assert_eq!(b, b"abc");

        let (h, b, _) = roundtrip(b"HTTP/1.0 200 OK\r\n\r\nuntil close").await;
        let h = h.unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
        assert_eq!(b, b"until close");
    }

    #[tokio::test]
    async fn truncation_and_garbage_are_errors() {
        let (h, _, _) = roundtrip(b"HTTP/1.1 200 OK\r\nContent-Le").await;
        assert!(matches!(h, Err(HttpError::Closed)));
        let (h, _, _) = roundtrip(b"garbage garbage\r\n\r\n").await;
        assert!(matches!(h, Err(HttpError::Malformed(_))));
        let (h, _, _) = roundtrip(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").await;
        assert!(matches!(h, Err(HttpError::Malformed(_))));
    }
}
