//! `mcpbench mcp`: mcpbench itself as an MCP server on stdin/stdout, so that an AI agent can
//! load-test a server. Three tools: `probe` (one session: revision, server, tools, latencies),
//! `run` (a bounded load test, its files written under a results root) and `compare` (two runs,
//! per operation and metric, with verdicts).
//!
//! There is no second JSON-RPC server here: the reference server's stdio transport, dispatch
//! and revisions (`server::run_stdio`) serve these tools, plugged in through its `Proxy` seam
//! under an `Identity` of their own (`Config::identity`: no benchmark catalog). A call's
//! blocking work — the probe's and the driver's own runtimes — runs on a blocking thread;
//! a call the client cancels interrupts its run (the results are still written).
//!
//! Every target is checked against the allow-list before anything is sent to it, and every run
//! against the bounds (`guard`). A refusal, like any failure, is a tool result with
//! `isError: true` that says what to change. Header values (and the environment variables the
//! server passes) are secrets: redacted from everything a tool returns.
//!
//! ```text
//! guard   the allow-list (loopback, --allow; stdio with --allow-stdio) and a run's bounds
//! tools   the tools' definitions: descriptions, input and output schemas
//! run     `run`: arguments → scenario TOML → Plan → driver::run; the summary's essentials
//! ```

pub mod guard;
mod run_tool;
mod tool_defs;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::driver::Interrupt;
use crate::driver::runner::redact;
use crate::probe::{self, ProbeOptions};
use crate::protocol::schema::{self, Validator};
use crate::protocol::version::Revision;
use crate::report::compare::{self, Verdict};
use crate::report::read_back::RunFiles;
use crate::scenario::plan::Scheme;
use crate::server::proxy::{ProgressRelay, Proxied, ProxiedTool, Proxy, ProxyFuture};
use crate::server::{self, Identity};
use tool_defs::Tool;

/// `serverInfo.name` of `mcpbench mcp`.
pub const SERVER_NAME: &str = "mcpbench";
const SERVER_TITLE: &str = "mcpbench load generator";
const INSTRUCTIONS: &str = "mcpbench load-tests MCP servers. Start with `probe` on the \
server's URL to see its revision and tools, then `run` a short test (a few seconds, a few \
virtual users) and read the result; raise the load step by step. `compare` tells what changed \
between two runs. `run` with target \"embedded\" uses mcpbench's own reference server, to try \
things out. Targets must be on this server's allow-list and load is bounded: a refusal says \
which bound, and only whoever configured this server can change it.";

/// How long a probe may take to connect and for each exchange.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// `mcpbench mcp`'s options: where results go, what may be reached, how much load.
#[derive(Debug, Clone, clap::Args)]
pub struct McpOptions {
    /// Where the `run` tool writes each run's directory (summary.json, latency.hlog,
    /// timeseries.csv, report.md, report.html); relative to the working directory the MCP
    /// client starts mcpbench in.
    #[arg(long, value_name = "DIR", default_value = "results/mcp")]
    pub results_root: PathBuf,
    /// Also allow targets on this host: a name (trusted as named), an address or a network
    /// (IP/PREFIX), on any port or only on PORT. Repeatable. Loopback (127.0.0.0/8, ::1 and
    /// names that resolve only there, such as localhost) is always allowed.
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    pub allow: Vec<guard::Allow>,
    /// Allow stdio targets: the `run` tool's `command` (or a scenario's `target.command`)
    /// starts that program on this machine.
    #[arg(long)]
    pub allow_stdio: bool,
    /// The longest run (warm-up included), and the longest request timeout.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = mcpbench_knobs::parse_duration)]
    pub max_duration: Duration,
    /// The highest open-loop rate; a run sends at most this × its duration requests.
    #[arg(long, value_name = "PER_SECOND", default_value_t = 5000.0)]
    pub max_rate: f64,
    /// The most virtual users (closed loop) or requests in flight (open loop).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrency: u32,
    /// An environment variable the agent's headers and scenarios may read as `${NAME}` (its
    /// value is redacted from every result). Repeatable; none by default, since the
    /// environment holds secrets.
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
}

