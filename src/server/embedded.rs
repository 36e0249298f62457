//! The reference server (and, unless an external backend is given, the mock backend) running
//! in-process on their own runtime thread: `mcpbench run` without a target uses them on
//! 127.0.0.1 ephemeral ports, `mcpbench serve` on the address it is given. [`run_stdio`] is
//! `mcpbench serve --stdio`: the same, with stdin/stdout instead of a listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Config, ResponseMode, State, serve_state, serve_stdio_with};

/// Why the servers could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the servers' runtime: {0}")]
    Runtime(std::io::Error),
    #[error("invalid mock backend settings: {0}")]
    Backend(#[from] mock_backend::Error),
    #[error("stdio: {0}")]
    Stdio(std::io::Error),
    #[error("policy tool patterns that match no tool (a typo would deny silently): {}; tools: {}", .0.join(", "), .1.join(", "))]
    Policy(Vec<String>, Vec<String>),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Address of the MCP server.
    pub listen: SocketAddr,
    /// Server settings; with `backend: None` a mock backend is started on 127.0.0.1:0.
    pub config: Config,
    /// Settings of that mock backend.
    pub backend: mock_backend::Config,
    /// Runtime threads.
    pub threads: usize,
}

/// Running servers; dropping this shuts them down gracefully and waits for them.
#[derive(Debug)]
pub struct EmbeddedServers {
    pub mcp_addr: SocketAddr,
    /// Serving HTTPS/WSS.
    pub tls: bool,
    /// The REST backend the server's tools call (started here or given).
    pub backend_url: String,
    /// The in-process mock backend, when one was started.
    pub backend_addr: Option<SocketAddr>,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// A gateway's other server threads.
    extra: Vec<JoinHandle<()>>,
}

/// Completes when `rx` says the servers are shutting down.
async fn wait(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|d| *d).await;
}

/// One server thread (inside a `LocalSet`): the proxy's lane for this thread, if it has one,
/// and the server on `listener` until `down`; then the lane closes its sessions.
async fn serve_thread(
    listener: std::net::TcpListener,
    state: Arc<State>,
    down: tokio::sync::watch::Receiver<bool>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        tracing::error!("cannot register the server's listener");
        return;
    };
    let proxy = state.config.proxy.clone();
    let lane = proxy
        .as_ref()
        .and_then(|p| p.lane())
        .map(tokio::task::spawn_local);
    serve_state(listener, state, wait(down)).await;
    if let (Some(p), Some(lane)) = (proxy, lane) {
        p.end_lane();
        let _ = tokio::time::timeout(Duration::from_secs(5), lane).await;
    }
}

/// Backlog of the listeners (the kernel caps it at `somaxconn`): an opening storm of thousands
/// of connections at once waits in it instead of having its handshakes dropped and retried
/// seconds later (std's `TcpListener::bind` asks for 128).
const BACKLOG: i32 = 4096;

/// A listener on `addr`. `shared` sets `SO_REUSEPORT` (Linux): other processes (and sockets)
/// with it set may bind the same address, and the kernel spreads new connections over their
/// listeners; elsewhere it is not asked for (its meaning differs).
fn bind(addr: SocketAddr, shared: bool) -> Result<std::net::TcpListener, EmbeddedError> {
    use socket2::{Domain, Socket, Type};
    let bound = || {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        #[cfg(unix)]
        s.set_reuse_address(true)?;
        #[cfg(target_os = "linux")]
        if shared {
            s.set_reuse_port(true)?;
        }
        #[cfg(not(target_os = "linux"))]
        let _ = shared;
        s.bind(&addr.into())?;
        s.listen(BACKLOG)?;
        s.set_nonblocking(true)?;
        Ok(s.into())
    };
    bound().map_err(|source| EmbeddedError::Bind { addr, source })
}

impl EmbeddedServers {
    /// The reference server and a mock backend on 127.0.0.1 ephemeral ports.
    pub fn start(
        response: ResponseMode,
        catalog: usize,
        page_size: usize,
        knobs: mock_backend::Knobs,
        threads: usize,
    ) -> Result<Self, EmbeddedError> {
        Self::launch(Launch {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            config: Config {
                response,
                catalog,
                page_size,
                ..Config::default()
            },
            backend: mock_backend::Config {
                defaults: knobs,
                ..mock_backend::Config::default()
            },
            threads,
        })
    }

