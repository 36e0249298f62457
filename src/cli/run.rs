//! `mcpbench run`: its options, the scenario overrides, the shard and start of a split run,
//! how the run is shown; then one run, repeated runs, an A/B run or a find-max search. A quick
//! test (a URL or `-- CMD` instead of a scenario file) is made a scenario file by `oneliner`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::oneliner::{Given, QuickArgs, given, write_quick};
use super::signals::watch_signals;
use super::values::{self, Number};
use super::{EXIT_ERROR, EXIT_FAILED, SummaryFormat, error};
use crate::driver::{self, RunOptions};
use crate::protocol::jsonrpc::Codec;
use crate::scenario::{self, Override};
use crate::ui::{Display, Watcher};

/// `run`'s command line. `-c` and `-d` are short for the overrides `--concurrency` and
/// `--duration` (as in oha and hey).
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A scenario file (TOML; `mcpbench init` writes one for your server), or for a quick test
    /// the server's URL: http://, https://, ws:// or wss://.
    #[arg(value_name = "SCENARIO|URL")]
    pub scenario: Option<PathBuf>,
    /// Directory for this run's results (default: `results/<UTC time>-<name>`).
    #[arg(long, short, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Where default run directories go.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results_root: PathBuf,
    /// JSON decoder for responses (`scan`, the default, also recognises replies read before).
    #[arg(
        long,
        default_value = "scan",
        value_parser = values::one_of::<Codec>(["scan", "serde-json", "simd-json"])
    )]
    pub codec: Codec,
    /// Generator threads (default: the scenario's, else one per core).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "generator threads")
    )]
    pub workers: Option<usize>,
    /// The final result on stdout.
    #[arg(long, default_value = "text")]
    pub format: SummaryFormat,
    /// After SIGINT, SIGTERM or SIGHUP: how long requests in flight get to finish (at most
    /// the request timeout) before they are cancelled; a second signal cancels them at once.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "5s", value_parser = mcpbench_knobs::parse_duration)]
    pub grace: Duration,
    /// A process of the target to sample every interval (CPU time, memory, descriptors,
    /// threads; reported per request): the server, a gateway, its upstreams. Repeat for
    /// several; adds to the scenario's `target.pid`. Stdio servers are sampled anyway.
    #[arg(
        long = "target-pid",
        value_name = "PID",
        allow_negative_numbers = true,
        value_parser = Number::<u32>::at_least(1, "a process id")
    )]
    pub target_pid: Vec<u32>,
    /// Run the scenario N times, one after the other, into OUTPUT/run-1 … run-N: a side
    /// of `mcpbench compare` that sees the machine's drift between runs (3 or more). Exit 1
    /// if a threshold was breached in any; `--format junit` prints a test suite per run, the
    /// other formats the last run's.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = Number::<u16>::at_least(1, "runs")
    )]
    pub repeat: u16,
    #[command(flatten)]
    pub quick: QuickArgs,
    #[command(flatten)]
    pub overrides: Overrides,
    #[command(flatten)]
    pub display: DisplayArgs,
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// Changes to the scenario without editing it; checked like the file (errors name the flag).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Virtual users (closed loop) at a constant level: replaces `load.concurrency` and any
    /// stages.
    #[arg(
        long,
        short = 'c',
        value_name = "N",
        help_heading = "Scenario overrides",
        allow_negative_numbers = true,
        value_parser = Number::<u32>::at_least(1, "virtual users")
    )]
    pub concurrency: Option<u32>,
    /// Open loop at a constant arrival rate (requests per second): sets `load.model = "open"`
    /// and `load.rate`, replaces any stages.
    #[arg(
        long,
        value_name = "PER_SECOND",
        help_heading = "Scenario overrides",
        allow_negative_numbers = true,
        value_parser = Number::<f64>::above(0.0, "requests per second")
    )]
    pub rate: Option<f64>,
    /// How long the run lasts, warm-up included (`30s`, `2m`, `1h`).
    #[arg(
        long,
        short = 'd',
        value_name = "DURATION",
        allow_hyphen_values = true,
        help_heading = "Scenario overrides"
    )]
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
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10m", value_parser = mcpbench_knobs::parse_duration)]
    pub barrier_timeout: Duration,
    /// Open connections from these local addresses (this machine's; on loopback any
    /// 127.x.y.z): one, a list (127.0.0.2,127.0.0.3) or a CIDR block (127.0.0.0/28), each
    /// with its own range of ports; virtual user g connects from address g mod k. Replaces
    /// the scenario's target.source_address.
    #[arg(long, value_name = "IP[,IP…]|CIDR")]
    pub source_address: Option<crate::transport::sources::Sources>,
    /// Run the scenario as N processes of this binary on this machine (each shard I/N, into
    /// OUTPUT/shard-I, started together), then merge them into OUTPUT: past one process's
    /// open-file limit. The source addresses are shared out by user (g mod k).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = Number::<u16>::at_least(1, "local shards")
    )]
    pub local_shards: Option<u16>,
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

