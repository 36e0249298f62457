//! `mcpbench init URL` or `mcpbench init -- CMD…`: connects to a server, lists its tools, and writes a
//! starter scenario that calls every tool with arguments made from its `inputSchema` (types,
//! enums, ranges, formats, required fields). Arguments are checked like any scenario's (a
//! complete JSON Schema validator), then each tool is called once with the very bytes a run
//! sends: tools that refuse them, fail or time out are written commented out, with the
//! server's reason, so the scenario runs clean from the first try.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::client::endpoint::{for_plan, of_remote};
use crate::client::workload_fit::{check_workload, trial};
use crate::client::{self, ClientError, Preflight, PreflightError};
use crate::metrics::outcome::Outcome;
use crate::protocol::schema;
use crate::scenario::{self, ScenarioError};
use crate::scenario::{Diagnostic, Plan, Target};
use crate::transport::Endpoint;

/// What `init` needs to know (its command line).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InitOptions {
    /// The server's URL: http(s)://…/mcp, ws(s)://…, or a legacy …/sse endpoint with
    /// --transport sse.
    #[arg(required_unless_present = "command")]
    pub url: Option<String>,
    /// Instead of a URL, after `--`: the command that serves MCP on stdio.
    #[arg(last = true, value_name = "CMD", conflicts_with = "url")]
    pub command: Vec<String>,
    /// An HTTP header, `Name: value` (repeatable); written into the scenario as given, so
    /// prefer `${ENV}` for secrets.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = crate::probe::parse_header)]
    pub headers: Vec<(String, String)>,
    /// The transport (default: from the URL; http(s) is streamable-http): `sse` is the
    /// legacy HTTP+SSE.
    #[arg(long, value_parser = ["streamable-http", "sse", "websocket"])]
    pub transport: Option<String>,
    /// The protocol revision to offer (default: auto).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(
        std::iter::once("auto").chain(crate::protocol::version::Revision::ALL.map(|r| r.as_str()))
    ))]
    pub protocol: Option<String>,
    /// The scenario's request timeout, which also bounds each trial call (default 10s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub timeout: Option<String>,
    /// The scenario file to write.
    #[arg(long, short, value_name = "FILE", default_value = "scenario.toml")]
    pub output: PathBuf,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("give the server's URL, or after `--` the command that serves MCP on stdio")]
    NoTarget,
    #[error("{0} exists; choose another --output, or --force to overwrite it")]
    Exists(String),
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("target {url} is not usable: {source}")]
    Unusable { url: String, source: PreflightError },
    #[error("{0}")]
    Workload(Box<Diagnostic>),
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub path: PathBuf,
    pub kept: Vec<String>,
    /// Tools written commented out, with the reason.
    pub left_out: Vec<(String, String)>,
    pub revision: String,
}

/// The scenario's target as the client reaches it: a session opened (revision found), its
/// tools listed, the workload's tools and generated arguments held to them.
fn connect(plan: &Plan, rt: &tokio::runtime::Runtime) -> Result<(Endpoint, Preflight), InitError> {
    let mut ep = for_plan(plan);
    if let Target::Remote(r) = &plan.target {
        of_remote(&mut ep, r)?;
    }
    let pre = client::connect(rt, plan.connection().protocol, &mut ep).map_err(|source| {
        InitError::Unusable {
            url: url_of(plan),
            source,
        }
    })?;
    check_workload(plan, &pre).map_err(InitError::Workload)?;
    Ok((ep, pre))
}

/// What messages name as the target.
fn url_of(plan: &Plan) -> String {
    match &plan.target {
        Target::Remote(r) => r.describe(),
        Target::Embedded(_) => "the embedded server".into(),
    }
}

/// One tool's workload entry, or why it is left out.
struct Entry {
    tool: String,
    arguments: Result<String, String>,
}

