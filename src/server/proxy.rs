//! Tools another MCP server serves, listed and called through this one (the gateway mode of
//! `mcpbench serve --upstream`). The server sees only this interface; the client sessions to
//! the upstreams live in `crate::gateway`.
//!
//! A proxied call passes the client's raw `arguments` through and gets the upstream's raw
//! `result` object back, adapted to the client's revision only when the two eras differ.
//! Upstream failures reach the client sanitized (a code and a reference, no upstream words,
//! addresses or traces); the detail goes to the server's log under the same reference.

use std::borrow::Cow;
use std::cell::Cell;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::wire::MODERN_RESULT_TAIL;
use crate::protocol::jsonrpc::code;
use crate::protocol::scan;
use crate::protocol::version::Revision;

/// A tool of an upstream, as the gateway lists it.
#[derive(Debug, Clone)]
pub struct ProxiedTool {
    /// The name `tools/list` shows (`upstream__tool`).
    pub name: String,
    /// The upstream's definition.
    pub definition: Value,
}

/// Why a proxied call has no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxyError {
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream error {code}: {detail}")]
    Rpc { code: i64, detail: String },
    #[error("upstream did not answer in time")]
    Timeout,
    /// Not reachable, or the exchange failed (the detail names what and where).
    #[error("upstream unavailable: {detail}")]
    Unavailable { detail: String },
}

/// A proxied call's answer.
#[derive(Debug, Clone)]
pub struct Proxied {
    /// The raw `result` object, as the client reads it (adapted to its revision).
    pub result: Bytes,
    /// The result says `isError: true` (a tool error, not a failed call).
    pub is_error: bool,
    /// How long the upstream exchange took (on the wire, from the send to the answer; not the
    /// wait for a free pooled session), when there is an upstream.
    pub upstream: Option<Duration>,
}

pub type ProxyFuture = Pin<Box<dyn Future<Output = Result<Proxied, ProxyError>> + Send>>;

/// Where a proxied call's progress goes: the client asked for progress with `token` (raw JSON,
/// a string or an integer), and its response stream takes notifications through `sink`.
#[derive(Debug, Clone)]
pub struct ProgressRelay {
    pub token: Bytes,
    pub sink: mpsc::Sender<Bytes>,
}

