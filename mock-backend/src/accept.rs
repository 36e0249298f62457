//! The project's one TCP accept loop, and the glue that serves HTTP on each connection.
//!
//! Every HTTP server in mcpbench (this backend and the root crate's servers) accepts through
//! [`serve_connections`], so socket options, accept-error handling and shutdown behave the same
//! everywhere. [`serve_http`] is the usual per-connection body: HTTP/1.1 or HTTP/2 (detected
//! from the preface) with graceful shutdown, over a plain socket or any other byte stream (a
//! TLS session, say).
//!
//! Limits against hostile clients, each costing nothing per request:
//!
//! - [`serve_connections_limited`] holds at most [`Connections::max`] connections open at once
//!   (one atomic per connection); a connection beyond it is sent a fixed refusal (an HTTP 503,
//!   say) and closed, instead of waiting for file descriptors or memory to run out.
//! - [`serve_http_with`] bounds how long a client may take to show its protocol and send a
//!   request head ([`HttpLimits::header_read_timeout`]), and how long a response may wait for a
//!   client that stopped reading ([`HttpLimits::write_stall`]), through [`Guarded`], the socket
//!   wrapper that also carries the connection's [`Slot`] (so a WebSocket that leaves hyper by an
//!   upgrade still counts).

use std::{
    error::Error as StdError,
    io,
    net::SocketAddr,
    pin::{Pin, pin},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use hyper::{Request, Response, body::Body, body::Incoming, service::Service};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto::{self, HttpServerConnExec},
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinError, JoinSet},
    time::Sleep,
};

/// How long in-flight connections get to finish after shutdown before they are aborted.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Pause after an accept error that is not about one connection (e.g. EMFILE): retrying at once
/// would spin a core while the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long a refused connection is given to take its refusal and close: the refusal is
/// written, the write side shut, and what the client still sends is read and dropped (closing a
/// socket with unread input resets it, and a reset can destroy the refusal before the client
/// reads it).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Refused connections lingering at once (see [`REFUSAL_LINGER`]); beyond it, a refused
/// connection is closed without a word, so a flood costs no more than this many small tasks.
const MAX_LINGERING: usize = 256;

/// The open connections of one server and the most it takes, shared by every accept loop of the
/// server (a gateway runs one per thread).
#[derive(Debug)]
pub struct Connections {
    open: AtomicUsize,
    lingering: AtomicUsize,
    max: usize,
}

impl Connections {
    /// At most `max` connections open at once (`usize::MAX`: no limit).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Connections {
            open: AtomicUsize::new(0),
            lingering: AtomicUsize::new(0),
            max,
        })
    }

    /// Connections open now (each holds a [`Slot`]).
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The most connections open at once.
    pub fn max(&self) -> usize {
        self.max
    }

    fn take(self: &Arc<Self>) -> Option<Slot> {
        let before = self.open.fetch_add(1, Ordering::Relaxed);
        if before >= self.max {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Slot(self.clone()))
    }
}

/// One open connection's place under [`Connections::max`]; dropping it frees the place. Keep it
/// with the socket (see [`Guarded`]), so it lives exactly as long as the connection.
#[derive(Debug)]
pub struct Slot(Arc<Connections>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a server admits connections: its limit, and what a connection beyond it is told.
#[derive(Debug, Clone)]
pub struct Admission {
    pub connections: Arc<Connections>,
    /// Written to a connection beyond the limit before it is closed (e.g. a complete HTTP/1.1
    /// `503` response with `Connection: close`); `None` closes it at once (a TLS listener, whose
    /// clients expect a handshake first).
    pub refusal: Option<Bytes>,
    /// Run each connection's task on the current thread's `LocalSet` (`spawn_local`) rather
    /// than on the runtime: a server whose per-thread work (e.g. a gateway's upstream
    /// sessions) lives in that `LocalSet` then wakes it without a trip through the runtime's
    /// scheduler (on a current-thread runtime, one `epoll_wait` per wake-up). Must be set only
    /// inside a `LocalSet`.
    pub local: bool,
}

/// Lets a connection task observe that the server is shutting down, so it can stop taking new
/// requests while finishing the ones in flight.
#[derive(Clone, Debug)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// Whether shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Completes once shutdown has begun (at once if it already has).
    pub async fn triggered(&mut self) {
        // An error means the accept loop is gone, which is shutdown too.
        let _ = self.rx.wait_for(|&down| down).await;
    }

    /// [`triggered`](Self::triggered) as a future of its own, for a connection that waits on
    /// it between many requests: kept and polled again, it registers its waker once instead
    /// of once per wait.
    pub fn owned_trigger(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut own = self.clone();
        async move { own.triggered().await }
    }
}

