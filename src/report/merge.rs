//! `mcpbench merge DIR… --output DIR`: one result from several runs of the same scenario —
//! the basis for a run split over machines. Counters add; each operation's latency comes from
//! its histograms added exactly (latency.hlog), not from averaged percentiles; the interval
//! logs are laid on one wall-clock time line, and the time series is rebuilt from them per
//! interval. Figures that cannot be merged exactly from the files (latency of other outcome
//! classes, time to first event, open-loop service time and lateness) are left out, with a note.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use super::read_back::{LoggedInterval, read_intervals};
use super::summary::{self, Latency, Operation, Outcomes, Summary, WarmupOperation};
use super::{document, files, read_back::RunFiles};
use crate::metrics::collector::HlogWriter;
use crate::metrics::grid::Phase;
use crate::metrics::recorder::new_histogram;
use crate::scenario::plan::OP_INITIALIZE;
use crate::scenario::thresholds::Threshold;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("merge needs at least two runs (or one directory holding them)")]
    TooFew,
    #[error(transparent)]
    Read(#[from] super::read_back::ReadError),
    #[error("{0}")]
    Mismatch(String),
    #[error("{path}: {why}")]
    Bad { path: String, why: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

fn add_map(
    into: &mut std::collections::BTreeMap<String, u64>,
    from: &std::collections::BTreeMap<String, u64>,
) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn add_outcomes(a: &mut Outcomes, b: &Outcomes) {
    a.ok += b.ok;
    a.tool_error += b.tool_error;
    add_map(&mut a.rpc_error, &b.rpc_error);
    a.input_required += b.input_required;
    a.assertion += b.assertion;
    a.divergence += b.divergence;
    add_map(&mut a.http, &b.http);
    a.timeout += b.timeout;
    a.hang += b.hang;
    a.connect += b.connect;
    a.io += b.io;
    add_map(&mut a.protocol, &b.protocol);
    a.cancelled += b.cancelled;
}

/// Seconds since the epoch of an RFC 3339 time.
fn epoch(rfc3339: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

/// The runs to merge: as given, or one directory's subdirectories that are runs (sorted).
fn expand(runs: &[PathBuf]) -> Result<Vec<PathBuf>, MergeError> {
    let [dir] = runs else {
        return Ok(runs.to_vec());
    };
    let found = super::files::run_dirs(dir).map_err(|e| MergeError::Bad {
        path: dir.display().to_string(),
        why: e.to_string(),
    })?;
    match found.len() {
        1 => Err(MergeError::TooFew),
        _ => Ok(found),
    }
}

/// The shards of a split run must be one split, each shard once; missing ones are an error
/// unless `partial`, then a note.
fn check_shards(read: &[RunFiles], partial: bool) -> Result<Option<String>, MergeError> {
    let shards: Vec<(&RunFiles, summary::ShardInfo)> = read
        .iter()
        .filter_map(|r| r.summary.shard.map(|s| (r, s)))
        .collect();
    let Some((first, one)) = shards.first() else {
        return Ok(None);
    };
    if let Some(r) = read.iter().find(|r| r.summary.shard.is_none()) {
        return Err(MergeError::Mismatch(format!(
            "{} is shard {}/{} of a split run, {} is not a shard: merge the shards of one split",
            first.dir.display(),
            one.index,
            one.count,
            r.dir.display()
        )));
    }
    let mut seen: Vec<Option<&RunFiles>> = vec![None; one.count];
    for (r, s) in &shards {
        if s.count != one.count {
            return Err(MergeError::Mismatch(format!(
                "{} is a shard of {}, {} a shard of {}: merge the shards of one split",
                first.dir.display(),
                one.count,
                r.dir.display(),
                s.count
            )));
        }
        if let Some(twin) = seen[s.index].replace(r) {
            return Err(MergeError::Mismatch(format!(
                "shard {}/{} twice: {} and {} (a retried pod leaves its first attempt behind: \
                 keep one)",
                s.index,
                s.count,
                twin.dir.display(),
                r.dir.display()
            )));
        }
    }
    let missing: Vec<String> = (0..one.count)
        .filter(|i| seen[*i].is_none())
        .map(|i| i.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let what = format!(
        "shard{} {} of {} missing",
        if missing.len() == 1 { "" } else { "s" },
        missing.join(", "),
        one.count
    );
    if !partial {
        return Err(MergeError::Mismatch(format!(
            "{what}: the merged result would be part of the scenario; wait for every shard, or \
             pass --partial to merge what is there"
        )));
    }
    Ok(Some(format!(
        "PARTIAL: {what}; this result is {} of {} shards of the scenario",
        shards.len(),
        one.count
    )))
}

/// Each run's own health, kept beside the merged result.
fn health(r: &RunFiles) -> summary::ShardHealth {
    let s = &r.summary;
    summary::ShardHealth {
        dir: r.dir.display().to_string(),
        shard: s.shard,
        started_at: s.started_at.clone(),
        late_seconds: s.start.as_ref().map(|st| st.late_seconds),
        started: s.totals.started,
        ok: s.totals.ok,
        error_rate: s.totals.error_rate,
        dropped: s.totals.dropped,
        cpu_us_per_request: s.generator.cpu_us_per_request,
        lateness_p99_ms: s.generator.lateness.as_ref().map(|l| l.p99_ms),
        interrupted: s.interrupted,
    }
}

/// Merges `runs` (or the runs inside one directory) into `output`: summary.json, latency.hlog,
/// timeseries.csv and the reports. Shards of a split run must all be there unless `partial`.
pub fn merge(runs: &[PathBuf], output: &Path, partial: bool) -> Result<Summary, MergeError> {
    let read = read_runs(runs)?;
    let partial_note = check_shards(&read, partial)?;
    check_one_scenario(&read)?;
    let logs = Logs::read(&read)?;
    let measured = measured_seconds(&read);
    let mut merged = add_up(&read, &logs.intervals, measured, partial_note);
    let base = time_line_start(&read, &logs.intervals);
    judge(&read, &mut merged);
    write(output, &merged, &logs, base)?;
    Ok(merged)
}

/// Reads every run to merge (at least two).
fn read_runs(runs: &[PathBuf]) -> Result<Vec<RunFiles>, MergeError> {
    let runs = expand(runs)?;
    if runs.len() < 2 {
        return Err(MergeError::TooFew);
    }
    Ok(runs
        .iter()
        .map(|r| RunFiles::read(r))
        .collect::<Result<_, _>>()?)
}

/// Runs of different scenarios are not merged.
fn check_one_scenario(read: &[RunFiles]) -> Result<(), MergeError> {
    let first = &read[0].summary;
    for r in &read[1..] {
        if r.summary.scenario.name != first.scenario.name {
            return Err(MergeError::Mismatch(format!(
                "{} ran scenario `{}`, {} ran `{}`: merge runs of one scenario",
                read[0].dir.display(),
                first.scenario.name,
                r.dir.display(),
                r.summary.scenario.name
            )));
        }
    }
    Ok(())
}

/// Every interval of every run (their latency.hlog), in run order, each with the phase it had
/// in its own run.
struct Logs {
    intervals: Vec<LoggedInterval>,
    phases: Vec<Phase>,
}

impl Logs {
    /// Reads each run's interval log.
    fn read(read: &[RunFiles]) -> Result<Logs, MergeError> {
        let mut logs = Logs {
            intervals: Vec::new(),
            phases: Vec::new(),
        };
        for r in read {
            let path = r.dir.join("latency.hlog");
            let bytes = std::fs::read(&path).map_err(|e| MergeError::Bad {
                path: path.display().to_string(),
                why: e.to_string(),
            })?;
            let of_run = read_intervals(&bytes).map_err(|why| MergeError::Bad {
                path: path.display().to_string(),
                why,
            })?;
            let (w, m) = (r.summary.load.warmup_seconds, r.summary.measured_seconds);
            logs.phases.extend(of_run.iter().map(|i| {
                if i.offset + i.length <= w + 1e-3 {
                    Phase::Warmup
                } else if i.offset >= w + m - 1e-3 {
                    Phase::Drain
                } else {
                    Phase::Measured
                }
            }));
            logs.intervals.extend(of_run);
        }
        Ok(logs)
    }
}

/// The start of the common time line: the earliest interval or run start (seconds since the
/// epoch).
fn time_line_start(read: &[RunFiles], intervals: &[LoggedInterval]) -> f64 {
    intervals
        .iter()
        .map(|i| i.start)
        .fold(f64::MAX, f64::min)
        .min(
            read.iter()
                .filter_map(|r| epoch(&r.summary.started_at))
                .fold(f64::MAX, f64::min),
        )
}

/// The measured time: when at least one run was measuring — the span for shards running side
/// by side, the sum for slices run one after another (A/B), so throughput is never diluted by
/// time nobody measured.
fn measured_seconds(read: &[RunFiles]) -> f64 {
    let windows: Vec<(f64, f64)> = read
        .iter()
        .filter_map(|r| {
            let s = &r.summary;
            let start = epoch(&s.started_at)? + s.load.warmup_seconds;
            Some((start, start + s.measured_seconds))
        })
        .collect();
    match windows.is_empty() {
        true => read
            .iter()
            .map(|r| r.summary.measured_seconds)
            .fold(0.0, f64::max),
        false => covered(windows),
    }
}

/// The merged summary, thresholds not judged yet: counters added, latency from the histograms
/// added exactly, rates over the `measured` seconds, each run's health beside it.
fn add_up(
    read: &[RunFiles],
    intervals: &[LoggedInterval],
    measured: f64,
    partial_note: Option<String>,
) -> Summary {
    let first = &read[0].summary;
    let (operations, per_run_extras) = merged_operations(read, intervals, measured);
    let tenants = merged_tenants(read, measured);
    let workload = summary::workload(&operations);
    let dropped = read.iter().map(|r| r.summary.totals.dropped).sum();
    let mut totals = summary::totals(&workload, dropped, measured);
    totals.latency = workload_latency(&operations, intervals);
    let session_opening = summary::totals(&[&operations[OP_INITIALIZE]], 0, measured);
    let errors = summary::Errors::of(&workload, &[&operations[OP_INITIALIZE]]);
    let warmup = merged_warmup(read);
    let all_started: u64 = operations.iter().map(|o| o.started).sum::<u64>()
        + warmup.iter().map(|w| w.started).sum::<u64>();
    let notes = notes(read, partial_note, per_run_extras || !tenants.is_empty());
    Summary {
        started_at: read
            .iter()
            .map(|r| r.summary.started_at.clone())
            .min()
            .unwrap_or_default(),
        load: merged_load(read),
        measured_seconds: (measured * 1000.0).round() / 1000.0,
        interrupted: read.iter().any(|r| r.summary.interrupted),
        totals,
        session_opening,
        errors,
        operations,
        tenants,
        warmup,
        sessions: merged_sessions(read),
        generator: merged_generator(read, all_started),
        // Every shard watched the same processes over the same time line: the first's view,
        // per request of the whole.
        target_processes: first
            .target_processes
            .iter()
            .map(|p| p.clone().per_request(all_started))
            .collect(),
        target_memory_per_session: first
            .target_memory_per_session
            .as_ref()
            .map(unmerged_session_memory),
        notes,
        thresholds: Vec::new(),
        shard: None,
        start: None,
        shards: read.iter().map(health).collect(),
        ..first.clone()
    }
}

/// The target's memory per session is not merged: each shard's line ran through its own
/// sessions, while the memory it read grew with every shard's.
fn unmerged_session_memory(m: &summary::SessionMemory) -> summary::SessionMemory {
    summary::SessionMemory {
        bytes_per_session: None,
        unmeasured: Some(
            "not merged: each shard's line counts only its own sessions; see a single run's summary".into(),
        ),
        ..m.clone()
    }
}

/// Each operation's counters added and its latency from its histograms added exactly; and
/// whether a run had figures that cannot be merged exactly (left out).
fn merged_operations(
    read: &[RunFiles],
    intervals: &[LoggedInterval],
    measured: f64,
) -> (Vec<Operation>, bool) {
    let merged_hist = |name: &str| -> Option<Histogram<u64>> {
        let mut h = new_histogram();
        for i in intervals.iter().filter(|i| i.tag == name) {
            let _ = h.add(&i.hist);
        }
        (!h.is_empty()).then_some(h)
    };
    let mut operations: Vec<Operation> = Vec::new();
    let mut dropped_extras = false;
    for r in read {
        for o in &r.summary.operations {
            dropped_extras |= !o.latency_by_outcome.is_empty()
                || o.first_event.is_some()
                || o.service.is_some()
                || o.upstream.is_some();
            add_row(&mut operations, o, o.latency.clone());
        }
    }
    for o in &mut operations {
        o.latency = merged_hist(&o.name).map(|h| Latency::from_hist(&h));
        o.throughput = summary::rate(o.outcomes.ok, measured);
    }
    (operations, dropped_extras)
}

/// Tenants: counts add; their latency is not in latency.hlog, so it stays per run.
fn merged_tenants(read: &[RunFiles], measured: f64) -> Vec<Operation> {
    let mut tenants: Vec<Operation> = Vec::new();
    for r in read {
        for t in &r.summary.tenants {
            add_row(&mut tenants, t, None);
        }
    }
    for t in &mut tenants {
        t.throughput = summary::rate(t.outcomes.ok, measured);
    }
    tenants
}

/// The workload's latency: every interval but the session opening's, added exactly.
fn workload_latency(operations: &[Operation], intervals: &[LoggedInterval]) -> Option<Latency> {
    let mut all = new_histogram();
    for i in intervals
        .iter()
        .filter(|i| operations.first().is_none_or(|o0| o0.name != i.tag))
    {
        let _ = all.add(&i.hist);
    }
    (!all.is_empty()).then(|| Latency::from_hist(&all))
}

/// The warm-up's operations, counters added.
fn merged_warmup(read: &[RunFiles]) -> Vec<WarmupOperation> {
    let mut warmup: Vec<WarmupOperation> = Vec::new();
    for r in read {
        for w in &r.summary.warmup {
            match warmup.iter_mut().find(|m| m.name == w.name) {
                Some(m) => {
                    m.started += w.started;
                    add_outcomes(&mut m.outcomes, &w.outcomes);
                }
                None => warmup.push(w.clone()),
            }
        }
    }
    warmup
}

/// The sessions' counters added.
fn merged_sessions(read: &[RunFiles]) -> summary::Sessions {
    let mut sessions = read[0].summary.sessions.clone();
    for r in &read[1..] {
        sessions.add(&r.summary.sessions);
    }
    sessions
}

/// The first run's load, with the users, workers and request counts of all runs added.
fn merged_load(read: &[RunFiles]) -> summary::LoadInfo {
    let mut load = read[0].summary.load.clone();
    load.concurrency = read.iter().map(|r| r.summary.load.concurrency).sum();
    load.workers = read.iter().map(|r| r.summary.load.workers).sum();
    load.requests = read.iter().map(|r| r.summary.load.requests).sum();
    load
}

/// The generators together: workers, CPU time and peak memory added (the peaks of separate
/// processes, an upper bound of their sum at any moment), CPU per request of the whole (their
/// lateness is per run only).
fn merged_generator(read: &[RunFiles], all_started: u64) -> summary::Generator {
    let cpu: Option<f64> = read.iter().map(|r| r.summary.generator.cpu_seconds).sum();
    summary::Generator {
        workers: read.iter().map(|r| r.summary.generator.workers).sum(),
        cpu_seconds: cpu,
        cpu_us_per_request: cpu
            .filter(|_| all_started > 0)
            .map(|c| (c * 1e6 / all_started as f64 * 100.0).round() / 100.0),
        peak_rss_bytes: read
            .iter()
            .map(|r| r.summary.generator.peak_rss_bytes)
            .sum(),
        engine: merged_engine(read),
        handovers: read.iter().map(|r| r.summary.generator.handovers).sum(),
        lateness: None,
    }
}

/// The shards' engine: theirs if they agree, else `mixed`.
fn merged_engine(read: &[RunFiles]) -> Option<String> {
    let first = read.first()?.summary.generator.engine.clone();
    if read.iter().all(|r| r.summary.generator.engine == first) {
        first
    } else {
        Some("mixed".into())
    }
}

/// The merged result's notes: partial or not, where it comes from, what was left out, and
/// each run's own notes.
fn notes(read: &[RunFiles], partial_note: Option<String>, dropped_extras: bool) -> Vec<String> {
    let mut notes: Vec<String> = partial_note.into_iter().collect();
    notes.push(format!(
        "merged from {} runs: {}",
        read.len(),
        read.iter()
            .map(|r| r.dir.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if dropped_extras {
        notes.push("latency of outcome classes other than ok, time to first event, open-loop service time, time upstream, tenants' latency and lateness are per run only (not in latency.hlog, so not merged exactly): see each run".into());
    }
    for r in read {
        for n in &r.summary.notes {
            notes.push(format!("{}: {n}", r.dir.display()));
        }
    }
    notes
}

/// Judges the merged result by the thresholds the runs recorded (a note when they differed).
fn judge(read: &[RunFiles], merged: &mut Summary) {
    let (checks, disagree) = recorded_thresholds(read);
    merged.thresholds = super::verdict::evaluate(&checks, merged);
    if disagree {
        merged.notes.push(
            "the runs recorded different thresholds: the merged result is judged by all of them"
                .into(),
        );
    }
}

/// The length of the union of time windows (seconds).
fn covered(mut windows: Vec<(f64, f64)>) -> f64 {
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in windows {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

/// Adds a run's row to the merged rows of the same name (counters add), or starts one with
/// `latency` (what cannot be merged exactly is left out).
fn add_row(rows: &mut Vec<Operation>, o: &Operation, latency: Option<Latency>) {
    match rows.iter_mut().find(|m| m.name == o.name) {
        Some(m) => {
            m.started += o.started;
            m.completed += o.completed;
            m.failed += o.failed;
            m.cancelled += o.cancelled;
            m.streamed += o.streamed;
            m.events += o.events;
            add_outcomes(&mut m.outcomes, &o.outcomes);
        }
        None => rows.push(Operation {
            latency,
            latency_by_outcome: Default::default(),
            first_event: None,
            service: None,
            upstream: None,
            ..o.clone()
        }),
    }
}

/// The thresholds the runs were judged by (their scenario's), to judge the merged result by:
/// each once, in the order first recorded; and whether the runs disagreed.
fn recorded_thresholds(read: &[RunFiles]) -> (Vec<Threshold>, bool) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in read {
        for t in &r.summary.thresholds {
            let key = (t.name.clone(), t.condition.clone());
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
    }
    let disagree = read
        .iter()
        .any(|r| r.summary.thresholds.len() != seen.len());
    let checks = seen
        .iter()
        .filter_map(|(name, cond)| Threshold::from_recorded(name, cond).ok())
        .collect();
    (checks, disagree)
}

/// A writing failure at `p`.
fn write_err(p: &Path) -> impl FnOnce(std::io::Error) -> MergeError {
    let path = p.display().to_string();
    move |source| MergeError::Write { path, source }
}

/// Writes the merged run directory.
fn write(output: &Path, s: &Summary, logs: &Logs, base: f64) -> Result<(), MergeError> {
    std::fs::create_dir_all(output).map_err(write_err(output))?;
    write_hlog(output, &logs.intervals, base)?;
    write_timeseries(output, s, logs, base)?;
    files::write_summary(output, s).map_err(write_err(output))?;
    let run = RunFiles::read(output)?;
    document::write(&run).map_err(write_err(output))
}

/// latency.hlog: every interval of every run, on the common time line from `base`.
fn write_hlog(output: &Path, intervals: &[LoggedInterval], base: f64) -> Result<(), MergeError> {
    let hlog_path = output.join("latency.hlog");
    let err = || write_err(&hlog_path);
    let mut tags: Vec<String> = Vec::new();
    for i in intervals {
        if !tags.contains(&i.tag) {
            tags.push(i.tag.clone());
        }
    }
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(base.max(0.0));
    let mut hlog = HlogWriter::create(&hlog_path, start, &tags).map_err(err())?;
    let mut sorted: Vec<&LoggedInterval> = intervals.iter().collect();
    sorted.sort_by(|a, b| a.start.total_cmp(&b.start));
    for i in &sorted {
        hlog.write(
            &i.tag,
            &i.hist,
            Duration::from_secs_f64((i.start - base).max(0.0)),
            Duration::from_secs_f64(i.length),
        )
        .map_err(err())?;
    }
    hlog.flush().map_err(err())
}

/// timeseries.csv, rebuilt from the merged intervals on the common time line: intervals that
/// start together (shards on one grid) are one row; each keeps the phase it had in its own
/// run. Ok responses and their latency of the workload (the session opening left out, as a
/// run's own time series does); the other columns are per run.
fn write_timeseries(output: &Path, s: &Summary, logs: &Logs, base: f64) -> Result<(), MergeError> {
    let csv_path = output.join("timeseries.csv");
    let err = || write_err(&csv_path);
    let opening = s.operations.first().map(|o| o.name.as_str());
    let mut rows: std::collections::BTreeMap<(u64, u8), (Histogram<u64>, f64, Phase)> =
        Default::default();
    for (i, phase) in logs.intervals.iter().zip(&logs.phases) {
        let at = ((i.start - base).max(0.0) * 1000.0).round() as u64;
        let rank = match phase {
            Phase::Warmup => 0,
            Phase::Measured => 1,
            Phase::Drain => 2,
        };
        let e = rows
            .entry((at, rank))
            .or_insert_with(|| (new_histogram(), 0.0, *phase));
        if Some(i.tag.as_str()) != opening {
            let _ = e.0.add(&i.hist);
        }
        e.1 = e.1.max(i.length);
    }
    let mut csv = crate::metrics::collector::CsvWriter::create(&csv_path).map_err(err())?;
    for (index, ((at, _), (h, len, phase))) in rows.into_iter().enumerate() {
        let t = at as f64 / 1000.0;
        let len = if len > 0.0 { len } else { 1.0 };
        let snap = crate::metrics::collector::IntervalSnapshot {
            index: index as u64,
            start: Duration::from_secs_f64(t),
            end: Duration::from_secs_f64(t + len),
            phase,
            ended: h.len(),
            ok: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            ..Default::default()
        };
        csv.row(&snap).map_err(err())?;
    }
    csv.flush().map_err(err())
}

#[cfg(test)]
mod tests {
    use super::covered;

    /// Shards side by side cover their span; slices one after another cover their sum.
    #[test]
    fn measured_time_is_the_union_of_windows() {
        assert_eq!(covered(vec![(0.0, 10.0), (0.5, 10.2)]), 10.2);
        assert_eq!(covered(vec![(4.0, 6.0), (0.0, 2.0), (2.0, 3.0)]), 5.0);
        assert_eq!(covered(vec![(0.0, 2.0), (10.0, 12.0), (1.0, 2.5)]), 4.5);
    }
}
