//! The project's one TCP accept loop, and the glue that serves HTTP on each connection.
//!
//! Every HTTP server in mcpbench (this backend and the root crate's servers) accepts through
//! [`serve_connections`], so socket options, accept-error handling and shutdown behave the same
//! everywhere. [`serve_http`] is the usual per-connection body: HTTP/1.1 or HTTP/2 (detected
//! from the preface) with graceful shutdown, over a plain socket or any other byte stream (a
//! TLS session, say).

use std::{error::Error as StdError, io, net::SocketAddr, pin::pin, time::Duration};

use hyper::{Request, Response, body::Body, body::Incoming, service::Service};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto::{self, HttpServerConnExec},
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinError, JoinSet},
};

/// How long in-flight connections get to finish after shutdown before they are aborted.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Pause after an accept error that is not about one connection (e.g. EMFILE): retrying at once
/// would spin a core while the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

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
                    connections.spawn(on_conn(stream, peer, Shutdown { rx: rx.clone() }));
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

/// Serves HTTP/1.1 or HTTP/2 (prior knowledge, or negotiated by ALPN when `io` is a TLS
/// session) on one connection until the peer closes it, or until `shutdown` fires and the
/// requests in flight have been answered.
///
/// `io` is any byte stream: a `TcpStream`, or a TLS stream wrapping one. HTTP/1.1 upgrades
/// (WebSocket) are enabled; a service that never answers `101` is unaffected.
///
/// A timer is installed so hyper's HTTP/1 header-read timeout works: a client that opens a
/// connection and never sends a request cannot hold it forever.
pub async fn serve_http<I, S, B>(io: I, service: S, mut shutdown: Shutdown)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: HttpServerConnExec<S::Future, B>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new());
    builder.http2().timer(TokioTimer::new());
    let mut conn = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.triggered() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}
