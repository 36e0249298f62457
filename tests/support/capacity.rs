//! An MCP server with a known capacity: its one tool, `work`, takes `service` and at most
//! `slots` run at once (the rest queue), so it serves `slots / service` calls per second.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub struct Capacity {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Capacity {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn start(slots: usize, service: Duration) -> Capacity {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_l.set_nonblocking(true).unwrap();
    let addr = std_l.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::from_std(std_l).unwrap();
            let permits = Arc::new(Semaphore::new(slots));
            tokio::select! {
                _ = stopped => {}
                _ = async {
                    loop {
                        if let Ok((s, _)) = l.accept().await {
                            let _ = s.set_nodelay(true);
                            tokio::spawn(conn(s, permits.clone(), service));
                        }
                    }
                } => {}
            }
        });
        rt.shutdown_timeout(Duration::from_millis(100));
    });
    Capacity {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

async fn conn(mut s: TcpStream, permits: Arc<Semaphore>, service: Duration) {
    let mut buf = Vec::new();
    loop {
        let body = loop {
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
                    break body;
                }
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let id = v["id"].clone();
        let json = match v["method"].as_str().unwrap_or_default() {
            "initialize" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"capacity","version":"0"}}}}}}"#
            ),
            m if m.starts_with("notifications/") => {
                if s.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            "tools/list" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"work","inputSchema":{{"type":"object"}}}}]}}}}"#
            ),
            "tools/call" => {
                let _permit = permits.acquire().await;
                tokio::time::sleep(service).await;
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
                )
            }
            _ => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#)
            }
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        );
        if s.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}