impl ProgressRelay {
    /// Relays an upstream notification if it is `notifications/progress`: the same progress,
    /// total and message under the client's token. A client stream that is full or gone does
    /// not hold up the call (progress is advisory); whether it was sent.
    pub fn relay(&self, upstream: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Notification<'a> {
            #[serde(borrow)]
            method: Cow<'a, str>,
            #[serde(borrow)]
            params: Option<&'a RawValue>,
        }
        /// The values as the upstream wrote them (numbers keep their form, the message its
        /// escapes).
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            progress: &'a RawValue,
            #[serde(borrow)]
            total: Option<&'a RawValue>,
            #[serde(borrow)]
            message: Option<&'a RawValue>,
        }
        let Ok(n) = serde_json::from_slice::<Notification<'_>>(upstream) else {
            return false;
        };
        let Some(p) = n.params.filter(|_| n.method == "notifications/progress") else {
            return false;
        };
        let Ok(p) = serde_json::from_str::<Params<'_>>(p.get()) else {
            return false;
        };
        // Only what the spec allows is passed on: numbers, and a string message.
        let number = |v: &RawValue| {
            v.get()
                .starts_with(|c: char| c == '-' || c.is_ascii_digit())
        };
        if !number(p.progress)
            || p.total.is_some_and(|t| !number(t))
            || p.message.is_some_and(|m| !m.get().starts_with('"'))
        {
            return false;
        }
        let mut out = Vec::with_capacity(128 + self.token.len());
        out.extend_from_slice(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"#,
        );
        out.extend_from_slice(&self.token);
        for (key, v) in [
            (&br#","progress":"#[..], Some(p.progress)),
            (br#","total":"#, p.total),
            (br#","message":"#, p.message),
        ] {
            if let Some(v) = v {
                out.extend_from_slice(key);
                out.extend_from_slice(v.get().as_bytes());
            }
        }
        out.extend_from_slice(b"}}");
        self.sink.try_send(Bytes::from(out)).is_ok()
    }
}

tokio::task_local! {
    /// Time spent upstream by the proxied calls of the request being served.
    static UPSTREAM: Cell<Option<Duration>>;
}

/// Adds `d` to the upstream time of the request being served (within [`timed`]).
pub(crate) fn note_upstream(d: Duration) {
    let _ = UPSTREAM.try_with(|u| u.set(Some(u.get().unwrap_or_default() + d)));
}

/// Runs a request's handling and returns, beside its output, the `Server-Timing` value that
/// splits its time: `upstream` (the proxied calls' time on the wire, [`note_upstream`]) and
/// `gateway` (the rest, from `start` to now). `None` when no upstream call was made.
pub(crate) async fn timed<T>(start: Instant, work: impl Future<Output = T>) -> (T, Option<String>) {
    UPSTREAM
        .scope(Cell::new(None), async move {
            let out = work.await;
            let timing = UPSTREAM
                .with(Cell::get)
                .map(|up| server_timing(up, start.elapsed()));
            (out, timing)
        })
        .await
}

/// `upstream;dur=U, gateway;dur=G` in milliseconds (microsecond precision), G = total − U.
fn server_timing(upstream: Duration, total: Duration) -> String {
    // Whole microseconds as `m.uuu` milliseconds, without float formatting (every proxied call).
    let ms = |d: Duration| {
        let us = d.as_micros();
        (us / 1000, us % 1000)
    };
    let mut out = String::with_capacity(48);
    let mut put = |label: &str, d: Duration| {
        let (whole, frac) = ms(d);
        out.push_str(label);
        out.push_str(itoa::Buffer::new().format(whole));
        out.push('.');
        for digit in [frac / 100, frac / 10 % 10, frac % 10] {
            out.push(char::from(b'0' + digit as u8));
        }
    };
    put("upstream;dur=", upstream);
    put(", gateway;dur=", total.saturating_sub(upstream));
    out
}

/// The upstreams behind a gateway.
pub trait Proxy: Send + Sync + std::fmt::Debug {
    /// Every upstream tool, namespaced.
    fn tools(&self) -> Vec<ProxiedTool>;
    /// Calls tool `index` of [`tools`](Self::tools) with raw JSON `arguments`; the raw
    /// `result` object as a client of revision `client` reads it (adapted to that revision). With
    /// `progress`, the upstream is asked for progress and what it sends is relayed to the
    /// client as it arrives.
    fn call(
        &self,
        index: usize,
        arguments: Option<Bytes>,
        progress: Option<ProgressRelay>,
        client: Revision,
    ) -> ProxyFuture;
    /// The upstream client work of the calling thread, to run (on a `LocalSet`) on every
    /// thread of a server of current-thread runtimes: calls made on that thread then stay on
    /// it (no hand-over to another thread, no wake-up of one). `None`: calls go elsewhere.
    fn lane(&self) -> Option<Pin<Box<dyn Future<Output = ()>>>> {
        None
    }
    /// Lets the calling thread's lane finish: it closes its sessions and its future ends.
    fn end_lane(&self) {}
    /// Whether the calling thread has a lane ([`lane`](Self::lane) was called here and not
    /// ended): the thread runs a `LocalSet`, where its connections' tasks then belong too.
    fn has_lane(&self) -> bool {
        false
    }
}

/// The members of a 2026-07-28 result object that a client of an earlier revision does not know.
pub(crate) const OLDER_CLIENT_DROPS: [&str; 2] = ["resultType", "_meta"];

/// The result object for a client of revision `rev`, from an upstream of the other era or the
/// same.
pub(crate) fn adapt(result: &[u8], upstream_modern: bool, rev: Revision) -> Cow<'_, [u8]> {
    let client_modern = !rev.has_handshake();
    match (upstream_modern, client_modern) {
        (false, true) => match result.iter().rposition(|&b| b == b'}') {
            Some(end) => {
                let body = &result[..end];
                let empty = body.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
                let mut out = Vec::with_capacity(result.len() + MODERN_RESULT_TAIL.len());
                out.extend_from_slice(body);
                out.extend_from_slice(if empty {
                    &MODERN_RESULT_TAIL.as_bytes()[1..]
                } else {
                    MODERN_RESULT_TAIL.as_bytes()
                });
                out.push(b'}');
                Cow::Owned(out)
            }
            None => Cow::Borrowed(result),
        },
        // What an older client does not know goes; the rest stays as the upstream wrote it.
        // The result is part of a reply decoded as a whole (`Checked::Yes`).
        (true, false) => scan::without_members(result, &OLDER_CLIENT_DROPS, scan::Checked::Yes)
            .map_or(Cow::Borrowed(result), Cow::Owned),
        _ => Cow::Borrowed(result),
    }
}

/// Whether a result object says `isError: true` (what the audit log records): the key, then
/// `true` after the colon and any whitespace.
pub(crate) fn is_tool_error(result: &[u8]) -> bool {
    const KEY: &[u8] = br#""isError""#;
    // Every proxied call: a vectorised search, not a comparison at every byte.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(KEY));
    FINDER.find_iter(result).any(|i| {
        result[i + KEY.len()..]
            .iter()
            .skip_while(|b| b.is_ascii_whitespace() || **b == b':')
            .take(4)
            .eq(b"true".iter())
    })
}

static REFERENCE: AtomicU64 = AtomicU64::new(1);