/// Why `mcpbench mcp` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Options(String),
    #[error(transparent)]
    Serve(#[from] server::EmbeddedError),
}

/// What a tool produced: the structured content and a few lines for the agent to read first.
#[derive(Debug)]
pub(crate) struct Done {
    structured: Value,
    text: String,
}

/// The environment variables an agent may read (`--env`), read once.
#[derive(Debug, Default)]
pub(crate) struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    pub(crate) fn new(names: &[String]) -> Self {
        let vars = names
            .iter()
            .filter_map(|n| Some((n.clone(), std::env::var(n).ok()?)))
            .collect();
        Env { vars }
    }

    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    fn values(&self) -> impl Iterator<Item = &String> {
        self.vars.values()
    }
}

/// A JSON number, or `null` when it is not finite (JSON has no NaN).
pub(crate) fn finite(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

fn ms(d: Duration) -> Value {
    finite((d.as_secs_f64() * 1e6).round() / 1e3)
}

/// The tools' shared state.
#[derive(Debug)]
struct Agent {
    /// Absolute.
    root: PathBuf,
    allow: guard::AllowList,
    bounds: guard::Bounds,
    env: Env,
    /// Held by the run in progress: one at a time, so runs do not share the machine.
    running: Mutex<()>,
    /// Each tool's input schema, compiled (in [`Tool::ALL`] order).
    inputs: Vec<Validator>,
}

/// A call's interrupt, requested if the call is dropped before its run ends (the client
/// cancelled it, or went away).
struct CancelOnDrop(Option<Interrupt>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            i.request("the MCP client (its call was cancelled)");
        }
    }
}

impl Agent {
    fn new(o: McpOptions) -> Result<Self, AgentError> {
        let bad = |m: String| Err(AgentError::Options(m));
        if !(o.max_rate.is_finite() && o.max_rate > 0.0) {
            return bad(format!(
                "--max-rate {}: give a rate above 0 (per second)",
                o.max_rate
            ));
        }
        if o.max_duration.is_zero() {
            return bad("--max-duration must be above 0".into());
        }
        let root = std::path::absolute(&o.results_root).map_err(|e| {
            AgentError::Options(format!("--results-root {}: {e}", o.results_root.display()))
        })?;
        let inputs = Tool::ALL
            .iter()
            .map(|t| schema::compile(&t.input_schema()))
            .collect::<Result<_, _>>()
            .map_err(|e| AgentError::Options(format!("a tool's input schema: {e}")))?;
        Ok(Agent {
            root,
            allow: guard::AllowList {
                extra: o.allow,
                stdio: o.allow_stdio,
            },
            bounds: guard::Bounds {
                max_duration: o.max_duration,
                max_rate: o.max_rate,
                max_concurrency: o.max_concurrency,
            },
            env: Env::new(&o.env),
            running: Mutex::new(()),
            inputs,
        })
    }

