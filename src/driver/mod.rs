//! Running a plan: resolve the target (embedded servers started), preflight, worker threads,
//! collection, results. The driver orchestrates; what the results say is decided in
//! `report::build`.

pub mod ab_slices;
mod collect;
pub mod divergence;
mod event_loop;
pub mod expect;
pub mod findmax;
pub mod limits;
pub mod mix;
pub mod oauth;
mod pacing;
pub mod repeat;
pub mod resolve;
mod run_context;
pub mod runner;
pub mod schedule;
mod shards;
mod stages;
pub mod start;
mod user;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::{self, Preflight, PreflightError};
use crate::protocol::jsonrpc::Codec;
use crate::report::live::LiveSink;
use crate::report::{Summary, files, text};
use crate::scenario::plan::Model;
use crate::scenario::{Diagnostic, Place, Plan};
use resolve::Resolved;

/// How a run is stopped early (a signal, `q` on the dashboard). The first request stops new
/// requests and lets those in flight finish for [`RunOptions::grace`]; a second cancels them at
/// once. Either way the results are written, marked interrupted.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    stop: CancellationToken,
    now: CancellationToken,
    cause: Arc<std::sync::OnceLock<String>>,
}

impl Interrupt {
    /// Asks the run to stop (the first time) or to stop at once (any later time), giving the
    /// cause ("SIGTERM") for the results' notes. Returns whether this was the first request.
    pub fn request(&self, cause: &str) -> bool {
        if self.stop.is_cancelled() {
            self.now.cancel();
            return false;
        }
        let _ = self.cause.set(cause.to_string());
        self.stop.cancel();
        true
    }

    /// Whether the run was asked to stop.
    pub fn is_requested(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Whether the run was asked a second time (requests in flight cancelled at once).
    pub fn is_hurried(&self) -> bool {
        self.now.is_cancelled()
    }

    /// What asked first.
    pub fn cause(&self) -> Option<&str> {
        self.cause.get().map(String::as_str)
    }

    async fn requested(&self) {
        self.stop.cancelled().await
    }

    async fn hurried(&self) {
        self.now.cancelled().await
    }
}

/// How long requests in flight get to finish after an interrupt, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How to run (beyond what the scenario says).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The run directory; `None` makes `<results_root>/<UTC time>-<name>`.
    pub output: Option<PathBuf>,
    pub results_root: PathBuf,
    pub codec: Codec,
    /// Length of a histogram interval (time series, hlog, live view).
    pub interval: Duration,
    /// find-max: print one line per step to stderr.
    pub progress: bool,
    /// Where the run publishes its live view (the dashboard, progress lines): once when the
    /// target has passed the preflight, then once per interval.
    pub live: Option<LiveSink>,
    /// Overrides the scenario's `workers`.
    pub workers: Option<usize>,
    /// Scenario file path, for the report.
    pub scenario_file: String,
    /// What this run is part of (a find-max step, an A/B slice and the comparison so far),
    /// shown after the scenario's name on the dashboard.
    pub label: Option<String>,
    /// After an interrupt, how long requests in flight get to finish before they are cancelled
    /// (never longer than the request timeout).
    pub grace: Duration,
    /// When the load starts: now, or a time agreed with the other shards.
    pub start: start::StartAt,
    /// The local addresses connections come from (each address has its own range of ports):
    /// replaces the scenario's `target.source_address`.
    pub source_address: Option<crate::transport::sources::Sources>,
    /// Processes of the target to sample every interval, besides the scenario's `target.pid`.
    pub target_pids: Vec<u32>,
    /// `--otlp-endpoint`: where the live view is also pushed, once per interval and at the
    /// end; its failures become a note.
    pub otlp: Option<Arc<crate::otlp::Exporter>>,
    /// An A/B slice: the first answers to deterministic calls, shared by every slice of the
    /// comparison, and the name of this slice's target.
    pub ab_divergence: Option<(Arc<divergence::Seen>, String)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            output: None,
            results_root: PathBuf::from("results"),
            codec: Codec::default(),
            interval: Duration::from_secs(1),
            progress: false,
            live: None,
            workers: None,
            scenario_file: String::new(),
            label: None,
            grace: DEFAULT_GRACE,
            start: start::StartAt::Now,
            source_address: None,
            target_pids: Vec::new(),
            otlp: None,
            ab_divergence: None,
        }
    }
}

