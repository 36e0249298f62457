//! What watchers of a running test see — the dashboard, progress lines: a [`Live`] view,
//! rebuilt once per interval from the collector's merged [`IntervalSnapshot`] and its totals,
//! never from per-request data. The per-operation figures are the same [`Operation`] rows the
//! final summary has, its totals and error rates come from the same functions
//! ([`summary::totals`], [`Errors::of`]) over the same measured window — warm-up and drain left
//! out — and once the run is over ([`Live::finish`]) with the very seconds the summary divides
//! by, so the dashboard and the report cannot disagree.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

pub use super::spectrum::SPECTRUM;
use super::spectrum::points;
use super::summary::{
    self, Errors, Figures, LoadInfo, Operation, Outcomes, Sessions, TargetInfo, Totals,
};
use crate::metrics::collector::IntervalSnapshot;
use crate::metrics::grid::Phase;
use crate::metrics::outcome::OutcomeCounts;
use crate::metrics::recorder::Recorder;

/// The sending side of a run's live view: the latest [`Live`] (none before the preflight).
pub type LiveSink = Arc<tokio::sync::watch::Sender<Option<Arc<Live>>>>;

/// Intervals kept for the charts: the memory of a watcher stays constant however long the run.
pub const HISTORY: usize = 1800;

/// Error lines kept (the most recently seen distinct ones).
pub const ERROR_LINES: usize = 8;

/// Upper bounds (µs) of the fixed latency buckets a watcher exports (`--otlp-endpoint`'s
/// explicit-bucket histograms): 1-2.5-5 steps from 25 µs to 60 s, so every run's (and every
/// shard's) histograms share bounds and add up. The exact percentiles stay in the reports.
pub const LATENCY_BOUNDS_US: [u64; 20] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// A latency histogram in [`LATENCY_BOUNDS_US`]: `counts[i]` holds the values above bound
/// `i - 1` up to bound `i`; the last one those above the last bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum_us: f64,
    pub min_us: u64,
    pub max_us: u64,
}

impl Buckets {
    /// An HdrHistogram's values in the fixed buckets, each by its bucket's middle value (exact
    /// below 2 ms; within the histogram's 0.1 % resolution above).
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Buckets {
        let mut counts = vec![0; LATENCY_BOUNDS_US.len() + 1];
        for v in h.iter_recorded() {
            let value = h.median_equivalent(v.value_iterated_to());
            counts[LATENCY_BOUNDS_US.partition_point(|&b| b < value)] += v.count_at_value();
        }
        Buckets {
            counts,
            count: h.len(),
            sum_us: h.mean() * h.len() as f64,
            min_us: h.min(),
            max_us: h.max(),
        }
    }
}

/// What a run is: known once the target answered the preflight.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHeader {
    pub scenario: String,
    pub target: TargetInfo,
    pub load: LoadInfo,
    /// Operation names, in the run's order (0 is the session opening).
    pub ops: Vec<String>,
    pub interval: Duration,
}

impl RunHeader {
    /// The load level the profile asks for at `t` from the start (virtual users or
    /// requests per second), and the stage it is in (1-based; 0 before any stage).
    pub fn level_at(&self, t: Duration) -> (f64, usize) {
        let p = &self.load.profile;
        let t = t.as_secs_f64();
        let (mut from, mut t0) = (p.start, 0.0);
        for (i, s) in p.stages.iter().enumerate() {
            if t < t0 + s.duration_seconds {
                let f = if s.duration_seconds > 0.0 {
                    (t - t0) / s.duration_seconds
                } else {
                    1.0
                };
                return (from + (s.target - from) * f, i + 1);
            }
            from = s.target;
            t0 += s.duration_seconds;
        }
        (from, p.stages.len())
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.load.duration_seconds)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64(self.load.warmup_seconds)
    }
}

/// One distinct kind of failure recently seen: which operation, which outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorLine {
    pub op: String,
    /// The outcome with its code, e.g. `rpc_error(-32602)`, `http(503)`, `protocol(wrong_id)`.
    pub outcome: String,
    pub count: u64,
    /// When it was first and last seen (end of the interval, from the run's start).
    pub first: Duration,
    pub last: Duration,
    /// What the server said the last time it was sampled (sanitized: no credentials).
    pub message: Option<String>,
}

