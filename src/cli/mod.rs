//! Command-line interface: `run`, `init`, `report`, `compare`, `merge`, `serve`, `record`,
//! `trace`, `validate`, `probe`, `completions`, `man`, `schema`, `doctor`, `mcp`.
//!
//! This file holds what every command shares (the clap definitions, exit codes, the one way
//! of reporting an error) and [`execute`], which hands each command to its own file: `run`
//! (run; split over local processes: local_shards), `serve` and `mcp` (serve), `record` and `trace` (recording), `report`, `compare` and
//! `merge` (results), `init`, `probe`, `validate`, `doctor`, `schema`, `completions` and
//! `man` (inspect); signals and the open-file limit (signals).
//!
//! Exit codes ([`EXIT_FAILED`], [`EXIT_ERROR`]): 0 success (a run stopped from the dashboard
//! included); 1 the target failed a check (thresholds breached by a run or a merged result, a
//! regression found by `compare`, a failed probe) or `doctor` warned; 2 usage, scenario, set-up
//! or runtime error, including a run interrupted by a signal (its partial results are still
//! written).

mod inspect;
mod local_shards;
mod oneliner;
mod recording;
mod results;
mod run;
mod serve;
mod signals;
mod values;

use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::driver::{RunError, RunOutput};
use crate::probe::init::InitOptions;
use values::Number;

pub use inspect::{
    CompletionsArgs, DoctorArgs, ProbeArgs, SchemaArgs, SchemaKind, TableFormat, ValidateArgs,
};
pub use oneliner::QuickArgs;
pub use recording::{RecordArgs, TraceArgs, TraceCommand};
pub use results::{CompareArgs, CompareFormat, MergeArgs, ReportArgs};
pub use run::{DisplayArgs, Overrides, ProgressFormat, RunArgs, ScaleArgs};
pub use serve::{FrontArgs, GatewayArgs, ServeArgs, UpstreamArgs};

