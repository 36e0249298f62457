//! The reference server and mock backend started in-process on 127.0.0.1 ephemeral ports, on
//! their own runtime thread, so `mcpbench run` needs no set-up and no target.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::{Config, ResponseMode, serve};

/// Why the embedded servers could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot bind 127.0.0.1: {0}")]
    Bind(std::io::Error),
    #[error("cannot start the embedded servers' runtime: {0}")]
    Runtime(std::io::Error),
    #[error("invalid mock backend settings: {0}")]
    Backend(#[from] mock_backend::Error),
}

/// Running embedded servers; dropping this shuts them down and waits for them.
#[derive(Debug)]
pub struct EmbeddedServers {
    pub mcp_addr: SocketAddr,
    pub backend_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EmbeddedServers {
    /// Starts both on `threads` runtime threads.
    pub fn start(
        response: ResponseMode,
        catalog: usize,
        page_size: usize,
        knobs: mock_backend::Knobs,
        threads: usize,
    ) -> Result<Self, EmbeddedError> {
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(EmbeddedError::Bind)?;
            l.set_nonblocking(true).map_err(EmbeddedError::Bind)?;
            Ok::<_, EmbeddedError>(l)
        };
        let backend_l = bind()?;
        let mcp_l = bind()?;
        let backend_addr = backend_l.local_addr().map_err(EmbeddedError::Bind)?;
        let mcp_addr = mcp_l.local_addr().map_err(EmbeddedError::Bind)?;
        let backend_cfg = mock_backend::Config {
            defaults: knobs,
            ..mock_backend::Config::default()
        };
        let backend = mock_backend::Backend::new(backend_cfg.clone())?;
        drop(backend);
        let config = Config {
            response,
            catalog,
            page_size,
            backend: Some(format!("http://{backend_addr}")),
            ..Config::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("mcpbench-embedded")
            .enable_all()
            .build()
            .map_err(EmbeddedError::Runtime)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mcpbench-embedded".into())
            .spawn(move || {
                rt.block_on(async move {
                    let (down_tx, down_rx) = tokio::sync::watch::channel(false);
                    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
                        let _ = rx.wait_for(|d| *d).await;
                    };
                    let (Ok(bl), Ok(ml)) = (
                        tokio::net::TcpListener::from_std(backend_l),
                        tokio::net::TcpListener::from_std(mcp_l),
                    ) else {
                        tracing::error!("cannot register the embedded listeners with the runtime");
                        return;
                    };
                    let b =
                        tokio::spawn(mock_backend::serve(bl, backend_cfg, wait(down_rx.clone())));
                    let m = tokio::spawn(serve(ml, config, wait(down_rx)));
                    let _ = stopped.await;
                    let _ = down_tx.send(true);
                    let _ = m.await;
                    let _ = b.await;
                });
            })
            .map_err(EmbeddedError::Runtime)?;
        Ok(EmbeddedServers {
            mcp_addr,
            backend_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.mcp_addr)
    }

    pub fn backend_url(&self) -> String {
        format!("http://{}", self.backend_addr)
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