/// The live view of a run. See the module docs.
#[derive(Debug, Clone)]
pub struct Live {
    pub header: Arc<RunHeader>,
    /// The last [`HISTORY`] intervals, oldest first.
    pub history: VecDeque<Arc<IntervalSnapshot>>,
    /// Every operation so far (measured phase), as the summary will show it (throughput over
    /// [`measured`](Self::measured)); `rate_now` is each one's ok/s in the last measured
    /// interval.
    pub ops: Vec<Operation>,
    pub rate_now: Vec<f64>,
    /// The measured window so far: from the end of warm-up to the last interval's end, at
    /// most the scenario's duration (the drain is not measured); once finished, the
    /// summary's own `measured_seconds`.
    pub measured: Duration,
    /// The workload's totals so far, as the summary's `totals` (throughput, error rate).
    pub totals: Totals,
    /// The error rate and its parts so far, as the summary's `errors`.
    pub error_rates: Errors,
    /// Outcomes of every measured request so far, across operations.
    pub outcomes: Outcomes,
    /// Recently seen kinds of failure, the most recent first.
    pub errors: Vec<ErrorLine>,
    pub sessions: Sessions,
    /// Requests started so far, warm-up and session openings included.
    pub all_started: u64,
    /// Open loop: arrivals dropped so far (warm-up included).
    pub dropped: u64,
    /// The generator's CPU time so far (zero where not reported).
    pub cpu: Duration,
    /// The watched target processes' CPU time so far.
    pub target_cpu: Duration,
    /// Latency spectrum of ok responses so far: `(percentile, µs)` at [`SPECTRUM`]; index 0
    /// is every operation together, then one per operation.
    pub spectrum: Vec<Vec<(f64, u64)>>,
    /// Latency of ok responses so far per operation, in fixed buckets (for exporters); empty
    /// for an operation without any.
    pub buckets: Vec<Buckets>,
    /// Requests ended so far per operation and outcome class (index: `Class as usize`): the
    /// counts behind `ops[i].outcomes`.
    pub classes: Vec<[u64; crate::metrics::outcome::Class::COUNT]>,
    /// The run has ended (the last interval is in).
    pub finished: bool,
    /// Generator worker threads (CPU saturation is `cpu / (elapsed × workers)`).
    pub workers: usize,
}

impl Live {
    /// Before the first interval: the header, nothing measured.
    pub fn new(header: RunHeader, workers: usize) -> Self {
        let n = header.ops.len();
        Live {
            header: Arc::new(header),
            history: VecDeque::new(),
            ops: Vec::new(),
            rate_now: vec![0.0; n],
            measured: Duration::ZERO,
            totals: summary::totals(&[], 0, 0.0),
            error_rates: Errors::default(),
            outcomes: Outcomes::default(),
            errors: Vec::new(),
            sessions: Sessions::default(),
            all_started: 0,
            dropped: 0,
            cpu: Duration::ZERO,
            target_cpu: Duration::ZERO,
            spectrum: Vec::new(),
            buckets: Vec::new(),
            classes: Vec::new(),
            finished: false,
            workers,
        }
    }

    /// Time covered so far (the end of the last interval).
    pub fn elapsed(&self) -> Duration {
        self.history.back().map_or(Duration::ZERO, |s| s.end)
    }

