//! `mcpbench record`: every `tools/list` and `tools/call` a client makes, written to a trace
//! (`crate::trace`) as it completes — when it arrived (seconds from the first), which session
//! sent it (numbered in order of appearance), its params, the digest of the result the client
//! got, its latency and outcome.
//!
//! Entries are written in the order requests complete (the trace reader sorts them by arrival)
//! into a buffer that a thread of the recorder flushes every second; [`Recorder::finish`]
//! flushes the rest when the server has stopped. A call cancelled before its answer (the client
//! cancelled it, left, or the server stopped) is recorded as an error.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::trace::{self, Entry, Header};

/// When a request arrived and from which session (its number).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub session: u64,
    pub at: Instant,
}

/// What a finished recording holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub entries: u64,
    /// Client sessions that made a recorded request.
    pub sessions: u64,
}

/// The trace a recording server writes to.
#[derive(Debug)]
pub struct Recorder {
    out: Mutex<Out>,
    /// When the first recorded request arrived: every `t` counts from it.
    first: OnceLock<Instant>,
    path: PathBuf,
}

#[derive(Debug)]
struct Out {
    writer: trace::Writer<BufWriter<File>>,
    entries: u64,
    sessions: u64,
    /// A write failed (said once).
    failed: bool,
}

/// How often buffered entries are written out.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

impl Recorder {
    /// Creates (truncates) the trace at `path` and writes its header; secret-looking values in
    /// params are redacted unless `keep_secrets`.
    pub fn create(path: &Path, header: &Header, keep_secrets: bool) -> std::io::Result<Arc<Self>> {
        let file = BufWriter::with_capacity(64 * 1024, File::create(path)?);
        let mut writer = trace::Writer::new(file, header)?;
        if keep_secrets {
            writer = writer.keep_secrets();
        }
        let rec = Arc::new(Recorder {
            out: Mutex::new(Out {
                writer,
                entries: 0,
                sessions: 0,
                failed: false,
            }),
            first: OnceLock::new(),
            path: path.to_path_buf(),
        });
        rec.flush()?;
        let weak = Arc::downgrade(&rec);
        std::thread::Builder::new()
            .name("mcpbench-record".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    match weak.upgrade() {
                        Some(r) => r.flush_or_warn(),
                        None => return,
                    }
                }
            })?;
        Ok(rec)
    }

    /// The trace's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A request arrived now (the first one starts the trace's clock).
    pub(crate) fn arrived(&self) -> Instant {
        let now = Instant::now();
        self.first.get_or_init(|| now);
        now
    }

    fn out(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one entry (into the buffer).
    fn write(
        &self,
        seen: Seen,
        method: &str,
        params: Value,
        response: Option<&[u8]>,
        outcome: &str,
    ) {
        let first = *self.first.get_or_init(|| seen.at);
        let entry = Entry {
            t: seen.at.saturating_duration_since(first).as_secs_f64(),
            session: seen.session,
            method: method.to_string(),
            params,
            digest: response.and_then(trace::digest_of_response),
            latency: seen.at.elapsed().as_secs_f64(),
            outcome: outcome.to_string(),
        };
        let mut out = self.out();
        out.entries += 1;
        out.sessions = out.sessions.max(seen.session);
        if let Err(error) = out.writer.entry(&entry)
            && !std::mem::replace(&mut out.failed, true)
        {
            tracing::warn!(%error, path = %self.path.display(), "trace write failed");
        }
    }

    /// A request answered at once (`tools/list`, or a `tools/call` refused before it ran):
    /// `response` is the whole JSON-RPC response; an error response is outcome `error`.
    pub(crate) fn answered(&self, seen: Seen, method: &str, params: Value, response: &[u8]) {
        let ok = trace::digest_of_response(response).is_some();
        let outcome = if ok { "ok" } else { "error" };
        self.write(seen, method, params, Some(response), outcome);
    }

    /// A `tools/call` about to run: recorded when [`Call::done`], or as an error if dropped
    /// before (cancelled).
    pub(crate) fn call<'a>(
        &'a self,
        seen: Seen,
        name: &'a str,
        arguments: Option<&'a [u8]>,
    ) -> Call<'a> {
        Call {
            rec: self,
            seen,
            name,
            arguments,
            done: false,
        }
    }

    /// Writes what is buffered.
    pub fn flush(&self) -> std::io::Result<()> {
        self.out().writer.flush()
    }

    fn flush_or_warn(&self) {
        let mut out = self.out();
        if let Err(error) = out.writer.flush()
            && !std::mem::replace(&mut out.failed, true)
        {
            tracing::warn!(%error, path = %self.path.display(), "trace write failed");
        }
    }

    /// Writes everything out (to the disk): the trace is complete. What it holds.
    pub fn finish(&self) -> std::io::Result<Recorded> {
        let mut out = self.out();
        out.writer.flush()?;
        out.writer.get_ref().get_ref().sync_data()?;
        Ok(Recorded {
            entries: out.entries,
            sessions: out.sessions,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush_or_warn();
    }
}

/// A `tools/call` being recorded (see [`Recorder::call`]).
#[derive(Debug)]
pub(crate) struct Call<'a> {
    rec: &'a Recorder,
    seen: Seen,
    name: &'a str,
    arguments: Option<&'a [u8]>,
    done: bool,
}