/// Accepts connections until `shutdown` completes, handing each to `on_conn` on its own task,
/// then waits up to [`DEFAULT_GRACE`] for in-flight connections.
///
/// See [`serve_connections_with_grace`].
pub async fn serve_connections<S, F, Fut>(listener: TcpListener, shutdown: S, on_conn: F)
where
    S: Future<Output = ()>,
    F: FnMut(TcpStream, SocketAddr, Shutdown) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    serve_connections_with_grace(listener, shutdown, DEFAULT_GRACE, on_conn).await;
}

/// Accepts connections until `shutdown` completes, then drains them for at most `grace`.
///
/// - Every accepted socket gets `TCP_NODELAY`: without it, small replies can wait ~40 ms for
///   the peer's delayed ACK, which would swamp the latencies a load test measures.
/// - Accept errors never end the loop: errors about one connection are skipped, others (EMFILE,
///   ENFILE, ENOBUFS) are logged and retried after a short backoff.
/// - On shutdown the listener is closed at once (new connections are refused), every
///   connection's [`Shutdown`] fires, and connections still running after `grace` are aborted.
pub async fn serve_connections_with_grace<S, F, Fut>(
    listener: TcpListener,
    shutdown: S,
    grace: Duration,
    mut on_conn: F,
) where
    S: Future<Output = ()>,
    F: FnMut(TcpStream, SocketAddr, Shutdown) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admission = Admission {
        connections: Connections::new(usize::MAX),
        refusal: None,
        local: false,
    };
    serve_connections_limited(
        listener,
        shutdown,
        grace,
        admission,
        move |s, peer, down, slot| {
            let conn = on_conn(s, peer, down);
            async move {
                let _slot = slot;
                conn.await;
            }
        },
    )
    .await;
}

/// [`serve_connections_with_grace`] with a limit on open connections: each accepted connection
/// takes a [`Slot`] (handed to `on_conn`, which keeps it as long as the socket lives); one
/// accepted when every slot is taken gets [`Admission::refusal`] and is closed, so a client
/// over the limit learns it at once rather than hanging in the listen backlog.
pub async fn serve_connections_limited<S, F, Fut>(
    listener: TcpListener,
    shutdown: S,
    grace: Duration,
    admission: Admission,
    mut on_conn: F,
) where
    S: Future<Output = ()>,
    F: FnMut(TcpStream, SocketAddr, Shutdown, Slot) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);

    loop {
        tokio::select! {
            biased;
            () = shutdown.as_mut() => break,
            // Reap finished connections as we go so the set does not grow with history.
            Some(done) = connections.join_next(), if !connections.is_empty() => log_join(done),
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if let Err(error) = stream.set_nodelay(true) {
                        tracing::debug!(%peer, %error, "could not set TCP_NODELAY");
                    }
                    match admission.connections.take() {
                        Some(slot) => {
                            let conn = on_conn(stream, peer, Shutdown { rx: rx.clone() }, slot);
                            if admission.local {
                                connections.spawn_local(conn);
                            } else {
                                connections.spawn(conn);
                            }
                        }
                        None => refuse(stream, peer, &admission),
                    }
                }
                Err(error) if is_connection_error(&error) => {
                    tracing::debug!(%error, "connection failed during accept");
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed; backing off");
                    tokio::select! {
                        () = shutdown.as_mut() => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    }
                }
            },
        }
    }

    drop(listener);
    // Receivers are held by the connections; nobody listening is fine.
    let _ = tx.send(true);
    let drained = tokio::time::timeout(grace, async {
        while let Some(done) = connections.join_next().await {
            log_join(done);
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = connections.len(),
            ?grace,
            "grace period over; aborting connections"
        );
        connections.shutdown().await;
    }
}

/// Sends a connection over the limit its refusal (on a task of its own, for at most
/// [`REFUSAL_LINGER`]) and closes it.
fn refuse(mut stream: TcpStream, peer: SocketAddr, admission: &Admission) {
    let c = &admission.connections;
    tracing::debug!(%peer, limit = c.max, "connection refused: too many open");
    let Some(refusal) = admission.refusal.clone() else {
        return;
    };
    if c.lingering.fetch_add(1, Ordering::Relaxed) >= MAX_LINGERING {
        c.lingering.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let c = c.clone();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&refusal).await?;
            stream.shutdown().await?;
            let mut drain = [0u8; 1024];
            while stream.read(&mut drain).await? > 0 {}
            Ok::<_, io::Error>(())
        })
        .await;
        c.lingering.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Errors that concern only the connection being accepted, not the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

