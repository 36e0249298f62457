//! The stages of `driver::run`, each handing the next what it made: prepare (the target
//! checked, the start agreed with other shards, the run directory and its streamed files
//! opened) → start (worker threads and the collector) → load (collected until every worker
//! ended; the measured window) → finish (notes, summary and reports written).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;

use super::collect::{Stopped, Watch, collect, run_id};
use super::run_context::context;
use super::{
    Checked, Interrupt, RunError, RunOptions, RunOutput, check, limits, runner, start, target_pids,
};
use crate::metrics::collector::{Collector, CsvWriter, HlogWriter, ShardMsg};
use crate::metrics::target_procs::Sampler;
use crate::report::build::{RunFacts, load_info, summarize};
use crate::report::live::{Live, RunHeader};
use crate::report::read_back::RunFiles;
use crate::report::summary::{StartInfo, TargetInfo};
use crate::report::{document, files};
use crate::scenario::Plan;
use crate::transport::{Endpoint, TransportKind};

use super::resolve::Resolved;

/// A target ready for load, a start agreed, files open.
pub(super) struct Prepared {
    checked: Checked,
    /// Operation names as this run reports them (operation 0 as the target opened sessions).
    ops: Vec<String>,
    started_wall: SystemTime,
    start_at: Instant,
    start_info: Option<StartInfo>,
    /// The target's processes sampled every interval.
    pids: Vec<u32>,
    dir: PathBuf,
}

/// The files a run streams as it goes (handed to the collector).
pub(super) struct Streams {
    hlog: HlogWriter,
    csv: CsvWriter,
}

