//! Traces: what MCP clients sent and got, as versioned JSON Lines (`mcpbench record` writes
//! them, `mcpbench trace from-audit` converts a gateway's audit log, a scenario's
//! `[replay]` reads them).
//!
//! ```text
//! {"mcpbench_trace":1,"created":"2026-12-02T16:00:00Z","source":"record","upstream":"…"}
//! {"t":0.0123,"session":1,"method":"tools/call","params":{"name":"echo","arguments":{…}},
//!  "digest":"fnv1a64:0123456789abcdef","latency":0.0021,"outcome":"ok"}
//! ```
//!
//! `t` is when the request arrived, in seconds from the first one; `session` numbers the
//! client sessions in order of appearance (never their ids); `digest` is [`digest`] of the
//! `result` (`null` when unknown, e.g. from an audit log); `latency` is seconds; `outcome` is
//! `ok`, `tool_error` or `error`. Secret-looking values are refused on reading ([`find_secret`])
//! unless redacted ([`redact`]).

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format version this build writes and reads.
pub const VERSION: u64 = 1;

/// What stands in for a redacted value.
pub const REDACTED: &str = "[redacted]";

/// Errors reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Format {
        path: String,
        line: usize,
        message: String,
    },
    #[error(
        "{path}:{line}: `{pointer}` looks like a secret; traces with secrets are refused — \
         redact them with `mcpbench trace redact {path}` (or record with the default redaction)"
    )]
    Secret {
        path: String,
        line: usize,
        pointer: String,
    },
}

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub mcpbench_trace: u64,
    /// RFC 3339, when recording started.
    #[serde(default)]
    pub created: String,
    /// `record` or `audit`.
    #[serde(default)]
    pub source: String,
    /// What was recorded (the upstream as given, without credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Seconds from the first request of the trace to this one's arrival.
    pub t: f64,
    /// The client session, numbered from 1 in order of appearance.
    pub session: u64,
    /// `tools/list` or `tools/call`.
    pub method: String,
    /// The request's params (`tools/call`: `name` and `arguments`), `_meta` left out.
    #[serde(default)]
    pub params: Value,
    /// [`digest`] of the result; `None` when not known.
    #[serde(default)]
    pub digest: Option<String>,
    /// Seconds from the request to its answer.
    #[serde(default)]
    pub latency: f64,
    /// `ok`, `tool_error` or `error`.
    #[serde(default)]
    pub outcome: String,
}

/// A trace read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub header: Header,
    /// In order of `t`.
    pub entries: Vec<Entry>,
}

impl Trace {
    /// The time from the first request to the last.
    pub fn span(&self) -> f64 {
        self.entries.last().map_or(0.0, |e| e.t)
    }

    /// Reads a trace; refuses a newer version, a malformed line, and secret-looking values.
    /// Entries may be in any order in the file (they are written as requests complete); they
    /// come back sorted by `t`.
    pub fn read(path: &Path) -> Result<Trace, TraceError> {
        let p = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| TraceError::Io {
            path: p.clone(),
            source,
        })?;
        Self::parse(std::io::BufReader::new(file), &p)
    }

    /// [`read`](Self::read) from any reader; `path` names it in errors.
    pub fn parse(r: impl BufRead, path: &str) -> Result<Trace, TraceError> {
        let format = |line: usize, message: String| TraceError::Format {
            path: path.to_string(),
            line,
            message,
        };
        let mut header = None;
        let mut entries: Vec<Entry> = Vec::new();
        for line in json_lines(r, path) {
            let (n, line) = line?;
            if header.is_none() {
                let h: Header = serde_json::from_str(&line).map_err(|e| {
                    format(
                        n,
                        format!(
                            "not a trace header ({e}); a trace starts with \
                             {{\"mcpbench_trace\":{VERSION},…}}"
                        ),
                    )
                })?;
                if h.mcpbench_trace != VERSION {
                    return Err(format(
                        n,
                        format!(
                            "trace version {} (this mcpbench reads version {VERSION})",
                            h.mcpbench_trace
                        ),
                    ));
                }
                header = Some(h);
                continue;
            }
            let e: Entry = serde_json::from_str(&line)
                .map_err(|e| format(n, format!("not a trace entry: {e}")))?;
            if !matches!(e.method.as_str(), "tools/list" | "tools/call") {
                return Err(format(
                    n,
                    format!(
                        "method `{}`: a trace replays tools/list and tools/call",
                        e.method
                    ),
                ));
            }
            if e.method == "tools/call" && !e.params["name"].is_string() {
                return Err(format(n, "a tools/call without params.name".into()));
            }
            if !e.t.is_finite() || e.t < 0.0 {
                return Err(format(n, format!("t = {}: not a time", e.t)));
            }
            if let Some(pointer) = find_secret(&e.params, "/params") {
                return Err(TraceError::Secret {
                    path: path.to_string(),
                    line: n,
                    pointer,
                });
            }
            entries.push(e);
        }
        let header = header.ok_or_else(|| format(1, "empty: no trace header".into()))?;
        // Written as requests complete (`mcpbench record`, an audit log), so not in order of
        // arrival: sorted here, requests that arrived together kept in file order.
        entries.sort_by(|a, b| a.t.total_cmp(&b.t));
        Ok(Trace { header, entries })
    }
}

