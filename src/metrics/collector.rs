//! Merges per-worker shards into intervals and totals, and writes the HdrHistogram interval log.
//!
//! Workers send one shard per interval (plus a final one); the collector merges the shards of
//! an interval once every worker still running has reported it, writes that interval's
//! histograms to `latency.hlog` (one tag per operation), adds them to the run's totals, and
//! returns a small [`IntervalSnapshot`] for live display. Cleared shards go back to their
//! worker for reuse, so steady state allocates nothing.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use super::grid::{Grid, Phase};
use super::outcome::Class;
use super::recorder::{Failure, Recorder};
use super::target_procs::{Sampler, SessionFit, TargetProcess, TargetSample};

/// A message from a worker.
#[derive(Debug)]
pub struct ShardMsg {
    pub worker: usize,
    /// Interval index (0 = the first interval after the start).
    pub index: u64,
    pub shard: Recorder,
    /// Set on the worker's last message: its CPU time, when the platform reports it.
    pub last: Option<WorkerEnd>,
}

/// What a worker reports when it ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerEnd {
    pub cpu: Option<Duration>,
    /// The worker ran its virtual users in its event loop: how many times it handed one to a
    /// task (`driver::event_loop`).
    pub handovers: Option<u64>,
}

/// One merged interval, for live display and the time series.
#[derive(Debug, Clone, Default)]
pub struct IntervalSnapshot {
    pub index: u64,
    /// Where the interval begins and ends, from the run's start (see [`Grid`]).
    pub start: Duration,
    pub end: Duration,
    pub phase: Phase,
    /// Requests started in the interval (all operations, warm-up included).
    pub started: u64,
    /// Requests that ended in the interval (all operations, measured phase).
    pub ended: u64,
    pub ok: u64,
    pub errors: u64,
    /// Open loop: arrivals dropped (over `max_in_flight`), warm-up included.
    pub dropped: u64,
    /// Latency of `ok` responses across operations, in microseconds.
    pub p50_us: u64,
    pub p90_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Open loop: service time p99 of ok responses, µs.
    pub service_p99_us: u64,
    /// Requests in flight at the end of the interval.
    pub in_flight: u64,
    /// Open loop: lateness p99 of the generator's releases, µs.
    pub late_p99_us: u64,
    pub warmup_ended: u64,
    /// The generator's worker threads' CPU time in the interval (zero where not reported).
    pub cpu: Duration,
    /// Per operation, in the order of the run's operations (measured phase).
    pub ops: Vec<OpInterval>,
    /// What some failing responses of the interval said (one per operation and outcome).
    pub failures: Vec<Failure>,
    /// The target's processes at the interval's end, when any are watched.
    pub target: Option<TargetSample>,
    /// Sessions opened in the interval (warm-up included).
    pub opened: u64,
    /// The session opening's row (`initialize`, measured phase), and the connection's on its
    /// own (`connect`) when the run times it: a session-opening storm per interval.
    pub initialize: OpInterval,
    pub connect: Option<OpInterval>,
}

/// One operation's share of an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpInterval {
    pub ok: u64,
    pub errors: u64,
    /// Latency of `ok` responses, µs (0 without any).
    pub p50_us: u64,
    pub p90_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
}

/// One value of a time-series row: the CSV column and the JSON field are the same.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field {
    Text(&'static str),
    Count(u64),
    /// A number written with this many decimals.
    Number(f64, usize),
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Field::Text(t) => f.write_str(t),
            Field::Count(n) => write!(f, "{n}"),
            Field::Number(x, decimals) => write!(f, "{x:.decimals$}"),
        }
    }
}

impl IntervalSnapshot {
    /// The interval's length.
    pub fn len(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }

    /// Nothing started, ended or was in flight: the quiet tail after a run.
    pub fn is_empty(&self) -> bool {
        self.started == 0 && self.ended == 0 && self.warmup_ended == 0 && self.in_flight == 0
    }

