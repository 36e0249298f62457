//! Running a plan: resolve the target (embedded servers started), preflight, worker threads,
//! collection, results. The driver orchestrates; what the results say is decided in
//! `report::build`.

pub mod ab_slices;
pub mod divergence;
pub mod expect;
pub mod findmax;
pub mod limits;
pub mod oauth;
pub mod preflight;
pub mod repeat;
pub mod resolve;
pub mod runner;
pub mod schedule;
pub mod start;
pub mod templates;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::metrics::collector::{Collector, CsvWriter, HlogWriter, IntervalSnapshot, ShardMsg};
use crate::metrics::grid::{Grid, Phase};
use crate::metrics::target_procs::Sampler;
use crate::protocol::jsonrpc::Codec;
use crate::report::build::{RunFacts, load_info, summarize};
use crate::report::live::{Live, LiveSink, RunHeader};
use crate::report::read_back::RunFiles;
use crate::report::summary::TargetInfo;
use crate::report::{Summary, document, files, text};
use crate::scenario::plan::Model;
use crate::scenario::{Diagnostic, Plan};
use crate::transport::Endpoint;
use preflight::Preflight;
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
    /// The local address connections come from (several generators on one machine, each
    /// with its own address and port range).
    pub source_address: Option<std::net::IpAddr>,
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
    #[error("target {url} is not usable: {source}")]
    Preflight {
        url: String,
        source: preflight::PreflightError,
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
}

/// Resolves the target (starting the embedded servers), opens a session, lists its tools and
/// checks the workload against them — everything but the load. `mcpbench validate --connect`
/// stops here.
pub fn check(
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<Checked, RunError> {
    let plan = &*with_tool_prefix(plan);
    let needs = limits::needs(plan, workers_for(plan, opts));
    limits::Machine::read().check(&needs, limits::per_session(plan))?;
    let mut resolved = resolve::resolve(plan, opts)?;
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
                source: preflight::PreflightError::Open(format!(
                    "no OAuth token from the token endpoint: {}",
                    preflight::describe(o)
                )),
            })?;
        probe.add_header("Authorization", &format!("Bearer {}", token.access_token));
    }
    let preflight =
        preflight::connect(rt, plan.connection().protocol, &mut probe).map_err(|source| {
            RunError::Preflight {
                url: resolved.url.clone(),
                source,
            }
        })?;
    resolved.endpoint.protocol = probe.protocol;
    preflight::check_workload(plan, &preflight).map_err(RunError::Workload)?;
    let tenants = tenants_of(plan);
    for item in &plan.workload {
        if let Some(e) = &item.expect {
            expect::Check::new(e, item, &preflight, &tenants)
                .map_err(|m| RunError::Workload(Box::new(item.place.diagnostic(m, None))))?;
        }
    }
    Ok(Checked {
        resolved,
        preflight,
    })
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

/// A current-thread runtime for the driver's own work (preflight, collecting).
/// The plan with its target's `tool_prefix` applied to the workload's tool names (and cleared,
/// so applying it again changes nothing); operation names stay as written.
fn with_tool_prefix(plan: &Plan) -> std::borrow::Cow<'_, Plan> {
    let crate::scenario::Target::Remote(r) = &plan.target else {
        return std::borrow::Cow::Borrowed(plan);
    };
    let Some(prefix) = r.tool_prefix.clone() else {
        return std::borrow::Cow::Borrowed(plan);
    };
    let mut p = plan.clone();
    if let crate::scenario::Target::Remote(r) = &mut p.target {
        r.tool_prefix = None;
    }
    for item in &mut p.workload {
        if let crate::scenario::plan::Method::ToolsCall { tool } = &mut item.method {
            tool.insert_str(0, &prefix);
        }
        if let Some(e) = &mut item.expect {
            let names = e
                .tools
                .iter_mut()
                .flatten()
                .chain(e.tenant_tools.iter_mut().flat_map(|(_, v)| v.iter_mut()));
            for name in names {
                name.insert_str(0, &prefix);
            }
        }
    }
    std::borrow::Cow::Owned(p)
}

