//! Hand-written HTTP/1.1 test servers (for misbehaviour hyper would not allow): each runs on
//! its own thread and runtime, and stops and joins when dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// A server on its own thread; stopped and joined when dropped.
pub struct ThreadServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves each accepted connection (TCP_NODELAY set) with `conn`, on `threads` runtime threads.
pub fn start<F, Fut>(threads: usize, conn: F) -> ThreadServer
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_l.set_nonblocking(true).unwrap();
    let addr = std_l.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::from_std(std_l).unwrap();
            tokio::select! {
                _ = stopped => {}
                _ = async {
                    loop {
                        if let Ok((s, _)) = l.accept().await {
                            let _ = s.set_nodelay(true);
                            tokio::spawn(conn(s));
                        }
                    }
                } => {}
            }
        });
        rt.shutdown_timeout(Duration::from_millis(100));
    });
    ThreadServer {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// Reads one request (head lower-cased, body by Content-Length); `None` at EOF or error.
pub async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = buf[end + 4..end + 4 + len].to_vec();
                buf.drain(..end + 4 + len);
                return Some((head, body));
            }
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
