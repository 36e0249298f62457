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
    /// Open loop: service time, from the actual send (the latency above runs from the
    /// intended start).
    pub service: Option<Histogram<u64>>,
    /// The time the target's timing header reported (a gateway's time upstream).
    pub upstream: Option<Histogram<u64>>,
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
        merge_hist(&mut self.service, &other.service);
        merge_hist(&mut self.upstream, &other.upstream);
        self.events += other.events;
        self.streamed += other.streamed;
    }

    fn clear(&mut self) {
        self.started = 0;
        self.counts.clear();
        for h in self.latency.iter_mut().flatten() {
            h.reset();
        }
        for h in [&mut self.first_event, &mut self.service, &mut self.upstream]
            .into_iter()
            .flatten()
        {
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
    /// Responses whose id matched no request of the connection (never sent: wrong ids, or a
    /// gateway copying other sessions' traffic).
    pub unmatched_responses: u64,
    /// Responses that arrived after their request had timed out.
    pub late_responses: u64,
    /// Requests from the server (ping, sampling…) that mcpbench answered.
    pub server_requests: u64,
    /// Second (or later) responses to one request.
    pub duplicate_responses: u64,
    /// Server requests mcpbench does not support (sampling, elicitation, roots…), answered
    /// with -32601.
    pub unsupported_server_requests: u64,
}

impl SessionCounts {
    fn merge(&mut self, o: &SessionCounts) {
        self.opened += o.opened;
        self.expired += o.expired;
        self.connections += o.connections;
        self.lingering_streams += o.lingering_streams;
        self.cancels_sent += o.cancels_sent;
        self.unmatched_responses += o.unmatched_responses;
        self.late_responses += o.late_responses;
        self.server_requests += o.server_requests;
        self.duplicate_responses += o.duplicate_responses;
        self.unsupported_server_requests += o.unsupported_server_requests;
    }

    /// Adds what a session's connections counted.
    pub fn add_transport(&mut self, st: TransportCounts) {
        self.unmatched_responses += st.unmatched;
        self.late_responses += st.late;
        self.server_requests += st.server_requests;
        self.duplicate_responses += st.duplicates;
        self.unsupported_server_requests += st.unsupported_requests;
    }
}

/// What a session's connections saw that belongs to no request: transports count it (in a
/// `Cell`, per connection) and hand it over when the session ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportCounts {
    /// Responses whose id matched no request ever sent (or no id at all).
    pub unmatched: u64,
    /// Responses to requests the caller had given up on (timed out).
    pub late: u64,
    /// Requests from the server answered (`ping`, or -32601).
    pub server_requests: u64,
    /// Responses to a request that had been answered already.
    pub duplicates: u64,
    /// Of the server requests, those answered -32601 (not supported).
    pub unsupported_requests: u64,
}

impl TransportCounts {
    pub fn add(&mut self, o: TransportCounts) {
        self.unmatched += o.unmatched;
        self.late += o.late;
        self.server_requests += o.server_requests;
        self.duplicates += o.duplicates;
        self.unsupported_requests += o.unsupported_requests;
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
    /// Open loop: arrivals not sent because `max_in_flight` requests were in flight
    /// (measured phase, warm-up).
    pub dropped: u64,
    pub warmup_dropped: u64,
    /// Open loop: how late the generator released each arrival after its intended start.
    pub lateness: Option<Histogram<u64>>,
    /// `Retry-After` of rate-limited (429) responses.
    pub retry_after: Option<Histogram<u64>>,
    /// Per tenant (of per-user credentials): the workload requests of its users, every
    /// operation together (measured phase; `started` counts them as they end).
    pub tenants: Vec<OpShard>,
    /// Requests in flight when the shard was handed over (a gauge, summed over workers).
    pub in_flight: u64,
    /// The worker thread's CPU time (user + system) in the interval, where the platform
    /// reports it (read once per interval, never per request).
    pub cpu: Duration,
    /// A sample of what failing responses said: the first message of each (operation,
    /// outcome) in the interval, at most [`FAILURE_SAMPLES`] (so a flood of errors costs one
    /// short scan each, and one allocation per kind per interval).
    pub failures: Vec<Failure>,
}

/// Distinct failures sampled per interval and shard.
pub const FAILURE_SAMPLES: usize = 8;

/// What one failing response said.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub op: usize,
    pub outcome: Outcome,
    /// Sanitized and shortened by whoever noted it; `None` when the transport kept no
    /// message to read.
    pub message: Option<String>,
}