/// A run that could not start, or whose results could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Embedded(#[from] crate::server::EmbeddedError),
    #[error("cannot resolve {target}: {reason}")]
    Resolve { target: String, reason: String },
    /// The target cannot be used: where it is written (the scenario's line, or the flag),
    /// and why.
    #[error("{}target {url} is not usable: {source}", located(.at))]
    Preflight {
        url: String,
        at: Option<Box<Place>>,
        source: PreflightError,
    },
    /// The workload does not fit the target: a tool it does not list, arguments its schema
    /// rejects. Points at the scenario.
    #[error("{0}")]
    Workload(Box<Diagnostic>),
    /// The targets of an A/B run are not comparable (a workload tool differs between them).
    #[error("{0}")]
    Incomparable(String),
    #[error("TLS set-up for {target}: {reason}")]
    Tls { target: String, reason: String },
    #[error("cannot write results to {path}: {source}")]
    Output {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
    /// The run does not fit in this machine's limits (open files, ports, processes).
    #[error(transparent)]
    Limits(#[from] limits::LimitError),
    /// No common start with the other shards.
    #[error(transparent)]
    Start(#[from] start::StartError),
    /// A target process to sample cannot be read.
    #[error(
        "target process {pids} cannot be read in /proc (no such process, or not this user's): \
         check the pid (`pgrep -f <server>`), or run as its user"
    )]
    TargetPid { pids: String },
    /// A threshold on the target's processes, and none watched.
    #[error(
        "threshold {threshold} is about the target's processes, and none are watched: give \
         target.pid in the scenario or --target-pid (stdio servers are watched by themselves)"
    )]
    TargetUnwatched { threshold: String },
}

/// `file:line:column: `key`: ` of a place, when there is one.
fn located(at: &Option<Box<Place>>) -> String {
    at.as_ref().map_or(String::new(), |p| p.to_string())
}

/// Where a plan's target is written (none for the embedded servers).
fn target_place(plan: &Plan) -> Option<Box<Place>> {
    match &plan.target {
        crate::scenario::Target::Remote(r) => Some(Box::new(r.place.clone())),
        crate::scenario::Target::Embedded(_) => None,
    }
}

