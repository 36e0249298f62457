//! Command-line interface: `run`, `init`, `report`, `compare`, `merge`, `serve`, `record`,
//! `trace`, `validate`, `probe`, `completions`, `man`, `schema`, `doctor`, `mcp`.
//!
//! Exit codes ([`EXIT_FAILED`], [`EXIT_ERROR`]): 0 success (a run stopped from the dashboard
//! included); 1 the target failed a check (thresholds breached by a run or a merged result, a
//! regression found by `compare`, a failed probe) or `doctor` warned; 2 usage, scenario, set-up
//! or runtime error, including a run interrupted by a signal (its partial results are still
//! written).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::driver::{self, RunOptions};
use crate::probe::init::InitOptions;
use crate::probe::{self, ProbeError, ProbeOptions};
use crate::protocol::ResponseMode;
use crate::protocol::jsonrpc::Codec;
use crate::scenario::{self, Override, Target};
use crate::server;
use crate::ui::{Display, Watcher};

#[derive(Debug, Parser)]
#[command(
    name = "mcpbench",
    version,
    about = "Load generator and reference server for MCP servers and gateways"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario and write its results. A live dashboard shows the run when stdout is a
    /// terminal (q, Esc or Ctrl-C stop it; results are written either way).
    #[command(after_help = "Examples:\n  mcpbench run scenarios/quickstart.toml\n  \
        mcpbench run gateway.toml --url http://127.0.0.1:8080/mcp --concurrency 64 --duration 2m\n  \
        mcpbench run gateway.toml --rate 2000 --set load.timeout=2s --no-tui --progress json")]
    Run {
        /// The scenario file (TOML); `mcpbench init` writes one for your server.
        scenario: Option<PathBuf>,
        /// Directory for this run's results (default: `results/<UTC time>-<name>`).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Where default run directories go.
        #[arg(long, default_value = "results")]
        results_root: PathBuf,
        /// JSON decoder for responses: scan (default), serde-json or simd-json.
        #[arg(long, default_value = "scan")]
        codec: Codec,
        /// Generator threads (default: the scenario's, else one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// The final result on stdout: `text` (the table), `prometheus` (text exposition
        /// format) or `junit` (XML: each threshold and check a test case).
        #[arg(long, default_value = "text")]
        format: SummaryFormat,
        /// After SIGINT, SIGTERM or SIGHUP: how long requests in flight get to finish (at most
        /// the request timeout) before they are cancelled; a second signal cancels them at once.
        #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = mcpbench_knobs::parse_duration)]
        grace: Duration,
        /// A process of the target to sample every interval (CPU time, memory, descriptors,
        /// threads; reported per request): the server, a gateway, its upstreams. Repeat for
        /// several; adds to the scenario's `target.pid`. Stdio servers are sampled anyway.
        #[arg(long = "target-pid", value_name = "PID")]
        target_pid: Vec<u32>,
        /// Run the scenario N times, one after the other, into OUTPUT/run-1 … run-N: a side
        /// of `mcpbench compare` that sees the machine's drift between runs (3 or more). Exit 1
        /// if a threshold was breached in any; `--format junit` prints a test suite per run,
        /// `--format prometheus` the last run's.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        repeat: u16,
        #[command(flatten)]
        overrides: Overrides,
        #[command(flatten)]
        display: DisplayArgs,
        #[command(flatten)]
        scale: ScaleArgs,
    },
    /// Serve the reference MCP server: Streamable HTTP at /mcp, HTTP+SSE at /sse + /messages,
    /// WebSocket at /ws (subprotocol mcp); or one session on stdin/stdout with --stdio.
    Serve {
        #[command(flatten)]
        front: FrontArgs,
        /// Base URL of the REST backend for REST-backed tools; without it a mock backend is
        /// started in-process on 127.0.0.1.
        #[arg(long)]
        backend: Option<String>,
        /// Synthetic tools added to tools/list.
        #[arg(long, default_value_t = 0)]
        catalog: usize,
        /// Tools per tools/list page.
        #[arg(long, default_value_t = 100)]
        page_size: usize,
        /// Also serve the official conformance suite's fixtures: `test_*` tools, prompts,
        /// resources, completions and logging (the benchmark catalog is unchanged).
        #[arg(long)]
        conformance: bool,
        #[command(flatten)]
        gateway: GatewayArgs,
    },
    /// Record what MCP clients do: a transparent proxy in front of one upstream server (any
    /// transport) that clients reach like `serve` (Streamable HTTP at /mcp, HTTP+SSE, WebSocket,
    /// or stdio), writing every tools/list and tools/call to a trace (JSON Lines) as it
    /// completes: arrival time, session, params, digest of the result, latency, outcome.
    /// Secret-looking values are redacted. Stop it with Ctrl-C (or EOF on stdin with --stdio);
    /// the trace is complete either way. Replay it with a scenario's `[replay]` table.
    #[command(after_help = "Examples:\n  \
        mcpbench record --upstream http://127.0.0.1:3000/mcp --out session.trace.jsonl\n  \
        mcpbench record --upstream 'stdio:python server.py' --out t.jsonl --listen 127.0.0.1:9000\n  \
        mcpbench record --stdio --upstream ws://127.0.0.1:3000/ws --out t.jsonl")]
    Record {
        /// The server to record: http(s)://… (Streamable HTTP, either era), sse+http(s)://…
        /// (HTTP+SSE), ws(s)://… or stdio:COMMAND ARGS…. Its tools keep their names.
        #[arg(long, value_name = "TARGET")]
        upstream: String,
        /// The trace to write (replaced if it exists).
        #[arg(long, short, value_name = "FILE")]
        out: PathBuf,
        /// Write arguments as received, secrets included (the trace is then refused by
        /// readers until `mcpbench trace redact` has run on it).
        #[arg(long)]
        keep_secrets: bool,
        #[command(flatten)]
        front: FrontArgs,
        #[command(flatten)]
        upstream_args: UpstreamArgs,
    },
    /// Work with traces (what `mcpbench record` writes, what a scenario's `[replay]` reads).
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// Connect to a server, list its tools and write a starter scenario that calls each one
    /// with arguments made from its input schema (tools that fail a trial call are written
    /// commented out, with the reason).
    #[command(
        after_help = "Examples:\n  mcpbench init http://127.0.0.1:8080/mcp\n  \
        mcpbench init --output mine.toml -- python server.py\n  \
        mcpbench init https://gw.example/mcp -H 'Authorization: Bearer ${MCP_TOKEN}'"
    )]
    Init(InitOptions),
    /// Render a finished run's report again from its files: report.md and report.html in
    /// its directory (parameters, outcomes, thresholds, generator health, plots). A find-max
    /// directory gets its sweep's report (steps, knee, throughput frontier).
    Report {
        /// The run directory (or its summary.json).
        run: PathBuf,
        /// Print the result in this format instead of writing report.md and report.html:
        /// `prometheus` or `junit`.
        #[arg(long)]
        format: Option<SummaryFormat>,
    },
    /// Compare two sides, each one run or several (a run directory, or a directory of them
    /// such as `run --repeat` writes): per operation, the change of p50/p90/p95/p99/p99.9,
    /// throughput and error rate, with a verdict that accounts for the noise — the spread
    /// between runs with several a side, else the spread inside each run. Exit 1 if anything
    /// regressed (or a budget was breached beyond the noise).
    #[command(
        after_help = "Examples:\n  mcpbench compare results/base results/current\n  \
        mcpbench run ci.toml --repeat 3 -o base; mcpbench run ci.toml --repeat 3 -o current; mcpbench compare base current\n  \
        mcpbench compare base current --budget p95=+15%,throughput=-10%,errors=+0.5pp --format json"
    )]
    Compare {
        /// The base side: a run directory (or its summary.json), or a directory of runs.
        base: PathBuf,
        /// The current side, as BASE.
        current: PathBuf,
        /// The smallest change, in percent, that can be a regression or an improvement (also
        /// what absorbs some drift between two single runs of a shared machine).
        #[arg(long, default_value_t = 10.0, value_name = "PERCENT")]
        min_change: f64,
        /// How much worse each metric may get before it is a regression (when clear of the
        /// noise): METRIC=CHANGE,… with p50…p99.9 and throughput in % and errors in percentage
        /// points, e.g. `p95=+15%,throughput=-10%,errors=+0.5pp`. Default: the current runs'
        /// scenario's `[compare]` table.
        #[arg(long, value_name = "BUDGETS")]
        budget: Option<String>,
        /// `markdown` (for a pull-request comment) or `json`.
        #[arg(long, default_value = "markdown")]
        format: CompareFormat,
    },
    /// Merge runs of one scenario (e.g. shards on several machines) into one result:
    /// counters added, latency histograms added exactly, interval logs on one time line; the
    /// scenario's thresholds judged on the merged result (exit 1 if one is breached).
    Merge {
        /// The run directories; or one directory holding them (every subdirectory with a
        /// summary.json), e.g. the shards' results on a shared volume.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<PathBuf>,
        /// The merged run's directory.
        #[arg(long, short)]
        output: PathBuf,
        /// Merge the shards present even when some of a split run are missing (the result
        /// is then a part of the scenario, and says so).
        #[arg(long)]
        partial: bool,
    },
    /// Print a shell completion script: `mcpbench completions bash > /etc/bash_completion.d/mcpbench`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `mcpbench man > mcpbench.1 && man ./mcpbench.1`.
    Man,
    /// Print a JSON Schema (draft 2020-12): of the scenario format, for editors (Taplo and
    /// VS Code's Even Better TOML read a `#:schema FILE` first line), or of summary.json.
    #[command(
        after_help = "Examples:\n  mcpbench schema scenario > scenario.schema.json\n  \
        mcpbench schema summary > summary.schema.json"
    )]
    Schema {
        /// `scenario` (scenarios/schema.json) or `summary` (results/schema.json).
        which: SchemaKind,
    },
    /// Check a scenario file without running it; with --connect (always for the built-in
    /// server) also open a session on the target and check the workload against its tools.
    Validate {
        scenario: PathBuf,
        /// Also connect to a remote target: the tools the workload calls exist and the
        /// generated arguments fit their input schemas.
        #[arg(long)]
        connect: bool,
    },
    /// Open one MCP session on a Streamable HTTP endpoint with mcpbench's client, list the
    /// tools, call the ones asked for, and print one line (exit 0 ok, 1 failed, 2 usage). Under
    /// the official conformance suite (MCP_CONFORMANCE_SCENARIO set) the scenario decides what
    /// to call. With --tenants, check a gateway's tenant isolation instead.
    #[command(
        after_help = "Examples:\n  mcpbench probe http://127.0.0.1:8080/mcp --call 'echo={\"message\":\"hi\"}'\n  \
        mcpbench probe https://gw.example/mcp -H \"Authorization: Bearer $MCP_TOKEN\"\n  \
        mcpbench probe --tenants tenants.toml http://127.0.0.1:9090/mcp --upstream http://127.0.0.1:8080/mcp"
    )]
    Probe {
        /// The endpoint, e.g. http://127.0.0.1:8080/mcp.
        url: String,
        /// The revision to offer (handshake era) or to use (2026-07-28).
        #[arg(long, default_value = "2025-11-25")]
        protocol: crate::protocol::version::Revision,
        /// A tool to call, optionally with JSON arguments: `--call echo`,
        /// `--call 'echo={"message":"hi"}'`. Repeatable.
        #[arg(long = "call", value_name = "TOOL[=JSON]", value_parser = probe::parse_call)]
        calls: Vec<(String, serde_json::Value)>,
        /// An extra HTTP header, `Name: value` (repeatable).
        #[arg(long = "header", short = 'H', value_parser = probe::parse_header)]
        headers: Vec<(String, String)>,
        /// Bound on connecting and on each exchange.
        #[arg(long, default_value = "10s", value_parser = mcpbench_knobs::parse_duration)]
        timeout: std::time::Duration,
        /// https: accept any certificate (self-signed test servers only).
        #[arg(long)]
        insecure: bool,
        /// Check the gateway at URL as a hostile tenant would, with the credentials of two or
        /// more tenants from FILE (TOML: `[[tenant]] name, token | headers`): requests without
        /// credentials or with a token in the query string, another tenant's session used,
        /// listened on and ended (POST, GET, DELETE), session ids guessed, and with --upstream
        /// any tenant credential reaching the upstream. A pass/fail table; exit 1 if a check
        /// fails.
        #[arg(long, value_name = "FILE")]
        tenants: Option<PathBuf>,
        /// With --tenants: the `mcpbench serve` the gateway fronts (its URL), which says which
        /// credentials reached it: none may be a tenant's.
        #[arg(long, value_name = "URL", requires = "tenants")]
        upstream: Option<String>,
        /// With --tenants: `text` (a table) or `json`.
        #[arg(long, default_value = "text", requires = "tenants")]
        format: TableFormat,
    },
    /// Check this machine for what a load test needs and what would make its measurements
    /// unreliable: open-file and port limits for the planned load, TIME_WAIT, timer and clock
    /// precision, CPU frequency scaling and quota, other load on the cores; each finding with
    /// its fix. Exit 0 nothing found, 1 a warning, 2 usage.
    #[command(after_help = "Examples:\n  mcpbench doctor\n  \
        mcpbench doctor --concurrency 20000\n  \
        mcpbench doctor --quick --format json")]
    Doctor {
        /// The virtual users (connections to one target) you plan: what the open-file, port
        /// and accept-queue checks size for.
        #[arg(
            long,
            value_name = "N",
            default_value_t = 1000,
            value_parser = clap::value_parser!(u64).range(1..)
        )]
        concurrency: u64,
        /// Skip what takes time: the timer measurement and the 1 s sample of the cores' load.
        #[arg(long)]
        quick: bool,
        /// `text` (a table) or `json`: {schema_version, concurrency, quick, findings: [{check,
        /// value, verdict (ok | info | warn), detail, fix (null when nothing to do)}]}.
        #[arg(long, default_value = "text")]
        format: TableFormat,
    },
    /// Serve mcpbench itself as an MCP server on stdin/stdout, so that an AI agent can
    /// load-test a server: tools `probe` (revision, server, tools, latencies), `run` (a
    /// bounded load test; its results written under --results-root) and `compare` (two runs,
    /// with verdicts). Only targets on the allow-list are reached (loopback, plus --allow);
    /// runs are bounded (--max-duration, --max-rate, --max-concurrency). Logs go to stderr.
    #[command(after_help = "Register it with an MCP client (Claude Desktop's \
        claude_desktop_config.json, a project's .mcp.json, VS Code's mcp.json):\n  \
        {\"mcpServers\": {\"mcpbench\": {\"command\": \"mcpbench\", \"args\": [\"mcp\"]}}}\n\
        With its own results directory and a gateway on another host allowed:\n  \
        {\"mcpServers\": {\"mcpbench\": {\"command\": \"/usr/local/bin/mcpbench\", \"args\": [\"mcp\", \
        \"--results-root\", \"/home/me/bench\", \"--allow\", \"gw.internal:8080\"]}}}\n\
        Try it by hand with the MCP Inspector:\n  \
        npx @modelcontextprotocol/inspector --cli mcpbench mcp --method tools/list")]
    Mcp(crate::agent::McpOptions),
}

