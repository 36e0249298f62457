//! MCP over a child process's stdin/stdout: one compact JSON message per line.
//!
//! The child is launched per connection (one per virtual user, or one per worker thread
//! shared by its virtual users, many requests in flight matched by id). stderr is drained by
//! a task of its own — it never blocks the child and is never an error signal (2025-11-25);
//! its last lines are kept to say why a child that broke off did ([`ChildOut`]'s `aside`).
//! Messages the server sends before the `initialize` result (notifications, logs) are
//! tolerated. Shutdown: close stdin, wait, then kill.

use std::cell::RefCell;
use std::process::Stdio;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::mux::{Connector, Lines, MuxConn, MuxSession, Writer};
use super::{CommandSpec, Endpoint};
use crate::metrics::outcome::Outcome;

/// The way out to a child: its stdin, plus the child itself (so it lives as long as the
/// connection and can be waited for) and the end of its standard error.
pub struct ChildOut {
    writer: Writer<ChildStdin, Lines>,
    child: RefCell<Option<Child>>,
    stderr: Rc<RefCell<Tail>>,
}

/// The last [`TAIL`] bytes of a child's standard error, and whether it ended.
#[derive(Debug, Default)]
struct Tail {
    bytes: Vec<u8>,
    closed: bool,
}

/// How much of a child's standard error is kept.
const TAIL: usize = 2048;

impl Tail {
    /// Keeps the end of what was read.
    fn keep(&mut self, read: &[u8]) {
        self.bytes
            .extend_from_slice(&read[read.len().saturating_sub(TAIL)..]);
        let over = self.bytes.len().saturating_sub(TAIL);
        self.bytes.drain(..over);
    }

    /// Its last lines (at most 300 characters), control characters as spaces.
    fn last_lines(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let said = lines[lines.len().saturating_sub(3)..].join(" / ");
        let chars: Vec<char> = said
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let start = chars.len().saturating_sub(300);
        let prefix = if start > 0 { "…" } else { "" };
        (!chars.is_empty())
            .then(|| format!("{prefix}{}", chars[start..].iter().collect::<String>()))
    }
}

impl super::mux::Outbound for ChildOut {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        self.writer.send(msg).await
    }

    async fn aside(&self) -> Option<String> {
        // A child that broke off gets a moment to exit and to finish its standard error.
        let mut status = None;
        for _ in 0..10 {
            status = self
                .child
                .borrow_mut()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if status.is_some() && self.stderr.borrow().closed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let said = self.stderr.borrow().last_lines();
        match (status, said) {
            (None, None) => None,
            (Some(s), None) => Some(format!("it exited ({s}), writing nothing on stderr")),
            (None, Some(said)) => Some(format!("its stderr ends: {said}")),
            (Some(s), Some(said)) => Some(format!("it exited ({s}); its stderr ends: {said}")),
        }
    }
}

/// The command of a stdio server, its standard streams piped, killed when dropped.
pub fn command(spec: &CommandSpec) -> Command {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    cmd
}

/// Launches stdio servers.
#[derive(Debug)]
pub struct StdioConnector;

/// An MCP session over a child process.
pub type StdioSession = MuxSession<StdioConnector>;

/// Largest line accepted from a server.
const MAX_LINE: usize = 64 * 1024 * 1024;

impl Connector for StdioConnector {
    type Out = ChildOut;

    async fn connect(
        ep: &Arc<Endpoint>,
        capacity: usize,
    ) -> Result<Rc<MuxConn<ChildOut>>, Outcome> {
        let spec = ep.command.as_ref().ok_or(Outcome::Connect)?;
        let mut child = command(spec)
            .spawn()
            .map_err(|e| crate::metrics::outcome::LocalKind::or_connect(&e))?;
        if let Some(pid) = child.id() {
            ep.children.push(pid);
        }
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Outcome::Connect);
        };
        let tail = Rc::new(RefCell::new(Tail::default()));
        let out = ChildOut {
            writer: Writer::new(stdin, Lines),
            child: RefCell::new(Some(child)),
            stderr: tail.clone(),
        };
        let conn = Rc::new(MuxConn::new(capacity, ep, out));
        let weak = Rc::downgrade(&conn);
        let reader = tokio::task::spawn_local(async move {
            let mut lines = BufReader::with_capacity(64 * 1024, stdout);
            let mut line = Vec::with_capacity(4096);
            let mut answer = Vec::new();
            loop {
                line.clear();
                let n: usize = (&mut lines)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .await
                    .unwrap_or_default();
                let Some(conn) = weak.upgrade() else { return };
                if n == 0 || (line.last() != Some(&b'\n') && line.len() >= MAX_LINE) {
                    conn.mux.close(Outcome::Io);
                    return;
                }
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                conn.incoming(&mut line, &mut answer).await;
            }
        });
        conn.hold(reader);
        // Drain stderr so the child never blocks on a full pipe, keeping its end.
        conn.hold(tokio::task::spawn_local(async move {
            let mut sink = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut sink).await
                && n > 0
            {
                tail.borrow_mut().keep(&sink[..n]);
            }
            tail.borrow_mut().closed = true;
        }));
        Ok(conn)
    }

    async fn shutdown(conn: Rc<MuxConn<ChildOut>>, within: Duration) {
        // Closing stdin is the shutdown signal; then wait, then kill.
        drop(conn.out.writer.take());
        let child = conn.out.child.borrow_mut().take();
        if let Some(mut child) = child
            && tokio::time::timeout(within, child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_stderr_is_kept_in_a_few_lines() {
        let mut t = Tail::default();
        assert_eq!(t.last_lines(), None);
        for i in 0..1000 {
            t.keep(format!("log line {i}\n").as_bytes());
        }
        assert!(t.bytes.len() <= TAIL);
        t.keep(b"Traceback:\n\x1b[31mError: no\tmodule\n\n");
        assert_eq!(
            t.last_lines().unwrap(),
            "log line 999 / Traceback: / \u{20}[31mError: no module"
        );
        t.keep(&[b'x'; 5000]);
        let long = t.last_lines().unwrap();
        assert!(
            long.starts_with('…') && long.chars().count() == 301,
            "{long}"
        );
    }
}