    /// Answers a call: the raw `CallToolResult` (2026-07-28 shaped; the server adapts it to
    /// the client's revision).
    async fn call(self: Arc<Self>, index: usize, arguments: Option<Bytes>) -> Bytes {
        let Some(&tool) = Tool::ALL.get(index) else {
            return render(Err("no such tool".into()), &[]);
        };
        let args = match arguments.as_deref().map(serde_json::from_slice::<Value>) {
            None => json!({}),
            Some(Ok(a)) => a,
            Some(Err(e)) => return render(Err(format!("arguments are not JSON: {e}")), &[]),
        };
        if let Err(e) = schema::check(&self.inputs[index], &args) {
            let m = format!("invalid arguments for `{}`: {e}", tool.name());
            return render(Err(m), &[]);
        }
        let interrupt = Interrupt::default();
        let mut cancel = CancelOnDrop(Some(interrupt.clone()));
        let agent = self.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut secrets: Vec<String> = agent.env.values().cloned().collect();
            let done = agent.dispatch(tool, args, interrupt, &mut secrets);
            (done, secrets)
        })
        .await;
        cancel.0 = None;
        match joined {
            Ok((done, secrets)) => render(done, &secrets),
            Err(e) => render(
                Err(format!("internal error: `{}` failed ({e})", tool.name())),
                &[],
            ),
        }
    }

    /// Runs a tool (on a blocking thread); the secrets it meets are added to `secrets`.
    fn dispatch(
        &self,
        tool: Tool,
        args: Value,
        interrupt: Interrupt,
        secrets: &mut Vec<String>,
    ) -> Result<Done, String> {
        match tool {
            Tool::Probe => self.probe(args, secrets),
            Tool::Run => self.run(args, interrupt, secrets),
            Tool::Compare => self.compare(args),
        }
    }

    fn probe(&self, args: Value, secrets: &mut Vec<String>) -> Result<Done, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            url: String,
            #[serde(default)]
            headers: BTreeMap<String, String>,
            protocol: Option<String>,
        }
        let a: Args =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let mut headers = Vec::new();
        for (name, value) in a.headers {
            let value =
                crate::scenario::args::expand_env(&value, &|k| self.env.get(k)).map_err(|e| {
                    format!(
                        "headers.{name}: {} (this server passes only the variables it was \
                         started with `--env NAME` for)",
                        e.message
                    )
                })?;
            secrets.push(value.clone());
            headers.push((name, value));
        }
        let protocol = match &a.protocol {
            None => Revision::LATEST_HANDSHAKE,
            Some(p) => p
                .parse()
                .map_err(|_| format!("unknown protocol revision `{p}`"))?,
        };
        let u = crate::scenario::parse_url(&a.url).map_err(|e| format!("url: {e}"))?;
        if !matches!(u.scheme, Scheme::Http | Scheme::Https) {
            return Err(format!(
                "`{}`: probe speaks Streamable HTTP (http:// or https://)",
                a.url
            ));
        }
        self.allow
            .check("target", &u.host, u.port, &guard::system_resolver)?;
        let o = ProbeOptions {
            url: a.url,
            protocol,
            calls: Vec::new(),
            headers,
            timeout: PROBE_TIMEOUT,
            insecure: false,
        };
        let p = probe::session(&o).map_err(|e| format!("probe of {} failed: {e}", o.url))?;
        let server = match p.server_info.get("name").and_then(Value::as_str) {
            Some(name) => {
                let version = p.server_info.get("version").and_then(Value::as_str);
                format!("{name} {}", version.unwrap_or("?"))
            }
            None => "an unnamed server".into(),
        };
        let shown: Vec<&str> = p.tools.iter().take(20).map(String::as_str).collect();
        let more = p.tools.len().saturating_sub(shown.len());
        let text = format!(
            "probe ok: {} speaks {} ({server}); session opened in {} ms, tools/list in {} ms: \
             {} tools: {}{}",
            o.url,
            p.revision,
            ms(p.open),
            ms(p.list),
            p.tools.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        let structured = json!({
            "url": o.url,
            "protocol": p.revision.as_str(),
            "server": if p.server_info.is_object() { p.server_info.clone() } else { Value::Null },
            "tools": p.tools,
            "latency_ms": {"open": ms(p.open), "tools_list": ms(p.list)},
        });
        Ok(Done { structured, text })
    }

    fn run(
        &self,
        args: Value,
        interrupt: Interrupt,
        secrets: &mut Vec<String>,
    ) -> Result<Done, String> {
        let mut plan = run_tool::plan(args, &self.env, &self.bounds)?;
        secrets.extend(run_tool::secrets(&plan));
        let notes = guard::check_plan(
            &mut plan,
            &self.allow,
            &self.bounds,
            &guard::system_resolver,
        )?;
        let _one = match self.running.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(
                    "refused: another run is in progress (one at a time, so that runs do not \
                     share the machine): call again when it has ended"
                        .into(),
                );
            }
        };
        run_tool::execute(plan, &self.root, notes, interrupt)
    }

    /// A run's path as given, or under the results root when it is relative and not found.
    fn locate(&self, p: &str) -> PathBuf {
        let path = PathBuf::from(p);
        if path.is_relative() && !path.exists() && self.root.join(&path).exists() {
            return self.root.join(path);
        }
        path
    }

    fn compare(&self, args: Value) -> Result<Done, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            base: String,
            current: String,
            min_change_percent: Option<f64>,
        }
        let a: Args =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let read = |which: &str, p: &str| {
            let path = self.locate(p);
            RunFiles::read_side(&path).map_err(|e| format!("cannot read the {which} run: {e}"))
        };
        let (b, c) = (read("base", &a.base)?, read("current", &a.current)?);
        let min = a.min_change_percent.unwrap_or(10.0);
        let cmp = compare::compare(&b, &c, min / 100.0, &[]);
        let (b, c) = (&b[0], &c[0]);
        Ok(comparison(&cmp, &b.dir, &c.dir, min, b, c))
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Regressed => "regressed",
        Verdict::Improved => "improved",
        Verdict::Unchanged => "unchanged",
    }
}