/// `mcpbench trace …`.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Convert a gateway's audit log (`mcpbench serve --audit FILE`) into a trace:
    /// invocations become tools/call entries and discoveries tools/list, at their arrival
    /// times, in the sessions the log names. The log needs the arguments
    /// (`--audit-arguments`) unless --empty-arguments. Denied and rate-limited calls are left
    /// out (and counted).
    #[command(name = "from-audit")]
    FromAudit {
        /// The audit log (JSON lines).
        audit: PathBuf,
        /// The trace to write.
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
        /// Replay calls whose arguments were not logged (`"[redacted]"`) with `{}`.
        #[arg(long)]
        empty_arguments: bool,
    },
    /// Replace secret-looking values in a trace's params with `"[redacted]"`, in place.
    Redact {
        /// The trace.
        file: PathBuf,
    },
    /// Summarise a trace: requests, sessions, span, and per method and tool the requests and
    /// their outcomes.
    Show {
        /// The trace.
        file: PathBuf,
    },
}

/// Changes to the scenario without editing it; checked like the file (errors name the flag).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Virtual users (closed loop) at a constant level: replaces `load.concurrency` and any
    /// stages.
    #[arg(long, value_name = "N", help_heading = "Scenario overrides")]
    pub concurrency: Option<u32>,
    /// Open loop at a constant arrival rate (requests per second): sets `load.model = "open"`
    /// and `load.rate`, replaces any stages.
    #[arg(long, value_name = "PER_SECOND", help_heading = "Scenario overrides")]
    pub rate: Option<f64>,
    /// How long the run lasts, warm-up included (`30s`, `2m`, `1h`).
    #[arg(long, value_name = "DURATION", help_heading = "Scenario overrides")]
    pub duration: Option<String>,
    /// The target's URL (http://, https://, ws://, wss://): replaces the scenario's target.
    #[arg(long, value_name = "URL", help_heading = "Scenario overrides")]
    pub url: Option<String>,
    /// An HTTP header for the target, `Name: value` (repeatable; `${ENV}` works in values).
    #[arg(
        long = "header",
        short = 'H',
        value_name = "NAME: VALUE",
        help_heading = "Scenario overrides"
    )]
    pub headers: Vec<String>,
    /// Any scenario key, `KEY=VALUE` with a TOML value (`load.timeout=2s`,
    /// `load.sessions=shared`, `embedded.catalog=500`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse_set, help_heading = "Scenario overrides")]
    pub sets: Vec<Override>,
}