pub fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(RunError::Runtime)
}

/// Runs a plan to the end (or until `interrupt` asks it to stop) and writes its results.
pub fn run(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: Interrupt,
) -> Result<RunOutput, RunError> {
    let rt = runtime()?;
    let plan = match with_tool_prefix(&plan) {
        std::borrow::Cow::Owned(p) => Arc::new(p),
        std::borrow::Cow::Borrowed(_) => plan,
    };
    let Checked {
        resolved,
        preflight: pre,
    } = check(&plan, opts, &rt)?;
    // Operation 0 is the session opening: `initialize`, or `server/discover` for 2026-07-28.
    let mut ops = plan.ops.clone();
    if !pre.revision.has_handshake() {
        ops[0] = "server/discover".into();
    }
    // The target is ready: agree on the start with the other shards (if any).
    let agreed = start::agree(&opts.start, plan.load.shard, &|| interrupt.is_requested())?;
    let (started_wall, start_at, late) = start::schedule(
        agreed.map(|a| a.0),
        opts.interval,
        Duration::from_millis(20),
    );
    let start_info = agreed
        .zip(late)
        .map(|((t, by), late)| crate::report::summary::StartInfo {
            agreed: start::rfc3339(t),
            by: by.into(),
            late_seconds: (late.as_secs_f64() * 1000.0).round() / 1000.0,
        });
    if opts.progress
        && let Some(s) = &start_info
    {
        eprintln!(
            "start: {} ({}{})",
            s.agreed,
            s.by,
            match s.late_seconds {
                0.0 => String::new(),
                l => format!(", ready {l:.3}s too late: starting on the next interval"),
            }
        );
    }
    // The target's processes to sample: named ones must be readable before any load.
    let pids = target_pids(&plan, opts);
    let stdio = resolved.endpoint.kind == crate::transport::TransportKind::Stdio;
    if let Some(t) = plan.thresholds.checks.iter().find(|t| t.metric.is_target())
        && pids.is_empty()
        && !stdio
    {
        return Err(RunError::TargetUnwatched {
            threshold: t.name(),
        });
    }
    let unreadable = Sampler::unreadable(&pids);
    if !unreadable.is_empty() {
        let pids = unreadable.iter().map(u32::to_string).collect::<Vec<_>>();
        return Err(RunError::TargetPid {
            pids: pids.join(", "),
        });
    }
    let dir = opts.output.clone().unwrap_or_else(|| {
        let s = plan.load.shard;
        let name = match s.is_whole() {
            true => plan.name.clone(),
            false => format!("{}-shard-{}-of-{}", plan.name, s.index, s.count),
        };
        files::default_dir(&opts.results_root, &name, started_wall.into())
    });
    let output_error = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| RunError::Output { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(output_error(&dir))?;
    let hlog_path = dir.join("latency.hlog");
    let hlog =
        HlogWriter::create(&hlog_path, started_wall, &ops).map_err(output_error(&hlog_path))?;
    let csv_path = dir.join("timeseries.csv");
    let csv = CsvWriter::create(&csv_path).map_err(output_error(&csv_path))?;

    let workers = workers_for(&plan, opts);
    // Read once before the load: the first interval's CPU time is its own.
    let sampler = Sampler::new(&pids, stdio.then(|| resolved.endpoint.children.clone()));
    let ctx = Arc::new(context(
        &plan,
        Arc::new(Endpoint {
            id_base: plan.load.shard.id_base(),
            ..resolved.endpoint.clone()
        }),
        resolved.oauth.clone(),
        &pre,
        opts,
        workers,
        (started_wall, start_at),
    ));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut recyclers = Vec::with_capacity(workers);
    let mut threads = Vec::with_capacity(workers);
    for w in 0..workers {
        let (rtx, rrx) = std::sync::mpsc::channel();
        recyclers.push(rtx);
        // Global indexes: a shard's users are those of the whole scenario it owns.
        let vus: Vec<usize> = (0..plan.load.concurrency)
            .filter(|v| v % workers == w)
            .map(|v| plan.load.shard.global(v))
            .collect();
        let (ctx, tx) = (ctx.clone(), tx.clone());
        let t = std::thread::Builder::new()
            .name(format!("mcpbench-worker-{w}"))
            .spawn(move || runner::worker(w, ctx, vus, tx, rrx))
            .map_err(RunError::Runtime)?;
        threads.push(t);
    }
    drop(tx);

    let counted = ops
        .iter()
        .enumerate()
        .map(|(i, o)| crate::scenario::plan::is_workload_op(i, o))
        .collect();
    let mut collector = Collector::new(ops.clone(), ctx.grid, recyclers, Some(hlog))
        .counting(counted)
        .with_csv(csv)
        .with_sampler(sampler);
    let target = TargetInfo {
        kind: resolved.kind.into(),
        transport: plan.connection().transport.name().into(),
        http: if plan.connection().http2 { "2" } else { "1.1" }.into(),
        url: resolved.url.clone(),
        headers: resolved.headers.clone(),
        protocol_offered: plan.connection().protocol.to_string(),
        protocol_negotiated: pre.revision.to_string(),
    };
    let watched = opts.live.is_some() || opts.otlp.is_some();
    let mut watch = watched.then(|| {
        let header = RunHeader {
            scenario: match &opts.label {
                Some(l) => format!("{} · {l}", plan.name),
                None => plan.name.clone(),
            },
            target: target.clone(),
            load: load_info(&plan, workers),
            ops: ops.clone(),
            interval: opts.interval,
        };
        let s = plan.load.shard;
        let otlp = opts.otlp.clone().map(|x| {
            let run = crate::otlp::RunInfo {
                scenario: plan.name.clone(),
                id: run_id(&dir, opts.label.is_some()),
                started_at: started_wall,
                shard: (!s.is_whole()).then_some((s.index, s.count)),
                label: opts.label.clone(),
            };
            (x, Arc::new(run))
        });
        let mut w = Watch {
            sink: opts.live.clone(),
            otlp,
            live: Live::new(header, workers),
        };
        w.publish(&[], &collector, None);
        w
    });
    let (stopped, threshold_stop) = rt.block_on(collect(
        &ctx,
        &mut collector,
        rx,
        (&interrupt, opts.grace),
        &mut watch,
    ));
    for t in threads {
        let _ = t.join();
    }
    let run_end = Instant::now();
    let last = collector.finish();
    // The measured window: from the end of warm-up to where the load ended — the scenario's
    // end, or the stop (an interrupt, a breached threshold) — never past the last request.
    // The drain is not in it. Every rate of the run divides by it.
    let stop_at = stopped
        .as_ref()
        .and_then(|s| s.at.map(|at| ctx.start + at))
        .into_iter()
        .chain(threshold_stop.as_ref().map(|t| t.1))
        .min();
    let load_end = stop_at.map_or(ctx.end, |s| s.min(ctx.end)).min(run_end);
    let measured = load_end.saturating_duration_since(ctx.warmup_end.min(load_end));
    if let Some(w) = &mut watch {
        w.publish(&last, &collector, Some(measured));
    }

    let mut notes = Vec::new();
    if let Some(s) = &stopped {
        let cancelled = collector
            .totals
            .class_total(crate::metrics::outcome::Class::Cancelled);
        notes.push(s.note(interrupt.cause(), cancelled));
    }
    if let Some((n, _)) = &threshold_stop {
        notes.push(n.clone());
    }
    let loopback = resolved
        .endpoint
        .net
        .as_ref()
        .is_none_or(|n| n.addr.ip().is_loopback());
    if let Some(s) = start_info.as_ref().filter(|s| s.late_seconds > 0.0) {
        notes.push(format!(
            "started {:.3}s after the agreed start {} ({}): ready too late, it began on the \
             next interval of the common time line, so its load runs that much later than the \
             other shards'",
            s.late_seconds, s.agreed, s.by
        ));
    }
    notes.extend(limits::time_wait_note(
        collector.totals.sessions.connections,
        run_end.saturating_duration_since(ctx.start).as_secs_f64(),
        loopback,
    ));
    notes.extend(watch.as_ref().and_then(Watch::export_note));
    if let Some(e) = &collector.hlog_error {
        notes.push(format!("latency.hlog or timeseries.csv is incomplete: {e}"));
    }
    // What only the time line shows (plateaus, error onsets), read back from the file just
    // written: the run kept no per-interval history.
    let (series, phases) = crate::report::read_back::read_series(&dir.join("timeseries.csv"));
    notes.extend(crate::report::diagnose::over_time(&plan, &series, &phases));
    let facts = RunFacts {
        scenario_file: opts.scenario_file.clone(),
        started_at: time::OffsetDateTime::from(started_wall)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        target,
        workers,
        measured,
        interrupted: stopped.is_some() || threshold_stop.is_some(),
        cpu: collector.ends.iter().map(|e| e.cpu).sum(),
        notes,
        start: start_info,
        target_processes: collector.target_processes(),
    };
    let summary = summarize(&plan, &ops, &collector.totals, facts);
    files::write_summary(&dir, &summary).map_err(output_error(&dir))?;
    // The reports are rendered from the files just written, as `mcpbench report DIR` would.
    let reports = RunFiles::read(&dir)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|run| document::write(&run));
    reports.map_err(output_error(&dir))?;
    Ok(RunOutput { summary, dir })
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

/// The read-only context every worker shares.
fn context(
    plan: &Arc<Plan>,
    endpoint: Arc<Endpoint>,
    oauth: Option<oauth::TokenEndpoint>,
    pre: &Preflight,
    opts: &RunOptions,
    workers: usize,
    (started_wall, start): (SystemTime, Instant),
) -> runner::Ctx {
    let items = &plan.workload;
    // Per-virtual-user credentials: an endpoint each, with its headers added.
    let credentials = match &plan.target {
        crate::scenario::Target::Remote(r) => r.credentials.clone(),
        crate::scenario::Target::Embedded(_) => Vec::new(),
    };
    let tenants = tenants_of(plan);
    let mut secrets = endpoint.headers.clone();
    if let crate::scenario::Target::Remote(r) = &plan.target
        && let Some(o) = &r.oauth
    {
        secrets.push(("client_secret".into(), o.client_secret.clone()));
    }
    let oauth_tenant = match &plan.target {
        crate::scenario::Target::Remote(r) => r.oauth.as_ref().and_then(|o| o.tenant.clone()),
        crate::scenario::Target::Embedded(_) => None,
    };
    let endpoints = credentials
        .iter()
        .map(|c| {
            let mut ep = (*endpoint).clone();
            for (name, value) in &c.headers {
                ep.add_header(name, value);
                secrets.push((name.clone(), value.clone()));
            }
            let tenant = tenants.iter().position(|t| t == &c.tenant).unwrap_or(0);
            (Arc::new(ep), tenant)
        })
        .collect();
    // OAuth users share the endpoint (each sends its own token) and count for its tenant;
    // mixed revisions: an endpoint per revision, each its own row.
    let revisions = match &plan.target {
        crate::scenario::Target::Remote(r) => r.revisions.clone(),
        crate::scenario::Target::Embedded(_) => Vec::new(),
    };
    let endpoints: Vec<(Arc<Endpoint>, usize)> = if oauth_tenant.is_some() {
        vec![(endpoint.clone(), 0)]
    } else if !revisions.is_empty() {
        revisions
            .iter()
            .map(|r| {
                let mut ep = (*endpoint).clone();
                ep.protocol = *r;
                let row = tenants
                    .iter()
                    .position(|t| *t == r.to_string())
                    .unwrap_or(0);
                (Arc::new(ep), row)
            })
            .collect()
    } else {
        endpoints
    };
    // Request templates per revision the users speak (one, unless mixed).
    let mut speak: Vec<crate::protocol::version::Revision> = vec![pre.revision];
    for r in &revisions {
        if !speak.contains(r) {
            speak.push(*r);
        }
    }
    runner::Ctx {
        oauth: oauth.map(|t| {
            let op = plan
                .ops
                .iter()
                .position(|o| o == crate::scenario::plan::OP_OAUTH)
                .unwrap_or(1);
            (t, op)
        }),
        checks: items
            .iter()
            .map(|w| {
                let e = w.expect.as_ref()?;
                expect::Check::new(e, w, pre, &tenants).ok()
            })
            .collect(),
        endpoints,
        tenants,
        secrets,
        requests: speak
            .iter()
            .map(|&rev| {
                (
                    rev,
                    items
                        .iter()
                        .map(|w| templates::RequestTemplate::new(w, rev))
                        .collect(),
                    items.iter().map(|w| templates::call_spec(w, rev)).collect(),
                )
            })
            .collect(),
        mix: templates::Mix::new(items),
        plan: plan.clone(),
        endpoint,
        start,
        warmup_end: start + plan.load.warmup,
        end: start + plan.load.duration,
        timeout: plan.load.timeout,
        grid: Grid::new(opts.interval, plan.load.warmup, plan.load.duration),
        abort: CancellationToken::new(),
        aborted: std::sync::atomic::AtomicBool::new(false),
        drain: CancellationToken::new(),
        stop: std::sync::atomic::AtomicBool::new(false),
        workers,
        seen: opts
            .ab_divergence
            .as_ref()
            .map_or_else(Default::default, |(s, _)| s.clone()),
        ab_target: opts.ab_divergence.as_ref().map(|(_, t)| t.clone()),
        seed: started_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64)
            ^ plan.load.shard.seed(),
    }
}