/// Connects, writes the scenario, and reports what it holds.
pub fn run(o: &InitOptions) -> Result<Written, InitError> {
    if o.url.is_none() && o.command.is_empty() {
        return Err(InitError::NoTarget);
    }
    if o.output.exists() && !o.force {
        return Err(InitError::Exists(o.output.display().to_string()));
    }
    let rt = client::runtime().map_err(InitError::Runtime)?;
    let name = scenario_name(o);
    // 1. The tools the server lists.
    let base = render(o, &name, &[]);
    let plan = parse(&o.output, &base)?;
    let (_, pre) = connect(&plan, &rt)?;
    let revision = pre.revision.to_string();
    let mut entries: Vec<Entry> = pre
        .tools
        .iter()
        .map(|(tool, schema)| Entry {
            tool: tool.clone(),
            arguments: arguments(&schema["inputSchema"]),
        })
        .collect();
    // 2. Arguments the scenario checks refuse (the tool's schema, its own grammar): left out.
    loop {
        let text = render(o, &name, &entries);
        let refused = match parse(&o.output, &text) {
            Ok(plan) => match connect(&plan, &rt) {
                Ok(_) => break,
                Err(InitError::Workload(d)) => Some(*d),
                Err(e) => return Err(e),
            },
            Err(ScenarioError::Invalid(d)) => Some(*d),
            Err(e) => return Err(e.into()),
        };
        let Some(d) = refused else { break };
        // `workload[k]…` counts from 1, and the first entry is tools/list.
        let Some(i) = workload_index(&d.key).and_then(|k| active(&entries).nth(k.checked_sub(2)?))
        else {
            return Err(ScenarioError::Invalid(Box::new(d)).into());
        };
        entries[i].arguments = Err(format!("generated arguments refused: {}", d.message));
    }
    // 3. Each remaining tool called once, as a run would call it.
    let text = render(o, &name, &entries);
    let plan = Arc::new(parse(&o.output, &text)?);
    let (ep, _) = connect(&plan, &rt)?;
    let trials = tokio::task::LocalSet::new()
        .block_on(&rt, trial(Arc::new(ep), plan.clone()))
        .map_err(|source| InitError::Unusable {
            url: url_of(&plan),
            source,
        })?;
    let active_now: Vec<usize> = active(&entries).collect();
    for (k, t) in trials.iter().enumerate().skip(1) {
        if t.outcome == Outcome::Ok {
            continue;
        }
        if let Some(&i) = active_now.get(k - 1) {
            let why = client::describe(t.outcome);
            entries[i].arguments = Err(match &t.message {
                Some(m) => format!("a trial call failed: {why}: {m}"),
                None => format!("a trial call failed: {why}"),
            });
        }
    }
    let text = render(o, &name, &entries);
    parse(&o.output, &text)?;
    std::fs::write(&o.output, &text).map_err(|source| InitError::Write {
        path: o.output.display().to_string(),
        source,
    })?;
    Ok(Written {
        path: o.output.clone(),
        kept: entries
            .iter()
            .filter(|e| e.arguments.is_ok())
            .map(|e| e.tool.clone())
            .collect(),
        left_out: entries
            .iter()
            .filter_map(|e| {
                e.arguments
                    .as_ref()
                    .err()
                    .map(|w| (e.tool.clone(), w.clone()))
            })
            .collect(),
        revision,
    })
}

fn parse(path: &Path, text: &str) -> Result<scenario::Plan, ScenarioError> {
    scenario::parse(&path.display().to_string(), text, &|k| {
        std::env::var(k).ok()
    })
}

/// Indices of the entries still in the workload.
fn active(entries: &[Entry]) -> impl Iterator<Item = usize> + '_ {
    entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.arguments.is_ok())
        .map(|(i, _)| i)
}

/// `workload[3].arguments.x` → 3 (1-based, as diagnostics count).
fn workload_index(key: &str) -> Option<usize> {
    key.strip_prefix("workload[")?
        .split(']')
        .next()?
        .parse()
        .ok()
}

