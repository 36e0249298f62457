//! A live Prometheus endpoint for a running test (`--metrics-listen ADDR`): `GET /metrics`
//! answers with the latest live view in the text exposition format — the same families as
//! `--format prometheus` at the end, plus requests in flight and elapsed time. It reads the
//! live view (updated once per interval), never per-request data, on its own thread.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::report::export::prometheus_of;
use crate::report::live::Live;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;

/// Serves `/metrics` from `rx` until the process ends (one connection at a time: a scraper).
pub fn serve(listener: TcpListener, rx: watch::Receiver<Option<Arc<Live>>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = answer(stream, &rx);
    }
}

fn answer(mut s: TcpStream, rx: &watch::Receiver<Option<Arc<Live>>>) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = path.split(|b| *b == b'?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => {
            let live = rx.borrow().clone();
            let text = live.map_or_else(
                || "# mcpbench: the target has not passed the preflight yet\n".to_string(),
                |l| prometheus_of(&l.figures()),
            );
            ("200 OK", text)
        }
        (b"GET", _) => ("404 Not Found", "only /metrics is served\n".to_string()),
        _ => ("405 Method Not Allowed", "GET /metrics\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(response.as_bytes())
}
