//! The `run` tool: its arguments become scenario TOML (or the agent gives TOML), read by
//! `scenario::parse` like any file, held to the allow-list and the bounds, run by
//! `driver::run` (no display) into a directory under the results root; the result is the
//! summary's essential parts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::guard::Bounds;
use super::{Done, Env, finite};
use crate::driver::{self, Interrupt, RunOptions};
use crate::report::Summary;
use crate::report::summary::{Latency, Outcomes, Totals};
use crate::scenario::{self, Plan, ScenarioError, Target};

/// How the scenario of a call is named in its diagnostics and in summary.json.
const FROM_ARGUMENTS: &str = "run arguments";
const FROM_TEXT: &str = "scenario";

/// A request's timeout unless the agent gives one (the scenario's default).
const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The `run` tool's arguments (its input schema says what each means).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunArgs {
    name: Option<String>,
    target: Option<String>,
    command: Option<Vec<String>>,
    protocol: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    workload: Vec<WorkArg>,
    concurrency: Option<u32>,
    rate: Option<f64>,
    duration: Option<Length>,
    warmup: Option<Length>,
    timeout: Option<Length>,
    requests: Option<u64>,
    scenario: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkArg {
    method: String,
    tool: Option<String>,
    arguments: Option<Map<String, Value>>,
    weight: Option<u32>,
}

/// A duration as the scenario writes it (`"10s"`), or a number of seconds.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Length {
    Text(String),
    Seconds(f64),
}

impl Length {
    fn toml(&self) -> toml::Value {
        match self {
            Length::Text(t) => t.clone().into(),
            Length::Seconds(s) => format!("{}ms", (s * 1000.0).round() as i64).into(),
        }
    }
}