/// `run`: the options checked and made ready (the scenario or quick test, overrides, shard
/// and start, OTLP export, the metrics endpoint, the display), then the run.
pub(super) fn run(a: RunArgs) -> ExitCode {
    let RunArgs {
        scenario,
        quick,
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
    } = a;
    let source = match source(scenario, quick, &overrides) {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    if let Some(n) = scale.local_shards {
        return local_shards(
            n,
            source,
            (&scale, &display),
            repeat,
            format,
            RunOptions {
                source_address: scale.source_address.clone(),
                output,
                results_root,
                codec,
                workers,
                grace,
                target_pids: target_pid,
                ..RunOptions::default()
            },
        );
    }
    let (shard, start) = match scale.resolve(&|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    let otlp = crate::otlp::start(display.otlp_endpoint.as_deref(), &|k| std::env::var(k).ok());
    let otlp = match otlp {
        Ok(x) => x.map(|(x, announce)| {
            eprintln!("{announce}");
            Arc::new(x)
        }),
        Err(e) => return error(e),
    };
    let mut opts = RunOptions {
        otlp,
        start,
        source_address: scale.source_address,
        output,
        results_root,
        codec,
        workers,
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
    let (scenario, overrides) = match source {
        Source::File(file, overrides) => (file, overrides),
        Source::Quick(q, overrides) => match write_quick(&q, &overrides, &mut opts) {
            Ok(file) => (file, Vec::new()),
            Err(e) => return error(e),
        },
    };
    opts.scenario_file = scenario.display().to_string();
    run_plan(
        &scenario,
        (&overrides, shard),
        (opts, usize::from(repeat)),
        (display, metrics),
        format,
    )
}

/// `--local-shards N`: refused with what else it would need to mean, else the split run.
fn local_shards(
    n: u16,
    source: Source,
    (scale, display): (&ScaleArgs, &DisplayArgs),
    repeat: u16,
    format: SummaryFormat,
    opts: RunOptions,
) -> ExitCode {
    let other = [
        (
            scale.shard.is_some(),
            "--shard (or MCPBENCH_SHARD)",
            "it is one shard already",
        ),
        (
            scale.shards.is_some(),
            "--shards",
            "it is one shard already",
        ),
        (
            scale.start_at.is_some() || scale.start_barrier.is_some(),
            "--start-at and --start-barrier",
            "the local shards agree on their start themselves",
        ),
        (
            repeat > 1,
            "--repeat",
            "repeat the split run from a shell loop",
        ),
        (
            display.metrics_listen.is_some() || display.otlp_endpoint.is_some(),
            "--metrics-listen and --otlp-endpoint",
            "the shards run without a live view; their merged result is written at the end",
        ),
    ];
    if let Some((_, flag, why)) = other.iter().find(|(given, _, _)| *given) {
        return error(format_args!("--local-shards {n} with {flag}: {why}"));
    }
    let Source::File(file, overrides) = source else {
        return error(format_args!(
            "--local-shards {n} runs a scenario file: write one for the target (`mcpbench init \
             URL`) and give it"
        ));
    };
    use std::io::IsTerminal;
    super::local_shards::run(super::local_shards::Split {
        shards: usize::from(n),
        file: &file,
        overrides: &overrides,
        opts,
        format,
        display: display.display(std::io::stdout().is_terminal()),
    })
}

/// What `run` loads: a scenario file with the command line's overrides, or a quick test and
/// the overrides to write into its scenario.
enum Source {
    File(PathBuf, Vec<Override>),
    Quick(scenario::Quick, Vec<Override>),
}

/// The source the positional argument, `-- CMD` and the flags name. A quick test takes -c, -d
/// and --rate as its own load; the other overrides are written over its scenario.
fn source(positional: Option<PathBuf>, q: QuickArgs, o: &Overrides) -> Result<Source, String> {
    let target = match given(positional, &q)? {
        Given::File(file) => return Ok(Source::File(file, o.list()?)),
        Given::Quick(target) => target,
    };
    if let Some(u) = &o.url {
        return Err(format!(
            "--url {u} replaces a scenario file's target; a quick test's target is the URL \
             given first (or the command after `--`)"
        ));
    }
    let others = Overrides {
        concurrency: None,
        rate: None,
        duration: None,
        ..o.clone()
    };
    let quick = scenario::Quick {
        target,
        tool: q.tool,
        arguments: q.args,
        concurrency: o.concurrency,
        rate: o.rate,
        duration: o.duration.clone(),
    };
    Ok(Source::Quick(quick, others.list()?))
}

/// What a run (or a search, or repeated runs) ended with, for the exit code.
struct Finished {
    /// The result as printed on stdout.
    rendered: String,
    interrupted: bool,
    /// A threshold was breached (in any run).
    breached: bool,
    /// Where the results are.
    dir: PathBuf,
}

/// One run, or a find-max search, shown as `display` asks; Ctrl-C (or `q` on the dashboard)
/// stops early and still writes results.
fn run_plan(
    file: &Path,
    (overrides, shard): (&[scenario::Override], scenario::Shard),
    (mut opts, repeat): (RunOptions, usize),
    (display, metrics): (Display, Option<std::net::TcpListener>),
    format: SummaryFormat,
) -> ExitCode {
    let plan = match scenario::load_finished(file, overrides, shard) {
        Ok(p) => Arc::new(p),
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
    let result = dispatch(plan, &opts, repeat, format, &interrupt);
    drop(opts);
    // The dashboard shows the final result, then gives the terminal back.
    if let Err(e) = watcher.finish() {
        eprintln!("warning: {e}");
    }
    match result {
        Ok(f) => conclude(f, &interrupt, &watcher),
        Err(e) => error(e),
    }
}

/// Runs the plan as it asks: an A/B run, a find-max search, repeated runs or one run.
fn dispatch(
    plan: Arc<scenario::Plan>,
    opts: &RunOptions,
    repeat: usize,
    format: SummaryFormat,
    interrupt: &driver::Interrupt,
) -> Result<Finished, driver::RunError> {
    if plan.ab.is_some() {
        driver::ab_slices::ab(plan, opts, interrupt.clone()).map(|(report, dir)| Finished {
            rendered: crate::report::ab::render(&report, &dir),
            interrupted: report.interrupted,
            breached: !report.breached.is_empty(),
            dir,
        })
    } else if plan.find_max.is_some() {
        driver::findmax::find_max(plan, opts, interrupt.clone()).map(|(report, dir)| Finished {
            rendered: crate::report::sweep::render(&report, &dir),
            interrupted: report.interrupted,
            breached: false,
            dir,
        })
    } else if repeat > 1 {
        driver::repeat::repeat(plan, opts, repeat, interrupt.clone()).and_then(|(runs, dir)| {
            Ok(Finished {
                rendered: format.render_runs(&runs, &dir)?,
                interrupted: runs.iter().any(|r| r.summary.interrupted),
                breached: runs.iter().any(|r| r.summary.breached().next().is_some()),
                dir,
            })
        })
    } else {
        driver::run(plan, opts, interrupt.clone()).and_then(|out| {
            Ok(Finished {
                rendered: format.render(&out)?,
                interrupted: out.summary.interrupted,
                breached: out.summary.breached().next().is_some(),
                dir: out.dir,
            })
        })
    }
}

/// Prints the result and says how the run ended: interrupted by a signal (exit 2),
/// thresholds breached (exit 1), or complete (stopped from the dashboard included).
fn conclude(f: Finished, interrupt: &driver::Interrupt, watcher: &Watcher) -> ExitCode {
    let Finished {
        rendered,
        interrupted,
        breached,
        dir,
    } = f;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// Splits a shell line as `sh` would for the examples: words, '…' and "…" quoting.
    fn words(line: &str) -> Vec<String> {
        let (mut out, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (None, ' ') if started => {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
                (None, ' ') => {}
                (None, '\'' | '"') => (quote, started) = (Some(c), true),
                (Some(q), c) if c == q => quote = None,
                (_, c) => {
                    word.push(c);
                    started = true;
                }
            }
        }
        if started {
            out.push(word);
        }
        out
    }

    #[test]
    fn every_example_of_run_parses() {
        let cmd = super::super::Cli::command();
        let run = cmd.find_subcommand("run").expect("run");
        let help = run.get_after_help().expect("examples").to_string();
        let examples: Vec<&str> = help
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| l.starts_with("mcpbench run"))
            .collect();
        assert!(examples.len() >= 5, "{help}");
        assert!(
            examples[0].starts_with("mcpbench run http://"),
            "one-liners first"
        );
        for e in examples {
            let argv = words(e);
            if let Err(err) = super::super::Cli::try_parse_from(&argv) {
                panic!("{e}: {err}");
            }
        }
        assert_eq!(
            words(r#"run --args '{"a":"b c"}' -- x"#),
            ["run", "--args", r#"{"a":"b c"}"#, "--", "x"]
        );
    }

    /// `run`'s parsed command line.
    fn args(line: &str) -> RunArgs {
        match super::super::Cli::try_parse_from(words(line)) {
            Ok(super::super::Cli {
                command: super::super::Command::Run(a),
            }) => a,
            other => panic!("{line}: {other:?}"),
        }
    }

    /// The quick test a command line names, and the overrides to write into its scenario.
    fn quick(line: &str) -> (scenario::Quick, Vec<Override>) {
        let a = args(line);
        match source(a.scenario, a.quick, &a.overrides) {
            Ok(Source::Quick(q, o)) => (q, o),
            Ok(Source::File(f, _)) => panic!("{line}: a file {}", f.display()),
            Err(e) => panic!("{line}: {e}"),
        }
    }

    #[test]
    fn the_positional_is_a_url_or_a_file_and_the_flags_make_the_quick_test() {
        let (q, o) = quick("mcpbench run wss://gw.example/mcp -c 3 -d 2m -H 'A: b'");
        assert_eq!(
            q.target,
            scenario::QuickTarget::Url("wss://gw.example/mcp".into())
        );
        assert_eq!(
            (q.concurrency, q.duration.as_deref()),
            (Some(3), Some("2m"))
        );
        assert_eq!(q.tool, None);
        // The load's flags are the quick test's; the rest are written over its scenario.
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].key, "target.headers.A");
        let (q, o) = quick("mcpbench run --rate 9.5 --tool t --args '{\"n\":1}' -- srv --stdio");
        let scenario::QuickTarget::Command { argv, cwd } = &q.target else {
            panic!("{q:?}")
        };
        assert_eq!(argv, &["srv", "--stdio"]);
        assert!(Path::new(cwd).is_absolute());
        assert_eq!(q.rate, Some(9.5));
        assert_eq!(q.arguments.unwrap()["n"], toml::Value::Integer(1));
        assert!(o.is_empty());
        let a = args("mcpbench run scenarios/quickstart.toml -c 4");
        let Ok(Source::File(f, o)) = source(a.scenario, a.quick, &a.overrides) else {
            panic!("not a file")
        };
        assert_eq!(f, Path::new("scenarios/quickstart.toml"));
        assert_eq!(o.last().unwrap().key, "load.concurrency");
    }
}