    /// Binds (so errors come back here), then serves on a runtime thread of its own.
    pub fn launch(l: Launch) -> Result<Self, EmbeddedError> {
        let mcp_l = bind(l.listen, l.config.reuse_port)?;
        let mcp_addr = mcp_l.local_addr().map_err(|source| EmbeddedError::Bind {
            addr: l.listen,
            source,
        })?;
        let mut config = l.config;
        let (backend_l, backend_addr) = match &config.backend {
            Some(_) => (None, None),
            // A server of another identity has none of the tools that call a backend.
            None if config.identity.is_some() => (None, None),
            None => {
                mock_backend::Backend::new(l.backend.clone())?;
                let bl = bind(SocketAddr::from(([127, 0, 0, 1], 0)), false)?;
                let addr = bl.local_addr().ok();
                (Some(bl), addr)
            }
        };
        if let Some(a) = backend_addr {
            config.backend = Some(format!("http://{a}"));
        }
        let backend_url = config.backend.clone().unwrap_or_default();
        let tls = config.tls.is_some();
        let state = Arc::new(State::new(config));
        let unmatched = state.unmatched_policy_patterns();
        if !unmatched.is_empty() {
            return Err(EmbeddedError::Policy(unmatched, state.tool_names()));
        }
        let served = state.clone();
        // A gateway serves on one current-thread runtime per thread, all accepting on the
        // listener, each with its own upstream sessions: a call stays on the thread that
        // received it. Otherwise one multi-thread runtime.
        let gateway = state.config.proxy.is_some();
        let threads = l.threads.max(1);
        let runtime = || {
            if gateway {
                tokio::runtime::Builder::new_current_thread()
            } else {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(threads).thread_name("mcpbench-server");
                b
            }
            .enable_io()
            .enable_time()
            .build()
            .map_err(EmbeddedError::Runtime)
        };
        let (down_tx, down_rx) = tokio::sync::watch::channel(false);
        let mut extra = Vec::new();
        for i in 1..if gateway { threads } else { 1 } {
            let listener = mcp_l.try_clone().map_err(|source| EmbeddedError::Bind {
                addr: l.listen,
                source,
            })?;
            let (rt, state, down) = (runtime()?, served.clone(), down_rx.clone());
            extra.push(
                std::thread::Builder::new()
                    .name(format!("mcpbench-server-{i}"))
                    .spawn(move || {
                        tokio::task::LocalSet::new()
                            .block_on(&rt, serve_thread(listener, state, down));
                    })
                    .map_err(EmbeddedError::Runtime)?,
            );
        }
        let rt = runtime()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let backend_cfg = l.backend;
        let thread = std::thread::Builder::new()
            .name("mcpbench-server".into())
            .spawn(move || {
                tokio::task::LocalSet::new().block_on(&rt, async move {
                    let backend = backend_l
                        .and_then(|bl| tokio::net::TcpListener::from_std(bl).ok())
                        .map(|bl| {
                            tokio::spawn(mock_backend::serve(
                                bl,
                                backend_cfg,
                                wait(down_rx.clone()),
                            ))
                        });
                    let server = tokio::task::spawn_local(serve_thread(mcp_l, served, down_rx));
                    let _ = stopped.await;
                    let _ = down_tx.send(true);
                    let _ = server.await;
                    if let Some(b) = backend {
                        let _ = b.await;
                    }
                });
            })
            .map_err(EmbeddedError::Runtime)?;
        Ok(EmbeddedServers {
            mcp_addr,
            tls,
            state,
            backend_url,
            backend_addr,
            stop: Some(stop),
            thread: Some(thread),
            extra,
        })
    }

    fn scheme(&self, plain: &'static str, secure: &'static str) -> &'static str {
        if self.tls { secure } else { plain }
    }

    /// The Streamable HTTP endpoint (`http://` or `https://`).
    pub fn mcp_url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme("http", "https"),
            self.mcp_addr,
            self.state.config.path
        )
    }

    /// The legacy HTTP+SSE stream endpoint.
    pub fn sse_url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme("http", "https"),
            self.mcp_addr,
            self.state.config.sse_path
        )
    }

    /// The WebSocket endpoint (`ws://` or `wss://`).
    pub fn ws_url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme("ws", "wss"),
            self.mcp_addr,
            self.state.config.ws_path
        )
    }

    /// The running server's state (e.g. [`State::active_calls`]).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }
}