impl Overrides {
    /// The overrides in the order they apply: the named flags, then each `--set`.
    pub fn list(&self) -> Result<Vec<Override>, String> {
        let mut out = Vec::new();
        if let Some(n) = self.concurrency {
            let flag = format!("--concurrency {n}");
            out.push(Override::remove(flag.clone(), "load.stages"));
            out.push(Override::set(flag, "load.concurrency", i64::from(n).into()));
        }
        if let Some(r) = self.rate {
            let flag = format!("--rate {r}");
            out.push(Override::remove(flag.clone(), "load.stages"));
            out.push(Override::set(flag.clone(), "load.model", "open".into()));
            out.push(Override::set(flag, "load.rate", r.into()));
        }
        if let Some(d) = &self.duration {
            out.push(Override::set(
                format!("--duration {d}"),
                "load.duration",
                d.as_str().into(),
            ));
        }
        if let Some(u) = &self.url {
            let flag = format!("--url {u}");
            out.push(Override::remove(flag.clone(), "embedded"));
            out.push(Override::remove(flag.clone(), "target.command"));
            out.push(Override::set(flag, "target.url", u.as_str().into()));
        }
        for h in &self.headers {
            let (name, value) = h
                .split_once(':')
                .filter(|(n, _)| !n.trim().is_empty())
                .ok_or_else(|| format!("--header {h}: expected `Name: value`"))?;
            out.push(Override::set(
                format!("--header {h}"),
                &format!("target.headers.{}", name.trim()),
                value.trim().into(),
            ));
        }
        out.extend(self.sets.iter().cloned());
        Ok(out)
    }
}

/// One scenario split over several generators (docs/scale-out.md).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Scale-out")]
pub struct ScaleArgs {
    /// Run shard I (from 0) of N of the scenario: its share of the users, rate, request count
    /// and credentials; the N shards together are the scenario (merge them with `mcpbench
    /// merge`).
    #[arg(
        long,
        value_name = "I/N",
        env = "MCPBENCH_SHARD",
        conflicts_with = "shards"
    )]
    pub shard: Option<String>,
    /// Run one of N shards, the index taken from JOB_COMPLETION_INDEX (a Kubernetes Indexed
    /// Job): one container spec serves every pod.
    #[arg(long, value_name = "N")]
    pub shards: Option<String>,
    /// Start the load at this time (RFC 3339, e.g. 2026-12-02T10:00:00Z) once the target is
    /// ready, so that the shards' intervals line up; a shard ready too late starts on the next
    /// interval and says so.
    #[arg(long, value_name = "TIME", conflicts_with = "start_barrier")]
    pub start_at: Option<String>,
    /// Start together through a directory every shard can write (a shared volume): each
    /// writes ready-I, shard 0 then writes the start time (a fresh directory per run).
    #[arg(long, value_name = "DIR")]
    pub start_barrier: Option<PathBuf>,
    /// How long to wait at the start barrier for every shard.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = mcpbench_knobs::parse_duration)]
    pub barrier_timeout: Duration,
    /// Open connections from this local address (one of this machine's; on loopback any
    /// 127.x.y.z): several generators on one machine, each with its own address and its own
    /// range of ports.
    #[arg(long, value_name = "IP")]
    pub source_address: Option<std::net::IpAddr>,
}

impl ScaleArgs {
    /// The shard and the start, from the flags and (`--shards`) `JOB_COMPLETION_INDEX`.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(scenario::Shard, driver::start::StartAt), String> {
        let shard = match (&self.shard, &self.shards) {
            (Some(s), _) => scenario::Shard::parse(s).map_err(|e| format!("--shard {e}"))?,
            (None, Some(n)) => {
                let count = scenario::Shard::count(n).map_err(|e| format!("--shards: {e}"))?;
                let index = env("JOB_COMPLETION_INDEX").ok_or_else(|| {
                    format!(
                        "--shards {n} takes this shard's index from JOB_COMPLETION_INDEX (set in \
                         the pods of a Kubernetes Indexed Job), which is not set: outside \
                         Kubernetes, use --shard I/{n}"
                    )
                })?;
                scenario::Shard::parse(&format!("{}/{count}", index.trim()))
                    .map_err(|e| format!("--shards {n} with JOB_COMPLETION_INDEX={index}: {e}"))?
            }
            (None, None) => scenario::Shard::WHOLE,
        };
        let start = match (&self.start_at, &self.start_barrier) {
            (Some(t), _) => driver::start::StartAt::At(
                driver::start::parse_time(t).map_err(|e| format!("--start-at {e}"))?,
            ),
            (None, Some(dir)) if shard.is_whole() => {
                return Err(format!(
                    "--start-barrier {} waits for every shard of a split run: give --shard I/N \
                     or --shards N (or --start-at TIME to start one run at a set time)",
                    dir.display()
                ));
            }
            (None, Some(dir)) => driver::start::StartAt::Barrier {
                dir: dir.clone(),
                timeout: self.barrier_timeout,
            },
            (None, None) => driver::start::StartAt::Now,
        };
        Ok((shard, start))
    }
}