/// The non-blank lines of a JSON Lines file, each with its number (from 1); `path` names it in
/// errors.
pub fn json_lines(
    r: impl BufRead,
    path: &str,
) -> impl Iterator<Item = Result<(usize, String), TraceError>> {
    r.lines()
        .enumerate()
        .filter_map(move |(i, line)| match line {
            Ok(l) if l.trim().is_empty() => None,
            Ok(l) => Some(Ok((i + 1, l))),
            Err(source) => Some(Err(TraceError::Io {
                path: path.to_string(),
                source,
            })),
        })
}

/// Writes a trace line by line.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    /// Secret-looking values are replaced with [`REDACTED`] (the default).
    redact: bool,
}

impl<W: Write> Writer<W> {
    /// Starts a trace with its header.
    pub fn new(mut out: W, header: &Header) -> std::io::Result<Self> {
        serde_json::to_writer(&mut out, header)?;
        out.write_all(b"\n")?;
        Ok(Writer { out, redact: true })
    }

    /// Writes params as they are, secrets included (`mcpbench record --keep-secrets`; such a
    /// trace is refused on reading until redacted).
    pub fn keep_secrets(mut self) -> Self {
        self.redact = false;
        self
    }

    /// Appends one entry (its params redacted first, unless [`keep_secrets`](Self::keep_secrets)).
    pub fn entry(&mut self, e: &Entry) -> std::io::Result<()> {
        if self.redact && find_secret(&e.params, "").is_some() {
            let mut e = e.clone();
            redact(&mut e.params);
            serde_json::to_writer(&mut self.out, &e)?;
        } else {
            serde_json::to_writer(&mut self.out, e)?;
        }
        self.out.write_all(b"\n")
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    pub fn get_ref(&self) -> &W {
        &self.out
    }
}

/// The digest of a JSON-RPC `result`: FNV-1a (64 bits) of its canonical form (object keys
/// sorted, no whitespace), its top-level `_meta` left out (where servers and gateways put what
/// varies by delivery). Equal results have equal digests whatever their key order.
pub fn digest(result: &Value) -> String {
    let mut h = Fnv::default();
    match result {
        Value::Object(m) => canonical_object(&mut h, m, true),
        v => canonical(&mut h, v),
    }
    format!("fnv1a64:{:016x}", h.0)
}

/// [`digest`] of the `result` of a raw JSON-RPC response; `None` when it has none (an error).
pub fn digest_of_response(message: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct R {
        result: Option<Value>,
    }
    let r: R = serde_json::from_slice(message).ok()?;
    r.result.as_ref().map(digest)
}

/// FNV-1a, 64 bits: the digest's hash, and a `Hasher` for tables whose keys are fixed when
/// they are built (a client's names only look up there, so an unkeyed hash is safe).
pub(crate) struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        self.bytes(bytes);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn canonical(h: &mut Fnv, v: &Value) {
    match v {
        Value::Object(m) => canonical_object(h, m, false),
        Value::Array(a) => {
            h.bytes(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    h.bytes(b",");
                }
                canonical(h, x);
            }
            h.bytes(b"]");
        }
        // Scalars as serde_json writes them (strings escaped the one way it escapes).
        v => h.bytes(v.to_string().as_bytes()),
    }
}

