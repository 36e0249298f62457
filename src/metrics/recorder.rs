//! Per-worker shards of latency histograms and outcome counters.
//!
//! Each worker thread owns one `Recorder` for the current interval; recording is an array index
//! and a histogram bucket increment — no lock, no atomic, no channel message, and after the
//! first occurrence of an outcome class no allocation. Once per interval the worker hands the
//! whole shard to the collector and continues with a recycled, cleared one.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::outcome::{Class, Outcome, OutcomeCounts};

/// Latencies are recorded in microseconds, 1 µs … 1 h, 3 significant digits.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;
pub const SIGFIG: u8 = 3;

/// A latency histogram with the project's fixed bounds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, SIGFIG).expect("constant bounds are valid")
}

/// Microseconds, clamped into the histogram's range.
pub fn micros(d: Duration) -> u64 {
    (d.as_micros().min(LATENCY_MAX_US as u128) as u64).max(1)
}

/// Everything recorded for one operation.
#[derive(Debug, Clone, Default)]
pub struct OpShard {
    /// Requests sent (or attempted). Must equal `counts.total()` once all have ended.
    pub started: u64,
    pub counts: OutcomeCounts,
    /// Latency per outcome class, created on the class's first occurrence.
    pub latency: [Option<Histogram<u64>>; Class::COUNT],
    /// Time from sending to the first SSE event, for streamed responses.
    pub first_event: Option<Histogram<u64>>,
    /// SSE events (notifications, requests, the response itself) received on streamed responses.
    pub events: u64,
    /// Responses that arrived on an SSE stream.
    pub streamed: u64,
}

impl OpShard {
    fn record(&mut self, outcome: Outcome, latency: Duration) {
        self.counts.add(outcome);
        let h = self.latency[outcome.class() as usize].get_or_insert_with(new_histogram);
        h.saturating_record(micros(latency));
    }

    pub fn merge(&mut self, other: &OpShard) {
        self.started += other.started;
        self.counts.merge(&other.counts);
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            merge_hist(mine, theirs);
        }
        merge_hist(&mut self.first_event, &other.first_event);
        self.events += other.events;
        self.streamed += other.streamed;
    }

    fn clear(&mut self) {
        self.started = 0;
        self.counts.clear();
        for h in self.latency.iter_mut().flatten() {
            h.reset();
        }
        if let Some(h) = &mut self.first_event {
            h.reset();
        }
        self.events = 0;
        self.streamed = 0;
    }

    /// The latency histogram of one class, if any request ended that way.
    pub fn hist(&self, c: Class) -> Option<&Histogram<u64>> {
        self.latency[c as usize].as_ref().filter(|h| !h.is_empty())
    }
}

fn merge_hist(mine: &mut Option<Histogram<u64>>, theirs: &Option<Histogram<u64>>) {
    if let Some(t) = theirs.as_ref().filter(|t| !t.is_empty()) {
        let m = mine.get_or_insert_with(new_histogram);
        m.add(t).expect("histograms share bounds");
    }
}

/// Session life-cycle counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Sessions opened successfully.
    pub opened: u64,
    /// Sessions the server forgot (HTTP 404) that were opened again.
    pub expired: u64,
    /// Connections opened (TCP or child processes).
    pub connections: u64,
    /// Responses whose stream the server did not end after the response; the connection was
    /// dropped instead of reused.
    pub lingering_streams: u64,
    /// Cancellations sent for timed-out requests (`notifications/cancelled`).
    pub cancels_sent: u64,
}

impl SessionCounts {
    fn merge(&mut self, o: &SessionCounts) {
        self.opened += o.opened;
        self.expired += o.expired;
        self.connections += o.connections;
        self.lingering_streams += o.lingering_streams;
        self.cancels_sent += o.cancels_sent;
    }
}

/// Phase of the run a request started in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Measured,
}

/// One worker's shard for one interval.
#[derive(Debug, Clone)]
pub struct Recorder {
    pub ops: Vec<OpShard>,
    /// Started and outcome counts of requests that started during warm-up (no histograms).
    pub warmup: Vec<(u64, OutcomeCounts)>,
    pub sessions: SessionCounts,
}

impl Recorder {
    pub fn new(ops: usize) -> Self {
        Recorder {
            ops: vec![OpShard::default(); ops],
            warmup: vec![(0, OutcomeCounts::default()); ops],
            sessions: SessionCounts::default(),
        }
    }

    #[inline]
    pub fn started(&mut self, op: usize, phase: Phase) {
        match phase {
            Phase::Measured => self.ops[op].started += 1,
            Phase::Warmup => self.warmup[op].0 += 1,
        }
    }

    #[inline]
    pub fn record(&mut self, op: usize, phase: Phase, outcome: Outcome, latency: Duration) {
        match phase {
            Phase::Measured => self.ops[op].record(outcome, latency),
            Phase::Warmup => self.warmup[op].1.add(outcome),
        }
    }

    /// Records stream metrics for a response that arrived over SSE.
    #[inline]
    pub fn stream(&mut self, op: usize, phase: Phase, first_event: Option<Duration>, events: u32) {
        if phase == Phase::Warmup {
            return;
        }
        let s = &mut self.ops[op];
        s.streamed += 1;
        s.events += events as u64;
        if let Some(d) = first_event {
            s.first_event
                .get_or_insert_with(new_histogram)
                .saturating_record(micros(d));
        }
    }

    pub fn merge(&mut self, other: &Recorder) {
        for (m, t) in self.ops.iter_mut().zip(&other.ops) {
            m.merge(t);
        }
        for (m, t) in self.warmup.iter_mut().zip(&other.warmup) {
            m.0 += t.0;
            m.1.merge(&t.1);
        }
        self.sessions.merge(&other.sessions);
    }

    /// Empties the shard, keeping its allocations for reuse.
    pub fn clear(&mut self) {
        for op in &mut self.ops {
            op.clear();
        }
        for w in &mut self.warmup {
            w.0 = 0;
            w.1.clear();
        }
        self.sessions = SessionCounts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_merges_and_clears() {
        let mut a = Recorder::new(2);
        a.started(0, Phase::Measured);
        a.record(0, Phase::Measured, Outcome::Ok, Duration::from_micros(1500));
        a.started(1, Phase::Warmup);
        a.record(1, Phase::Warmup, Outcome::Timeout, Duration::from_secs(1));
        let mut total = Recorder::new(2);
        total.merge(&a);
        total.merge(&a);
        assert_eq!(total.ops[0].started, 2);
        assert_eq!(total.ops[0].hist(Class::Ok).unwrap().len(), 2);
        assert_eq!(total.warmup[1].1.get(Class::Timeout), 2);
        assert!(total.ops[1].hist(Class::Timeout).is_none());
        a.clear();
        assert_eq!(a.ops[0].started, 0);
        assert!(a.ops[0].hist(Class::Ok).is_none());
        assert_eq!(micros(Duration::ZERO), 1);
        assert_eq!(micros(Duration::from_secs(7200)), LATENCY_MAX_US);
    }
}
