//! MCP over a child process's stdin/stdout: one compact JSON message per line.
//!
//! The child is launched per connection (one per virtual user, or one per worker thread
//! shared by its virtual users, many requests in flight matched by id). stderr is drained by
//! a task of its own — it never blocks the child and is never an error signal (2025-11-25).
//! Messages the server sends before the `initialize` result (notifications, logs) are
//! tolerated. Shutdown: close stdin, wait, then kill.

use std::process::Stdio;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::Endpoint;
use super::mux::{Connector, Lines, MuxConn, MuxSession, Writer};
use crate::metrics::outcome::Outcome;

/// The way out to a child: its stdin, plus the child itself (so it lives as long as the
/// connection and can be waited for).
pub struct ChildOut {
    writer: Writer<ChildStdin, Lines>,
    child: std::cell::RefCell<Option<Child>>,
}

impl super::mux::Outbound for ChildOut {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        self.writer.send(msg).await
    }
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
        let mut child = cmd
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
        let out = ChildOut {
            writer: Writer::new(stdin, Lines),
            child: std::cell::RefCell::new(Some(child)),
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
        // Drain stderr so the child never blocks on a full pipe.
        conn.hold(tokio::task::spawn_local(async move {
            let mut sink = [0u8; 8192];
            while matches!(stderr.read(&mut sink).await, Ok(n) if n > 0) {}
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