impl RunArgs {
    /// The scenario TOML these arguments describe. The bounds cap an open loop's default
    /// requests in flight (the scenario's default grows with the rate) and the default request
    /// timeout (10 s).
    fn scenario_text(&self, bounds: &Bounds) -> Result<String, String> {
        let max_in_flight = bounds.max_concurrency;
        let mut root = toml::Table::new();
        let name = self.name.as_deref().unwrap_or("mcp-run");
        root.insert("name".into(), name.into());
        let mut target = toml::Table::new();
        match (self.target.as_deref(), &self.command) {
            (Some(_), Some(_)) => return Err("give `target` or `command`, not both".into()),
            (None, None) => {
                return Err(
                    "`target` is missing: \"embedded\" (mcpbench's reference server) or \
                     the server's URL; or `command` for a stdio server"
                        .into(),
                );
            }
            (Some("embedded"), None) => {
                if !self.headers.is_empty() {
                    return Err("the embedded server takes no headers".into());
                }
                let mut embedded = toml::Table::new();
                if let Some(p) = &self.protocol {
                    embedded.insert("protocol".into(), p.clone().into());
                }
                root.insert("embedded".into(), embedded.into());
            }
            (Some(url), None) => {
                target.insert("url".into(), url.into());
            }
            (None, Some(command)) => {
                let command = command.iter().map(|c| c.clone().into()).collect();
                target.insert("command".into(), toml::Value::Array(command));
            }
        }
        if !root.contains_key("embedded") {
            if let Some(p) = &self.protocol {
                target.insert("protocol".into(), p.clone().into());
            }
            if !self.headers.is_empty() {
                let h = self
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()));
                target.insert("headers".into(), toml::Value::Table(h.collect()));
            }
            root.insert("target".into(), target.into());
        }
        let mut load = toml::Table::new();
        match (self.rate, self.concurrency) {
            (Some(rate), c) => {
                load.insert("model".into(), "open".into());
                load.insert("rate".into(), rate.into());
                let c = c.unwrap_or(((rate * 0.1).ceil() as u32).clamp(16, max_in_flight));
                load.insert("max_in_flight".into(), i64::from(c).into());
            }
            (None, Some(c)) => {
                load.insert("concurrency".into(), i64::from(c).into());
            }
            (None, None) => {}
        }
        let duration = self
            .duration
            .as_ref()
            .map_or_else(|| "10s".into(), Length::toml);
        load.insert("duration".into(), duration);
        if let Some(w) = &self.warmup {
            load.insert("warmup".into(), w.toml());
        }
        let timeout = self.timeout.as_ref().map_or_else(
            || {
                let ms = DEFAULT_TIMEOUT.min(bounds.max_duration).as_millis();
                format!("{ms}ms").into()
            },
            Length::toml,
        );
        load.insert("timeout".into(), timeout);
        if let Some(n) = self.requests {
            let n = i64::try_from(n).map_err(|_| format!("`requests` {n} is out of range"))?;
            load.insert("requests".into(), n.into());
        }
        root.insert("load".into(), load.into());
        if self.workload.is_empty() {
            return Err(
                "`workload` is missing: what to send, e.g. [{\"method\": \"tools/call\", \
                 \"tool\": \"echo\", \"arguments\": {\"message\": \"hi\"}}]"
                    .into(),
            );
        }
        let mut work = Vec::new();
        for (i, w) in self.workload.iter().enumerate() {
            let mut t = toml::Table::new();
            t.insert("method".into(), w.method.clone().into());
            if let Some(tool) = &w.tool {
                t.insert("tool".into(), tool.clone().into());
            }
            if let Some(weight) = w.weight {
                t.insert("weight".into(), i64::from(weight).into());
            }
            if let Some(a) = &w.arguments {
                let args = scenario::json_to_toml(
                    &Value::Object(a.clone()),
                    &format!("workload[{i}].arguments"),
                )?;
                t.insert("arguments".into(), args);
            }
            work.push(toml::Value::Table(t));
        }
        root.insert("workload".into(), toml::Value::Array(work));
        toml::to_string(&root).map_err(|e| format!("cannot write the scenario: {e}"))
    }

    /// Whether anything but `scenario` (and `name`) was given.
    fn has_fields(&self) -> bool {
        self.target.is_some()
            || self.command.is_some()
            || self.protocol.is_some()
            || !self.headers.is_empty()
            || !self.workload.is_empty()
            || self.concurrency.is_some()
            || self.rate.is_some()
            || self.duration.is_some()
            || self.warmup.is_some()
            || self.timeout.is_some()
            || self.requests.is_some()
    }
}

/// A scenario's problem, for the agent: the key and what is wrong (a generated scenario's
/// line numbers mean nothing to it).
fn invalid(e: ScenarioError, generated: bool) -> String {
    match e {
        ScenarioError::Invalid(d) if generated => {
            let mut s = format!("the run is not valid: `{}`: {}", d.key, d.message);
            if let Some(h) = &d.hint {
                s.push_str(&format!(" (hint: {h})"));
            }
            s
        }
        e => format!("the scenario is not valid: {e}"),
    }
    .replace(
        "is not set",
        "is not set (this server passes only the variables it was started with `--env NAME` for)",
    )
}

/// The plan of a call: from the arguments, or from the TOML text it gives.
pub(super) fn plan(args: Value, env: &Env, bounds: &Bounds) -> Result<Plan, String> {
    let a: RunArgs = serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
    let lookup = |k: &str| env.get(k);
    match &a.scenario {
        Some(_) if a.has_fields() => Err(
            "give either `scenario` (TOML) or the run's fields (target, workload, …), not both"
                .into(),
        ),
        Some(text) => scenario::parse(FROM_TEXT, text, &lookup).map_err(|e| invalid(e, false)),
        None => {
            let text = a.scenario_text(bounds)?;
            scenario::parse(FROM_ARGUMENTS, &text, &lookup).map_err(|e| invalid(e, true))
        }
    }
}

/// Header values (and the OAuth secret) of a plan's target: never shown.
pub(super) fn secrets(plan: &Plan) -> Vec<String> {
    let Target::Remote(r) = &plan.target else {
        return Vec::new();
    };
    let headers = r
        .headers
        .iter()
        .chain(r.credentials.iter().flat_map(|c| &c.headers));
    headers
        .map(|(_, v)| v.clone())
        .chain(r.oauth.iter().map(|o| o.client_secret.clone()))
        .collect()
}