fn canonical_object(h: &mut Fnv, m: &serde_json::Map<String, Value>, top: bool) {
    let mut keys: Vec<&String> = m.keys().filter(|k| !(top && *k == "_meta")).collect();
    keys.sort();
    h.bytes(b"{");
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            h.bytes(b",");
        }
        h.bytes(Value::String(k.clone()).to_string().as_bytes());
        h.bytes(b":");
        canonical(h, &m[k]);
    }
    h.bytes(b"}");
}

/// Object keys whose values are secrets whatever they hold.
const SECRET_KEYS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "secret",
    "authorization",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "client_secret",
    "credential",
    "cookie",
    "session_token",
];

fn secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase().replace('-', "_");
    SECRET_KEYS
        .iter()
        .any(|s| k == *s || k.ends_with(&format!("_{s}")))
        || k.ends_with("token")
        || k.ends_with("password")
        || k.ends_with("secret")
}

/// Values that are secrets whatever key holds them: bearer credentials, well-known key
/// prefixes, JSON Web Tokens.
fn secret_value(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    lower.starts_with("bearer ")
        || lower.starts_with("basic ")
        || [
            "sk-",
            "sk_live_",
            "ghp_",
            "gho_",
            "github_pat_",
            "xoxb-",
            "xoxp-",
            "AKIA",
        ]
        .iter()
        .any(|p| s.starts_with(p) && s.len() >= 16)
        || (s.starts_with("eyJ") && s.matches('.').count() == 2 && s.len() >= 32)
}

/// Whether `value` (held by `key`, if it has one) looks like a secret: for what is not JSON,
/// such as a command line's `--api-key VALUE` or a URL's query.
pub fn is_secret(key: Option<&str>, value: &str) -> bool {
    value != REDACTED && (key.is_some_and(secret_key) || secret_value(value))
}

/// The JSON pointer (under `at`) of the first secret-looking value not yet redacted.
pub fn find_secret(v: &Value, at: &str) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            let redacted = x.as_str() == Some(REDACTED);
            if secret_key(k) && !redacted && !x.is_null() {
                return Some(here);
            }
            find_secret(x, &here)
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| find_secret(x, &format!("{at}/{i}"))),
        Value::String(s) if secret_value(s) => Some(at.to_string()),
        _ => None,
    }
}

/// Replaces every secret-looking value with [`REDACTED`]; how many were.
pub fn redact(v: &mut Value) -> usize {
    match v {
        Value::Object(m) => m
            .iter_mut()
            .map(|(k, x)| {
                if secret_key(k) && !x.is_null() && x.as_str() != Some(REDACTED) {
                    *x = Value::String(REDACTED.into());
                    1
                } else {
                    redact(x)
                }
            })
            .sum(),
        Value::Array(a) => a.iter_mut().map(redact).sum(),
        Value::String(s) if secret_value(s) => {
            *s = REDACTED.into();
            1
        }
        _ => 0,
    }
}