/// The worst of some verdicts: a regression, else an improvement, else unchanged.
fn worst(vs: impl Iterator<Item = Verdict> + Clone) -> Verdict {
    if vs.clone().any(|v| v == Verdict::Regressed) {
        Verdict::Regressed
    } else if vs.into_iter().any(|v| v == Verdict::Improved) {
        Verdict::Improved
    } else {
        Verdict::Unchanged
    }
}

/// The `compare` tool's result: deltas grouped per operation, each with its verdict.
fn comparison(
    cmp: &compare::Comparison,
    base: &Path,
    current: &Path,
    min: f64,
    b: &RunFiles,
    c: &RunFiles,
) -> Done {
    let mut names: Vec<&str> = Vec::new();
    for d in &cmp.deltas {
        if !names.contains(&d.operation.as_str()) {
            names.push(&d.operation);
        }
    }
    let operations: Vec<Value> = names
        .iter()
        .map(|name| {
            let deltas = cmp.deltas.iter().filter(|d| d.operation == *name);
            let metrics: Vec<Value> = deltas
                .clone()
                .map(|d| {
                    json!({
                        "metric": d.metric, "unit": d.unit,
                        "base": finite(d.base), "current": finite(d.current),
                        "change_percent": d.change.map_or(Value::Null, |c| finite(c * 100.0)),
                        "statistic": d.statistic.map_or(Value::Null, finite),
                        "verdict": verdict_name(d.verdict),
                    })
                })
                .collect();
            json!({
                "name": name,
                "verdict": verdict_name(worst(deltas.map(|d| d.verdict))),
                "metrics": metrics,
            })
        })
        .collect();
    let count = |v: Verdict| cmp.deltas.iter().filter(|d| d.verdict == v).count();
    let overall = worst(cmp.deltas.iter().map(|d| d.verdict));
    let mut notes = Vec::new();
    let (sb, sc) = (&b.summary.scenario.name, &c.summary.scenario.name);
    if sb != sc {
        notes.push(format!(
            "the runs are of different scenarios ({sb} and {sc})"
        ));
    }
    let structured = json!({
        "base": base.display().to_string(),
        "current": current.display().to_string(),
        "min_change_percent": finite(min),
        "verdict": verdict_name(overall),
        "regressed": count(Verdict::Regressed),
        "improved": count(Verdict::Improved),
        "operations": operations,
        "unmatched": cmp.unmatched,
        "notes": notes,
    });
    let mut text = format!(
        "compare: {} regressed, {} improved, {} unchanged (changes under {min} % are never a \
         verdict); {} → {}",
        count(Verdict::Regressed),
        count(Verdict::Improved),
        count(Verdict::Unchanged),
        base.display(),
        current.display()
    );
    for d in cmp
        .deltas
        .iter()
        .filter(|d| d.verdict != Verdict::Unchanged)
    {
        let change = d
            .change
            .map(|c| format!(" ({:+.1} %)", c * 100.0))
            .unwrap_or_default();
        text.push_str(&format!(
            "\n  {} {}: {} → {} {}{change} {}",
            d.operation,
            d.metric,
            d.base,
            d.current,
            d.unit,
            verdict_name(d.verdict)
        ));
    }
    for name in &cmp.unmatched {
        text.push_str(&format!("\n  {name}: only in the base run"));
    }
    Done { structured, text }
}

