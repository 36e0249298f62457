//! MCP over stdio (or any byte stream): one session, one compact JSON message per line
//! (mcp-protocol.md §3.1). Nothing but MCP messages is written to the output; logs go to
//! stderr through `tracing`.
//!
//! Lines are read in order (a trailing `\r` is stripped, blank lines skipped, a line longer
//! than `max_body` is answered with `-32600`, one that is not JSON with `-32700` and id null).
//! Tool calls run on their own tasks, so many are in flight at once; one writer drains the
//! output channel and flushes when it runs dry. At EOF the session waits (at most
//! `Config::drain`) for calls in flight, cancels what is left, and returns once everything
//! queued is written.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::sync::mpsc;

use super::conn::{Conn, Received};
use super::wire::error_body;
use super::{Config, State};
use crate::protocol::jsonrpc::code;

/// Serves one MCP session on `input`/`output` until EOF on `input` or `shutdown`.
pub async fn serve_stdio<R, W>(
    input: R,
    output: W,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: AsyncRead,
    W: AsyncWrite,
{
    serve_stdio_with(Arc::new(State::new(config)), input, output, shutdown).await
}

/// What one read produced.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `line` (terminator included), keeping at most `max`
/// bytes: a longer line is consumed and reported as [`Line::TooLong`].
async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Complete,
            });
        }
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            if line.len() + n > max.saturating_add(2) {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..n]);
            }
        }
        r.consume(n);
        if done {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

/// [`serve_stdio`] with state made by the caller.
pub async fn serve_stdio_with<R, W>(
    state: Arc<State>,
    input: R,
    output: W,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: AsyncRead,
    W: AsyncWrite,
{
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    let conn = Conn::new(state.clone(), tx, state.anonymous_tenant());
    let inflight = conn.inflight().clone();
    let max = state.config.max_body;
    let drain = state.config.drain;

    let reader = async move {
        let mut input = pin!(BufReader::new(input));
        let mut shutdown = pin!(shutdown);
        let mut line = Vec::new();
        let result = loop {
            let read = tokio::select! {
                biased;
                () = &mut shutdown => break Ok(()),
                read = read_line(&mut input, &mut line, max) => read,
            };
            let reply = match read {
                Err(e) => break Err(e),
                Ok(Line::Eof) => break Ok(()),
                Ok(Line::TooLong) => Some(Bytes::from(error_body(
                    None,
                    code::INVALID_REQUEST,
                    "Invalid Request: message too large",
                ))),
                Ok(Line::Complete) => {
                    while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
                        line.pop();
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        line.clear();
                        continue;
                    }
                    match conn.receive(Bytes::from(std::mem::take(&mut line))) {
                        Received::Reply(b) | Received::Invalid(b) => Some(b),
                        Received::Nothing => None,
                    }
                }
            };
            line.clear();
            if let Some(b) = reply
                && conn.sink().send(b).await.is_err()
            {
                break Ok(());
            }
        };
        if tokio::time::timeout(drain, conn.idle()).await.is_err() {
            tracing::warn!(
                in_flight = conn.in_flight(),
                "stdio: calls still running after the drain period; cancelling them"
            );
            conn.close();
        }
        result
    };

    let writer = async move {
        let mut out = pin!(BufWriter::new(output));
        while let Some(msg) = rx.recv().await {
            out.write_all(&msg).await?;
            out.write_all(b"\n").await?;
            if rx.is_empty() {
                out.flush().await?;
            }
        }
        out.flush().await?;
        out.shutdown().await
    };

    let mut writer = pin!(writer);
    let read = tokio::select! {
        read = reader => read,
        written = &mut writer => {
            // The output is gone: nobody can see another response.
            inflight.cancel_all();
            return written;
        }
    };
    // Every response queued so far is written once the last call task lets go of the session.
    match tokio::time::timeout(drain, writer).await {
        Ok(written) => read.and(written),
        Err(_) => {
            tracing::warn!("stdio: output not drained in time");
            inflight.cancel_all();
            read
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let data: &[u8] = b"abc\r\n0123456789\nlast";
        let mut r = BufReader::with_capacity(4, data);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut r, &mut line, 5).await.unwrap(),
            Line::Complete
        );
        assert_eq!(line, b"abc\r\n");
        line.clear();
        assert_eq!(
            read_line(&mut r, &mut line, 5).await.unwrap(),
            Line::TooLong
        );
        line.clear();
        assert_eq!(
            read_line(&mut r, &mut line, 5).await.unwrap(),
            Line::Complete
        );
        assert_eq!(line, b"last");
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, 5).await.unwrap(), Line::Eof);
    }
}
