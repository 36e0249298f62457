//! Audit events as JSON lines (`mcpbench serve --audit FILE`): one line per discovery
//! (`tools/list` page), per invocation (`tools/call`, whatever became of it: ok, tool_error,
//! error, denied, rate_limited) and per error (authentication, upstream, a session cap, a
//! request naming another tenant's session). Discoveries and
//! invocations name the client session by its number (from 1, in order of appearance — the
//! numbers of `mcpbench record`'s traces), so `mcpbench trace from-audit` can replay them
//! session by session. Arguments are redacted unless asked for; tokens are never written. Lines
//! are buffered and written at least once a second, and at shutdown.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::protocol::jsonrpc::write_json_str;

/// What became of a `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invocation {
    Ok,
    ToolError,
    Error,
    Denied,
    RateLimited,
}

impl Invocation {
    fn name(self) -> &'static str {
        match self {
            Invocation::Ok => "ok",
            Invocation::ToolError => "tool_error",
            Invocation::Error => "error",
            Invocation::Denied => "denied",
            Invocation::RateLimited => "rate_limited",
        }
    }

    /// The outcome in a trace (`crate::trace`): a call that did not run is an error.
    pub(crate) fn trace_name(self) -> &'static str {
        match self {
            Invocation::Ok => "ok",
            Invocation::ToolError => "tool_error",
            _ => "error",
        }
    }
}

/// The audit log.
#[derive(Debug)]
pub struct Audit {
    out: Mutex<BufWriter<File>>,
    /// Write call arguments as received (off: `"[redacted]"`).
    arguments: bool,
}

impl Audit {
    /// Creates (truncates) the log file.
    pub fn create(path: &Path, arguments: bool) -> std::io::Result<Audit> {
        Ok(Audit {
            out: Mutex::new(BufWriter::with_capacity(256 * 1024, File::create(path)?)),
            arguments,
        })
    }

    fn line(&self, event: &str, tenant: Option<&str>, body: impl FnOnce(&mut Vec<u8>)) {
        let mut l = Vec::with_capacity(192);
        l.extend_from_slice(br#"{"ts":""#);
        let now = time::OffsetDateTime::now_utc();
        let ts = now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        l.extend_from_slice(ts.as_bytes());
        l.extend_from_slice(br#"","event":""#);
        l.extend_from_slice(event.as_bytes());
        l.extend_from_slice(br#"","tenant":"#);
        match tenant {
            Some(t) => write_json_str(&mut l, t),
            None => l.extend_from_slice(b"null"),
        }
        body(&mut l);
        l.extend_from_slice(b"}\n");
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(error) = out.write_all(&l) {
            tracing::warn!(%error, "audit log write failed");
        }
    }

    /// A `tools/list` page returned to a tenant in a session: the names on it (`names` is a
    /// JSON array).
    pub(crate) fn discovery(
        &self,
        tenant: Option<&str>,
        session: Option<u64>,
        count: usize,
        names: &[u8],
    ) {
        self.line("discovery", tenant, |l| {
            write_session(l, session);
            l.extend_from_slice(br#","tools":"#);
            l.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
            l.extend_from_slice(br#","names":"#);
            l.extend_from_slice(names);
        });
    }

    /// A `tools/call` of a tenant in a session, and what became of it.
    pub(crate) fn invocation(
        &self,
        (tenant, session): (Option<&str>, Option<u64>),
        tool: &str,
        arguments: Option<&[u8]>,
        outcome: Invocation,
        latency: Duration,
    ) {
        self.line("invocation", tenant, |l| {
            write_session(l, session);
            l.extend_from_slice(br#","tool":"#);
            write_json_str(l, tool);
            l.extend_from_slice(br#","arguments":"#);
            match arguments {
                Some(a) if self.arguments => l.extend_from_slice(a),
                Some(_) => l.extend_from_slice(br#""[redacted]""#),
                None => l.extend_from_slice(b"null"),
            }
            l.extend_from_slice(br#","outcome":""#);
            l.extend_from_slice(outcome.name().as_bytes());
            l.extend_from_slice(br#"","latency_us":"#);
            l.extend_from_slice(
                itoa::Buffer::new()
                    .format(latency.as_micros() as u64)
                    .as_bytes(),
            );
        });
    }

    /// An error: its type (`auth`, `upstream`…), the tenant if known, and a context that holds
    /// no secret and no internal address.
    pub(crate) fn error(&self, kind: &str, tenant: Option<&str>, context: &str) {
        self.line("error", tenant, |l| {
            l.extend_from_slice(br#","type":"#);
            write_json_str(l, kind);
            l.extend_from_slice(br#","context":"#);
            write_json_str(l, context);
        });
    }

    /// A request of `tenant` that named a session of `owner` (refused as an unknown session):
    /// the session's number and the request (`POST`, `GET`, `DELETE`), never the session id.
    pub(crate) fn foreign_session(
        &self,
        tenant: Option<&str>,
        owner: Option<&str>,
        session: u64,
        request: &str,
    ) {
        self.line("error", tenant, |l| {
            l.extend_from_slice(br#","type":"foreign_session","owner":"#);
            match owner {
                Some(o) => write_json_str(l, o),
                None => l.extend_from_slice(b"null"),
            }
            write_session(l, Some(session));
            l.extend_from_slice(br#","request":"#);
            write_json_str(l, request);
            l.extend_from_slice(
                br#","context":"the request named a session of another tenant; answered as an unknown session""#,
            );
        });
    }

    /// Writes what is buffered.
    pub fn flush(&self) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(error) = out.flush() {
            tracing::warn!(%error, "audit log flush failed");
        }
    }
}

/// `,"session":N` (`null` when not known).
fn write_session(l: &mut Vec<u8>, session: Option<u64>) {
    l.extend_from_slice(br#","session":"#);
    match session {
        Some(n) => l.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        None => l.extend_from_slice(b"null"),
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.flush();
    }
}