/// A fresh directory name under `root` for a run called `name`.
fn run_dir(root: &Path, name: &str) -> PathBuf {
    let base = crate::report::files::default_dir(root, name, time::OffsetDateTime::now_utc());
    let mut dir = base.clone();
    for n in 2.. {
        if !dir.exists() {
            break;
        }
        dir = PathBuf::from(format!("{}-{n}", base.display()));
    }
    dir
}

/// Runs a checked plan to its end (or until `interrupt`), results under `root`.
pub(super) fn execute(
    plan: Plan,
    root: &Path,
    notes: Vec<String>,
    interrupt: Interrupt,
) -> Result<Done, String> {
    std::fs::create_dir_all(root)
        .map_err(|e| format!("cannot create the results root {}: {e}", root.display()))?;
    let dir = run_dir(root, &plan.name);
    let opts = RunOptions {
        output: Some(dir),
        results_root: root.to_path_buf(),
        scenario_file: "mcpbench mcp".into(),
        ..RunOptions::default()
    };
    let out = driver::run(Arc::new(plan), &opts, interrupt).map_err(|e| match e {
        driver::RunError::Workload(d) => format!(
            "the workload does not fit the target: `{}`: {}{}",
            d.key,
            d.message,
            d.hint.map(|h| format!(" (hint: {h})")).unwrap_or_default()
        ),
        e => format!("the run failed: {e}"),
    })?;
    let dir = std::path::absolute(&out.dir).unwrap_or(out.dir);
    let structured = essentials(&out.summary, &dir, notes);
    let text = brief(&out.summary, &dir);
    Ok(Done { structured, text })
}

fn latency(l: Option<&Latency>) -> Value {
    match l {
        None => Value::Null,
        Some(l) => json!({
            "count": l.count, "min": finite(l.min_ms), "mean": finite(l.mean_ms),
            "p50": finite(l.p50_ms), "p90": finite(l.p90_ms), "p95": finite(l.p95_ms),
            "p99": finite(l.p99_ms),
            "p999": finite(l.p999_ms), "max": finite(l.max_ms),
        }),
    }
}

fn totals(t: &Totals) -> Value {
    json!({
        "started": t.started, "completed": t.completed, "failed": t.failed,
        "cancelled": t.cancelled, "ok": t.ok, "dropped": t.dropped,
        "throughput": finite(t.throughput), "error_rate": finite(t.error_rate),
        "latency_ms": latency(t.latency.as_ref()),
    })
}

