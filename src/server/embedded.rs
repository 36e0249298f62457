//! The reference server (and, unless an external backend is given, the mock backend) running
//! in-process on their own runtime thread: `mcpbench run` without a target uses them on
//! 127.0.0.1 ephemeral ports, `mcpbench serve` on the address it is given.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::{Config, ResponseMode, serve};

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
    /// The REST backend the server's tools call (started here or given).
    pub backend_url: String,
    /// The in-process mock backend, when one was started.
    pub backend_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, EmbeddedError> {
    let l =
        std::net::TcpListener::bind(addr).map_err(|source| EmbeddedError::Bind { addr, source })?;
    l.set_nonblocking(true)
        .map_err(|source| EmbeddedError::Bind { addr, source })?;
    Ok(l)
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
        let mcp_l = bind(l.listen)?;
        let mcp_addr = mcp_l.local_addr().map_err(|source| EmbeddedError::Bind {
            addr: l.listen,
            source,
        })?;
        let mut config = l.config;
        let (backend_l, backend_addr) = match &config.backend {
            Some(_) => (None, None),
            None => {
                mock_backend::Backend::new(l.backend.clone())?;
                let bl = bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
                let addr = bl.local_addr().ok();
                (Some(bl), addr)
            }
        };
        if let Some(a) = backend_addr {
            config.backend = Some(format!("http://{a}"));
        }
        let backend_url = config.backend.clone().unwrap_or_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(l.threads.max(1))
            .thread_name("mcpbench-server")
            .enable_io()
            .enable_time()
            .build()
            .map_err(EmbeddedError::Runtime)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let backend_cfg = l.backend;
        let thread = std::thread::Builder::new()
            .name("mcpbench-server".into())
            .spawn(move || {
                rt.block_on(async move {
                    let (down_tx, down_rx) = tokio::sync::watch::channel(false);
                    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
                        let _ = rx.wait_for(|d| *d).await;
                    };
                    let Ok(ml) = tokio::net::TcpListener::from_std(mcp_l) else {
                        tracing::error!("cannot register the server's listener");
                        return;
                    };
                    let backend = backend_l
                        .and_then(|bl| tokio::net::TcpListener::from_std(bl).ok())
                        .map(|bl| {
                            tokio::spawn(mock_backend::serve(
                                bl,
                                backend_cfg,
                                wait(down_rx.clone()),
                            ))
                        });
                    let server = tokio::spawn(serve(ml, config, wait(down_rx)));
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
            backend_url,
            backend_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.mcp_addr)
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
    }
}