    /// Takes one interval and the totals it was merged into.
    pub fn update(&mut self, snap: &IntervalSnapshot, totals: &Recorder) {
        let (warmup, end) = (self.header.warmup(), self.header.duration());
        self.measured = snap.end.clamp(warmup, end.max(warmup)) - warmup;
        let secs = self.measured.as_secs_f64();
        self.ops = self
            .header
            .ops
            .iter()
            .zip(&totals.ops)
            .map(|(name, s)| Operation::from_shard(name, s, secs))
            .collect();
        if snap.phase == Phase::Measured {
            let secs = snap.len().as_secs_f64().max(1e-3);
            self.rate_now = snap.ops.iter().map(|o| o.ok as f64 / secs).collect();
        }
        let mut all = OutcomeCounts::default();
        for s in &totals.ops {
            all.merge(&s.counts);
        }
        self.outcomes = (&all).into();
        self.note_errors(totals, snap);
        self.sessions = totals.sessions.into();
        self.all_started += snap.started;
        self.dropped += snap.dropped;
        self.derive();
        self.cpu += snap.cpu;
        self.target_cpu += snap.target.map_or(Duration::ZERO, |t| t.cpu);
        self.spectrum = spectrum(totals);
        self.buckets = totals
            .ops
            .iter()
            .map(|s| {
                s.hist(crate::metrics::outcome::Class::Ok)
                    .map_or_else(Buckets::default, Buckets::of)
            })
            .collect();
        self.classes = totals.ops.iter().map(|s| s.counts.by_class).collect();
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Arc::new(snap.clone()));
    }

    /// The totals and error rates of the operations as they stand (one definition: the
    /// summary's).
    fn derive(&mut self) {
        let workload = summary::workload(&self.ops);
        self.totals = summary::totals(&workload, self.dropped, self.measured.as_secs_f64());
        self.error_rates = Errors::of(&workload, &self.ops.iter().take(1).collect::<Vec<_>>());
    }

    /// The run is over: its measured window is `measured` (the summary's), and every rate is
    /// over it.
    pub fn finish(&mut self, measured: Duration) {
        self.finished = true;
        self.measured = measured;
        let secs = measured.as_secs_f64();
        for o in &mut self.ops {
            o.throughput = summary::rate(o.outcomes.ok, secs);
        }
        self.derive();
    }

    /// Moves the kinds of failure that grew to the front of the error lines.
    fn note_errors(&mut self, totals: &Recorder, snap: &IntervalSnapshot) {
        let at = snap.end;
        for (op, (name, s)) in self.header.ops.iter().zip(&totals.ops).enumerate() {
            for (kind, count) in s.counts.failures() {
                let outcome = kind.to_string();
                let said = snap
                    .failures
                    .iter()
                    .find(|f| f.op == op && f.outcome == kind)
                    .and_then(|f| f.message.clone());
                let seen = self
                    .errors
                    .iter()
                    .position(|e| e.op == *name && e.outcome == outcome);
                let line = match seen {
                    Some(i) if self.errors[i].count == count => continue,
                    Some(i) => {
                        let old = self.errors.remove(i);
                        ErrorLine {
                            count,
                            last: at,
                            message: said.or(old.message),
                            ..old
                        }
                    }
                    None => ErrorLine {
                        op: name.clone(),
                        outcome,
                        count,
                        first: at,
                        last: at,
                        message: said,
                    },
                };
                self.errors.insert(0, line);
            }
        }
        self.errors.truncate(ERROR_LINES);
    }

    /// What a Prometheus scrape of the running test shows.
    pub fn figures(&self) -> Figures<'_> {
        Figures {
            scenario: &self.header.scenario,
            operations: &self.ops,
            throughput: self.totals.throughput,
            errors: self.error_rates,
            dropped: self.dropped,
            cpu_us_per_request: self.cpu_us_per_request(),
            thresholds: &[],
            running: Some((
                self.last_active().map_or(0, |s| s.in_flight),
                self.elapsed().as_secs_f64(),
            )),
        }
    }

    /// The generator's CPU time per request started so far, µs.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        (self.cpu > Duration::ZERO && self.all_started > 0)
            .then(|| self.cpu.as_secs_f64() * 1e6 / self.all_started as f64)
    }

    /// The watched target processes' CPU time per request so far.
    pub fn target_cpu_us_per_request(&self) -> Option<f64> {
        (self.all_started > 0)
            .then(|| self.target_cpu.as_secs_f64() * 1e6 / self.all_started as f64)
    }

    /// The last interval of the measured window (or of warm-up, before it).
    pub fn last_active(&self) -> Option<&IntervalSnapshot> {
        self.history
            .iter()
            .rev()
            .find(|s| s.phase != Phase::Drain)
            .map(|s| s.as_ref())
    }

    /// How busy the generator's worker threads were in the last active interval (1.0: every
    /// worker thread ran all the time — the generator is at its own ceiling).
    pub fn saturation(&self) -> Option<f64> {
        let s = self.last_active()?;
        let capacity = s.len().as_secs_f64() * self.workers.max(1) as f64;
        (s.cpu > Duration::ZERO && capacity > 0.0).then(|| s.cpu.as_secs_f64() / capacity)
    }
}

/// The latency spectrum of ok responses: every operation together, then each one.
fn spectrum(totals: &Recorder) -> Vec<Vec<(f64, u64)>> {
    let mut all = crate::metrics::recorder::new_histogram();
    let mut per_op = Vec::with_capacity(totals.ops.len());
    for s in &totals.ops {
        match s.hist(crate::metrics::outcome::Class::Ok) {
            Some(h) => {
                let _ = all.add(h);
                per_op.push(points(h));
            }
            None => per_op.push(Vec::new()),
        }
    }
    let mut out = vec![points(&all)];
    out.extend(per_op);
    out
}