impl Recorder {
    pub fn new(ops: usize) -> Self {
        Recorder {
            ops: vec![OpShard::default(); ops],
            warmup: vec![(0, OutcomeCounts::default()); ops],
            sessions: SessionCounts::default(),
            dropped: 0,
            warmup_dropped: 0,
            lateness: None,
            retry_after: None,
            tenants: Vec::new(),
            in_flight: 0,
            cpu: Duration::ZERO,
            failures: Vec::new(),
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

    /// Open loop: also records the service time (from the actual send).
    #[inline]
    pub fn service(&mut self, op: usize, phase: Phase, service: Duration) {
        if phase == Phase::Measured {
            self.ops[op]
                .service
                .get_or_insert_with(new_histogram)
                .saturating_record(micros(service));
        }
    }

    /// The time a response's timing header reported.
    #[inline]
    pub fn upstream(&mut self, op: usize, phase: Phase, upstream: Duration) {
        if phase == Phase::Measured {
            self.ops[op]
                .upstream
                .get_or_insert_with(new_histogram)
                .saturating_record(micros(upstream));
        }
    }

    /// Open loop: an arrival that found `max_in_flight` requests in flight.
    #[inline]
    pub fn drop_arrival(&mut self, phase: Phase) {
        match phase {
            Phase::Measured => self.dropped += 1,
            Phase::Warmup => self.warmup_dropped += 1,
        }
    }

    /// A workload request of a user of tenant `t` ended (measured phase only).
    #[inline]
    pub fn record_tenant(&mut self, t: usize, phase: Phase, outcome: Outcome, latency: Duration) {
        if phase != Phase::Measured {
            return;
        }
        if self.tenants.len() <= t {
            self.tenants.resize_with(t + 1, OpShard::default);
        }
        let s = &mut self.tenants[t];
        s.started += 1;
        s.record(outcome, latency);
    }

    /// The `Retry-After` a rate-limited response advised.
    #[inline]
    pub fn retry_after(&mut self, phase: Phase, after: Duration) {
        if phase == Phase::Measured {
            self.retry_after
                .get_or_insert_with(new_histogram)
                .saturating_record(micros(after));
        }
    }

    /// Open loop: how late an arrival was released.
    #[inline]
    pub fn late(&mut self, phase: Phase, lateness: Duration) {
        if phase == Phase::Measured {
            self.lateness
                .get_or_insert_with(new_histogram)
                .saturating_record(micros(lateness));
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

    /// Requests of one outcome class, every operation and phase together.
    pub fn class_total(&self, c: Class) -> u64 {
        let measured: u64 = self.ops.iter().map(|o| o.counts.get(c)).sum();
        measured + self.warmup.iter().map(|(_, w)| w.get(c)).sum::<u64>()
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
        self.dropped += other.dropped;
        self.warmup_dropped += other.warmup_dropped;
        merge_hist(&mut self.lateness, &other.lateness);
        merge_hist(&mut self.retry_after, &other.retry_after);
        if self.tenants.len() < other.tenants.len() {
            self.tenants
                .resize_with(other.tenants.len(), OpShard::default);
        }
        for (m, t) in self.tenants.iter_mut().zip(&other.tenants) {
            m.merge(t);
        }
        self.in_flight += other.in_flight;
        self.cpu += other.cpu;
        for f in &other.failures {
            if !self.has_failure(f.op, f.outcome) && self.failures.len() < 2 * FAILURE_SAMPLES {
                self.failures.push(f.clone());
            }
        }
    }

    /// Whether a message for this (operation, outcome) is already sampled in the interval.
    #[inline]
    pub fn has_failure(&self, op: usize, outcome: Outcome) -> bool {
        self.failures
            .iter()
            .any(|f| f.op == op && f.outcome == outcome)
    }

    /// Samples a failing response's message, if its kind is new in the interval and there is
    /// room; `message` is only called then (once per kind and interval).
    pub fn note_failure(
        &mut self,
        op: usize,
        outcome: Outcome,
        message: impl FnOnce() -> Option<String>,
    ) {
        if self.failures.len() < FAILURE_SAMPLES && !self.has_failure(op, outcome) {
            self.failures.push(Failure {
                op,
                outcome,
                message: message(),
            });
        }
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
        self.dropped = 0;
        self.warmup_dropped = 0;
        if let Some(h) = &mut self.retry_after {
            h.reset();
        }
        for t in &mut self.tenants {
            t.clear();
        }
        if let Some(h) = &mut self.lateness {
            h.reset();
        }
        self.in_flight = 0;
        self.cpu = Duration::ZERO;
        self.failures.clear();
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