impl Call<'_> {
    /// The call answered `response` (the whole JSON-RPC response) with `outcome` (`ok`,
    /// `tool_error` or `error`).
    pub(crate) fn done(mut self, response: &[u8], outcome: &str) {
        self.done = true;
        let params = call_params(self.name, self.arguments);
        self.rec
            .write(self.seen, "tools/call", params, Some(response), outcome);
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if !self.done {
            let params = call_params(self.name, self.arguments);
            self.rec
                .write(self.seen, "tools/call", params, None, "error");
        }
    }
}

/// A `tools/call`'s params in a trace: `name`, and `arguments` as received (raw JSON).
pub(crate) fn call_params(name: &str, arguments: Option<&[u8]>) -> Value {
    let mut p = Map::new();
    p.insert("name".into(), Value::String(name.into()));
    if let Some(a) = arguments {
        p.insert(
            "arguments".into(),
            serde_json::from_slice(a).unwrap_or(Value::Null),
        );
    }
    Value::Object(p)
}

/// A `tools/list`'s params in a trace: its cursor, if any.
pub(crate) fn list_params(cursor: Option<&str>) -> Value {
    let mut p = Map::new();
    if let Some(c) = cursor {
        p.insert("cursor".into(), Value::String(c.into()));
    }
    Value::Object(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_written_with_arrival_session_digest_and_cancels() {
        let dir = std::env::temp_dir().join(format!("mcpbench-recorder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let header = Header {
            mcpbench_trace: trace::VERSION,
            created: "2026-01-01T00:00:00Z".into(),
            source: "record".into(),
            upstream: None,
        };
        let rec = Recorder::create(&path, &header, false).unwrap();
        let a = Seen {
            session: 1,
            at: rec.arrived(),
        };
        std::thread::sleep(Duration::from_millis(5));
        let b = Seen {
            session: 2,
            at: rec.arrived(),
        };
        let call = rec.call(b, "login", Some(br#"{"user":"u","password":"p"}"#));
        rec.answered(
            a,
            "tools/list",
            list_params(None),
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        );
        drop(call);
        let c = Seen {
            session: 2,
            at: rec.arrived(),
        };
        rec.call(c, "echo", None).done(
            br#"{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}"#,
            "tool_error",
        );
        assert_eq!(
            rec.finish().unwrap(),
            Recorded {
                entries: 3,
                sessions: 2
            }
        );
        let t = trace::Trace::read(&path).unwrap();
        let e = &t.entries;
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].method.as_str(), e[0].t, e[0].session),
            ("tools/list", 0.0, 1)
        );
        assert_eq!(
            e[0].digest.as_deref(),
            Some(trace::digest(&serde_json::json!({"tools": []})).as_str())
        );
        assert!(e[1].t >= 0.005 && e[1].t <= e[2].t, "{e:?}");
        assert_eq!(e[1].params["arguments"]["password"], trace::REDACTED);
        assert_eq!((e[1].outcome.as_str(), &e[1].digest), ("error", &None));
        assert_eq!(e[2].params, serde_json::json!({"name": "echo"}));
        assert_eq!(e[2].outcome, "tool_error");
        assert!(e[2].digest.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