/// Serves one MCP session on this process's stdin/stdout until stdin's EOF or `shutdown`,
/// with a mock backend on 127.0.0.1:0 unless `config.backend` is set. Nothing but MCP messages
/// is written to stdout.
pub fn run_stdio(
    mut config: Config,
    backend: mock_backend::Config,
    threads: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), EmbeddedError> {
    // A server of another identity has none of the tools that call a backend.
    let backend_l = match &config.backend {
        Some(_) => None,
        None if config.identity.is_some() => None,
        None => {
            mock_backend::Backend::new(backend.clone())?;
            let bl = bind(SocketAddr::from(([127, 0, 0, 1], 0)), false)?;
            if let Ok(a) = bl.local_addr() {
                config.backend = Some(format!("http://{a}"));
            }
            Some(bl)
        }
    };
    tracing::info!(backend = ?config.backend, "serving MCP on stdio");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("mcpbench-server")
        .enable_io()
        .enable_time()
        .build()
        .map_err(EmbeddedError::Runtime)?;
    let result = rt.block_on(async move {
        let (down_tx, mut down_rx) = tokio::sync::watch::channel(false);
        let mock = backend_l
            .and_then(|bl| tokio::net::TcpListener::from_std(bl).ok())
            .map(|bl| {
                tokio::spawn(mock_backend::serve(bl, backend, async move {
                    let _ = down_rx.wait_for(|d| *d).await;
                }))
            });
        let state = Arc::new(State::new(config));
        let handle = tokio::runtime::Handle::current();
        let input = pipe_stdin(handle.clone());
        let (output, writer) = pipe_stdout(handle);
        let served = serve_stdio_with(state, input, output, shutdown).await;
        let _ = down_tx.send(true);
        if let Some(m) = mock {
            let _ = m.await;
        }
        (served, writer)
    });
    let (served, writer) = result;
    // The output half was shut down, so the writer thread ends once stdout has everything.
    if let Some(w) = writer {
        let _ = w.join();
    }
    // A blocking stdin read may still be parked on its thread; don't wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    served.map_err(EmbeddedError::Stdio)
}

/// Buffer between the blocking stdio threads and the async session.
const PIPE: usize = 64 * 1024;

/// Stdin as an async stream: a thread does the blocking reads (tokio's own stdin does the
/// same; its feature is not enabled in this build). EOF on stdin is EOF on the stream.
fn pipe_stdin(handle: tokio::runtime::Handle) -> tokio::io::DuplexStream {
    use std::io::Read;
    use tokio::io::AsyncWriteExt;
    let (mut tx, rx) = tokio::io::duplex(PIPE);
    let spawned = std::thread::Builder::new()
        .name("mcpbench-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; PIPE];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(error) => {
                        tracing::warn!(%error, "stdin read failed");
                        break;
                    }
                };
                if handle.block_on(tx.write_all(&buf[..n])).is_err() {
                    break;
                }
            }
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the stdin thread");
    }
    rx
}

/// Stdout as an async stream, written by a thread; it ends when the stream is shut down.
fn pipe_stdout(
    handle: tokio::runtime::Handle,
) -> (tokio::io::DuplexStream, Option<JoinHandle<()>>) {
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    let (tx, mut rx) = tokio::io::duplex(PIPE);
    let spawned = std::thread::Builder::new()
        .name("mcpbench-stdout".into())
        .spawn(move || {
            let mut stdout = std::io::stdout().lock();
            let mut buf = vec![0u8; PIPE];
            loop {
                let n = match handle.block_on(rx.read(&mut buf)) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
        });
    match spawned {
        Ok(t) => (tx, Some(t)),
        Err(error) => {
            tracing::error!(%error, "cannot start the stdout thread");
            (tx, None)
        }
    }
}

impl Drop for EmbeddedServers {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for t in self.extra.drain(..) {
            let _ = t.join();
        }
    }
}
