//! What every check of a scenario shares: TOML errors made readable, key hints, "did you
//! mean", closed sets of names, durations, and the one range check.

use std::fmt::Display;
use std::time::Duration;

use toml::Spanned;

use super::raw::KNOWN_KEYS;
use super::{ScenarioError, Source};

pub(super) fn line_of(src: &Source<'_>, offset: usize) -> usize {
    src.text[..offset.min(src.text.len())].matches('\n').count() + 1
}

pub(super) fn toml_error(src: &Source<'_>, e: &toml::de::Error) -> ScenarioError {
    let span = e.span().unwrap_or(0..0);
    let raw_msg = e.message().trim().to_string();
    let mut message = raw_msg
        .replace("expected u32", "expected a non-negative integer")
        .replace("expected f64", "expected a number")
        .replace("expected a string", "expected a string (in quotes)");
    let loc_key = super::locate::locate(src.text, span.start).key;
    let mut hint = key_hint(&loc_key);
    if let Some(field) = between(&raw_msg, "unknown field `", "`") {
        let table = table_of(&loc_key, field);
        let known = KNOWN_KEYS
            .iter()
            .find(|(t, _)| *t == table)
            .map(|(_, k)| *k)
            .unwrap_or(&[]);
        message = format!("unknown key `{field}`");
        hint = Some(match closest(field, known) {
            Some(k) => format!("did you mean `{k}`? (keys here: {})", known.join(", ")),
            None => format!("keys here: {}", known.join(", ")),
        });
    } else if let Some(field) = between(&raw_msg, "missing field `", "`") {
        message = format!("missing key `{field}`");
    }
    if hint.is_none() && span.is_empty() {
        hint =
            Some("check the TOML syntax: key = value, strings in quotes, [table] headers".into());
    }
    src.error(span, message, hint)
}

/// The table an unknown key was found in, from the located key path.
fn table_of(path: &str, field: &str) -> String {
    let path = strip_indexes(path);
    let trimmed = path
        .strip_suffix(field)
        .unwrap_or(&path)
        .trim_end_matches('.');
    trimmed.to_string()
}

fn strip_indexes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)? + i;
    Some(&s[i..j])
}

/// The known key nearest to `word` by edit distance, if it is plausibly a typo.
pub fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