fn log_join(result: Result<(), JoinError>) {
    if let Err(error) = result
        && error.is_panic()
    {
        tracing::error!(%error, "connection task panicked");
    }
}

/// Limits of one HTTP connection (see [`serve_http_with`]).
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// How long a client may take to show its protocol (the first bytes of a request head, or
    /// the HTTP/2 preface) and then, on HTTP/1, to send each whole request head; an idle
    /// keep-alive connection is closed after it too (hyper's rule). `None`: no limit.
    pub header_read_timeout: Option<Duration>,
    /// How long a write may wait for a client that stopped reading (its receive window and our
    /// socket buffer full) before the connection is closed with an error, dropping the
    /// response, and with it the work a streamed response drives. `None`: forever.
    pub write_stall: Option<Duration>,
    /// HTTP/2 streams open at once per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams: Option<u32>,
}

impl Default for HttpLimits {
    /// hyper's defaults (30 s for the head, 200 streams), and no write limit.
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Some(Duration::from_secs(30)),
            write_stall: None,
            max_streams: Some(200),
        }
    }
}

/// Serves HTTP/1.1 or HTTP/2 (prior knowledge, or negotiated by ALPN when `io` is a TLS
/// session) on one connection until the peer closes it, or until `shutdown` fires and the
/// requests in flight have been answered.
///
/// `io` is any byte stream: a `TcpStream`, or a TLS stream wrapping one. HTTP/1.1 upgrades
/// (WebSocket) are enabled; a service that never answers `101` is unaffected.
///
/// With [`HttpLimits::default`]: a client that opens a connection and never sends a request
/// cannot hold it for more than 30 s. See [`serve_http_with`].
pub async fn serve_http<I, S, B>(io: I, service: S, shutdown: Shutdown)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: HttpServerConnExec<S::Future, B>,
{
    serve_http_with(io, service, shutdown, HttpLimits::default(), None).await;
}

/// [`serve_http`] under `limits`, holding the connection's `slot` (if it has one) for as long
/// as the socket lives, an upgraded one (WebSocket) included.
pub async fn serve_http_with<I, S, B>(
    io: I,
    service: S,
    mut shutdown: Shutdown,
    limits: HttpLimits,
    slot: Option<Slot>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: HttpServerConnExec<S::Future, B>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams);
    let io = Guarded::new(io, slot, &limits);
    let conn = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    drive(conn, &mut shutdown, |c| c.graceful_shutdown()).await;
}

/// Drives a hyper connection to its end; when `shutdown` fires first, asks it to finish what
/// is in flight (`graceful`) and drives it to that end. An error ending it is logged.
async fn drive<C, E>(mut conn: Pin<&mut C>, shutdown: &mut Shutdown, graceful: fn(Pin<&mut C>))
where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.triggered() => {
            graceful(conn.as_mut());
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// What a connection's first bytes say it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    /// The first bytes are (so far) the HTTP/2 preface.
    Http2,
}

/// Peeks (does not read) a new plain-TCP connection's first bytes, within the head timeout:
/// `None` if the client closed or sent nothing in time (logged), else the protocol they begin.
///
/// Lighter on memory than [`serve_http_with`]'s detection for HTTP/1.1: an HTTP/1 client can
/// then be served by hyper's HTTP/1 connection directly ([`serve_h1`]). Through the
/// auto-detecting builder, the bytes it reads to decide come back to hyper as a short first
/// read, which makes hyper grow its read buffer from 8 to 16 KiB on every connection, and its
/// state machine (both protocols') sits in every connection's task.
pub async fn peek_protocol(stream: &TcpStream, limits: &HttpLimits) -> Option<Protocol> {
    let mut first = [0u8; 4];
    let peeked = match limits.header_read_timeout {
        Some(t) => tokio::time::timeout(t, stream.peek(&mut first))
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
        None => stream.peek(&mut first).await,
    };
    match peeked {
        Ok(0) => None,
        Ok(n) if first[..n] == H2_PREFACE[..n] => Some(Protocol::Http2),
        Ok(_) => Some(Protocol::Http1),
        Err(error) => {
            tracing::debug!(%error, "no request head within the header read timeout");
            None
        }
    }
}