/// Merges the workers' shards until every worker has ended. On `interrupt` no new request
/// starts and those in flight get `grace` (at most the request timeout) before they are
/// cancelled, at once on a second interrupt; they are also cancelled when they still run past
/// the drain deadline (end + timeout + 2 s), or (`abort_on_fail`) when a threshold is breached.
/// Returns how the run was interrupted, and why a threshold stopped it.
async fn collect(
    ctx: &runner::Ctx,
    collector: &mut Collector,
    mut rx: UnboundedReceiver<ShardMsg>,
    (interrupt, grace): (&Interrupt, Duration),
    watch: &mut Option<Watch>,
) -> (Option<Stopped>, Option<(String, Instant)>) {
    let drain_deadline = ctx.end + ctx.endpoint.timeout + Duration::from_secs(2);
    let abort = || {
        ctx.stop.store(true, Ordering::Relaxed);
        ctx.aborted.store(true, Ordering::Relaxed);
        ctx.abort.cancel();
    };
    let mut stopped: Option<Stopped> = None;
    let mut threshold_stop = None;
    // Far enough never to fire before an interrupt sets it.
    let mut grace_end = drain_deadline + Duration::from_secs(3600);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => {
                    let done = collector.accept(m);
                    if let Some(w) = watch.as_mut().filter(|_| !done.is_empty()) {
                        w.publish(&done, collector, None);
                    }
                    if threshold_stop.is_none()
                        && let Some(why) = breached_now(ctx, collector, &done)
                    {
                        threshold_stop = Some((why, Instant::now()));
                        abort();
                    }
                    if collector.all_done() {
                        return (stopped, threshold_stop);
                    }
                }
                None => return (stopped, threshold_stop),
            },
            _ = interrupt.requested(), if stopped.is_none() => {
                let now = Instant::now();
                let grace = grace.min(ctx.timeout);
                stopped = Some(Stopped {
                    at: now.checked_duration_since(ctx.start),
                    grace,
                    hurried: false,
                });
                ctx.stop.store(true, Ordering::Relaxed);
                ctx.drain.cancel();
                grace_end = now + grace;
                if grace.is_zero() {
                    abort();
                }
            }
            _ = interrupt.hurried(), if stopped.as_ref().is_some_and(|s| !s.hurried) => {
                if let Some(s) = stopped.as_mut() {
                    s.hurried = true;
                }
                abort();
            }
            _ = tokio::time::sleep_until(grace_end.into()), if !ctx.abort.is_cancelled() => {
                abort();
            }
            _ = tokio::time::sleep_until(drain_deadline.into()), if !ctx.abort.is_cancelled() => {
                abort();
            }
        }
    }
}

