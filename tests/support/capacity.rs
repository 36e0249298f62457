//! An MCP server with a known capacity: its one tool, `work`, takes `service` and at most
//! `slots` run at once (the rest queue), so it serves `slots / service` calls per second. Its
//! responses say how long the work took, as a gateway would: `Server-Timing: work;dur=MS`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::raw_http::{self, ThreadServer, read_request};

pub fn start(slots: usize, service: Duration) -> ThreadServer {
    start_with(slots, service, None)
}

/// Like `start`, and a keep-alive connection idle for `idle` is closed, as Node (5 s), hyper
/// (30 s) and nginx (75 s) servers do.
pub fn start_with(slots: usize, service: Duration, idle: Option<Duration>) -> ThreadServer {
    let permits = Arc::new(Semaphore::new(slots));
    raw_http::start(1, move |s| conn(s, permits.clone(), service, idle))
}

async fn conn(
    mut s: TcpStream,
    permits: Arc<Semaphore>,
    service: Duration,
    idle: Option<Duration>,
) {
    let mut buf = Vec::new();
    loop {
        let read = read_request(&mut s, &mut buf);
        let request = match idle {
            Some(d) => tokio::time::timeout(d, read).await.unwrap_or(None),
            None => read.await,
        };
        let Some((_, body)) = request else {
            return;
        };
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let mut timing = String::new();
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
                let began = std::time::Instant::now();
                tokio::time::sleep(service).await;
                timing = format!(
                    "Server-Timing: work;dur={:.3}\r\n",
                    began.elapsed().as_secs_f64() * 1000.0
                );
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
                )
            }
            _ => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#)
            }
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{timing}Content-Length: {}\r\n\r\n{json}",
            json.len()
        );
        if s.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}