/// hyper's HTTP/1.1 connection (upgrades enabled, its head timer from `limits`) on `io`, whose
/// protocol is known to be HTTP/1 and which already enforces the write limit (a [`Guarded`]),
/// until the peer closes it or `shutdown` fires and the request in flight is answered.
pub async fn serve_h1<I, S, B>(io: I, service: S, mut shutdown: Shutdown, limits: &HttpLimits)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = pin!(
        builder
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades()
    );
    drive(conn, &mut shutdown, |c| c.graceful_shutdown()).await;
}

/// A byte stream whose first reads return `prefix` (bytes already read from `io` by someone
/// who then handed the connection on), then read `io`; writes go to `io`.
#[derive(Debug)]
pub struct Replay<I> {
    prefix: Bytes,
    io: I,
}

impl<I> Replay<I> {
    pub fn new(prefix: Bytes, io: I) -> Self {
        Replay { prefix, io }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Replay<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = this.prefix.len().min(buf.remaining());
        buf.put_slice(&this.prefix.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Replay<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The HTTP/2 client preface: until a connection's first bytes either complete it or differ
/// from it, hyper-util cannot tell HTTP/1 from HTTP/2 (and hyper's HTTP/1 head timer has not
/// started yet).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection's socket with its limits: it holds the connection's [`Slot`], ends a connection
/// that has not shown its protocol within the head timeout (hyper's own timer only starts once
/// the protocol is known), and fails a write that has waited longer than the write-stall limit.
///
/// Costs on the hot path: one branch per read once the protocol is known, and one per write
/// that completes; a timer is armed only while a write waits (its `Sleep` is allocated once
/// per connection, then re-armed).
#[derive(Debug)]
pub struct Guarded<I> {
    io: I,
    _slot: Option<Slot>,
    /// Until the protocol is known: preface bytes matched so far, and the deadline.
    preface: Option<(usize, Pin<Box<Sleep>>)>,
    stall: Option<Stall>,
}

#[derive(Debug)]
struct Stall {
    after: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    /// A write is waiting and the timer runs for it.
    armed: bool,
}

impl Stall {
    /// After an attempt to write: whether it waited too long.
    fn check(&mut self, cx: &mut Context<'_>, pending: bool) -> io::Result<()> {
        if !pending {
            self.armed = false;
            return Ok(());
        }
        if !self.armed {
            let deadline = tokio::time::Instant::now() + self.after;
            match &mut self.timer {
                Some(t) => t.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = true;
        }
        match self.timer.as_mut().map(|t| t.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "write stalled: the client stopped reading",
            )),
            _ => Ok(()),
        }
    }
}

impl<I> Guarded<I> {
    /// `io` under `limits`, holding `slot`.
    pub fn new(io: I, slot: Option<Slot>, limits: &HttpLimits) -> Self {
        Guarded {
            io,
            _slot: slot,
            preface: limits
                .header_read_timeout
                .map(|d| (0, Box::pin(tokio::time::sleep(d)))),
            stall: limits.write_stall.map(|after| Stall {
                after,
                timer: None,
                armed: false,
            }),
        }
    }

    /// [`new`](Self::new) for a connection whose protocol is already known (hyper's own head
    /// timer bounds it from the start): no preface deadline.
    pub fn with_protocol_known(io: I, slot: Option<Slot>, limits: &HttpLimits) -> Self {
        let limits = HttpLimits {
            header_read_timeout: None,
            ..*limits
        };
        Self::new(io, slot, &limits)
    }

    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match &mut self.stall {
            Some(s) => match s.check(cx, r.is_pending()) {
                Ok(()) => r,
                Err(e) => Poll::Ready(Err(e)),
            },
            None => r,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Guarded<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Some((matched, deadline)) = &mut this.preface {
            match r {
                Poll::Ready(Ok(())) => {
                    let new = &buf.filled()[before..];
                    let rest = &H2_PREFACE[*matched..];
                    let n = new.len().min(rest.len());
                    if new[..n] != rest[..n] || *matched + n == H2_PREFACE.len() {
                        // HTTP/1 (hyper's head timer takes over) or HTTP/2.
                        this.preface = None;
                    } else {
                        *matched += n;
                    }
                }
                Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request head within the header read timeout",
                    )));
                }
                _ => {}
            }
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Guarded<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.after_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_shutdown(cx);
        this.after_write(cx, r)
    }
}