fn scenario_name(o: &InitOptions) -> String {
    let stem = o
        .output
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scenario");
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() {
        "scenario".into()
    } else {
        name
    }
}

/// The scenario text: target, a modest closed-loop load, `tools/list`, then one entry per
/// tool (left-out tools commented, with the reason).
fn render(o: &InitOptions, name: &str, entries: &[Entry]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Written by `mcpbench init`: every tool the server lists, called with"
    );
    let _ = writeln!(
        t,
        "# arguments made from its inputSchema. Edit freely; `mcpbench validate --connect"
    );
    let _ = writeln!(
        t,
        "# FILE` checks it against the server. Format: scenarios/README.md."
    );
    let _ = writeln!(t, "name = {}", quote(name));
    let _ = writeln!(t, "\n[target]");
    if let Some(u) = &o.url {
        let _ = writeln!(t, "url = {}", quote(u));
    } else {
        let cmd: Vec<String> = o.command.iter().map(|c| quote(c)).collect();
        let _ = writeln!(t, "command = [{}]", cmd.join(", "));
    }
    if let Some(tr) = &o.transport {
        let _ = writeln!(t, "transport = {}", quote(tr));
    }
    if let Some(p) = &o.protocol {
        let _ = writeln!(t, "protocol = {}", quote(p));
    }
    if !o.headers.is_empty() {
        let hs: Vec<String> = o
            .headers
            .iter()
            .map(|(k, v)| format!("{} = {}", key(k), quote(v)))
            .collect();
        let _ = writeln!(t, "headers = {{ {} }}", hs.join(", "));
    }
    let timeout = o.timeout.as_deref().unwrap_or("10s");
    let _ = writeln!(
        t,
        "\n[load]\nconcurrency = 8\nduration = \"30s\"\nwarmup = \"5s\"\ntimeout = {}\n",
        quote(timeout)
    );
    let _ = writeln!(t, "[[workload]]\nmethod = \"tools/list\"");
    for e in entries {
        match &e.arguments {
            Ok(args) => {
                let _ = writeln!(
                    t,
                    "\n[[workload]]\nmethod = \"tools/call\"\ntool = {}\narguments = {args}",
                    quote(&e.tool)
                );
            }
            Err(why) => {
                let _ = writeln!(t, "\n# left out: {}", why.replace('\n', " "));
                let _ = writeln!(
                    t,
                    "# [[workload]]\n# method = \"tools/call\"\n# tool = {}",
                    quote(&e.tool)
                );
            }
        }
    }
    t
}

/// A TOML basic string; `${` is escaped so no generator is read into it.
fn quote(s: &str) -> String {
    toml::Value::String(s.replace("${", "$${")).to_string()
}

/// A TOML key: bare when it can be.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        quote(k)
    }
}

/// The `arguments = …` inline table for a tool's input schema: its required properties.
pub fn arguments(input_schema: &Value) -> Result<String, String> {
    let root = input_schema;
    let s = resolve(root, input_schema);
    let required: Vec<&str> = s["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut parts = Vec::new();
    for name in required {
        let prop = resolve(root, &s["properties"][name]);
        let v = value(root, prop, 0)
            .ok_or_else(|| format!("no value could be made for the required argument `{name}`"))?;
        parts.push(format!("{} = {v}", key(name)));
    }
    Ok(if parts.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", parts.join(", "))
    })
}

/// Follows a local `$ref` (`#/$defs/x`, `#/definitions/x`).
fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    let mut s = s;
    for _ in 0..8 {
        match s["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => match root.pointer(pointer) {
                Some(t) => s = t,
                None => break,
            },
            None => break,
        }
    }
    s
}