/// How an interrupted run stopped.
#[derive(Debug, Clone, Copy)]
struct Stopped {
    /// When, from the start of the run; `None` before it (waiting for an agreed start).
    at: Option<Duration>,
    /// What the requests in flight were given.
    grace: Duration,
    /// A second interrupt cut the grace short.
    hurried: bool,
}

impl Stopped {
    /// The note in the summary: what stopped the run and what became of the requests in flight.
    fn note(&self, cause: Option<&str>, cancelled: u64) -> String {
        let drained = if self.hurried {
            "a second interrupt cancelled the requests still in flight".to_string()
        } else if self.grace.is_zero() {
            "requests in flight were cancelled (no grace)".to_string()
        } else {
            format!(
                "requests in flight had {} to finish",
                mcpbench_knobs::format_duration(self.grace)
            )
        };
        let cause = cause.unwrap_or("a signal");
        let Some(at) = self.at else {
            return format!("interrupted by {cause} before the agreed start: no load was sent");
        };
        format!(
            "interrupted by {cause} at {:.1}s: no new requests; {drained}; {cancelled} cancelled \
             (counted apart, not as errors)",
            at.as_secs_f64()
        )
    }
}

/// `abort_on_fail`: after a measured interval, the first threshold the run so far breaches.
fn breached_now(
    ctx: &runner::Ctx,
    collector: &Collector,
    done: &[IntervalSnapshot],
) -> Option<String> {
    let t = &ctx.plan.thresholds;
    let last = done.iter().rev().find(|s| s.phase == Phase::Measured)?;
    if !t.abort_on_fail || t.checks.is_empty() {
        return None;
    }
    let measured = last.end.saturating_sub(ctx.plan.load.warmup);
    let s =
        crate::report::build::provisional(&ctx.plan, collector.ops(), &collector.totals, measured);
    let b = s.breached().next()?;
    Some(format!(
        "stopped early at {:.1}s: threshold {} {} breached (abort_on_fail)",
        last.end.as_secs_f64(),
        b.name,
        b.condition
    ))
}