/// How the run is shown while it runs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DisplayArgs {
    /// No dashboard: progress lines on stderr instead (the default when stdout is not a
    /// terminal).
    #[arg(long, help_heading = "Display")]
    pub no_tui: bool,
    /// Leave the dashboard as soon as the run ends (default: it shows the final result until
    /// a key is pressed).
    #[arg(long, help_heading = "Display")]
    pub exit_on_finish: bool,
    /// Progress on stderr without the dashboard: `text` (one line per interval) or `json`
    /// (one object per interval, the fields of timeseries.csv).
    #[arg(long, value_name = "FORMAT", help_heading = "Display")]
    pub progress: Option<ProgressFormat>,
    /// No dashboard and no progress, only the final table.
    #[arg(long, short, help_heading = "Display")]
    pub quiet: bool,
    /// Serve the running test's figures to Prometheus at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; port 0 picks one, printed on stderr).
    #[arg(long, value_name = "ADDR", help_heading = "Display")]
    pub metrics_listen: Option<SocketAddr>,
    /// Push the running test's figures to an OpenTelemetry collector, OTLP/HTTP protobuf, once
    /// per interval and at the end: its base URL (e.g. http://127.0.0.1:4318; `/v1/metrics` is
    /// added). Default: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT;
    /// headers (authentication) from OTEL_EXPORTER_OTLP_HEADERS, never printed.
    #[arg(long, value_name = "URL", help_heading = "Display")]
    pub otlp_endpoint: Option<String>,
}

/// How a final result is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryFormat {
    Text,
    Prometheus,
    Junit,
}

impl SummaryFormat {
    fn render(self, s: &crate::report::Summary) -> Option<String> {
        match self {
            SummaryFormat::Text => None,
            SummaryFormat::Prometheus => Some(crate::report::export::prometheus(s)),
            SummaryFormat::Junit => Some(crate::report::export::junit(s)),
        }
    }
}

/// `compare` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Markdown,
    Json,
}

/// Output of `doctor` and `probe --tenants`: a table, or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Text,
    Json,
}

/// The JSON Schemas `mcpbench schema` prints, as committed (compiled in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaKind {
    /// The scenario format (scenarios/schema.json).
    Scenario,
    /// summary.json, the result of a run (results/schema.json).
    Summary,
}

impl SchemaKind {
    pub fn text(self) -> &'static str {
        match self {
            SchemaKind::Scenario => include_str!("../../scenarios/schema.json"),
            SchemaKind::Summary => include_str!("../../results/schema.json"),
        }
    }
}

/// `--progress` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressFormat {
    Text,
    Json,
}

impl DisplayArgs {
    /// What to show, given whether stdout is a terminal.
    pub fn display(&self, stdout_is_terminal: bool) -> Display {
        match (self.quiet, self.progress) {
            (true, _) => Display::Quiet,
            (false, Some(ProgressFormat::Json)) => Display::Json,
            (false, Some(ProgressFormat::Text)) => Display::Lines,
            (false, None) if self.no_tui || !stdout_is_terminal => Display::Lines,
            (false, None) => Display::Dashboard {
                exit_on_finish: self.exit_on_finish,
            },
        }
    }
}

/// Exit code: the target failed a check (thresholds, regression, probe), or `doctor` found
/// what would make measurements unreliable.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: usage, scenario, set-up or runtime error, or an interrupted run.
pub const EXIT_ERROR: u8 = 2;

/// Prints `error: …` and gives exit code 2: the one way every command reports an error.
fn error(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(EXIT_ERROR)
}