/// Replaces every secret in every string of `v` with `[redacted]`.
fn redact_value(v: &mut Value, secrets: &[(String, String)]) {
    match v {
        Value::String(s) => {
            let r = redact(s, secrets);
            if r != *s {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, secrets)),
        Value::Object(o) => o.values_mut().for_each(|x| redact_value(x, secrets)),
        _ => {}
    }
}

/// The `CallToolResult` of a tool's outcome: structured content with a short text and the same
/// JSON as text (for clients that read only text), or an error result. Secrets redacted;
/// 2026-07-28 shaped (the server strips `resultType` and `_meta` for older revisions).
fn render(done: Result<Done, String>, secrets: &[String]) -> Bytes {
    let secrets: Vec<(String, String)> = secrets
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| (String::new(), s.clone()))
        .collect();
    let mut result = match done {
        Ok(Done {
            mut structured,
            text,
        }) => {
            redact_value(&mut structured, &secrets);
            let json = serde_json::to_string(&structured).unwrap_or_default();
            json!({
                "content": [
                    {"type": "text", "text": redact(&text, &secrets)},
                    {"type": "text", "text": json},
                ],
                "structuredContent": structured,
                "isError": false,
            })
        }
        Err(message) => json!({
            "content": [{"type": "text", "text": redact(&message, &secrets)}],
            "isError": true,
        }),
    };
    result["resultType"] = json!("complete");
    result["_meta"] = json!({"io.modelcontextprotocol/serverInfo": server_info()});
    Bytes::from(serde_json::to_vec(&result).unwrap_or_default())
}

fn identity() -> Identity {
    Identity {
        name: SERVER_NAME.into(),
        title: SERVER_TITLE.into(),
        instructions: INSTRUCTIONS.into(),
    }
}

fn server_info() -> Value {
    json!({"name": SERVER_NAME, "title": SERVER_TITLE, "version": env!("CARGO_PKG_VERSION")})
}

/// The tools, as the reference server's `Proxy` sees them.
#[derive(Debug)]
struct Tools(Arc<Agent>);

impl Proxy for Tools {
    fn tools(&self) -> Vec<ProxiedTool> {
        Tool::ALL
            .iter()
            .map(|t| ProxiedTool {
                name: t.name().into(),
                definition: t.definition(),
            })
            .collect()
    }

    /// The agent's tools send no progress.
    fn call(
        &self,
        index: usize,
        arguments: Option<Bytes>,
        _: Option<ProgressRelay>,
        client: Revision,
    ) -> ProxyFuture {
        let agent = self.0.clone();
        Box::pin(async move {
            // Rendered 2026-07-28 shaped.
            let result = agent.call(index, arguments).await;
            let result = match crate::server::proxy::adapt(&result, true, client) {
                Cow::Borrowed(_) => result,
                Cow::Owned(adapted) => Bytes::from(adapted),
            };
            Ok(Proxied {
                is_error: crate::server::proxy::is_tool_error(&result),
                result,
                upstream: None,
            })
        })
    }
}