/// A run's name outside its files: its directory's (with the parent's for a part of a larger
/// run: `…-find-max/step-03`).
fn run_id(dir: &std::path::Path, part: bool) -> String {
    let name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name(dir), dir.parent().and_then(name).filter(|_| part)) {
        (Some(d), Some(p)) => format!("{p}/{d}"),
        (Some(d), None) => d,
        (None, _) => dir.display().to_string(),
    }
}

/// A run's live view and where it goes.
struct Watch {
    sink: Option<LiveSink>,
    /// `--otlp-endpoint`'s exporter and the run it pushes.
    otlp: Option<(Arc<crate::otlp::Exporter>, Arc<crate::otlp::RunInfo>)>,
    live: Live,
}

impl Watch {
    /// Takes the intervals the collector completed; publishes the view once.
    /// Sends the view with the intervals `done`; `finished`: the run is over, its measured
    /// window this long.
    fn publish(
        &mut self,
        done: &[IntervalSnapshot],
        collector: &Collector,
        finished: Option<Duration>,
    ) {
        for snap in done {
            self.live.update(snap, &collector.totals);
        }
        if let Some(measured) = finished {
            self.live.finish(measured);
        }
        let live = Arc::new(self.live.clone());
        if let Some((x, run)) = &self.otlp {
            x.push(run, live.clone());
        }
        if let Some(sink) = &self.sink {
            sink.send_replace(Some(live));
        }
    }

    /// After the final view: the exporter's note, if its pushes failed (waits a bounded time
    /// for the final push).
    fn export_note(&self) -> Option<String> {
        self.otlp.as_ref().and_then(|(x, _)| x.finish_run())
    }
}

/// Renders the table for a finished run.
pub fn render(out: &RunOutput) -> String {
    let mut s = text::render(&out.summary);
    s.push_str(&format!(
        "results: {}/ (summary.json, latency.hlog, timeseries.csv, report.md, report.html)\n",
        out.dir.display()
    ));
    s
}