/// A TOML value (or generator string) that fits `s`; `None` when none can be made (e.g. only
/// `null` fits: TOML has no null).
fn value(root: &Value, s: &Value, depth: usize) -> Option<String> {
    if depth > 6 {
        return None;
    }
    let s = resolve(root, s);
    if let Some(c) = s.get("const") {
        return literal(c);
    }
    for given in [s.get("default"), s["examples"].get(0)]
        .into_iter()
        .flatten()
    {
        if let Some(v) = literal(given).filter(|_| fits(s, given)) {
            return Some(v);
        }
    }
    if let Some(options) = s["enum"].as_array() {
        let simple: Vec<String> = options
            .iter()
            .filter_map(|o| match o {
                Value::String(t) if !t.is_empty() && !t.contains([',', '}', '$']) => {
                    Some(t.clone())
                }
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        let same_kind =
            options.iter().all(Value::is_string) || options.iter().all(Value::is_number);
        if simple.len() > 1 && simple.len() == options.len() && same_kind {
            return Some(quote_raw(&format!("${{pick:{}}}", simple.join(","))));
        }
        return options.first().and_then(literal);
    }
    for branch in ["anyOf", "oneOf", "allOf"] {
        if let Some(bs) = s[branch].as_array() {
            return bs
                .iter()
                .filter(|b| b["type"] != "null")
                .find_map(|b| value(root, b, depth + 1));
        }
    }
    let ty = match &s["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null")?,
        _ if s.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "string" => string(s),
        "integer" => integer(s),
        "number" => number(s),
        "boolean" => Some("false".into()),
        "array" => {
            let n = s["minItems"].as_u64().unwrap_or(0).min(8) as usize;
            let item = if n > 0 {
                value(root, &s["items"], depth + 1)?
            } else {
                String::new()
            };
            Some(format!("[{}]", vec![item; n].join(", ")))
        }
        "object" => {
            let required: Vec<&str> = s["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let parts: Option<Vec<String>> = required
                .iter()
                .map(|k| {
                    Some(format!(
                        "{} = {}",
                        key(k),
                        value(root, &s["properties"][*k], depth + 1)?
                    ))
                })
                .collect();
            let parts = parts?;
            Some(if parts.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", parts.join(", "))
            })
        }
        _ => None,
    }
}

/// Does `v` satisfy the (sub)schema `s`? A schema that does not compile accepts.
fn fits(s: &Value, v: &Value) -> bool {
    schema::compile(s).map_or(true, |c| schema::check(&c, v).is_ok())
}

/// A string candidate that fits: by `format`, then common shapes, padded to `minLength`.
fn string(s: &Value) -> Option<String> {
    let by_format = match s["format"].as_str() {
        Some("email") => Some("user@example.com"),
        Some("uri") | Some("url") | Some("iri") => Some("https://example.com/"),
        Some("date-time") => Some("2026-01-01T00:00:00Z"),
        Some("date") => Some("2026-01-01"),
        Some("time") => Some("12:00:00Z"),
        Some("uuid") => Some("6f1c2a7e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"),
        Some("ipv4") => Some("127.0.0.1"),
        Some("ipv6") => Some("::1"),
        Some("hostname") => Some("example.com"),
        _ => None,
    };
    let min = s["minLength"].as_u64().unwrap_or(0) as usize;
    let candidates = by_format
        .into_iter()
        .chain([
            "example",
            "a",
            "12345",
            "ABC",
            "abc123",
            "2026-01-01",
            "hello world",
        ])
        .map(|c| {
            let mut c = c.to_string();
            while c.chars().count() < min {
                c.push('x');
            }
            c
        });
    for c in candidates {
        if fits(s, &Value::String(c.clone())) {
            return Some(quote(&c));
        }
    }
    None
}

fn bounds(s: &Value) -> (Option<f64>, Option<f64>) {
    let lo = match (s["minimum"].as_f64(), s["exclusiveMinimum"].as_f64()) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let hi = match (s["maximum"].as_f64(), s["exclusiveMaximum"].as_f64()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (lo, hi)
}

/// An integer: a range generator over the first ten values within the bounds (exclusive
/// bounds moved in), else a small value within them.
fn integer(s: &Value) -> Option<String> {
    let (lo, hi) = bounds(s);
    let lo_i = lo.map(|l| {
        let l = l.ceil() as i64;
        if s["exclusiveMinimum"].as_f64() == Some(l as f64) {
            l + 1
        } else {
            l
        }
    });
    let hi_i = hi.map(|h| {
        let h = h.floor() as i64;
        if s["exclusiveMaximum"].as_f64() == Some(h as f64) {
            h - 1
        } else {
            h
        }
    });
    let multiple = s["multipleOf"].as_i64().filter(|m| *m > 1);
    let candidate = |v: i64| fits(s, &Value::from(v)).then(|| v.to_string());
    match (lo_i, hi_i, multiple) {
        // A narrow range: variety without surprises (a `sleep_ms` of 0..9, not 0..60000).
        (Some(a), Some(b), None) if a < b => {
            Some(quote_raw(&format!("${{range:{a}..{}}}", b.min(a + 9))))
        }
        _ => {
            let start = lo_i.unwrap_or(1);
            let base = multiple.map_or(start, |m| (start + m - 1).div_euclid(m) * m);
            [base, 1, 0, 10, 100].into_iter().find_map(candidate)
        }
    }
}

fn number(s: &Value) -> Option<String> {
    let (lo, hi) = bounds(s);
    let v = match (lo, hi) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        (Some(a), None) => a + 1.0,
        (None, Some(b)) => b - 1.0,
        (None, None) => 1.5,
    };
    [v, 1.0, 0.5, 0.0]
        .into_iter()
        .find(|x| fits(s, &serde_json::json!(x)))
        .map(|x| format!("{x:?}"))
}

/// A string written as is (a generator expression).
fn quote_raw(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A JSON value as TOML; `None` for null (TOML has none).
fn literal(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => format!("{:?}", n.as_f64()?),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(a) => {
            let items: Option<Vec<String>> = a.iter().map(literal).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(o) => {
            let items: Option<Vec<String>> = o
                .iter()
                .map(|(k, v)| Some(format!("{} = {}", key(k), literal(v)?)))
                .collect();
            let items = items?;
            if items.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(schema: Value) -> String {
        arguments(&schema).unwrap()
    }

    #[test]
    fn required_properties_get_fitting_values() {
        assert_eq!(args(json!({"type": "object"})), "{}");
        assert_eq!(
            args(
                json!({"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q"]})
            ),
            r#"{ q = "example" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":50}},"required":["n"]})
            ),
            r#"{ n = "${range:1..10}" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"c":{"type":"string","enum":["red","green"]}},"required":["c"]})
            ),
            r#"{ c = "${pick:red,green}" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"e":{"type":"string","format":"email"}},"required":["e"]})
            ),
            r#"{ e = "user@example.com" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"id":{"type":"string","pattern":"^[0-9]+$"}},"required":["id"]})
            ),
            r#"{ id = "12345" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"s":{"type":"string","minLength":10}},"required":["s"]})
            ),
            r#"{ s = "examplexxx" }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"x":{"type":"number","exclusiveMinimum":0,"maximum":1}},"required":["x"]})
            ),
            r#"{ x = 0.5 }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"t":{"type":"array","minItems":2,"items":{"type":"boolean"}}},"required":["t"]})
            ),
            r#"{ t = [false, false] }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","$defs":{"p":{"type":"object","properties":{"a":{"const":3}},"required":["a"]}},
                "properties":{"p":{"$ref":"#/$defs/p"}},"required":["p"]})
            ),
            r#"{ p = { a = 3 } }"#
        );
        assert_eq!(
            args(
                json!({"type":"object","properties":{"k":{"type":"string","default":"${HOME}"}},"required":["k"]})
            ),
            r#"{ k = "$${HOME}" }"#
        );
        assert!(
            arguments(
                &json!({"type":"object","properties":{"z":{"type":"null"}},"required":["z"]})
            )
            .is_err()
        );
    }
}