/// The sanitized JSON-RPC error for a failed proxied call: standard codes pass through with a
/// generic message; the upstream's words go to the log under the reference the client sees.
pub(crate) fn sanitize(e: &ProxyError, tool: &str) -> (i64, String) {
    let reference = REFERENCE.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(reference, tool, error = %e, "upstream call failed");
    let (code, what) = match e {
        ProxyError::Rpc { code: c, .. } if (-32700..=-32600).contains(c) => {
            (*c, "the upstream refused the call")
        }
        ProxyError::Rpc { .. } => (code::INTERNAL_ERROR, "the upstream failed"),
        ProxyError::Timeout => (code::INTERNAL_ERROR, "the upstream did not answer in time"),
        ProxyError::Unavailable { .. } => (code::INTERNAL_ERROR, "the upstream is unavailable"),
    };
    (
        code,
        format!("Upstream error: {what} (gateway log reference {reference})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_cross_eras() {
        let old = br#"{"content":[],"isError":false}"#;
        let up = adapt(old, false, Revision::V2026_07_28);
        let v: Value = serde_json::from_slice(&up).unwrap();
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["isError"], false);
        let empty: Value =
            serde_json::from_slice(&adapt(b"{}", false, Revision::V2026_07_28)).unwrap();
        assert_eq!(empty["resultType"], "complete");
        let modern = br#"{"content":[],"resultType":"complete","_meta":{"x":1}}"#;
        let down: Value =
            serde_json::from_slice(&adapt(modern, true, Revision::V2025_06_18)).unwrap();
        assert!(down.get("resultType").is_none() && down.get("_meta").is_none());
        let kept =
            br#"{"z":{"resultType":1},"resultType":"complete","a\"b":[1.50,"\u00e9"],"_meta":{}}"#;
        assert_eq!(
            &*adapt(kept, true, Revision::V2025_11_25),
            br#"{"z":{"resultType":1},"a\"b":[1.50,"\u00e9"]}"#,
            "members keep their order and their text; only top-level keys go"
        );
        let not_object = br#"[1]"#;
        assert!(matches!(
            adapt(not_object, true, Revision::V2025_11_25),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            adapt(old, false, Revision::V2025_11_25),
            Cow::Borrowed(_)
        ));
        assert!(is_tool_error(br#"{"content":[],"isError":true}"#));
        assert!(is_tool_error(br#"{"isError" :  true, "content":[]}"#));
        assert!(!is_tool_error(br#"{"isError": false}"#));
        assert!(is_tool_error(br#"{"m":{"isError":false},"isError":true}"#));
        assert!(!is_tool_error(br#"{"isError""#), "the key at the very end");
        assert!(!is_tool_error(old));
    }

    #[tokio::test]
    async fn server_timing_splits_upstream_and_gateway_time() {
        let start = Instant::now() - Duration::from_millis(5);
        let ((), none) = timed(start, async {}).await;
        assert_eq!(none, None, "no upstream call, no header");
        let ((), t) = timed(start, async {
            note_upstream(Duration::from_micros(1500));
            note_upstream(Duration::from_micros(500));
        })
        .await;
        let t = t.unwrap();
        let (up, gw) = t.split_once(", ").unwrap();
        assert_eq!(up, "upstream;dur=2.000");
        assert_eq!(
            server_timing(
                Duration::from_micros(12_345_678),
                Duration::from_micros(12_345_987)
            ),
            "upstream;dur=12345.678, gateway;dur=0.309"
        );
        let gw: f64 = gw.strip_prefix("gateway;dur=").unwrap().parse().unwrap();
        assert!((3.0..1000.0).contains(&gw), "{t}");
        note_upstream(Duration::from_secs(1)); // outside a request: ignored, no panic
    }

    #[test]
    fn progress_is_relayed_under_the_clients_token() {
        let (sink, mut rx) = mpsc::channel(4);
        let relay = ProgressRelay {
            token: Bytes::from_static(br#""client-7""#),
            sink,
        };
        assert!(relay.relay(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":12,"progress":2,"total":5,"message":"two \"of\" five"}}"#
        ));
        let v: Value = serde_json::from_slice(&rx.try_recv().unwrap()).unwrap();
        assert_eq!(v["method"], "notifications/progress");
        assert_eq!(v["params"]["progressToken"], "client-7");
        assert_eq!(v["params"]["progress"], 2, "numbers keep their form");
        assert_eq!(v["params"]["total"], 5);
        assert_eq!(v["params"]["message"], "two \"of\" five");
        assert!(!relay.relay(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#));
        assert!(!relay.relay(b"not json"));
        assert!(
            !relay.relay(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":"half"}}"#),
            "a progress that is not a number is not passed on"
        );
        assert!(rx.try_recv().is_err(), "only progress is relayed");
    }

    #[test]
    fn errors_are_sanitized() {
        let (c, m) = sanitize(
            &ProxyError::Unavailable {
                detail: "connect 10.1.2.3:8080 refused".into(),
            },
            "t",
        );
        assert_eq!(c, code::INTERNAL_ERROR);
        assert!(!m.contains("10.1.2.3") && m.contains("reference"));
        let (c, m) = sanitize(
            &ProxyError::Rpc {
                code: -32602,
                detail: "Traceback (most recent call last): at /srv/app.py".into(),
            },
            "t",
        );
        assert_eq!(c, -32602);
        assert!(!m.contains("Traceback"));
    }
}