#[derive(Debug, Parser)]
#[command(
    name = "mcpbench",
    version,
    about = "Load generator and reference server for MCP servers and gateways",
    after_help = "Examples:\n  mcpbench run scenarios/quickstart.toml\n  \
        mcpbench init http://127.0.0.1:8080/mcp && mcpbench run scenario.toml\n  \
        mcpbench run --help"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The commands. Each has a one-line description (the first paragraph of its doc comment,
/// what `mcpbench --help` lists), the rest of its doc for `--help`, and examples; a test walks
/// every help page (tests/help.rs).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario, or a quick test of a server by its URL (or `-- CMD`), and write the results.
    ///
    /// A live dashboard shows the run when stdout is a terminal (q, Esc or Ctrl-C stop it;
    /// results are written either way); at the end the result is printed (the table, or
    /// --format's rendering).
    ///
    /// A quick test (`mcpbench run URL`, or `mcpbench run -- CMD ARGS…` for a stdio server)
    /// needs no file: its flags become a scenario, written to `scenario.toml` in the run's
    /// directory (`results/<UTC time>-<tool, or tools-list>`, or --output) and run like any
    /// scenario file; `mcpbench run DIR/scenario.toml` repeats the test, and the file is
    /// there to edit. Each request is `tools/list`, or with --tool NAME a `tools/call` of that
    /// tool with the --args JSON object. Defaults: 8 virtual users (closed loop) for 10s, no
    /// warm-up, a 10s request timeout. -c/--concurrency N sets the virtual users; --rate R
    /// runs an open loop instead, R requests per second (-c then caps the requests in
    /// flight); -d/--duration sets how long. -H and --set are written into the scenario.
    #[command(after_help = "Examples:\n  \
        mcpbench run http://127.0.0.1:8080/mcp\n  \
        mcpbench run http://127.0.0.1:8080/mcp -c 16 -d 30s --tool echo --args '{\"message\":\"hi\"}'\n  \
        mcpbench run --rate 500 -d 1m -- python server.py\n  \
        mcpbench run results/20260101T120000Z-echo/scenario.toml\n  \
        mcpbench run scenarios/quickstart.toml\n  \
        mcpbench run gateway.toml --url http://127.0.0.1:8080/mcp --concurrency 64 --duration 2m\n  \
        mcpbench run gateway.toml --rate 2000 --set load.timeout=2s --no-tui --progress json")]
    Run(RunArgs),
    /// Serve the reference MCP server, or a gateway in front of other MCP servers.
    ///
    /// Streamable HTTP at /mcp, HTTP+SSE at /sse + /messages, WebSocket at /ws (subprotocol
    /// mcp); or one session on stdin/stdout with --stdio. With --upstream it is a gateway: the
    /// upstreams' tools listed under their prefixes, tenants and audit as asked.
    #[command(after_help = "Examples:\n  mcpbench serve\n  \
        mcpbench serve --listen 127.0.0.1:9000 --response sse --catalog 500\n  \
        mcpbench serve --stdio\n  \
        mcpbench serve --listen 127.0.0.1:9090 --upstream 'files=stdio:python3 my_server.py' --policy tenants.toml")]
    Serve(ServeArgs),
    /// Record what MCP clients do with a server into a trace, to replay as a workload.
    ///
    /// A transparent proxy in front of one upstream server (any transport) that clients reach
    /// like `serve` (Streamable HTTP at /mcp, HTTP+SSE, WebSocket, or stdio), writing every
    /// tools/list and tools/call to a trace (JSON Lines) as it completes: arrival time,
    /// session, params, digest of the result, latency, outcome. Secret-looking values are
    /// redacted. Stop it with Ctrl-C (or EOF on stdin with --stdio); the trace is complete
    /// either way. Replay it with a scenario's `[replay]` table.
    #[command(after_help = "Examples:\n  \
        mcpbench record --upstream http://127.0.0.1:3000/mcp --output session.trace.jsonl\n  \
        mcpbench record --upstream 'stdio:python3 server.py' -o t.jsonl --listen 127.0.0.1:9000\n  \
        mcpbench record --stdio --upstream ws://127.0.0.1:3000/ws -o t.jsonl")]
    Record(RecordArgs),
    /// Work with traces: summarise, redact, or convert a gateway's audit log into one.
    ///
    /// Traces are what `mcpbench record` writes and what a scenario's `[replay]` reads.
    #[command(
        after_help = "Examples:\n  mcpbench trace show session.trace.jsonl\n  \
        mcpbench trace redact session.trace.jsonl\n  \
        mcpbench trace from-audit audit.jsonl --output session.trace.jsonl"
    )]
    Trace(TraceArgs),
    /// Write a starter scenario for a server, calling each of its tools.
    ///
    /// Connects to the server, lists its tools and writes a scenario that calls each one with
    /// arguments made from its input schema (tools that fail a trial call are written
    /// commented out, with the reason).
    #[command(
        after_help = "Examples:\n  mcpbench init http://127.0.0.1:8080/mcp\n  \
        mcpbench init --output mine.toml -- python3 server.py\n  \
        mcpbench init https://gw.example/mcp -H 'Authorization: Bearer ${MCP_TOKEN}'"
    )]
    Init(InitOptions),
    /// Print a finished run's result again and render its report.md and report.html.
    ///
    /// From the run's files (summary.json, timeseries.csv, latency.hlog): the table `run`
    /// printed at its end, and report.md and report.html written again into its directory
    /// (parameters, outcomes, thresholds, generator health, plots). A find-max directory gets
    /// its sweep (steps, knee, throughput frontier), an A/B directory its comparison, a
    /// directory of runs (`run --repeat`) each run's reports and the spread between them.
    #[command(
        after_help = "Examples:\n  mcpbench report results/2026-12-02T10-00-00Z-quickstart\n  \
        mcpbench report results/ci --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n  \
        mcpbench report results/ci/summary.json --format junit > junit.xml"
    )]
    Report(ReportArgs),
    /// Compare two sides of runs per operation, with verdicts that account for the noise.
    ///
    /// Each side is one run or several (a run directory, or a directory of them such as `run
    /// --repeat` writes): per operation, the change of p50/p90/p95/p99/p99.9, throughput and
    /// error rate, with a verdict that accounts for the noise — the spread between runs with
    /// several a side, else the spread inside each run. Exit 1 if anything regressed (or a
    /// budget was breached beyond the noise).
    #[command(
        after_help = "Examples:\n  mcpbench compare results/base results/current\n  \
        mcpbench run ci.toml --repeat 3 -o base; mcpbench run ci.toml --repeat 3 -o current; mcpbench compare base current\n  \
        mcpbench compare base current --budget p95=+15%,throughput=-10%,errors=+0.5pp --format json"
    )]
    Compare(CompareArgs),
    /// Merge runs of one scenario, such as shards on several machines, into one result.
    ///
    /// Counters added, latency histograms added exactly, interval logs on one time line; the
    /// scenario's thresholds judged on the merged result (exit 1 if one is breached).
    #[command(
        after_help = "Examples:\n  mcpbench merge shard-0 shard-1 shard-2 --output merged\n  \
        mcpbench merge /shared/results -o merged --partial"
    )]
    Merge(MergeArgs),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  \
        mcpbench completions bash > ~/.local/share/bash-completion/completions/mcpbench\n  \
        mcpbench completions zsh > ~/.zfunc/_mcpbench\n  \
        mcpbench completions fish > ~/.config/fish/completions/mcpbench.fish")]
    Completions(CompletionsArgs),
    /// Print the man page (roff).
    #[command(after_help = "Examples:\n  mcpbench man > mcpbench.1 && man ./mcpbench.1")]
    Man,
    /// Print the JSON Schema of the scenario format or of summary.json.
    ///
    /// Draft 2020-12. The scenario's is for editors: Taplo and VS Code's Even Better TOML read
    /// a `#:schema FILE` first line.
    #[command(
        after_help = "Examples:\n  mcpbench schema scenario > scenario.schema.json\n  \
        mcpbench schema summary > summary.schema.json"
    )]
    Schema(SchemaArgs),
    /// Check a scenario file without running it.
    ///
    /// With --connect (always for the built-in server) also open a session on the target and
    /// check the workload against its tools. Takes the same overrides as `run`, checked the
    /// same way.
    #[command(
        after_help = "Examples:\n  mcpbench validate scenarios/quickstart.toml\n  \
        mcpbench validate gateway.toml --url http://127.0.0.1:8080/mcp --connect\n  \
        mcpbench validate gateway.toml --concurrency 64 --set load.timeout=2s"
    )]
    Validate(ValidateArgs),
    /// Open one MCP session, list the tools, call the ones asked for and print one line.
    ///
    /// On a Streamable HTTP endpoint, with mcpbench's client; exit 0 ok, 1 failed, 2 usage.
    /// Under the official conformance suite (MCP_CONFORMANCE_SCENARIO set) the scenario decides
    /// what to call. With --tenants, check a gateway's tenant isolation instead.
    #[command(
        after_help = "Examples:\n  mcpbench probe http://127.0.0.1:8080/mcp --call 'echo={\"message\":\"hi\"}'\n  \
        mcpbench probe https://gw.example/mcp -H \"Authorization: Bearer $MCP_TOKEN\"\n  \
        mcpbench probe --tenants tenants.toml http://127.0.0.1:9090/mcp --upstream http://127.0.0.1:8080/mcp"
    )]
    Probe(ProbeArgs),
    /// Check this machine for what would make a load test fail or its measurements unreliable.
    ///
    /// Open-file and port limits for the planned load, TIME_WAIT, timer and clock precision,
    /// CPU frequency scaling and quota, other load on the cores; each finding with its fix.
    /// Exit 0 nothing found, 1 a warning, 2 usage.
    #[command(after_help = "Examples:\n  mcpbench doctor\n  \
        mcpbench doctor --concurrency 20000\n  \
        mcpbench doctor --quick --format json")]
    Doctor(DoctorArgs),
    /// Serve mcpbench on stdin/stdout as an MCP server, for AI agents to load-test servers with.
    ///
    /// Tools `probe` (revision, server, tools, latencies), `run` (a bounded load test; its
    /// results written under --results-root) and `compare` (two runs, with verdicts). Only
    /// targets on the allow-list are reached (loopback, plus --allow); runs are bounded
    /// (--max-duration, --max-rate, --max-concurrency). Logs go to stderr.
    #[command(after_help = "Examples:\n  mcpbench mcp\n  \
        mcpbench mcp --results-root /home/me/bench --allow gw.internal:8080\n\n\
        Register it with an MCP client (Claude Desktop's \
        claude_desktop_config.json, a project's .mcp.json, VS Code's mcp.json):\n  \
        {\"mcpServers\": {\"mcpbench\": {\"command\": \"mcpbench\", \"args\": [\"mcp\"]}}}\n\
        With its own results directory and a gateway on another host allowed:\n  \
        {\"mcpServers\": {\"mcpbench\": {\"command\": \"/usr/local/bin/mcpbench\", \"args\": [\"mcp\", \
        \"--results-root\", \"/home/me/bench\", \"--allow\", \"gw.internal:8080\"]}}}\n\
        Try it by hand with the MCP Inspector:\n  \
        npx @modelcontextprotocol/inspector --cli mcpbench mcp --method tools/list")]
    #[command(
        mut_arg("max_duration", |a| a.allow_hyphen_values(true)),
        mut_arg("max_rate", |a| a
            .allow_negative_numbers(true)
            .value_parser(Number::above(0.0, "requests per second"))),
        mut_arg("max_concurrency", |a| a
            .allow_negative_numbers(true)
            .value_parser(Number::<u32>::at_least(1, "virtual users")))
    )]
    Mcp(crate::agent::McpOptions),
}