/// Reads, redacts and rewrites a trace in place (`mcpbench trace redact`); how many values
/// were redacted.
pub fn redact_file(path: &Path) -> Result<usize, TraceError> {
    let p = path.display().to_string();
    let io = |source| TraceError::Io {
        path: p.clone(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let mut out = Vec::with_capacity(text.len());
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if i == 0 {
            out.extend_from_slice(line.as_bytes());
        } else {
            let mut v: Value = serde_json::from_str(line).map_err(|e| TraceError::Format {
                path: p.clone(),
                line: i + 1,
                message: format!("not a trace entry: {e}"),
            })?;
            if let Some(params) = v.get_mut("params") {
                n += redact(params);
            }
            serde_json::to_writer(&mut out, &v).map_err(|e| io(e.into()))?;
        }
        out.push(b'\n');
    }
    std::fs::write(path, out).map_err(io)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digests_ignore_key_order_and_meta_but_not_values() {
        let a = json!({"content":[{"type":"text","text":"hi"}],"isError":false});
        let b = json!({"isError":false,"_meta":{"x":1},"content":[{"text":"hi","type":"text"}]});
        let c = json!({"content":[{"type":"text","text":"ho"}],"isError":false});
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        assert!(digest(&a).starts_with("fnv1a64:"));
        // Nested `_meta` is content.
        let d = json!({"content":[{"type":"text","text":"hi","_meta":{"x":1}}],"isError":false});
        assert_ne!(digest(&a), digest(&d));
        assert_eq!(
            digest_of_response(br#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"content":[{"text":"hi","type":"text"}]}}"#),
            Some(digest(&a))
        );
        assert_eq!(
            digest_of_response(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#),
            None
        );
    }

    #[test]
    fn secrets_are_found_redacted_and_refused() {
        let mut p = json!({"name":"fetch","arguments":{"url":"http://x","api_key":"abc",
            "headers":["Bearer abcdefgh"],"note":"sk-0123456789abcdefghij","n":3}});
        assert_eq!(
            find_secret(&p, "/params").as_deref(),
            Some("/params/arguments/api_key")
        );
        assert_eq!(redact(&mut p), 3);
        assert_eq!(find_secret(&p, "/params"), None);
        assert_eq!(p["arguments"]["url"], "http://x");
        assert_eq!(p["arguments"]["n"], 3);

        let text = "{\"mcpbench_trace\":1}\n\
            {\"t\":0,\"session\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"arguments\":{\"password\":\"hunter2\"}}}\n";
        let e = Trace::parse(text.as_bytes(), "t.jsonl").unwrap_err();
        assert!(
            e.to_string()
                .contains("t.jsonl:2: `/params/arguments/password`"),
            "{e}"
        );
    }

    #[test]
    fn entries_are_sorted_by_arrival_and_secrets_kept_when_asked() {
        let text = "{\"mcpbench_trace\":1}\n\
            {\"t\":2,\"session\":1,\"method\":\"tools/list\"}\n\
            {\"t\":1,\"session\":2,\"method\":\"tools/list\"}\n\
            {\"t\":1,\"session\":3,\"method\":\"tools/list\"}\n";
        let t = Trace::parse(text.as_bytes(), "x").unwrap();
        let order: Vec<u64> = t.entries.iter().map(|e| e.session).collect();
        assert_eq!(order, [2, 3, 1], "by t, ties in file order");
        assert_eq!(t.span(), 2.0);

        let header = Header {
            mcpbench_trace: VERSION,
            created: String::new(),
            source: "record".into(),
            upstream: None,
        };
        let e = Entry {
            t: 0.0,
            session: 1,
            method: "tools/call".into(),
            params: json!({"name":"login","arguments":{"password":"hunter2"}}),
            digest: None,
            latency: 0.0,
            outcome: "ok".into(),
        };
        let mut w = Writer::new(Vec::new(), &header).unwrap().keep_secrets();
        w.entry(&e).unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        assert!(text.contains("hunter2"), "{text}");
        assert!(
            Trace::parse(text.as_bytes(), "x").is_err(),
            "refused on reading"
        );
        assert!(is_secret(Some("api_key"), "x") && is_secret(None, "Bearer abcdefgh"));
        assert!(!is_secret(Some("query"), "x") && !is_secret(Some("token"), REDACTED));
    }

    #[test]
    fn traces_round_trip_and_bad_lines_name_their_line() {
        let mut w = Writer::new(
            Vec::new(),
            &Header {
                mcpbench_trace: VERSION,
                created: "2026-12-02T00:00:00Z".into(),
                source: "record".into(),
                upstream: None,
            },
        )
        .unwrap();
        let e = Entry {
            t: 0.5,
            session: 1,
            method: "tools/call".into(),
            params: json!({"name":"echo","arguments":{"message":"hi","token":"t0k3n"}}),
            digest: Some("fnv1a64:0000000000000001".into()),
            latency: 0.001,
            outcome: "ok".into(),
        };
        w.entry(&e).unwrap();
        let bytes = w.into_inner();
        let t = Trace::parse(bytes.as_slice(), "x").unwrap();
        assert_eq!(t.entries.len(), 1);
        assert_eq!(t.entries[0].params["arguments"]["token"], REDACTED);
        assert_eq!(t.span(), 0.5);

        for (bad, says) in [
            ("{\"mcpbench_trace\":2}\n", "x:1: trace version 2"),
            ("{\"t\":1}\n", "x:1: not a trace header"),
            (
                "{\"mcpbench_trace\":1}\n{\"t\":1,\"session\":1,\"method\":\"ping\"}\n",
                "x:2: method `ping`",
            ),
        ] {
            let e = Trace::parse(bad.as_bytes(), "x").unwrap_err().to_string();
            assert!(e.contains(says), "{e} should say {says}");
        }
    }
}
pub mod record;