    /// Names of the time-series fields ([`Self::fields`]), in order.
    pub const FIELDS: [&'static str; 29] = [
        "t_start_s",
        "t_end_s",
        "phase",
        "started",
        "ended",
        "ok",
        "errors",
        "dropped",
        "warmup_ended",
        "ok_per_s",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "service_p99_ms",
        "in_flight",
        "late_p99_ms",
        "cpu_ms",
        "target_cpu_ms",
        "target_rss_mb",
        "target_fds",
        "target_threads",
        "sessions_opened",
        "initialize_p50_ms",
        "initialize_p99_ms",
        "connect_p50_ms",
        "connect_p99_ms",
    ];

    /// The interval as one time-series row: a line of `timeseries.csv`, or an object of
    /// `--progress json`.
    pub fn fields(&self) -> [Field; 29] {
        let secs = self.len().as_secs_f64().max(1e-9);
        let ms = |us: u64| Field::Number(us as f64 / 1000.0, 3);
        // Empty when the target's processes are not watched.
        let target =
            |f: fn(&TargetSample) -> Field| self.target.as_ref().map_or(Field::Text(""), f);
        [
            Field::Number(self.start.as_secs_f64(), 3),
            Field::Number(self.end.as_secs_f64(), 3),
            Field::Text(self.phase.name()),
            Field::Count(self.started),
            Field::Count(self.ended),
            Field::Count(self.ok),
            Field::Count(self.errors),
            Field::Count(self.dropped),
            Field::Count(self.warmup_ended),
            Field::Number(self.ok as f64 / secs, 1),
            ms(self.p50_us),
            ms(self.p90_us),
            ms(self.p95_us),
            ms(self.p99_us),
            ms(self.p999_us),
            ms(self.max_us),
            ms(self.service_p99_us),
            Field::Count(self.in_flight),
            ms(self.late_p99_us),
            Field::Number(self.cpu.as_secs_f64() * 1000.0, 3),
            target(|t| Field::Number(t.cpu.as_secs_f64() * 1000.0, 1)),
            target(|t| Field::Number(t.rss_bytes as f64 / 1_048_576.0, 1)),
            target(|t| Field::Count(t.fds)),
            target(|t| Field::Count(t.threads)),
            Field::Count(self.opened),
            ms(self.initialize.p50_us),
            ms(self.initialize.p99_us),
            // Empty when the run does not time connections apart.
            self.connect.map_or(Field::Text(""), |c| ms(c.p50_us)),
            self.connect.map_or(Field::Text(""), |c| ms(c.p99_us)),
        ]
    }

    /// The row as one JSON object (one line of `--progress json`).
    pub fn json(&self) -> String {
        let mut out = String::from("{");
        for (i, (name, value)) in Self::FIELDS.iter().zip(self.fields()).enumerate() {
            if i > 0 {
                out.push(',');
            }
            match value {
                // Not measured (the target's columns when nothing is watched).
                Field::Text("") => out.push_str(&format!("\"{name}\":null")),
                Field::Text(t) => out.push_str(&format!("\"{name}\":\"{t}\"")),
                v => out.push_str(&format!("\"{name}\":{v}")),
            }
        }
        out.push('}');
        out
    }
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measured => "measured",
            Phase::Drain => "drain",
        }
    }
}

/// Writes `timeseries.csv`: one row per interval.
pub struct CsvWriter {
    out: BufWriter<File>,
}

impl std::fmt::Debug for CsvWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsvWriter")
    }
}

impl CsvWriter {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        writeln!(out, "{}", IntervalSnapshot::FIELDS.join(","))?;
        Ok(CsvWriter { out })
    }

    /// Appends the interval's row.
    pub fn row(&mut self, s: &IntervalSnapshot) -> std::io::Result<()> {
        let mut first = true;
        for f in s.fields() {
            if !first {
                self.out.write_all(b",")?;
            }
            first = false;
            write!(self.out, "{f}")?;
        }
        writeln!(self.out)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes an HdrHistogram interval log (V2 compressed histograms, values in µs).
pub struct HlogWriter {
    out: BufWriter<File>,
    ser: V2DeflateSerializer,
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HlogWriter")
    }
}