/// How a finished result is printed on stdout (`run`, `report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryFormat {
    /// The table.
    Text,
    /// report.md.
    Markdown,
    /// summary.json.
    Json,
    /// Prometheus text exposition format.
    Prometheus,
    /// JUnit XML: each threshold and check a test case.
    Junit,
}

impl SummaryFormat {
    /// A finished run as printed at its end: the table (with where its files are), or this
    /// rendering of it.
    pub(crate) fn render(self, run: &RunOutput) -> Result<String, RunError> {
        use crate::report::{document, export, read_back::RunFiles};
        let unreadable = |e: &dyn std::fmt::Display| RunError::Output {
            path: run.dir.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        };
        Ok(match self {
            SummaryFormat::Text => crate::driver::render(run),
            SummaryFormat::Markdown => {
                let files = RunFiles::read(&run.dir).map_err(|e| unreadable(&e))?;
                document::markdown(&document::document(&files))
            }
            SummaryFormat::Json => {
                serde_json::to_string_pretty(&run.summary).map_err(|e| unreadable(&e))? + "\n"
            }
            SummaryFormat::Prometheus => export::prometheus(&run.summary),
            SummaryFormat::Junit => export::junit(&run.summary),
        })
    }

    /// Runs of one series (`run --repeat`) as printed at its end: the table of the runs and
    /// their spread; JUnit a test suite per run; the other renderings the last run's (each
    /// run's files are in its directory).
    pub(crate) fn render_runs(self, runs: &[RunOutput], dir: &Path) -> Result<String, RunError> {
        match (self, runs.last()) {
            (SummaryFormat::Text, _) | (_, None) => Ok(crate::driver::repeat::render(runs, dir)),
            (SummaryFormat::Junit, _) => {
                let summaries: Vec<&crate::report::Summary> =
                    runs.iter().map(|r| &r.summary).collect();
                Ok(crate::report::export::junit_runs(&summaries))
            }
            (f, Some(last)) => f.render(last),
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
    let soft_files_at_start = signals::raise_open_files();
    match cli.command {
        Command::Run(a) => run::run(a),
        Command::Serve(a) => serve::serve(a),
        Command::Record(a) => recording::record(a),
        Command::Trace(a) => recording::trace(a.command),
        Command::Init(o) => inspect::init(&o),
        Command::Report(a) => results::report(a),
        Command::Compare(a) => results::compare(a),
        Command::Merge(a) => results::merge(a),
        Command::Completions(a) => inspect::completions(a.shell),
        Command::Man => inspect::man(),
        Command::Schema(a) => inspect::schema(a.which),
        Command::Validate(a) => inspect::validate(&a),
        Command::Probe(a) => inspect::probe(a),
        Command::Doctor(a) => inspect::doctor(a, soft_files_at_start),
        Command::Mcp(o) => serve::mcp(o),
    }
}