/// Serves the tools on this process's stdin/stdout until stdin's EOF or `shutdown`. Only MCP
/// messages go to stdout; a line about what is allowed goes to stderr.
pub fn serve(
    o: McpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    let agent = Arc::new(Agent::new(o)?);
    let b = &agent.bounds;
    eprintln!(
        "mcpbench mcp: tools probe, run, compare on stdin/stdout; results under {}; targets: \
         {}{}; runs of at most {}, {}/s, {} at once",
        agent.root.display(),
        agent.allow.describe(),
        if agent.allow.stdio {
            "; stdio commands"
        } else {
            ""
        },
        mcpbench_knobs::format_duration(b.max_duration),
        b.max_rate,
        b.max_concurrency,
    );
    let config = server::Config {
        identity: Some(identity()),
        proxy: Some(Arc::new(Tools(agent.clone()))),
        ..server::Config::default()
    };
    server::run_stdio(config, mock_backend::Config::default(), 2, shutdown)?;
    // A run still going when the client left was interrupted (its call cancelled): let it
    // write its results before the process ends.
    let start = std::time::Instant::now();
    while matches!(agent.running.try_lock(), Err(TryLockError::WouldBlock)) {
        if start.elapsed() > RUN_WRITE_WAIT {
            eprintln!("mcpbench mcp: a run did not end in time; its results may be partial");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// How long an interrupted run gets to drain (its grace) and write its results at exit.
const RUN_WRITE_WAIT: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(extra: &[&str]) -> Arc<Agent> {
        let mut args = vec!["mcpbench-mcp"];
        args.extend_from_slice(extra);
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            o: McpOptions,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(args).unwrap();
        Arc::new(Agent::new(cli.o).unwrap())
    }

    fn call(a: &Arc<Agent>, tool: Tool, args: Value) -> Value {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let i = Tool::ALL.iter().position(|t| *t == tool).unwrap();
        let out = rt.block_on(a.clone().call(i, Some(Bytes::from(args.to_string()))));
        serde_json::from_slice(&out).unwrap()
    }

    fn error_text(r: &Value) -> &str {
        assert_eq!(r["isError"], true, "{r}");
        r["content"][0]["text"].as_str().unwrap()
    }

    #[test]
    fn options_are_checked() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["x"];
            args.extend_from_slice(extra);
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                o: McpOptions,
            }
            <Cli as clap::Parser>::try_parse_from(args).map(|c| c.o)
        };
        assert!(parse(&["--max-concurrency", "0"]).is_err());
        assert!(parse(&["--allow", "a b"]).is_err());
        let o = parse(&["--max-rate", "0"]).unwrap();
        assert!(
            Agent::new(o)
                .unwrap_err()
                .to_string()
                .contains("--max-rate")
        );
        let o = parse(&["--results-root", "r"]).unwrap();
        assert!(Agent::new(o).unwrap().root.is_absolute());
    }

    #[test]
    fn refusals_are_tool_errors_and_send_nothing() {
        let a = agent(&[]);
        let work = json!([{"method": "tools/list"}]);
        let r = call(
            &a,
            Tool::Run,
            json!({"target": "http://192.0.2.1:8080/mcp", "workload": work, "duration": 1}),
        );
        let e = error_text(&r);
        assert!(
            e.contains("allow-list") && e.contains("--allow 192.0.2.1:8080"),
            "{e}"
        );
        let r = call(&a, Tool::Probe, json!({"url": "http://192.0.2.1/mcp"}));
        assert!(error_text(&r).contains("allow-list"));
        let r = call(
            &a,
            Tool::Run,
            json!({"target": "embedded", "workload": work, "duration": "61s"}),
        );
        assert!(error_text(&r).contains("--max-duration"));
        let r = call(
            &a,
            Tool::Run,
            json!({"command": ["true"], "workload": work, "duration": 1}),
        );
        assert!(error_text(&r).contains("--allow-stdio"));
        let r = call(
            &a,
            Tool::Run,
            json!({"target": "embedded", "workload": work, "concurrency": 0}),
        );
        assert!(error_text(&r).contains("invalid arguments for `run`: arguments.concurrency"));
        let r = call(
            &a,
            Tool::Compare,
            json!({"base": "/nonexistent/a", "current": "/nonexistent/b"}),
        );
        assert!(error_text(&r).contains("cannot read the base run"));
        assert_eq!(r["resultType"], "complete");
    }

    #[test]
    fn secrets_are_redacted() {
        let mut done = Done {
            structured: json!({"notes": ["server said: token s3cr3t-token-value is bad"]}),
            text: "Authorization: Bearer abc.def and s3cr3t-token-value".into(),
        };
        done.structured["n"] = json!(1);
        let r: Value =
            serde_json::from_slice(&render(Ok(done), &["s3cr3t-token-value".into()])).unwrap();
        let all = r.to_string();
        assert!(!all.contains("s3cr3t") && !all.contains("abc.def"), "{all}");
        assert_eq!(r["structuredContent"]["n"], 1);
        let r: Value = serde_json::from_slice(&render(
            Err("bad s3cr3t-token-value".into()),
            &["s3cr3t-token-value".into()],
        ))
        .unwrap();
        assert_eq!(error_text(&r), "bad [redacted]");
    }
}
