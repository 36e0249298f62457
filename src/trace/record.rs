//! What `mcpbench record` and `mcpbench trace` need around [`crate::trace`]: a trace's header
//! (the upstream written without credentials), a gateway audit log converted to a trace
//! ([`from_audit`]), and a one-screen summary of a trace ([`show`]). The recording itself is
//! the reference server's (`server::recorder`), in front of an upstream (`crate::gateway`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::trace::{self, Entry, Header, REDACTED, Trace, TraceError, is_secret};

/// A new trace's header: `source` (`record`, `audit`), created now.
pub fn header(source: &str, upstream: Option<String>) -> Header {
    Header {
        mcpbench_trace: trace::VERSION,
        created: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        source: source.to_string(),
        upstream,
    }
}

/// An upstream target (`http(s)://…`, `sse+…`, `ws(s)://…`, `stdio:COMMAND ARGS…`) as a
/// trace may show it: a URL without its user information and with secret-looking query values
/// redacted; a command with secret-looking arguments (`--token X`, `--api-key=X`, `sk-…`)
/// redacted.
pub fn printable_target(target: &str) -> String {
    if let Some(cmd) = target.strip_prefix("stdio:") {
        let mut words = Vec::new();
        let mut secret_next = false;
        for w in cmd.split_whitespace() {
            let flag = w.trim_start_matches('-');
            let shown = match w.split_once('=') {
                _ if secret_next => REDACTED.to_string(),
                Some((k, v)) if is_secret(Some(k.trim_start_matches('-')), v) => {
                    format!("{k}={REDACTED}")
                }
                None if is_secret(None, w) => REDACTED.to_string(),
                _ => w.to_string(),
            };
            secret_next = w.starts_with('-') && !w.contains('=') && is_secret(Some(flag), "x");
            words.push(shown);
        }
        return format!("stdio:{}", words.join(" "));
    }
    let (scheme, rest) = target.split_once("://").unwrap_or(("", target));
    let rest = rest.split('#').next().unwrap_or_default();
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.find('/') {
        Some(i) => before_query.split_at(i),
        None => (before_query, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let mut out = format!("{scheme}://{host}{path}");
    if let Some(q) = query {
        let pairs: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if is_secret(Some(k), v) => format!("{k}={REDACTED}"),
                _ => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

/// What [`from_audit`] made of an audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Converted {
    /// `tools/call` entries (invocations that ran).
    pub calls: usize,
    /// `tools/list` entries (discoveries).
    pub lists: usize,
    pub sessions: usize,
    /// Invocations left out: refused by the policy, or over a rate limit (they never reached
    /// a tool, so a replay would not know what they would have done).
    pub denied: usize,
    pub rate_limited: usize,
    /// Secret-looking values in arguments (redacted when written).
    pub redacted: usize,
}

/// One line of a gateway audit log (`mcpbench serve --audit`), what a trace needs of it.
#[derive(Debug, Deserialize)]
struct AuditLine {
    ts: String,
    event: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    session: Option<u64>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    latency_us: Option<u64>,
}

/// Converts a gateway's audit log (JSON lines, `mcpbench serve --audit`) into a trace:
/// invocations become `tools/call` entries and discoveries `tools/list`, arriving at `ts` less
/// their latency (relative to the first), in the session the line names (else its tenant's,
/// else one). Results are not in an audit log, so no entry has a digest. Arguments logged as
/// `"[redacted]"` (the default without `--audit-arguments`) are refused, unless
/// `empty_arguments`, which replays such calls with `{}`. `path` names the log in errors.
pub fn from_audit(
    audit: impl BufRead,
    path: &str,
    empty_arguments: bool,
) -> Result<(Vec<Entry>, Converted), TraceError> {
    let format = |line: usize, message: String| TraceError::Format {
        path: path.to_string(),
        line,
        message,
    };
    let mut c = Converted::default();
    let mut tenants: HashMap<String, u64> = HashMap::new();
    // (arrival in ns since the epoch, entry with t unset)
    let mut found: Vec<(i128, Entry)> = Vec::new();
    for line in crate::trace::json_lines(audit, path) {
        let (n, line) = line?;
        let a: AuditLine = serde_json::from_str(&line).map_err(|e| {
            format(
                n,
                format!("not an audit line ({e}); expected what `mcpbench serve --audit` writes"),
            )
        })?;
        let ts = time::OffsetDateTime::parse(&a.ts, &time::format_description::well_known::Rfc3339)
            .map_err(|e| format(n, format!("ts `{}` is not an RFC 3339 time: {e}", a.ts)))?;
        let latency = std::time::Duration::from_micros(a.latency_us.unwrap_or(0));
        let (method, params, outcome) = match a.event.as_str() {
            "discovery" => ("tools/list", Value::Object(Map::new()), "ok".to_string()),
            "invocation" => {
                let outcome = a.outcome.unwrap_or_default();
                match outcome.as_str() {
                    "denied" => {
                        c.denied += 1;
                        continue;
                    }
                    "rate_limited" => {
                        c.rate_limited += 1;
                        continue;
                    }
                    _ => {}
                }
                let tool = a
                    .tool
                    .ok_or_else(|| format(n, "an invocation without `tool`".into()))?;
                let mut p = Map::new();
                p.insert("name".into(), Value::String(tool));
                match a.arguments {
                    Some(Value::String(s)) if s == REDACTED => {
                        if !empty_arguments {
                            return Err(format(
                                n,
                                "the arguments were not logged (\"[redacted]\"), so the calls \
                                 cannot be replayed: run the gateway with `--audit-arguments` \
                                 (mcpbench serve --audit FILE --audit-arguments), or convert \
                                 with `--empty-arguments` to replay every call with {}"
                                    .into(),
                            ));
                        }
                        p.insert("arguments".into(), Value::Object(Map::new()));
                    }
                    None | Some(Value::Null) => {}
                    Some(args) => {
                        p.insert("arguments".into(), args);
                    }
                }
                (
                    "tools/call",
                    Value::Object(p),
                    if outcome.is_empty() {
                        "ok".into()
                    } else {
                        outcome
                    },
                )
            }
            // Errors (authentication, upstream) are not requests.
            _ => continue,
        };
        let session = match (a.session, a.tenant) {
            (Some(s), _) => s,
            (None, Some(t)) => {
                let next = tenants.len() as u64 + 1;
                *tenants.entry(t).or_insert(next)
            }
            (None, None) => 1,
        };
        if method == "tools/call" {
            c.calls += 1;
        } else {
            c.lists += 1;
        }
        let arrived = ts.unix_timestamp_nanos() - latency.as_nanos() as i128;
        found.push((
            arrived,
            Entry {
                t: 0.0,
                session,
                method: method.into(),
                params,
                digest: None,
                latency: latency.as_secs_f64(),
                outcome,
            },
        ));
    }
    let first = found.iter().map(|(a, _)| *a).min().unwrap_or(0);
    found.sort_by_key(|(a, _)| *a);
    let mut sessions: Vec<u64> = found.iter().map(|(_, e)| e.session).collect();
    sessions.sort_unstable();
    sessions.dedup();
    c.sessions = sessions.len();
    let entries = found
        .into_iter()
        .map(|(a, mut e)| {
            e.t = (a - first) as f64 / 1e9;
            c.redacted += trace::redact(&mut e.params.clone());
            e
        })
        .collect();
    Ok((entries, c))
}

/// Writes a trace: `header`, then `entries` (secret-looking values redacted).
pub fn write(path: &Path, header: &Header, entries: &[Entry]) -> Result<(), TraceError> {
    let io = |source| TraceError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = trace::Writer::new(std::io::BufWriter::new(file), header).map_err(io)?;
    for e in entries {
        w.entry(e).map_err(io)?;
    }
    w.flush().map_err(io)?;
    w.into_inner()
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    Ok(())
}

/// A one-screen summary of a trace: its header, entries, sessions and span; per method (and
/// tool) the requests and their outcomes.
pub fn show(t: &Trace, path: &str) -> String {
    let mut out = String::new();
    let h = &t.header;
    let sessions: std::collections::BTreeSet<u64> = t.entries.iter().map(|e| e.session).collect();
    let _ = writeln!(
        out,
        "{path}: {} requests, {} session{}, over {:.3} s",
        t.entries.len(),
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" },
        t.span()
    );
    let _ = writeln!(
        out,
        "  source {}{}{}",
        if h.source.is_empty() { "?" } else { &h.source },
        if h.created.is_empty() {
            String::new()
        } else {
            format!(", created {}", h.created)
        },
        h.upstream
            .as_deref()
            .map(|u| format!(", upstream {u}"))
            .unwrap_or_default()
    );
    // Per operation: count and outcomes.
    let mut ops: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for e in &t.entries {
        let op = match e.params["name"].as_str() {
            Some(name) if e.method == "tools/call" => format!("tools/call {name}"),
            _ => e.method.clone(),
        };
        *ops.entry(op)
            .or_default()
            .entry(if e.outcome.is_empty() {
                "?".into()
            } else {
                e.outcome.clone()
            })
            .or_default() += 1;
    }
    let width = ops.keys().map(String::len).max().unwrap_or(0);
    for (op, outcomes) in &ops {
        let total: usize = outcomes.values().sum();
        let detail: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
        let _ = writeln!(out, "  {op:<width$}  {total:>7}  ({})", detail.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_lose_their_credentials() {
        assert_eq!(
            printable_target("https://user:pw@gw.example:8443/mcp?api_key=abc&x=1#frag"),
            "https://gw.example:8443/mcp?api_key=[redacted]&x=1"
        );
        assert_eq!(
            printable_target("http://127.0.0.1:8080/mcp"),
            "http://127.0.0.1:8080/mcp"
        );
        assert_eq!(
            printable_target("sse+http://h/sse?token=t"),
            "sse+http://h/sse?token=[redacted]"
        );
        assert_eq!(
            printable_target(
                "stdio:python server.py --token abc --api-key=def --port 3 sk-0123456789abcdef"
            ),
            "stdio:python server.py --token [redacted] --api-key=[redacted] --port 3 [redacted]"
        );
    }

    #[test]
    fn audit_lines_become_entries() {
        let log = r#"{"ts":"2026-12-02T10:00:01.000Z","event":"discovery","tenant":null,"session":1,"tools":2,"names":["a","b"]}
{"ts":"2026-12-02T10:00:01.500Z","event":"invocation","tenant":"acme","session":2,"tool":"echo","arguments":{"message":"hi","token":"s3cr3t"},"outcome":"ok","latency_us":250000}
{"ts":"2026-12-02T10:00:02.000Z","event":"invocation","tenant":"acme","session":2,"tool":"echo","arguments":{},"outcome":"denied","latency_us":0}
{"ts":"2026-12-02T10:00:02.000Z","event":"error","tenant":null,"type":"auth","context":"bad token"}
{"ts":"2026-12-02T10:00:03.000Z","event":"invocation","tenant":"other","tool":"add","arguments":null,"outcome":"tool_error","latency_us":1000}
"#;
        let (entries, c) = from_audit(log.as_bytes(), "a.jsonl", false).unwrap();
        assert_eq!(
            c,
            Converted {
                calls: 2,
                lists: 1,
                sessions: 2,
                denied: 1,
                rate_limited: 0,
                redacted: 1,
            }
        );
        assert_eq!(entries[0].method, "tools/list");
        assert_eq!(entries[0].t, 0.0);
        assert_eq!(entries[1].t, 0.25, "ts less the latency");
        assert_eq!(entries[1].session, 2);
        assert_eq!(entries[1].params["arguments"]["message"], "hi");
        // No session field: the tenant's number (first tenant seen without one).
        assert_eq!(entries[2].session, 1);
        assert_eq!(entries[2].params, serde_json::json!({"name": "add"}));
        assert_eq!(entries[2].outcome, "tool_error");
        assert!(entries.iter().all(|e| e.digest.is_none()));

        let redacted = r#"{"ts":"2026-12-02T10:00:01Z","event":"invocation","tenant":null,"tool":"echo","arguments":"[redacted]","outcome":"ok","latency_us":5}"#;
        let e = from_audit(redacted.as_bytes(), "a.jsonl", false).unwrap_err();
        assert!(
            e.to_string().contains("a.jsonl:1:") && e.to_string().contains("--audit-arguments"),
            "{e}"
        );
        let (entries, _) = from_audit(redacted.as_bytes(), "a.jsonl", true).unwrap();
        assert_eq!(entries[0].params["arguments"], serde_json::json!({}));

        let e = from_audit("{}\n".as_bytes(), "a.jsonl", false).unwrap_err();
        assert!(
            e.to_string().starts_with("a.jsonl:1: not an audit line"),
            "{e}"
        );
    }
}