impl HlogWriter {
    pub fn create(path: &Path, start: SystemTime, ops: &[String]) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        let mut ser = V2DeflateSerializer::new();
        let mut b = IntervalLogWriterBuilder::new();
        b.add_comment(&format!(
            "mcpbench {} latency log; values in microseconds; one tag per operation: {}",
            env!("CARGO_PKG_VERSION"),
            ops.join(" ")
        ));
        b.with_start_time(start);
        b.with_base_time(start);
        b.begin_log_with(&mut out, &mut ser)?;
        writeln!(
            out,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        Ok(HlogWriter { out, ser })
    }

    /// Appends one interval: `start` from the log's start time, `len` its length.
    pub fn write(
        &mut self,
        tag: &str,
        h: &hdrhistogram::Histogram<u64>,
        start: Duration,
        len: Duration,
    ) -> std::io::Result<()> {
        // A builder with no headers set writes nothing itself: this appends one interval line.
        let mut w = IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.ser)?;
        w.write_histogram(h, start, len, Tag::new(tag))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Interval tags must not contain commas or spaces.
pub fn tag_for(op: &str) -> String {
    op.chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[derive(Debug)]
struct Pending {
    reported: Vec<bool>,
    merged: Recorder,
}

/// See the module docs.
#[derive(Debug)]
pub struct Collector {
    ops: Vec<String>,
    tags: Vec<String>,
    grid: Grid,
    last_index: Vec<Option<u64>>,
    pending: BTreeMap<u64, Pending>,
    next: u64,
    pub totals: Recorder,
    pub ends: Vec<WorkerEnd>,
    hlog: Option<HlogWriter>,
    csv: Option<CsvWriter>,
    recycle: Vec<Sender<Recorder>>,
    /// A histogram used to compute the across-operations percentiles of an interval.
    scratch: hdrhistogram::Histogram<u64>,
    scratch_service: hdrhistogram::Histogram<u64>,
    pub hlog_error: Option<std::io::Error>,
    /// The target's processes, read as each interval closes.
    sampler: Option<Sampler>,
    /// Per operation: whether the interval's requests, ok answers and latency count it (the
    /// workload's requests, not session openings, token requests or cold-start phases, which
    /// have their own rows; errors count wherever they are).
    counted: Vec<bool>,
    /// The session opening's operation, and the connection's when timed apart.
    opening: (usize, Option<usize>),
    /// Sessions opened so far, and the target's memory against them.
    opened: u64,
    fit: SessionFit,
}

impl Collector {
    pub fn new(
        ops: Vec<String>,
        grid: Grid,
        recycle: Vec<Sender<Recorder>>,
        hlog: Option<HlogWriter>,
    ) -> Self {
        let workers = recycle.len();
        Collector {
            tags: ops.iter().map(|o| tag_for(o)).collect(),
            totals: Recorder::new(ops.len()),
            ops,
            grid,
            last_index: vec![None; workers],
            pending: BTreeMap::new(),
            next: 0,
            ends: vec![WorkerEnd::default(); workers],
            hlog,
            csv: None,
            recycle,
            scratch: super::recorder::new_histogram(),
            scratch_service: super::recorder::new_histogram(),
            hlog_error: None,
            sampler: None,
            counted: Vec::new(),
            opening: (0, None),
            opened: 0,
            fit: SessionFit::default(),
        }
    }

    /// Only these operations count in an interval's totals (all do by default).
    pub fn counting(mut self, counted: Vec<bool>) -> Self {
        self.counted = counted;
        self
    }

    /// The session opening's operation (`initialize`) and the connection's (`connect`), when
    /// timed apart: their rows of each interval are its opening figures.
    pub fn opening(mut self, initialize: usize, connect: Option<usize>) -> Self {
        self.opening = (initialize, connect);
        self
    }

    /// Also writes the time series.
    pub fn with_csv(mut self, csv: CsvWriter) -> Self {
        self.csv = Some(csv);
        self
    }

    /// Also samples the target's processes as each interval closes.
    pub fn with_sampler(mut self, sampler: Option<Sampler>) -> Self {
        self.sampler = sampler;
        self
    }

    /// The summary's rows of the target's processes; empty when none are watched.
    pub fn target_processes(&self) -> Vec<TargetProcess> {
        self.sampler
            .as_ref()
            .map_or_else(Vec::new, Sampler::processes)
    }

    /// The target's resident memory against the sessions opened, one point per interval;
    /// `None` when no process is watched.
    pub fn session_fit(&self) -> Option<SessionFit> {
        self.sampler.as_ref().map(|_| self.fit)
    }

    /// True once every worker has sent its last shard.
    pub fn all_done(&self) -> bool {
        self.last_index.iter().all(Option::is_some)
    }

    /// Takes one message; returns the intervals it completed.
    pub fn accept(&mut self, msg: ShardMsg) -> Vec<IntervalSnapshot> {
        let workers = self.recycle.len();
        let ops = self.ops.len();
        let p = self.pending.entry(msg.index).or_insert_with(|| Pending {
            reported: vec![false; workers],
            merged: Recorder::new(ops),
        });
        p.merged.merge(&msg.shard);
        p.reported[msg.worker] = true;
        if let Some(end) = msg.last {
            self.last_index[msg.worker] = Some(msg.index);
            self.ends[msg.worker] = end;
        }
        let mut shard = msg.shard;
        shard.clear();
        let _ = self.recycle[msg.worker].send(shard);
        self.flush_ready()
    }

    fn complete(&self, index: u64, p: &Pending) -> bool {
        p.reported
            .iter()
            .enumerate()
            .all(|(w, &r)| r || self.last_index[w].is_some_and(|l| l < index))
    }

    fn flush_ready(&mut self) -> Vec<IntervalSnapshot> {
        let mut out = Vec::new();
        while let Some(p) = self.pending.get(&self.next) {
            if !self.complete(self.next, p) {
                break;
            }
            let p = self.pending.remove(&self.next).expect("present");
            out.push(self.finish_interval(self.next, p.merged));
            self.next += 1;
        }
        if !out.is_empty() {
            // Once per interval: what a killed run (SIGKILL) leaves behind is readable up to
            // its last complete interval.
            self.flush_files();
        }
        out
    }

    fn flush_files(&mut self) {
        if let Some(h) = &mut self.hlog
            && let Err(e) = h.flush()
        {
            self.hlog_error.get_or_insert(e);
        }
        if let Some(c) = &mut self.csv
            && let Err(e) = c.out.flush()
        {
            self.hlog_error.get_or_insert(e);
        }
    }

    /// Flushes whatever is pending (at the end, or after an abort).
    pub fn finish(&mut self) -> Vec<IntervalSnapshot> {
        let pending = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        for (index, p) in pending {
            out.push(self.finish_interval(index, p.merged));
        }
        self.flush_files();
        out
    }

    fn finish_interval(&mut self, index: u64, merged: Recorder) -> IntervalSnapshot {
        let (start, end) = (self.grid.start(index), self.grid.end(index));
        if let Some(h) = &mut self.hlog {
            for (op, tag) in merged.ops.iter().zip(&self.tags) {
                if let Some(hist) = op.hist(Class::Ok)
                    && let Err(e) = h.write(tag, hist, start, end - start)
                {
                    self.hlog_error.get_or_insert(e);
                }
            }
        }
        let mut snap = IntervalSnapshot {
            index,
            start,
            end,
            phase: self.grid.phase(index),
            ..Default::default()
        };
        self.scratch.reset();
        let service = &mut self.scratch_service;
        service.reset();
        snap.ops.reserve_exact(merged.ops.len());
        for (i, op) in merged.ops.iter().enumerate() {
            let counted = self.counted.get(i).copied().unwrap_or(true);
            if counted {
                snap.started += op.started;
                snap.ok += op.counts.get(Class::Ok);
            }
            // A session that cannot open is an error to see, whatever row it is in: it counts
            // among the calls ended too, so errors / ended is the headline's error rate (session
            // openings in both) and never more than all of them.
            snap.ended += op.counts.total();
            snap.errors += op.counts.errors();
            let mut row = OpInterval {
                ok: op.counts.get(Class::Ok),
                errors: op.counts.errors(),
                ..OpInterval::default()
            };
            if let Some(h) = op.hist(Class::Ok) {
                if counted {
                    let _ = self.scratch.add(h);
                }
                row.p50_us = h.value_at_quantile(0.5);
                row.p90_us = h.value_at_quantile(0.9);
                row.p95_us = h.value_at_quantile(0.95);
                row.p99_us = h.value_at_quantile(0.99);
                row.p999_us = h.value_at_quantile(0.999);
            }
            snap.ops.push(row);
            if let Some(h) = op.service.as_ref().filter(|h| !h.is_empty())
                && counted
            {
                let _ = service.add(h);
            }
        }
        snap.started += merged.warmup.iter().map(|w| w.0).sum::<u64>();
        snap.warmup_ended = merged.warmup.iter().map(|w| w.1.total()).sum();
        snap.dropped = merged.dropped + merged.warmup_dropped;
        snap.in_flight = merged.in_flight;
        snap.cpu = merged.cpu;
        snap.failures.clone_from(&merged.failures);
        snap.target = self.sampler.as_mut().map(Sampler::sample);
        snap.opened = merged.sessions.opened;
        self.opened += snap.opened;
        if let Some(t) = snap.target.filter(|t| t.processes > 0) {
            self.fit.add(self.opened, t.rss_bytes);
        }
        let (initialize, connect) = self.opening;
        snap.initialize = snap.ops.get(initialize).copied().unwrap_or_default();
        snap.connect = connect.map(|c| snap.ops.get(c).copied().unwrap_or_default());
        if !self.scratch.is_empty() {
            snap.p50_us = self.scratch.value_at_quantile(0.5);
            snap.p90_us = self.scratch.value_at_quantile(0.9);
            snap.p95_us = self.scratch.value_at_quantile(0.95);
            snap.p99_us = self.scratch.value_at_quantile(0.99);
            snap.p999_us = self.scratch.value_at_quantile(0.999);
            snap.max_us = self.scratch.max();
        }
        if !service.is_empty() {
            snap.service_p99_us = service.value_at_quantile(0.99);
        }
        if let Some(h) = merged.lateness.as_ref().filter(|h| !h.is_empty()) {
            snap.late_p99_us = h.value_at_quantile(0.99);
        }
        if let Some(c) = &mut self.csv
            && let Err(e) = c.row(&snap)
        {
            self.hlog_error.get_or_insert(e);
        }
        self.totals.merge(&merged);
        snap
    }

    pub fn ops(&self) -> &[String] {
        &self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::outcome::Outcome;
    use crate::metrics::recorder::Phase;

    fn shard(n: u64) -> Recorder {
        let mut r = Recorder::new(1);
        for _ in 0..n {
            r.started(0, Phase::Measured);
            r.record(0, Phase::Measured, Outcome::Ok, Duration::from_millis(2));
        }
        r
    }

    #[test]
    fn merges_intervals_when_every_running_worker_reported() {
        let (a, _ra) = std::sync::mpsc::channel();
        let (b, rb) = std::sync::mpsc::channel();
        let grid = Grid::new(
            Duration::from_secs(1),
            Duration::ZERO,
            Duration::from_secs(3),
        );
        let mut c = Collector::new(vec!["op".into()], grid, vec![a, b], None);
        assert!(
            c.accept(ShardMsg {
                worker: 0,
                index: 0,
                shard: shard(2),
                last: None
            })
            .is_empty()
        );
        let done = c.accept(ShardMsg {
            worker: 1,
            index: 0,
            shard: shard(3),
            last: None,
        });
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].ok, 5);
        assert!(rb.try_recv().is_ok(), "shards are recycled");
        // Worker 1 ends at interval 1; worker 0 goes on alone.
        assert!(
            c.accept(ShardMsg {
                worker: 1,
                index: 1,
                shard: shard(1),
                last: Some(WorkerEnd::default())
            })
            .is_empty()
        );
        assert_eq!(
            c.accept(ShardMsg {
                worker: 0,
                index: 1,
                shard: shard(1),
                last: None
            })
            .len(),
            1
        );
        assert_eq!(
            c.accept(ShardMsg {
                worker: 0,
                index: 2,
                shard: shard(4),
                last: Some(WorkerEnd::default())
            })[0]
                .ok,
            4
        );
        assert!(c.all_done());
        assert_eq!(c.totals.ops[0].started, 11);
        assert_eq!(c.totals.ops[0].counts.total(), 11);
    }
}