/// Runs the parsed command.
pub fn execute(cli: Cli) -> ExitCode {
    // A descriptor per connection: the usual soft limit (1024) is far below what load needs.
    let (before, after) = driver::limits::raise_open_files();
    if after > before {
        tracing::debug!(before, after, "open-file limit raised to the hard limit");
    }
    match cli.command {
        Command::Probe {
            url,
            protocol,
            calls,
            headers,
            timeout,
            insecure,
            tenants,
            upstream,
            format,
        } => {
            let o = ProbeOptions {
                url,
                protocol,
                calls,
                headers,
                timeout,
                insecure,
            };
            match tenants {
                Some(file) => probe_tenants(o, &file, upstream, format),
                None => probe(o),
            }
        }
        Command::Validate { scenario, connect } => validate(&scenario, connect),
        Command::Doctor {
            concurrency,
            quick,
            format,
        } => doctor(
            &crate::doctor::Options {
                concurrency,
                quick,
                soft_files_at_start: before,
            },
            format,
        ),
        Command::Init(o) => init(&o),
        // stdout carries MCP messages only; everything else goes to stderr.
        Command::Mcp(o) => match crate::agent::serve(o, signalled()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => error(e),
        },
        Command::Compare {
            base,
            current,
            min_change,
            budget,
            format,
        } => compare((&base, &current), min_change, budget.as_deref(), format),
        Command::Merge {
            runs,
            output,
            partial,
        } => match crate::report::merge::merge(&runs, &output, partial) {
            Ok(s) => {
                print!("{}", crate::report::text::render(&s));
                println!(
                    "results: {}/ (summary.json, latency.hlog, timeseries.csv, report.md, report.html)",
                    output.display()
                );
                // The scenario's thresholds, judged on the merged result.
                if s.breached().next().is_some() {
                    ExitCode::from(EXIT_FAILED)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => error(e),
        },
        Command::Report { run, format } if run.join("findmax.json").is_file() => {
            if format.is_some_and(|f| f != SummaryFormat::Text) {
                return error(format_args!(
                    "{} is a find-max search: each step-NN/ inside it is a run with a summary to export",
                    run.display()
                ));
            }
            let written = crate::report::sweep::read(&run).and_then(|r| {
                crate::report::sweep::write(&r, &run)
                    .map(|()| r)
                    .map_err(|e| format!("cannot write the report into {}: {e}", run.display()))
            });
            match written {
                Ok(r) => {
                    print!("{}", crate::report::sweep::render(&r, &run));
                    ExitCode::SUCCESS
                }
                Err(e) => error(e),
            }
        }
        Command::Report { run, format } => match crate::report::read_back::RunFiles::read(&run) {
            Ok(files) if format.is_some_and(|f| f != SummaryFormat::Text) => {
                print!(
                    "{}",
                    format
                        .and_then(|f| f.render(&files.summary))
                        .unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Ok(files) => match crate::report::document::write(&files) {
                Ok(()) => {
                    println!(
                        "{}\n{}",
                        files.dir.join("report.md").display(),
                        files.dir.join("report.html").display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => error(format_args!(
                    "cannot write the report into {}: {e}",
                    files.dir.display()
                )),
            },
            Err(e) => error(e),
        },
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "mcpbench",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Command::Man => {
            use clap::CommandFactory;
            match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => error(e),
            }
        }
        Command::Schema { which } => {
            print!("{}", which.text());
            ExitCode::SUCCESS
        }
        Command::Run {
            scenario,
            output,
            results_root,
            codec,
            workers,
            format,
            grace,
            target_pid,
            repeat,
            overrides,
            display,
            scale,
        } => {
            let Some(scenario) = scenario else {
                return error(
                    "no scenario given: try `mcpbench run scenarios/quickstart.toml` (built-in \
                     servers), or `mcpbench init URL` to write one for your server",
                );
            };
            let overrides = match overrides.list() {
                Ok(o) => o,
                Err(e) => return error(e),
            };
            let (shard, start) = match scale.resolve(&|k| std::env::var(k).ok()) {
                Ok(s) => s,
                Err(e) => return error(e),
            };
            let otlp =
                crate::otlp::start(display.otlp_endpoint.as_deref(), &|k| std::env::var(k).ok());
            let otlp = match otlp {
                Ok(x) => x.map(|(x, announce)| {
                    eprintln!("{announce}");
                    Arc::new(x)
                }),
                Err(e) => return error(e),
            };
            let opts = RunOptions {
                otlp,
                start,
                source_address: scale.source_address,
                output,
                results_root,
                codec,
                workers,
                scenario_file: scenario.display().to_string(),
                grace,
                target_pids: target_pid,
                ..RunOptions::default()
            };
            use std::io::IsTerminal;
            let metrics = match display.metrics_listen.map(std::net::TcpListener::bind) {
                None => None,
                Some(Ok(l)) => {
                    if let Ok(a) = l.local_addr() {
                        eprintln!("metrics: http://{a}/metrics");
                    }
                    Some(l)
                }
                Some(Err(e)) => return error(format_args!("--metrics-listen: {e}")),
            };
            let display = display.display(std::io::stdout().is_terminal());
            run(
                &scenario,
                (&overrides, shard),
                (opts, usize::from(repeat)),
                (display, metrics),
                format,
            )
        }
        Command::Serve {
            front,
            backend,
            catalog,
            page_size,
            conformance,
            gateway,
        } => serve(Serve {
            front,
            backend,
            catalog,
            page_size,
            conformance,
            gateway,
        }),
        Command::Record {
            upstream,
            out,
            keep_secrets,
            front,
            upstream_args,
        } => record(Record {
            upstream,
            out,
            keep_secrets,
            front,
            upstream_args,
        }),
        Command::Trace { command } => trace(command),
    }
}

/// `compare`: prints the comparison; exit 1 on a regression.
fn compare(
    (base, current): (&std::path::Path, &std::path::Path),
    min_change: f64,
    budget: Option<&str>,
    format: CompareFormat,
) -> ExitCode {
    use crate::report::{compare, read_back::RunFiles};
    let (b, c) = match (RunFiles::read_side(base), RunFiles::read_side(current)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(e), _) | (_, Err(e)) => return error(e),
    };
    let names: std::collections::BTreeSet<&str> = b
        .iter()
        .chain(&c)
        .map(|r| r.summary.scenario.name.as_str())
        .collect();
    if names.len() > 1 {
        let names: Vec<&str> = names.into_iter().collect();
        eprintln!(
            "warning: comparing different scenarios ({})",
            names.join(", ")
        );
    }
    // Budgets: as given, else the current runs' scenario's `[compare]`.
    let budgets = match budget {
        Some(text) => match compare::Budget::parse_list(text) {
            Ok(b) => b,
            Err(e) => return error(format_args!("--budget: {e}")),
        },
        None => c[0].summary.budgets.clone(),
    };
    let cmp = compare::compare(&b, &c, min_change / 100.0, &budgets);
    match format {
        CompareFormat::Markdown => print!("{}", compare::markdown(&cmp)),
        CompareFormat::Json => match serde_json::to_string_pretty(&cmp) {
            Ok(j) => println!("{j}"),
            Err(e) => return error(e),
        },
    }
    if cmp.regressed() > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `doctor`: the findings as a table or JSON; exit 1 if any would make measurements
/// unreliable.
fn doctor(o: &crate::doctor::Options, format: TableFormat) -> ExitCode {
    let report = crate::doctor::examine(o);
    match format {
        TableFormat::Text => print!("{}", crate::doctor::render_text(&report)),
        TableFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(j) => println!("{j}"),
            Err(e) => return error(e),
        },
    }
    if report.warnings() > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `init`: writes the starter scenario and says what is in it.
fn init(o: &InitOptions) -> ExitCode {
    match crate::probe::init::run(o) {
        Ok(w) => {
            println!(
                "wrote {}: tools/list and {} tool{} ({} negotiated)",
                w.path.display(),
                w.kept.len(),
                if w.kept.len() == 1 { "" } else { "s" },
                w.revision
            );
            for (tool, why) in &w.left_out {
                println!("  left out (commented): {tool}: {why}");
            }
            println!("run it: mcpbench run {}", w.path.display());
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

/// `validate`: the file, and (embedded target, or `--connect`) the workload against the
/// target's tools.
fn validate(file: &std::path::Path, connect: bool) -> ExitCode {
    let plan = match scenario::load(file) {
        Ok(p) => p,
        Err(e) => return error(e),
    };
    let embedded = matches!(plan.target, Target::Embedded(_));
    let target = match &plan.target {
        Target::Embedded(_) => "the built-in reference server".to_string(),
        Target::Remote(r) => r.describe(),
    };
    let mut checked = String::new();
    if embedded || connect {
        let opts = RunOptions {
            scenario_file: file.display().to_string(),
            ..RunOptions::default()
        };
        match driver::runtime().and_then(|rt| driver::check(&plan, &opts, &rt)) {
            Ok(c) => {
                checked = format!(
                    "; {} tools listed, {} negotiated",
                    c.preflight.tools.len(),
                    c.preflight.revision
                )
            }
            Err(e) => return error(e),
        }
    }
    println!(
        "{}: ok — {} workload entries against {}{checked}, {} virtual users for {}",
        file.display(),
        plan.workload.len(),
        target,
        plan.load.concurrency,
        mcpbench_knobs::format_duration(plan.load.duration)
    );
    ExitCode::SUCCESS
}

/// `probe`: without `--call`, the conformance scenario named in [`probe::SCENARIO_ENV`] (if
/// any) decides what to call. Prints one line; exit 0 ok, 1 failed, 2 usage.
fn probe(mut o: ProbeOptions) -> ExitCode {
    if o.calls.is_empty()
        && let Ok(scenario) = std::env::var(probe::SCENARIO_ENV)
    {
        match probe::scenario_calls(&scenario) {
            Some(calls) => o.calls = calls,
            None => {
                return error(format_args!(
                    "probe: mcpbench does not take part in conformance scenario `{scenario}` \
                     (interactive and OAuth flows are out of scope for a load generator)"
                ));
            }
        }
    }
    match probe::run(&o) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(ProbeError::Usage(e)) => error(e),
        Err(ProbeError::Failed(e)) => {
            eprintln!("probe failed: {}: {e}", o.url);
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `probe --tenants`: the isolation checks as a table or JSON; exit 1 if one failed.
fn probe_tenants(
    probe: ProbeOptions,
    file: &std::path::Path,
    upstream: Option<String>,
    format: TableFormat,
) -> ExitCode {
    let tenants = match probe::tenants::load(file, &|v| std::env::var(v).ok()) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    let url = probe.url.clone();
    let o = probe::tenants::TenantsOptions {
        probe,
        tenants,
        upstream,
    };
    match probe::tenants::run(&o) {
        Ok(checks) => {
            match format {
                TableFormat::Text => print!("{}", probe::tenants::table(&url, &checks)),
                TableFormat::Json => println!("{:#}", probe::tenants::to_json(&url, &checks)),
            }
            let failed = checks
                .iter()
                .any(|c| c.verdict == probe::tenants::Verdict::Fail);
            if failed {
                ExitCode::from(EXIT_FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(ProbeError::Usage(e)) => error(e),
        Err(ProbeError::Failed(e)) => {
            eprintln!("probe failed: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `run`: one run, or a find-max search, shown as `display` asks; Ctrl-C (or `q` on the
/// dashboard) stops early and still writes results.
fn run(
    file: &std::path::Path,
    (overrides, shard): (&[scenario::Override], scenario::Shard),
    (mut opts, repeat): (RunOptions, usize),
    (display, metrics): (Display, Option<std::net::TcpListener>),
    format: SummaryFormat,
) -> ExitCode {
    let plan = match scenario::load_with(file, overrides) {
        Ok(p) => match p.sharded(shard) {
            Ok(p) => Arc::new(p),
            Err(e) => return error(format_args!("{}: {e}", file.display())),
        },
        Err(e) => return error(e),
    };
    if (plan.ab.is_some() || plan.find_max.is_some()) && opts.start != driver::start::StartAt::Now {
        return error(
            "--start-at and --start-barrier start one run of a split scenario; a find-max \
             search or an A/B run is many runs on one generator",
        );
    }
    if repeat > 1 && (plan.ab.is_some() || plan.find_max.is_some()) {
        return error(
            "--repeat runs one scenario several times; an A/B run or a find-max search is \
             already many runs (an A/B run interleaves its targets for the same reason)",
        );
    }
    let interrupt = driver::Interrupt::default();
    watch_signals(interrupt.clone(), display);
    let stop = interrupt.clone();
    let on_key = move || {
        stop.request("the dashboard");
    };
    let asked = interrupt.clone();
    let requested = move || asked.is_requested();
    let mut watcher = match Watcher::start(display, (on_key, requested), metrics) {
        Ok(w) => w,
        Err(e) => return error(format_args!("cannot start the display: {e}")),
    };
    opts.live = watcher.sink();
    // find-max prints a line per step, unless the dashboard owns the screen.
    opts.progress = matches!(display, Display::Lines | Display::Json);
    let result = if plan.ab.is_some() {
        driver::ab_slices::ab(plan, &opts, interrupt.clone()).map(|(report, dir)| {
            (
                crate::report::ab::render(&report, &dir),
                report.interrupted,
                !report.breached.is_empty(),
                dir,
            )
        })
    } else if plan.find_max.is_some() {
        driver::findmax::find_max(plan, &opts, interrupt.clone()).map(|(report, dir)| {
            (
                crate::report::sweep::render(&report, &dir),
                report.interrupted,
                false,
                dir,
            )
        })
    } else if repeat > 1 {
        driver::repeat::repeat(plan, &opts, repeat, interrupt.clone()).map(|(runs, dir)| {
            // JUnit: a test suite per run; Prometheus: the last run's (each run's files are in
            // its directory).
            let summaries: Vec<&crate::report::Summary> = runs.iter().map(|r| &r.summary).collect();
            let rendered = match format {
                SummaryFormat::Junit => Some(crate::report::export::junit_runs(&summaries)),
                f => summaries.last().and_then(|s| f.render(s)),
            };
            (
                rendered.unwrap_or_else(|| driver::repeat::render(&runs, &dir)),
                runs.iter().any(|r| r.summary.interrupted),
                runs.iter().any(|r| r.summary.breached().next().is_some()),
                dir,
            )
        })
    } else {
        driver::run(plan, &opts, interrupt.clone()).map(|out| {
            let breached = out.summary.breached().next().is_some();
            (
                format
                    .render(&out.summary)
                    .unwrap_or_else(|| driver::render(&out)),
                out.summary.interrupted,
                breached,
                out.dir,
            )
        })
    };
    drop(opts);
    // The dashboard shows the final result, then gives the terminal back.
    if let Err(e) = watcher.finish() {
        eprintln!("warning: {e}");
    }
    let (rendered, interrupted, breached, dir) = match result {
        Ok(r) => r,
        Err(e) => return error(e),
    };
    print!("{rendered}");
    let by_signal = interrupt.is_requested() && !watcher.stopped_by_viewer();
    if by_signal {
        eprintln!("interrupted: partial results written to {}", dir.display());
        return ExitCode::from(EXIT_ERROR);
    }
    if breached {
        eprintln!("thresholds breached: results written to {}", dir.display());
        return ExitCode::from(EXIT_FAILED);
    }
    if interrupted && watcher.stopped_by_viewer() {
        // Stopped from the dashboard: a deliberate end, its results complete for the time run.
        eprintln!(
            "stopped from the dashboard: results written to {}",
            dir.display()
        );
    }
    ExitCode::SUCCESS
}

/// SIGINT, SIGTERM and SIGHUP stop the run: the first lets requests in flight drain for the
/// grace, the second cancels them at once (results are written either way), a third exits at
/// once with 130. (On the dashboard the terminal is in raw mode: Ctrl-C arrives as a key, and
/// `kill -INT` as a signal.)
fn watch_signals(interrupt: driver::Interrupt, display: Display) {
    let quiet = matches!(display, Display::Dashboard { .. });
    // Caught from here on (not from when the thread gets to run).
    let Some((rt, mut signals)) = Signals::caught() else {
        return;
    };
    let _ = std::thread::Builder::new().name("mcpbench-signals".into()).spawn(move || {
        rt.block_on(async {
            for n in 0.. {
                let Some(name) = signals.next().await else { return };
                match n {
                    0 => {
                        if !quiet {
                            eprintln!("\n{name}: no new requests, draining those in flight, then writing the results (again to cancel them)");
                        }
                        interrupt.request(name);
                    }
                    1 => {
                        if !quiet {
                            eprintln!("{name}: cancelling the requests in flight, writing the results (again to quit at once)");
                        }
                        interrupt.request(name);
                    }
                    _ => {
                        crate::ui::restore_terminal();
                        std::process::exit(130);
                    }
                }
            }
        });
    });
}

/// `serve`'s options.
struct Serve {
    front: FrontArgs,
    backend: Option<String>,
    catalog: usize,
    page_size: usize,
    conformance: bool,
    gateway: GatewayArgs,
}

/// `record`'s options.
struct Record {
    upstream: String,
    out: PathBuf,
    keep_secrets: bool,
    front: FrontArgs,
    upstream_args: UpstreamArgs,
}

/// How `serve` and `record` take their clients: on an address (Streamable HTTP, HTTP+SSE,
/// WebSocket; TLS if asked) or on stdin/stdout.
#[derive(Debug, Clone, clap::Args)]
pub struct FrontArgs {
    /// Address to listen on; loopback unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Answer requests as JSON or as SSE streams.
    #[arg(long, default_value = "json")]
    response: ResponseMode,
    /// Extra host names accepted in Host and Origin headers (`*` accepts any).
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    /// Runtime threads.
    #[arg(long)]
    threads: Option<usize>,
    /// Serve one MCP session on stdin/stdout (one JSON message per line) instead of
    /// listening; exits when stdin closes.
    #[arg(long, conflicts_with_all = ["listen", "tls_cert", "tls_key"])]
    stdio: bool,
    /// Serve HTTPS/WSS (ALPN h2 and http/1.1) with this PEM certificate chain.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: require client certificates signed by a CA in this PEM file (a policy
    /// maps their subject CN or DNS names to tenants with `certs`).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: also accept clients without a certificate (tokens then).
    #[arg(long, requires = "tls_client_ca")]
    tls_client_optional: bool,
    /// Connections open at once (WebSockets included); one more is answered 503 with
    /// Retry-After and closed.
    #[arg(long, value_name = "N", default_value_t = server::Config::default().max_connections)]
    max_connections: usize,
}

impl FrontArgs {
    fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// The server settings these make (TLS loaded).
    fn configure(&self, config: &mut server::Config) -> Result<(), String> {
        config.response = self.response;
        config.max_connections = self.max_connections;
        config
            .allowed_hosts
            .extend(self.allow_hosts.iter().cloned());
        if let Some((cert, key)) = self.tls_cert.as_ref().zip(self.tls_key.as_ref()) {
            let clients = self
                .tls_client_ca
                .clone()
                .map(|ca| server::tls::ClientAuth {
                    ca,
                    optional: self.tls_client_optional,
                });
            config.tls = Some(
                server::tls::load_pem_with(cert, key, clients.as_ref())
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(())
    }
}

/// `serve` as a gateway: upstreams, tenants, audit.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Gateway")]
pub struct GatewayArgs {
    /// Front an upstream MCP server, its tools listed as NAME__tool: NAME=TARGET with TARGET
    /// http(s)://… (Streamable HTTP, either era), sse+http(s)://… (HTTP+SSE), ws(s)://… or
    /// stdio:COMMAND ARGS…. Repeat for several.
    #[arg(long = "upstream", value_name = "NAME=TARGET")]
    upstreams: Vec<String>,
    /// A header the gateway sends upstream NAME on every request: its credentials there, e.g.
    /// `ref=Authorization: Bearer ${REF_TOKEN}` (`${VAR}` from the environment; never logged).
    /// The only credentials an upstream gets: clients' never leave the gateway. Repeatable.
    #[arg(
        long = "upstream-header",
        value_name = "NAME=HEADER: VALUE",
        requires = "upstreams"
    )]
    upstream_headers: Vec<String>,
    /// List the reference server's own tools (echo, sleep, the REST-backed ones…) beside the
    /// upstreams' (by default a gateway lists only its upstreams' tools, so a workload that
    /// forgot `tool_prefix` cannot measure the gateway's local `echo` by mistake).
    #[arg(long, requires = "upstreams")]
    local_tools: bool,
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// Tenants: bearer tokens, the tools each may list and call (globs), rate limits (TOML;
    /// see docs/gateway.md). Requests without a valid token get 401.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Write audit events (discovery, invocation, error) as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Write call arguments into the audit log (default: "[redacted]").
    #[arg(long, requires = "audit")]
    audit_arguments: bool,
    /// Wait this long before every tool call, to within microseconds (to check what an A/B
    /// comparison reports; the last 3 ms are spent yielding, so it costs CPU).
    #[arg(long, value_name = "DURATION", value_parser = mcpbench_knobs::parse_duration)]
    inject_delay: Option<Duration>,
}

/// How the gateway (`serve --upstream`, `record`) reaches its upstreams.
#[derive(Debug, Clone, clap::Args)]
pub struct UpstreamArgs {
    /// Pooled sessions per upstream on each upstream I/O thread.
    #[arg(long, value_name = "N", default_value_t = 32)]
    upstream_pool: usize,
    /// Bound on one upstream call.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = mcpbench_knobs::parse_duration)]
    upstream_timeout: Duration,
    /// Check https/wss upstreams against the CA certificates in this PEM file (default: the
    /// system's roots).
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<PathBuf>,
    /// Mutual TLS to the upstreams: present this PEM client certificate chain…
    #[arg(long, value_name = "FILE", requires = "upstream_key")]
    upstream_cert: Option<PathBuf>,
    /// …with this PEM private key.
    #[arg(long, value_name = "FILE", requires = "upstream_cert")]
    upstream_key: Option<PathBuf>,
}

impl UpstreamArgs {
    fn tls(&self) -> crate::gateway::UpstreamTls {
        crate::gateway::UpstreamTls {
            trust: self.upstream_ca.clone().map_or(
                crate::transport::net::Trust::System,
                crate::transport::net::Trust::CaFile,
            ),
            identity: self
                .upstream_cert
                .clone()
                .zip(self.upstream_key.clone())
                .map(|(cert, key)| crate::transport::net::IdentityFiles { cert, key }),
        }
    }

    fn options(&self, threads: usize) -> crate::gateway::GatewayOptions {
        crate::gateway::GatewayOptions {
            threads,
            pool: self.upstream_pool,
            timeout: self.upstream_timeout,
        }
    }
}

/// Says what the gateway found at its upstreams.
fn started(gw: &crate::gateway::Gateway) {
    for s in &gw.started {
        eprintln!(
            "upstream {}: {} tools, {} ({:.1} ms)",
            s.name,
            s.tools,
            s.revision,
            s.took.as_secs_f64() * 1000.0
        );
        for t in &s.refused {
            eprintln!(
                "upstream {}: tool {t:?} left out: its name holds whitespace or a control character",
                s.name
            );
        }
    }
}

impl GatewayArgs {
    /// The server settings these add, with the upstreams connected (their tools listed).
    fn apply(&self, config: &mut server::Config, threads: usize) -> Result<(), String> {
        if let Some(p) = &self.policy {
            let policy = server::policy::Policy::load(p).map_err(|e| e.to_string())?;
            config.policy = Some(Arc::new(policy));
        }
        if let Some(a) = &self.audit {
            let audit = server::audit::Audit::create(a, self.audit_arguments)
                .map_err(|e| format!("cannot create the audit log {}: {e}", a.display()))?;
            config.audit = Some(Arc::new(audit));
        }
        config.call_delay = self.inject_delay.unwrap_or_default();
        config.local_tools = self.local_tools;
        if self.upstreams.is_empty() {
            return Ok(());
        }
        let tls = self.upstream.tls();
        let mut specs = self
            .upstreams
            .iter()
            .map(|s| crate::gateway::UpstreamSpec::parse(s, self.upstream.upstream_timeout, &tls))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        crate::gateway::add_headers(&mut specs, &self.upstream_headers, &|v| {
            std::env::var(v).ok()
        })
        .map_err(|e| e.to_string())?;
        let gw = crate::gateway::Gateway::start(specs, &self.upstream.options(threads))
            .map_err(|e| e.to_string())?;
        started(&gw);
        eprintln!(
            "{} upstreams ready in {:.1} ms",
            gw.started.len(),
            gw.startup.as_secs_f64() * 1000.0
        );
        config.proxy = Some(gw);
        Ok(())
    }
}

fn serve(o: Serve) -> ExitCode {
    let mut config = server::Config {
        conformance: o.conformance,
        catalog: o.catalog,
        page_size: o.page_size,
        backend: o.backend,
        ..server::Config::default()
    };
    if let Err(e) = o.front.configure(&mut config) {
        return error(e);
    }
    let threads = o.front.threads();
    if let Err(e) = o.gateway.apply(&mut config, threads) {
        return error(e);
    }
    front(&o.front, config, threads, None)
}

/// `record`: the gateway in front of one upstream, its tools under their own names, every
/// tools/list and tools/call written to the trace; then says what the trace holds.
fn record(o: Record) -> ExitCode {
    let shown = crate::trace::record::printable_target(&o.upstream);
    let mut config = server::Config {
        identity: Some(server::Identity {
            name: "mcpbench-record".into(),
            title: "mcpbench record".into(),
            instructions: format!(
                "Records the requests made to {shown}: its tools, called through this proxy."
            ),
        }),
        // One page: the upstream was listed whole, and a trace should hold no cursor of ours.
        page_size: usize::MAX,
        ..server::Config::default()
    };
    if let Err(e) = o.front.configure(&mut config) {
        return error(e);
    }
    let threads = o.front.threads();
    let timeout = o.upstream_args.upstream_timeout;
    // The gateway's spec is NAME=TARGET; the name is never shown (no prefix).
    let spec = match crate::gateway::UpstreamSpec::parse(
        &format!("recorded={}", o.upstream),
        timeout,
        &o.upstream_args.tls(),
    ) {
        Ok(s) => s,
        Err(crate::gateway::GatewayError::Spec { reason, .. }) => {
            return error(format_args!("--upstream {}: {reason}", o.upstream));
        }
        Err(e) => return error(e),
    };
    let gw =
        match crate::gateway::Gateway::start_transparent(spec, &o.upstream_args.options(threads)) {
            Ok(gw) => gw,
            Err(crate::gateway::GatewayError::Upstream { reason, .. }) => {
                return error(format_args!("upstream {shown}: {reason}"));
            }
            Err(e) => return error(e),
        };
    if let Some(s) = gw.started.first() {
        eprintln!(
            "upstream {shown}: {} tools, {} ({:.1} ms)",
            s.tools,
            s.revision,
            s.took.as_secs_f64() * 1000.0
        );
    }
    let header = crate::trace::record::header("record", Some(shown));
    let recorder = match server::trace_recorder::Recorder::create(&o.out, &header, o.keep_secrets) {
        Ok(r) => r,
        Err(e) => {
            return error(format_args!(
                "cannot create the trace {}: {e}",
                o.out.display()
            ));
        }
    };
    if o.keep_secrets {
        eprintln!(
            "warning: --keep-secrets: arguments are written as received, secrets included; \
             readers refuse {} until `mcpbench trace redact` has run on it",
            o.out.display()
        );
    }
    config.proxy = Some(gw.clone());
    config.record = Some(recorder.clone());
    // The banner says clients may come: only once every server thread's upstream session is
    // open, so that no recorded call pays for opening one (a stdio upstream's start).
    let ready = move || {
        if !gw.wait_warm(threads, timeout) {
            eprintln!("warning: not every upstream session opened within {timeout:?}");
        }
    };
    let code = front(&o.front, config, threads, Some((recorder.clone(), &ready)));
    match recorder.finish() {
        Ok(r) => eprintln!(
            "recorded {} request{} from {} session{} to {}",
            r.entries,
            if r.entries == 1 { "" } else { "s" },
            r.sessions,
            if r.sessions == 1 { "" } else { "s" },
            o.out.display()
        ),
        Err(e) => return error(format_args!("{}: {e}", o.out.display())),
    }
    code
}

/// `trace from-audit | redact | show`.
fn trace(command: TraceCommand) -> ExitCode {
    match command {
        TraceCommand::FromAudit {
            audit,
            output,
            empty_arguments,
        } => {
            let name = audit.display().to_string();
            let read = std::fs::File::open(&audit)
                .map_err(|source| crate::trace::TraceError::Io {
                    path: name.clone(),
                    source,
                })
                .and_then(|f| {
                    crate::trace::record::from_audit(
                        std::io::BufReader::new(f),
                        &name,
                        empty_arguments,
                    )
                });
            let (entries, c) = match read {
                Ok(x) => x,
                Err(e) => return error(e),
            };
            let header = crate::trace::record::header("audit", None);
            if let Err(e) = crate::trace::record::write(&output, &header, &entries) {
                return error(e);
            }
            let span = entries.iter().map(|e| e.t).fold(0.0, f64::max);
            println!(
                "{}: {} tools/call and {} tools/list from {} session{} over {span:.3} s (from {name})",
                output.display(),
                c.calls,
                c.lists,
                c.sessions,
                if c.sessions == 1 { "" } else { "s" },
            );
            if c.denied + c.rate_limited > 0 {
                println!(
                    "left out: {} denied and {} rate-limited invocations (they never reached a tool)",
                    c.denied, c.rate_limited
                );
            }
            if c.redacted > 0 {
                println!("{} secret-looking values redacted", c.redacted);
            }
            ExitCode::SUCCESS
        }
        TraceCommand::Redact { file } => match crate::trace::redact_file(&file) {
            Ok(n) => {
                println!(
                    "{}: {n} value{} redacted",
                    file.display(),
                    if n == 1 { "" } else { "s" }
                );
                ExitCode::SUCCESS
            }
            Err(e) => error(e),
        },
        TraceCommand::Show { file } => match crate::trace::Trace::read(&file) {
            Ok(t) => {
                print!(
                    "{}",
                    crate::trace::record::show(&t, &file.display().to_string())
                );
                ExitCode::SUCCESS
            }
            Err(e) => error(e),
        },
    }
}

/// Serves `config` as `f` says (listening, or one session on stdio) until a signal or, on
/// stdio, the end of stdin; `recording` is flushed even when a second signal quits at once.
fn front(
    f: &FrontArgs,
    config: server::Config,
    threads: usize,
    recording: Option<(Arc<server::trace_recorder::Recorder>, &dyn Fn())>,
) -> ExitCode {
    let (recording, ready) = match recording {
        Some((r, ready)) => (Some(r), Some(ready)),
        None => (None, None),
    };
    let no_anonymous = config
        .policy
        .as_ref()
        .is_some_and(|p| !matches!(p.authenticate(None), server::policy::Auth::Tenant(_)));
    if f.stdio && no_anonymous {
        return error(
            "--stdio carries no credentials: the policy needs `anonymous = \"TENANT\"` to serve it",
        );
    }
    if f.stdio {
        // stdout carries MCP messages only; everything else goes to stderr.
        return match server::run_stdio(
            config,
            mock_backend::Config::default(),
            threads,
            signalled(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => error(e),
        };
    }
    let servers = match server::EmbeddedServers::launch(server::Launch {
        listen: f.listen,
        config,
        backend: mock_backend::Config::default(),
        threads,
    }) {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    if let Some(ready) = ready {
        ready();
    }
    // The first line is parsed by scripts and tests: keep its shape. One write, errors
    // ignored: a reader that stops after the first line must not make this panic.
    let serving = match &recording {
        Some(r) => format!("recording to {}", r.path().display()),
        None => format!("backend {}", servers.backend_url),
    };
    let banner = format!(
        "listening on {} ({serving})\nalso: {} (HTTP+SSE, 2024-11-05), {} (WebSocket, subprotocol mcp)\n",
        servers.mcp_url(),
        servers.sse_url(),
        servers.ws_url()
    );
    // Caught before the banner, which tells scripts they may signal.
    let caught = Signals::caught();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    drop(out);
    if let Some((rt, mut signals)) = caught {
        let name = rt.block_on(signals.next());
        eprintln!(
            "{}: stopping: no new connections, requests in flight get {} to finish",
            name.unwrap_or("signal"),
            mcpbench_knobs::format_duration(mock_backend::accept::DEFAULT_GRACE)
        );
        // A second signal does not wait for the drain (what was recorded is written first).
        let _ = std::thread::Builder::new()
            .name("mcpbench-signals".into())
            .spawn(move || {
                rt.block_on(signals.next());
                if let Some(r) = recording {
                    let _ = r.flush();
                }
                std::process::exit(130);
            });
    }
    // Dropping the servers drains them (graceful shutdown, bounded by the grace).
    drop(servers);
    ExitCode::SUCCESS
}

/// Completes on SIGINT, SIGTERM or SIGHUP. Nothing is registered until it is first polled,
/// so it can be made outside a runtime.
async fn signalled() {
    Signals::new().next().await;
}

/// SIGINT, SIGTERM and SIGHUP (Ctrl-C where there are no Unix signals), caught from creation
/// on: registering replaces their default action (termination) for good.
struct Signals {
    #[cfg(unix)]
    streams: Option<[tokio::signal::unix::Signal; 3]>,
}

impl Signals {
    /// A runtime to await them on, and the signals caught from now on.
    fn caught() -> Option<(tokio::runtime::Runtime, Signals)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        let signals = {
            let _in = rt.enter();
            Signals::new()
        };
        Some((rt, signals))
    }

    /// Must be called inside a runtime with signals enabled.
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let streams = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) {
                (Ok(int), Ok(term), Ok(hup)) => Some([int, term, hup]),
                _ => None,
            };
            Signals { streams }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal, by name; `None` if none can be awaited.
    async fn next(&mut self) -> Option<&'static str> {
        #[cfg(unix)]
        if let Some([int, term, hup]) = &mut self.streams {
            return tokio::select! {
                _ = int.recv() => Some("SIGINT"),
                _ = term.recv() => Some("SIGTERM"),
                _ = hup.recv() => Some("SIGHUP"),
            };
        }
        tokio::signal::ctrl_c().await.ok().map(|()| "Ctrl-C")
    }
}