/// Non-zero outcome counts, flat: `ok`, `timeout`, `rpc_error:-32602`, `http:503`…
fn outcomes(o: &Outcomes) -> Value {
    let mut flat = Map::new();
    if let Ok(Value::Object(o)) = serde_json::to_value(o) {
        for (k, v) in o {
            match v {
                Value::Number(n) if n.as_u64().is_some_and(|n| n > 0) => {
                    flat.insert(k, Value::Number(n));
                }
                Value::Object(inner) => {
                    for (code, n) in inner {
                        if n.as_u64().is_some_and(|n| n > 0) {
                            flat.insert(format!("{k}:{code}"), n);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Value::Object(flat)
}

/// The summary's essential parts (the run tool's structured content).
fn essentials(s: &Summary, dir: &Path, mut notes: Vec<String>) -> Value {
    notes.extend(s.notes.iter().cloned());
    let operations: Vec<Value> = s
        .operations
        .iter()
        .map(|op| {
            json!({
                "name": op.name, "started": op.started, "ok": op.outcomes.ok,
                "completed": op.completed, "failed": op.failed, "cancelled": op.cancelled,
                "throughput": finite(op.throughput), "latency_ms": latency(op.latency.as_ref()),
                "outcomes": outcomes(&op.outcomes),
            })
        })
        .collect();
    let thresholds: Vec<Value> = s
        .thresholds
        .iter()
        .map(|t| {
            json!({
                "name": t.name, "condition": t.condition, "value": t.value.map(finite),
                "unit": t.unit, "passed": t.passed,
            })
        })
        .collect();
    json!({
        "results_dir": dir.display().to_string(),
        "summary_json": dir.join("summary.json").display().to_string(),
        "scenario": s.scenario.name,
        "target": {
            "kind": s.target.kind, "url": s.target.url, "transport": s.target.transport,
            "protocol": s.target.protocol_negotiated,
        },
        "load": {
            "model": s.load.model, "concurrency": s.load.concurrency,
            "duration_seconds": finite(s.load.duration_seconds),
            "warmup_seconds": finite(s.load.warmup_seconds), "requests": s.load.requests,
        },
        "measured_seconds": finite(s.measured_seconds),
        "interrupted": s.interrupted,
        "totals": totals(&s.totals),
        "session_opening": totals(&s.session_opening),
        "operations": operations,
        "generator": {
            "workers": s.generator.workers,
            "cpu_seconds": s.generator.cpu_seconds.map(finite),
            "cpu_us_per_request": s.generator.cpu_us_per_request.map(finite),
        },
        "thresholds": thresholds,
        "passed": s.breached().next().is_none(),
        "notes": notes,
    })
}

/// A few lines for the agent to read first.
fn brief(s: &Summary, dir: &Path) -> String {
    let t = &s.totals;
    let p = |l: Option<&Latency>| match l {
        Some(l) => format!("p50 {} ms, p99 {} ms", l.p50_ms, l.p99_ms),
        None => "no ok response".into(),
    };
    let mut out = format!(
        "run {}{}: {} loop against {} ({}), {} for {:.1} s measured: {} requests, {} ok, {} \
         failed (error rate {:.2} %), {:.0}/s, {}.",
        s.scenario.name,
        if s.interrupted { " (interrupted)" } else { "" },
        s.load.model,
        s.target.url,
        s.target.protocol_negotiated,
        match s.load.model.as_str() {
            "open" => format!("at most {} in flight", s.load.concurrency),
            _ => format!("{} virtual users", s.load.concurrency),
        },
        s.measured_seconds,
        t.started,
        t.ok,
        t.failed,
        t.error_rate * 100.0,
        t.throughput,
        p(t.latency.as_ref()),
    );
    for op in &s.operations {
        out.push_str(&format!(
            "\n  {}: {} started, {} ok, {}",
            op.name,
            op.started,
            op.outcomes.ok,
            p(op.latency.as_ref())
        ));
    }
    if let Some(us) = s.generator.cpu_us_per_request {
        out.push_str(&format!(
            "\nGenerator CPU: {us:.1} µs per request ({} workers).",
            s.generator.workers
        ));
    }
    if !s.thresholds.is_empty() {
        let breached = s.breached().count();
        out.push_str(&format!(
            "\nThresholds: {} passed, {breached} breached.",
            s.thresholds.len() - breached
        ));
    }
    out.push_str(&format!("\nResults: {}", dir.display()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::new(&[])
    }

    fn args(v: Value) -> Result<Plan, String> {
        plan(v, &env(), &Bounds::default())
    }

    #[test]
    fn arguments_become_a_scenario() {
        let p = args(json!({
            "target": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer s3cr3t-token"},
            "protocol": "2025-06-18",
            "workload": [
                {"method": "tools/call", "tool": "echo", "arguments": {"message": "${pick:a,b}", "n": [1, 2.5, {"x": true}]}, "weight": 3},
                {"method": "tools/list"}
            ],
            "concurrency": 4,
            "duration": 2.5,
            "warmup": "1s",
            "requests": 100
        }))
        .unwrap();
        assert_eq!(p.workload.len(), 2);
        assert_eq!(p.load.concurrency, 4);
        assert_eq!(p.load.duration, std::time::Duration::from_millis(2500));
        assert_eq!(p.load.requests, Some(100));
        assert_eq!(p.load.timeout, std::time::Duration::from_secs(10));
        assert_eq!(secrets(&p), ["Bearer s3cr3t-token"]);
        let Target::Remote(r) = &p.target else {
            panic!("remote")
        };
        assert_eq!(r.url.as_ref().unwrap().port, 9);

        let p = args(json!({"target": "embedded", "rate": 2000,
            "workload": [{"method": "tools/call", "tool": "echo", "arguments": {"message": "x"}}]}))
        .unwrap();
        assert!(matches!(p.target, Target::Embedded(_)));
        assert_eq!(p.load.concurrency, 200, "max_in_flight from the rate");
        assert_eq!(
            p.load.duration,
            std::time::Duration::from_secs(10),
            "default duration"
        );
        let p = args(json!({"target": "embedded", "rate": 50000,
            "workload": [{"method": "tools/list"}]}))
        .unwrap();
        assert_eq!(p.load.concurrency, 256, "within the concurrency bound");
        let short = Bounds {
            max_duration: std::time::Duration::from_secs(3),
            ..Bounds::default()
        };
        let p = plan(
            json!({"target": "embedded", "workload": [{"method": "tools/list"}], "duration": 2}),
            &env(),
            &short,
        )
        .unwrap();
        assert_eq!(
            p.load.timeout,
            std::time::Duration::from_secs(3),
            "within the duration bound"
        );
    }

    #[test]
    fn mistakes_are_named() {
        for (a, says) in [
            (
                json!({"workload": [{"method": "tools/list"}]}),
                "`target` is missing",
            ),
            (json!({"target": "embedded"}), "`workload` is missing"),
            (
                json!({"target": "embedded", "command": ["x"], "workload": [{"method": "tools/list"}]}),
                "not both",
            ),
            (
                json!({"target": "embedded", "headers": {"a": "b"}, "workload": [{"method": "tools/list"}]}),
                "no headers",
            ),
            (
                json!({"target": "embedded", "workload": [{"method": "tools/call", "tool": "echo", "arguments": {"m": null}}]}),
                "`workload[0].arguments.m` is null",
            ),
            (
                json!({"target": "embedded", "workload": [{"method": "tools/call"}]}),
                "needs a `tool`",
            ),
            (
                json!({"target": "embedded", "workload": [{"method": "tools/list"}], "bogus": 1}),
                "unknown field `bogus`",
            ),
            (
                json!({"target": "embedded", "duration": "soon", "workload": [{"method": "tools/list"}]}),
                "`load.duration`",
            ),
            (
                json!({"scenario": "name = 1", "target": "embedded"}),
                "not both",
            ),
            (json!({"scenario": "[load]\nduration = 3"}), "scenario:"),
            (
                json!({"target": "embedded", "headers": {"Authorization": "${TOKEN}"}, "workload": [{"method": "tools/list"}]}),
                "no headers",
            ),
            (
                json!({"target": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "${TOKEN}"}, "workload": [{"method": "tools/list"}]}),
                "`TOKEN` is not set",
            ),
        ] {
            let e = args(a.clone()).unwrap_err();
            assert!(e.contains(says), "{a}: {e}");
        }
    }

    #[test]
    fn a_scenario_text_is_read_as_a_file() {
        let p = args(json!({"scenario": "name = \"s\"\n[load]\nconcurrency = 3\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n"})).unwrap();
        assert_eq!((p.name.as_str(), p.load.concurrency), ("s", 3));
    }

    #[test]
    fn outcomes_are_flat_and_non_zero() {
        let o = crate::report::summary::Outcomes {
            ok: 3,
            tool_error: 1,
            rpc_error: BTreeMap::from([("-32602".to_string(), 0)]),
            http: BTreeMap::from([("503".to_string(), 1)]),
            ..Default::default()
        };
        assert_eq!(
            outcomes(&o),
            json!({"ok": 3, "tool_error": 1, "http:503": 1})
        );
        assert_eq!(outcomes(&Default::default()), json!({}));
    }
}