impl From<client::ClientError> for RunError {
    fn from(e: client::ClientError) -> Self {
        match e {
            client::ClientError::Resolve { target, reason } => RunError::Resolve { target, reason },
            client::ClientError::Tls { target, reason } => RunError::Tls { target, reason },
        }
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutput {
    pub summary: Summary,
    pub dir: PathBuf,
}

/// A target that passed the preflight, ready for load.
#[derive(Debug)]
pub struct Checked {
    pub resolved: Resolved,
    pub preflight: Preflight,
    /// Worker threads the run uses.
    pub workers: usize,
    /// The tenants of the target's credentials, in order.
    pub tenants: Vec<String>,
    /// Per workload entry: its `expect` rules, compiled against what the target lists.
    pub checks: Vec<Option<expect::Check>>,
}

/// Resolves the target (starting the embedded servers), opens a session, lists its tools and
/// checks the workload against them — everything but the load. `mcpbench validate --connect`
/// stops here.
pub fn check(
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<Checked, RunError> {
    let workers = workers_for(plan, opts);
    let mut resolved = resolve::resolve(plan, opts)?;
    check_limits(plan, opts, &resolved)?;
    // With per-user credentials, the preflight speaks as the first user (and to the first
    // replica alone: a handshake-era session does not outlive a hop to another).
    let mut probe = resolved.endpoint.clone();
    probe.replicas.clear();
    if let crate::scenario::Target::Remote(r) = &plan.target
        && let Some(c) = r.credentials.first()
    {
        for (name, value) in &c.headers {
            probe.add_header(name, value);
        }
    }
    // With OAuth, it speaks with a token of its own.
    if let Some(te) = &resolved.oauth {
        let token = tokio::task::LocalSet::new()
            .block_on(rt, te.fetch())
            .map_err(|o| RunError::Preflight {
                url: resolved.url.clone(),
                at: None,
                source: PreflightError::open(format!(
                    "no OAuth token from the token endpoint: {}",
                    client::describe(o)
                )),
            })?;
        probe.add_header("Authorization", &format!("Bearer {}", token.access_token));
    }
    let preflight =
        client::connect(rt, plan.connection().protocol, &mut probe).map_err(|source| {
            RunError::Preflight {
                url: resolved.url.clone(),
                at: target_place(plan),
                source,
            }
        })?;
    resolved.endpoint.protocol = probe.protocol;
    client::workload_fit::check_workload(plan, &preflight).map_err(RunError::Workload)?;
    let tenants = tenants_of(plan);
    let checks = plan
        .workload
        .iter()
        .map(|item| {
            let Some(e) = &item.expect else {
                return Ok(None);
            };
            expect::Check::new(e, item, &preflight, &tenants)
                .map(Some)
                .map_err(|m| RunError::Workload(Box::new(item.place.diagnostic(m, None))))
        })
        .collect::<Result<_, _>>()?;
    Ok(Checked {
        resolved,
        preflight,
        workers,
        tenants,
        checks,
    })
}

/// Whether a plan fits this machine's limits (open files, ports, processes), its target
/// resolved: one clear error before load, naming the way out.
pub fn check_limits(plan: &Plan, opts: &RunOptions, resolved: &Resolved) -> Result<(), RunError> {
    let needs = limits::needs(plan, workers_for(plan, opts));
    limits::Machine::read().check(&needs, &fit(plan, opts, resolved))?;
    Ok(())
}

/// A scenario run as local shards (`whole` split, `first` its largest shard): each process
/// has its own descriptors, but the machine's ports are shared, so they are checked for the
/// whole over every source address.
pub fn check_local_split(whole: &Plan, first: &Plan, opts: &RunOptions) -> Result<(), RunError> {
    let resolved = resolve::resolve(whole, opts)?;
    let machine = limits::Machine::read();
    let needs = limits::needs(whole, workers_for(whole, opts));
    machine.check_ports(&needs, &fit(whole, opts, &resolved))?;
    check_limits(first, opts, &resolved)
}

/// How a plan's connections are made, for [`limits::Machine::check`].
fn fit(plan: &Plan, opts: &RunOptions, resolved: &Resolved) -> limits::Fit<'static> {
    let shards = plan.load.shard.count as u64;
    // User g connects from address g mod k: shard I of N uses k / gcd(k, N) of them.
    let addresses = resolve::sources(plan, opts).map_or(1, |s| {
        let k = s.len() as u64;
        k / gcd(k, shards)
    });
    limits::Fit {
        per_session: limits::per_session(plan),
        addresses,
        loopback: (resolved.endpoint.net.as_ref()).is_none_or(|n| n.addr.ip().is_loopback()),
        churn: limits::churn(plan),
        embedded: matches!(plan.target, crate::scenario::Target::Embedded(_)),
        shards,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// The directory of a run made of runs (find-max, A/B): `--output`, or a new one under the
/// results root named after the scenario and `kind`; created.
pub(crate) fn parent_dir(plan: &Plan, opts: &RunOptions, kind: &str) -> Result<PathBuf, RunError> {
    let dir = opts.output.clone().unwrap_or_else(|| {
        files::default_dir(
            &opts.results_root,
            &format!("{}-{kind}", plan.name),
            time::OffsetDateTime::now_utc(),
        )
    });
    std::fs::create_dir_all(&dir).map_err(|source| RunError::Output {
        path: dir.display().to_string(),
        source,
    })?;
    Ok(dir)
}

pub fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    client::runtime().map_err(RunError::Runtime)
}

/// Runs a plan to the end (or until `interrupt` asks it to stop) and writes its results:
/// prepare (target checked, start agreed, files opened) → start (worker threads, collector) →
/// load (collected until every worker ended) → finish (summary and reports written).
pub fn run(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: Interrupt,
) -> Result<RunOutput, RunError> {
    let rt = runtime()?;
    let prepared = stages::prepare(&plan, opts, &rt, &interrupt)?;
    let started = stages::start(&plan, opts, prepared)?;
    let loaded = stages::load(&rt, started, &interrupt, opts.grace);
    stages::finish(&plan, opts, &interrupt, loaded)
}

/// Worker threads: the option's, the scenario's, else one per core — for an open loop, one
/// per 50 000 arrivals a second of its (shard's) peak rate, up to one per core (a worker releasing more
/// arrivals per wake-up costs less per request and is later less often: at 20 000/s one
/// worker costs 21 µs a request where two cost 25, results/baselines/vs-http-tools-2026-12-02-issue15.md);
/// at most one per user. First-call rounds: one worker, so that every user meets at one
/// barrier.
fn workers_for(plan: &Plan, opts: &RunOptions) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let default = match &plan.load.model {
        Model::Open { rate, .. } => {
            let share = rate.max() / plan.load.shard.count as f64;
            ((share / OPEN_LOOP_RATE_PER_WORKER).ceil() as usize).clamp(1, cores)
        }
        // First calls go out together from one thread (and, on stdio, into one process).
        Model::Closed { .. } if plan.load.pattern == crate::scenario::Pattern::FirstCall => 1,
        Model::Closed { .. } => cores,
    };
    opts.workers
        .or(plan.load.workers)
        .unwrap_or(default)
        .min(plan.load.concurrency)
        .max(1)
}

/// Arrivals a second one open-loop worker is given by default (one worker kept up with 60 000/s
/// here, later less often than two).
const OPEN_LOOP_RATE_PER_WORKER: f64 = 50_000.0;

/// Target processes to sample: the scenario's `target.pid` and `--target-pid`, each once.
fn target_pids(plan: &Plan, opts: &RunOptions) -> Vec<u32> {
    let mut pids = match &plan.target {
        crate::scenario::Target::Remote(r) => r.pids.clone(),
        crate::scenario::Target::Embedded(_) => Vec::new(),
    };
    for p in &opts.target_pids {
        if !pids.contains(p) {
            pids.push(*p);
        }
    }
    pids
}

/// The tenants of the target's credentials, in order.
fn tenants_of(plan: &Plan) -> Vec<String> {
    match &plan.target {
        crate::scenario::Target::Remote(r) => r.tenants(),
        crate::scenario::Target::Embedded(_) => Vec::new(),
    }
}

/// Renders the table for a finished run, and where its files are (a quick test's directory
/// also holds the scenario it wrote).
pub fn render(out: &RunOutput) -> String {
    let mut s = text::render(&out.summary);
    let scenario = if out.dir.join("scenario.toml").is_file() {
        ", scenario.toml"
    } else {
        ""
    };
    s.push_str(&format!(
        "results: {}/ (summary.json, latency.hlog, timeseries.csv, report.md, report.html{scenario})\n",
        out.dir.display()
    ));
    s
}