/// Prepare: the target resolved and checked (preflight), the start agreed with the other
/// shards, the target's processes readable, the run directory and its streamed files open.
pub(super) fn prepare(
    plan: &Arc<Plan>,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
    interrupt: &Interrupt,
) -> Result<(Prepared, Streams), RunError> {
    let checked = check(plan, opts, rt)?;
    let ops = plan.ops_for(checked.preflight.revision);
    // The target is ready: agree on the start with the other shards (if any).
    let agreed = start::agree(&opts.start, plan.load.shard, &|| interrupt.is_requested())?;
    let (started_wall, start_at, late) = start::schedule(
        agreed.map(|a| a.0),
        opts.interval,
        Duration::from_millis(20),
    );
    let start_info = agreed.zip(late).map(|((t, by), late)| StartInfo {
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
    let pids = watched_pids(plan, opts, &checked.resolved)?;
    let dir = opts.output.clone().unwrap_or_else(|| {
        let s = plan.load.shard;
        let name = match s.is_whole() {
            true => plan.name.clone(),
            false => format!("{}-shard-{}-of-{}", plan.name, s.index, s.count),
        };
        files::default_dir(&opts.results_root, &name, started_wall.into())
    });
    std::fs::create_dir_all(&dir).map_err(output_error(&dir))?;
    let hlog_path = dir.join("latency.hlog");
    let hlog =
        HlogWriter::create(&hlog_path, started_wall, &ops).map_err(output_error(&hlog_path))?;
    let csv_path = dir.join("timeseries.csv");
    let csv = CsvWriter::create(&csv_path).map_err(output_error(&csv_path))?;
    let prepared = Prepared {
        checked,
        ops,
        started_wall,
        start_at,
        start_info,
        pids,
        dir,
    };
    Ok((prepared, Streams { hlog, csv }))
}

/// The target's processes to sample: named ones must be readable before any load, and a
/// threshold on them needs some (or a stdio server, watched by itself).
fn watched_pids(plan: &Plan, opts: &RunOptions, resolved: &Resolved) -> Result<Vec<u32>, RunError> {
    let pids = target_pids(plan, opts);
    let stdio = resolved.endpoint.kind == TransportKind::Stdio;
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
    Ok(pids)
}

fn output_error(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> RunError + use<> {
    let path = path.display().to_string();
    move |source| RunError::Output { path, source }
}

/// A run under way: its workers, the collector that takes their shards, and who watches.
pub(super) struct Started {
    prepared: Prepared,
    ctx: Arc<runner::Ctx>,
    workers: usize,
    threads: Vec<JoinHandle<()>>,
    rx: UnboundedReceiver<ShardMsg>,
    collector: Collector,
    target: TargetInfo,
    watch: Option<Watch>,
}

/// Start: the workers' shared context, one thread per worker with its virtual users, the
/// collector, and the live view (published once before any load).
pub(super) fn start(
    plan: &Arc<Plan>,
    opts: &RunOptions,
    (mut p, streams): (Prepared, Streams),
) -> Result<Started, RunError> {
    let workers = p.checked.workers;
    let stdio = p.checked.resolved.endpoint.kind == TransportKind::Stdio;
    // Read once before the load: the first interval's CPU time is its own.
    let sampler = Sampler::new(
        &p.pids,
        stdio.then(|| p.checked.resolved.endpoint.children.clone()),
    );
    let endpoint = Arc::new(Endpoint {
        id_base: plan.load.shard.id_base(),
        ..p.checked.resolved.endpoint.clone()
    });
    let ctx = Arc::new(context(
        plan,
        endpoint,
        &mut p.checked,
        opts,
        (p.started_wall, p.start_at),
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
    let counted = p
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| crate::scenario::plan::is_workload_op(i, o))
        .collect();
    let collector = Collector::new(p.ops.clone(), ctx.grid, recyclers, Some(streams.hlog))
        .counting(counted)
        .opening(
            crate::scenario::plan::OP_INITIALIZE,
            p.ops
                .iter()
                .position(|o| o == crate::scenario::plan::OP_CONNECT),
        )
        .with_csv(streams.csv)
        .with_sampler(sampler);
    let target = target_info(plan, &p);
    let watch = watch(plan, opts, &p, &target, workers, &collector);
    Ok(Started {
        prepared: p,
        ctx,
        workers,
        threads,
        rx,
        collector,
        target,
        watch,
    })
}

/// What the report says of the target.
fn target_info(plan: &Plan, p: &Prepared) -> TargetInfo {
    TargetInfo {
        kind: p.checked.resolved.kind.into(),
        transport: plan.connection().transport.name().into(),
        http: if plan.connection().http2 { "2" } else { "1.1" }.into(),
        url: p.checked.resolved.url.clone(),
        headers: p.checked.resolved.headers.clone(),
        protocol_offered: plan.connection().protocol.to_string(),
        protocol_negotiated: p.checked.preflight.revision.to_string(),
    }
}

/// The live view, when someone watches (a dashboard, progress lines, an OTLP collector):
/// published once now, before any load.
fn watch(
    plan: &Plan,
    opts: &RunOptions,
    p: &Prepared,
    target: &TargetInfo,
    workers: usize,
    collector: &Collector,
) -> Option<Watch> {
    if opts.live.is_none() && opts.otlp.is_none() {
        return None;
    }
    let header = RunHeader {
        scenario: match &opts.label {
            Some(l) => format!("{} · {l}", plan.name),
            None => plan.name.clone(),
        },
        target: target.clone(),
        load: load_info(plan, workers),
        ops: p.ops.clone(),
        interval: opts.interval,
    };
    let s = plan.load.shard;
    let otlp = opts.otlp.clone().map(|x| {
        let run = crate::otlp::RunInfo {
            scenario: plan.name.clone(),
            id: run_id(&p.dir, opts.label.is_some()),
            started_at: p.started_wall,
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
    w.publish(&[], collector, None);
    Some(w)
}

/// A run whose load is over: how it stopped, and its measured window.
pub(super) struct Loaded {
    prepared: Prepared,
    ctx: Arc<runner::Ctx>,
    workers: usize,
    collector: Collector,
    target: TargetInfo,
    watch: Option<Watch>,
    stopped: Option<Stopped>,
    threshold_stop: Option<(String, Instant)>,
    run_end: Instant,
    measured: Duration,
}

/// Load: the shards collected until every worker ended (interrupts, the drain deadline and
/// `abort_on_fail` handled there), the workers joined, the measured window fixed.
pub(super) fn load(
    rt: &tokio::runtime::Runtime,
    s: Started,
    interrupt: &Interrupt,
    grace: Duration,
) -> Loaded {
    let Started {
        prepared,
        ctx,
        workers,
        threads,
        rx,
        mut collector,
        target,
        mut watch,
    } = s;
    let (stopped, threshold_stop) = rt.block_on(collect(
        &ctx,
        &mut collector,
        rx,
        (interrupt, grace),
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
        .and_then(|st| st.at.map(|at| ctx.start + at))
        .into_iter()
        .chain(threshold_stop.as_ref().map(|t| t.1))
        .min();
    let load_end = stop_at.map_or(ctx.end, |st| st.min(ctx.end)).min(run_end);
    let measured = load_end.saturating_duration_since(ctx.warmup_end.min(load_end));
    if let Some(w) = &mut watch {
        w.publish(&last, &collector, Some(measured));
    }
    Loaded {
        prepared,
        ctx,
        workers,
        collector,
        target,
        watch,
        stopped,
        threshold_stop,
        run_end,
        measured,
    }
}

/// Finish: the run's notes, its summary built and written, the reports rendered from the
/// files just written (as `mcpbench report DIR` would).
pub(super) fn finish(
    plan: &Plan,
    opts: &RunOptions,
    interrupt: &Interrupt,
    l: Loaded,
) -> Result<RunOutput, RunError> {
    let notes = notes(plan, interrupt, &l);
    let p = &l.prepared;
    let facts = RunFacts {
        scenario_file: opts.scenario_file.clone(),
        started_at: time::OffsetDateTime::from(p.started_wall)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        target: l.target.clone(),
        workers: l.workers,
        measured: l.measured,
        interrupted: l.stopped.is_some() || l.threshold_stop.is_some(),
        cpu: l.collector.ends.iter().map(|e| e.cpu).sum(),
        peak_rss: crate::metrics::target_procs::own_peak_rss_bytes(),
        handovers: l.collector.ends.iter().map(|e| e.handovers).sum(),
        notes,
        start: p.start_info.clone(),
        target_processes: l.collector.target_processes(),
        session_fit: l.collector.session_fit(),
    };
    let summary = summarize(plan, &p.ops, &l.collector.totals, facts);
    let dir = p.dir.clone();
    files::write_summary(&dir, &summary).map_err(output_error(&dir))?;
    let reports = RunFiles::read(&dir)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|run| document::write(&run));
    reports.map_err(output_error(&dir))?;
    Ok(RunOutput { summary, dir })
}

/// What the summary notes of how the run went: an interrupt or a threshold stop, a late
/// start, TIME_WAIT, failed exports, incomplete files, and what only the time line shows.
fn notes(plan: &Plan, interrupt: &Interrupt, l: &Loaded) -> Vec<String> {
    let (p, collector) = (&l.prepared, &l.collector);
    let mut notes = Vec::new();
    if let Some(st) = &l.stopped {
        let cancelled = collector
            .totals
            .class_total(crate::metrics::outcome::Class::Cancelled);
        notes.push(st.note(interrupt.cause(), cancelled));
    }
    if let Some((n, _)) = &l.threshold_stop {
        notes.push(n.clone());
    }
    let loopback = p
        .checked
        .resolved
        .endpoint
        .net
        .as_ref()
        .is_none_or(|n| n.addr.ip().is_loopback());
    if let Some(st) = p.start_info.as_ref().filter(|st| st.late_seconds > 0.0) {
        notes.push(format!(
            "started {:.3}s after the agreed start {} ({}): ready too late, it began on the \
             next interval of the common time line, so its load runs that much later than the \
             other shards'",
            st.late_seconds, st.agreed, st.by
        ));
    }
    notes.extend(limits::time_wait_note(
        collector.totals.sessions.connections,
        l.run_end
            .saturating_duration_since(l.ctx.start)
            .as_secs_f64(),
        loopback,
    ));
    notes.extend(l.watch.as_ref().and_then(Watch::export_note));
    if let Some(e) = &collector.hlog_error {
        notes.push(format!("latency.hlog or timeseries.csv is incomplete: {e}"));
    }
    // What only the time line shows (plateaus, error onsets), read back from the file just
    // written: the run kept no per-interval history.
    let (series, phases) = crate::report::read_back::read_series(&p.dir.join("timeseries.csv"));
    notes.extend(crate::report::diagnose::over_time(plan, &series, &phases));
    notes
}
