//! The checks the property tests (`tests/fuzz.rs`) and the cargo-fuzz targets (`fuzz/`) share:
//! one function per parser that reads the network, taking arbitrary bytes and asserting (by
//! panicking) that the parser does not panic, stays within its memory bound, gives the same
//! result however the bytes are cut into chunks, and agrees with a reference.
//!
//! | function         | parser                                  | reference                          |
//! |------------------|-----------------------------------------|------------------------------------|
//! | `envelope`       | `protocol::scan` (the default codec)    | serde_json                         |
//! | `sse`            | `transport::sse::SseDecoder`            | the WHATWG rules, written out      |
//! | `chunked`        | `transport::http1::Chunked`             | httparse; the documented grammar   |
//! | `http1_response` | `transport::http1::Http1Conn`           | httparse                           |
//! | `ws_client`      | `transport::ws::WsReader`               | tungstenite (frames and client)    |
//! | `ws_handshake`   | `transport::ws::handshake` (the 101)    | httparse                           |
//! | `server_http`    | the reference server over TCP           | httparse (its answers)             |
//! | `server_ws`      | the reference server's `/ws` frames     | tungstenite in the server role     |
//! | `server_stdio`   | `server::serve_stdio` over a duplex     | serde_json (which lines are JSON)  |
//!
//! Each function with a `_with` twin takes its knobs (bound, cut points) explicitly, for the
//! property tests; the plain one derives them from the data, for the fuzzers. Not part of the
//! crate's interface: hidden, and free to change with the tests.

mod envelope;
mod http1;
mod server;
mod sse;
mod ws;

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub use envelope::envelope;
pub use http1::{chunked, chunked_with, http1_response, http1_response_with};
pub use server::{
    MODERN_PING, server_addr, server_http, server_http_with, server_stdio, server_stdio_with,
    server_ws, server_ws_with,
};
pub use sse::{sse, sse_with};
pub use ws::{ws_client, ws_client_with, ws_handshake, ws_handshake_with};

/// Cut points derived from the data itself (xorshift seeded with its FNV-1a hash), so a fuzzer
/// that finds an input also finds its chunking: about one cut per 16 bytes, duplicates (empty
/// chunks) included.
pub fn cuts_from(data: &[u8]) -> Vec<usize> {
    let mut x = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let n = data.len() / 16 + 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (data.len() as u64 + 1)) as usize
        })
        .collect()
}

/// `data` cut at `cuts` (clamped, sorted; a repeated cut gives an empty chunk).
pub fn split<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(data.len())).collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut prev = 0;
    for p in points {
        out.push(&data[prev..p]);
        prev = p;
    }
    out.push(&data[prev..]);
    out
}

/// Every cut point: one byte per chunk.
pub fn bytewise(data: &[u8]) -> Vec<usize> {
    (1..data.len()).collect()
}

/// An in-memory byte stream: each read hands out (part of) the next chunk, never more, then
/// EOF; writes are accepted and dropped. It never returns `Pending`, so `block_on` can drive
/// whatever reads it.
#[derive(Debug)]
pub struct Script {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes handed out so far.
    pub delivered: usize,
}

impl Script {
    /// `data` cut at `cuts`; empty chunks are dropped (a read of 0 bytes is EOF).
    pub fn new(data: &[u8], cuts: &[usize]) -> Self {
        Script {
            chunks: split(data, cuts)
                .into_iter()
                .filter(|c| !c.is_empty())
                .map(<[u8]>::to_vec)
                .collect(),
            delivered: 0,
        }
    }
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let Some(chunk) = self.chunks.front_mut() else {
            return Poll::Ready(Ok(()));
        };
        let n = chunk.len().min(buf.remaining());
        buf.put_slice(&chunk[..n]);
        chunk.drain(..n);
        if chunk.is_empty() {
            self.chunks.pop_front();
        }
        self.delivered += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Bytes to read, for tungstenite's blocking API, with a write side that keeps nothing
/// (tungstenite answers pings and close frames).
struct Bytes<'a>(io::Cursor<&'a [u8]>);

impl<'a> Bytes<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bytes(io::Cursor::new(data))
    }
}

impl io::Read for Bytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl io::Write for Bytes<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs a future that waits on nothing but `Script`s to completion, without a runtime (a
/// fuzzer runs millions of inputs). Panics if it waits on anything else.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    for _ in 0..1000 {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("the parser waits on something other than its input");
}

/// The input as text for assertion messages, shortened.
fn show(data: &[u8]) -> String {
    let cut = &data[..data.len().min(600)];
    let more = if data.len() > cut.len() { "…" } else { "" };
    format!("{:?}{more}", String::from_utf8_lossy(cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_keeps_every_byte_in_order() {
        let data = b"0123456789";
        let pieces = split(data, &[7, 3, 3, 42]);
        assert_eq!(pieces, [&b"012"[..], b"", b"3456", b"789", b""]);
        assert_eq!(pieces.concat(), data);
        let cuts = cuts_from(data);
        assert!(cuts.iter().all(|&c| c <= data.len()));
        assert_eq!(cuts, cuts_from(data), "derived from the data alone");
    }
}