pub(super) fn key_hint(path: &str) -> Option<String> {
    let key = strip_indexes(path);
    let h = match key.as_str() {
        "name" => "a short name for the run, e.g. name = \"gateway-smoke\"",
        "load.concurrency" => "the number of virtual users, a positive integer: concurrency = 16",
        "load.duration" | "load.warmup" | "load.timeout" => {
            "a duration in quotes, e.g. \"30s\", \"500ms\", \"2m\""
        }
        "load.workers" => "generator threads, a positive integer (default: one per core)",
        "target.sessions_per_connection" => {
            "with http = \"2\": sessions sharing one connection, e.g. sessions_per_connection = 1000 (1: a connection each)"
        }
        "load.model" => "\"closed\" (virtual users) or \"open\" (arrival rate)",
        "workload.weight" => {
            "a positive integer; entries are picked in proportion to their weights"
        }
        "workload.method" => "\"tools/list\" or \"tools/call\"",
        "workload.tool" => "the name of a tool the target lists",
        "target.url" | "targets.url" => {
            "e.g. url = \"http://127.0.0.1:8080/mcp\" (http, https, ws or wss)"
        }
        "target.transport" | "embedded.transport" => {
            "\"streamable-http\", \"sse\" (legacy HTTP+SSE), \"websocket\" or \"stdio\""
        }
        "target.protocol" | "embedded.protocol" => {
            "\"auto\" or one of 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28"
        }
        "target.http" | "embedded.http" => "\"1.1\" or \"2\"",
        "target.command" => {
            "the server command as an array, e.g. command = [\"node\", \"server.js\", \"stdio\"]"
        }
        "target.tls.ca" => "a PEM file of the CA (or self-signed certificate) to trust",
        "load.sessions" => {
            "\"per-vu\" (a session per virtual user), \"shared\" (one per worker thread, many requests in flight) or \"per-request\" (session churn)"
        }
        "load.arrival" => "\"poisson\" (independent arrivals) or \"uniform\" (evenly spaced)",
        "load.engine" => {
            "\"auto\" (the worker's event loop where the load fits it) or \"tasks\" (a task per virtual user)"
        }
        "load.hang_after" => {
            "a duration shorter than timeout: a request unanswered this long while others are answered is a hang, e.g. hang_after = \"2s\""
        }
        "target.pid" => {
            "a process id of the target, or a list (a gateway and its upstreams), e.g. pid = [4242, 4250]"
        }
        "load.release_interval" => {
            "the shortest time between two releases of arrivals, from \"0us\" (each at its own time) to \"10ms\" (default \"100us\")"
        }
        "workload.progress" => {
            "true to ask for progress notifications (progressToken = request id)"
        }
        "embedded.response" => "\"json\" or \"sse\"",
        "embedded.catalog" => {
            "the number of synthetic tools the built-in server adds to tools/list"
        }
        "embedded.page_size" => "tools per tools/list page, a positive integer",
        "embedded.backend_latency" => {
            "e.g. \"5ms\", \"uniform:1ms..10ms\", \"lognormal:p50=2ms,p99=20ms\""
        }
        "embedded.backend_error_rate" => "a fraction from 0.0 to 1.0",
        "embedded.backend_payload" => "extra bytes in each backend response",
        "ab.pairs" => "rounds per level, from 5 (Student's t needs pairs): pairs = 10",
        "ab.slice" | "find_max.step_duration" | "find_max.confirm_duration" => {
            "a duration in quotes, e.g. \"2s\""
        }
        "find_max.search" => "\"adaptive\" (grow, bisect, confirm) or \"step\"",
        "find_max.precision" => "a fraction of the level, e.g. precision = 0.05",
        _ => return None,
    };
    Some(h.to_string())
}

/// A value from a closed set of names (aliases included), or an error naming `what` with the
/// key's hint.
pub(super) fn one_of<T: Copy>(
    src: &Source<'_>,
    v: &Spanned<String>,
    what: &str,
    key: &str,
    options: &[(&str, T)],
) -> Result<T, ScenarioError> {
    let s = v.get_ref().as_str();
    options
        .iter()
        .find(|(name, _)| *name == s)
        .map(|(_, t)| *t)
        .ok_or_else(|| src.error(v.span(), format!("unknown {what} `{s}`"), key_hint(key)))
}

/// A duration in the project's one grammar (`mcpbench_knobs`), or an error at its value.
pub(super) fn duration(
    src: &Source<'_>,
    v: &Spanned<String>,
    key: &str,
) -> Result<Duration, ScenarioError> {
    mcpbench_knobs::parse_duration(v.get_ref())
        .map_err(|e| src.error(v.span(), e.to_string(), key_hint(key)))
}

/// A number from `lo` up to `hi` (no upper bound with `None`), or an error that names the
/// bounds. NaN is never within.
pub(super) fn within<T: PartialOrd + Copy + Display>(
    src: &Source<'_>,
    v: &Spanned<T>,
    lo: T,
    hi: Option<T>,
    key: &str,
) -> Result<T, ScenarioError> {
    let x = *v.get_ref();
    if x >= lo && hi.is_none_or(|h| x <= h) {
        return Ok(x);
    }
    let name = key.rsplit('.').next().unwrap_or(key);
    let message = match hi {
        Some(h) => format!("{name} must be from {lo} to {h}"),
        None => format!("{name} must be at least {lo}"),
    };
    Err(src.error(v.span(), message, key_hint(key)))
}

/// An optional key checked with [`within`].
pub(super) fn opt_within<T: PartialOrd + Copy + Display>(
    src: &Source<'_>,
    v: &Option<Spanned<T>>,
    lo: T,
    hi: Option<T>,
    key: &str,
) -> Result<Option<T>, ScenarioError> {
    v.as_ref().map(|v| within(src, v, lo, hi, key)).transpose()
}
