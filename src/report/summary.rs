//! The one result model of a run. Everything else (the table, summary.json, later Markdown and
//! HTML) is a rendering of a [`Summary`]. Its JSON form is versioned and described by
//! `results/schema.json`.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::metrics::outcome::{Class, ErrorKind, LocalKind, OutcomeCounts, ProtocolKind};
use crate::metrics::recorder::{OpShard, SessionCounts};

/// Version of the summary.json format; bump on incompatible change.
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub schema_version: u32,
    pub mcpbench_version: String,
    pub scenario: ScenarioInfo,
    /// UTC, RFC 3339.
    pub started_at: String,
    pub target: TargetInfo,
    pub load: LoadInfo,
    /// Seconds from the end of warm-up to the end of the run (the throughput denominator).
    pub measured_seconds: f64,
    /// The run was stopped early (Ctrl-C).
    pub interrupted: bool,
    /// The workload's requests (every operation but the session opening).
    pub totals: Totals,
    /// Session openings (`initialize`, or `server/discover` for 2026-07-28): counted apart
    /// from the workload; their latency is that operation's row.
    pub session_opening: Totals,
    /// The headline error rate and its parts: every call that did not do its job, workload
    /// requests and session openings alike.
    #[serde(default)]
    pub errors: Errors,
    pub operations: Vec<Operation>,
    /// Per tenant of per-user credentials (`target.credentials`): its users' workload
    /// requests, every operation together, named by the tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<Operation>,
    pub warmup: Vec<WarmupOperation>,
    pub sessions: Sessions,
    pub generator: Generator,
    /// The target's own processes (`target.pid`, `--target-pid`, spawned stdio servers):
    /// CPU time, memory and descriptors while the run watched them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_processes: Vec<crate::metrics::target_procs::TargetProcess>,
    /// The target's memory per session opened (its watched processes together), when any
    /// were watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_memory_per_session: Option<SessionMemory>,
    /// Things the reader should know: anomalies detected in what was measured, and warnings.
    pub notes: Vec<String>,
    /// The scenario's `[compare]` budgets: what `mcpbench compare` judges this run (as the
    /// current side) by when no `--budget` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<crate::scenario::budget::Budget>,
    /// The scenario's `[thresholds]`, each with the value measured and whether it held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdResult>,
    /// A shard of a split run (`--shard I/N`): which part of the scenario this run was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// A start agreed with other generators (`--start-at`, `--start-barrier`): when, and how
    /// late this run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartInfo>,
    /// A merged result: each run merged, with its own health.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardHealth>,
}

/// Which part of a split scenario a run was.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ShardInfo {
    /// From 0.
    pub index: usize,
    pub count: usize,
}

/// A start agreed between generators.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StartInfo {
    /// The agreed start, UTC, RFC 3339.
    pub agreed: String,
    /// How it was agreed: `start-at` or `barrier`.
    pub by: String,
    /// How much later than agreed this run started (0 when on time): a run ready too late
    /// starts at the next interval boundary of the common time line.
    pub late_seconds: f64,
}

/// One run of a merged result, as it went on its own.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardHealth {
    /// The run directory merged.
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    pub started_at: String,
    /// Late against the agreed start, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_seconds: Option<f64>,
    /// Its workload requests started, ok, and its error rate.
    pub started: u64,
    pub ok: u64,
    pub error_rate: f64,
    /// Open loop: its arrivals dropped.
    pub dropped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// Open loop: p99 of how late its arrivals were released, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness_p99_ms: Option<f64>,
    pub interrupted: bool,
}

/// One threshold, evaluated.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdResult {
    /// What it is about: `p99`, `tools/call:search-contacts p99`, `error_rate`.
    pub name: String,
    /// As written, e.g. `< 50ms`.
    pub condition: String,
    /// The value measured, in `unit` (`ms`, `/s`, or none for a fraction); absent when there
    /// was nothing to measure (no ok response for a latency), which fails the threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub unit: String,
    pub passed: bool,
    /// Why there is no value, when the reason is known (the figure needs more samples or
    /// sessions, no target process was watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<String>,
}

/// The target's resident memory per session opened: the slope of the least-squares line
/// through one point per interval — x the sessions the run had opened by the interval's end,
/// y the watched processes' resident memory then, summed. A server that frees what a closed
/// session held stays near 0 under session churn; one that leaks shows what each session left.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionMemory {
    /// Bytes per session opened; absent when too little was measured (`unmeasured` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_session: Option<f64>,
    /// Sessions opened from the line's first point to its last.
    pub sessions_opened: u64,
    /// The line's points: intervals that read the target's processes.
    pub samples: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmeasured: Option<String>,
}

impl SessionMemory {
    /// Fewest points for a line.
    pub const MIN_SAMPLES: u64 = 3;
    /// Fewest sessions opened along it: below, a page or two of allocator noise would read as
    /// kilobytes per session.
    pub const MIN_SESSIONS: u64 = 1000;

    /// The figure from the run's points.
    pub fn of(fit: &crate::metrics::target_procs::SessionFit) -> Self {
        let sessions_opened = fit.last_sessions - fit.first_sessions;
        let unmeasured = if fit.points < Self::MIN_SAMPLES {
            Some(format!(
                "{} samples of the target's memory, at least {} needed (a longer run, or a shorter [output] interval)",
                fit.points,
                Self::MIN_SAMPLES
            ))
        } else if sessions_opened < Self::MIN_SESSIONS {
            Some(format!(
                "{sessions_opened} sessions opened while the target was watched, at least {} needed (session churn: load.sessions = \"per-request\")",
                Self::MIN_SESSIONS
            ))
        } else {
            None
        };
        SessionMemory {
            bytes_per_session: fit.slope().filter(|_| unmeasured.is_none()).map(f64::round),
            sessions_opened,
            samples: fit.points,
            unmeasured,
        }
    }
}

impl Summary {
    /// Thresholds that did not hold — never a shard's: its thresholds are measured on its share
    /// and judged on the merged result (`mcpbench merge`).
    pub fn breached(&self) -> impl Iterator<Item = &ThresholdResult> {
        let judged = self.shard.is_none();
        self.thresholds.iter().filter(move |t| judged && !t.passed)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioInfo {
    pub name: String,
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetInfo {
    /// `embedded` (built-in reference server) or `remote`.
    pub kind: String,
    pub transport: String,
    /// HTTP version for the HTTP transports (`1.1` or `2`).
    pub http: String,
    /// The URL (never contains credentials; header values are never reported).
    pub url: String,
    /// Names of the extra headers sent (values omitted: they may be secrets).
    pub headers: Vec<String>,
    pub protocol_offered: String,
    pub protocol_negotiated: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplayInfo {
    pub trace: String,
    pub speed: f64,
    #[serde(rename = "loop")]
    pub looped: bool,
    /// Recorded sessions, one virtual user each.
    pub sessions: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadInfo {
    /// `closed` (virtual users) or `open` (arrival rate).
    pub model: String,
    /// Virtual users started: the peak concurrency (closed) or `max_in_flight` (open).
    pub concurrency: usize,
    /// Open loop: `poisson` or `uniform`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival: Option<String>,
    /// Open loop: each worker released the arrivals due at most this often (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_interval_seconds: Option<f64>,
    /// Closed loop, a session-opening storm: the virtual users started (each opening its
    /// session) at this many per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_rate: Option<f64>,
    /// `first_call` or `cold_start` rounds (absent: steady).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// A timed replay: the trace and its speed factor (`loop`: replayed again and again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayInfo>,
    /// The load profile: level (virtual users, or requests per second) at the start, then
    /// each stage's duration and the level it ramps to.
    pub profile: ProfileInfo,
    pub duration_seconds: f64,
    /// The run stops after this many requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    pub warmup_seconds: f64,
    pub timeout_seconds: f64,
    /// Closed loop: think time between requests, [min, max] seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_seconds: Option<[f64; 2]>,
    /// `per-vu`, `per-request` or `shared`.
    pub sessions: String,
    pub workers: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfileInfo {
    pub start: f64,
    pub stages: Vec<StageInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageInfo {
    pub duration_seconds: f64,
    pub target: f64,
}

/// Counts across operations (measured phase).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub started: u64,
    /// Answered by the peer: ok + tool_error + rpc_error + input_required.
    pub completed: u64,
    /// http, timeout, connect, io, protocol.
    pub failed: u64,
    pub cancelled: u64,
    pub ok: u64,
    /// `started - (completed + failed + cancelled)`; anything but 0 is a bug in mcpbench.
    pub unaccounted: i64,
    /// ok responses per second of the measured window.
    pub throughput: f64,
    /// Requests that did not do their job (every outcome but ok and input_required: tool
    /// errors, JSON-RPC errors, transport and protocol failures, wrong answers) over all that
    /// were judged; `cancelled` requests (cut short by the generator: an interrupt, the end of
    /// the drain) are in neither.
    pub error_rate: f64,
    /// Open loop: arrivals not sent because `max_in_flight` requests were in flight.
    pub dropped: u64,
    /// Latency of ok responses, these operations together (exact: their histograms merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    /// (Absent from summaries before schema 3: read as 0.)
    #[serde(default)]
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn from_hist(h: &Histogram<u64>) -> Self {
        let ms = |us: f64| (us / 1000.0 * 1000.0).round() / 1000.0;
        Latency {
            count: h.len(),
            min_ms: ms(h.min() as f64),
            mean_ms: ms(h.mean()),
            stdev_ms: ms(h.stdev()),
            p50_ms: ms(h.value_at_quantile(0.5) as f64),
            p90_ms: ms(h.value_at_quantile(0.9) as f64),
            p95_ms: ms(h.value_at_quantile(0.95) as f64),
            p99_ms: ms(h.value_at_quantile(0.99) as f64),
            p999_ms: ms(h.value_at_quantile(0.999) as f64),
            max_ms: ms(h.max() as f64),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcomes {
    pub ok: u64,
    pub tool_error: u64,
    /// JSON-RPC error code → count.
    pub rpc_error: BTreeMap<String, u64>,
    /// 2026-07-28 results asking the client for input (MRTR), not fulfilled.
    pub input_required: u64,
    /// Answers that broke an `expect` rule of the scenario.
    #[serde(default)]
    pub assertion: u64,
    /// Answers of deterministic calls that differ from the first answer seen (or recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub divergence: u64,
    /// HTTP status → count.
    pub http: BTreeMap<String, u64>,
    pub timeout: u64,
    /// No answer after `hang_after` while requests sent after it were answered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hang: u64,
    pub connect: u64,
    pub io: u64,
    /// Kind of protocol violation → count.
    pub protocol: BTreeMap<String, u64>,
    pub cancelled: u64,
    /// What the generator's machine ran out of (fd_limit, no_ports, process_limit) → count:
    /// requests that never reached the target.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub local: BTreeMap<String, u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Outcomes {
    /// Requests of one outcome class.
    pub fn count(&self, class: Class) -> u64 {
        let sum = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
        match class {
            Class::Ok => self.ok,
            Class::ToolError => self.tool_error,
            Class::RpcError => sum(&self.rpc_error),
            Class::InputRequired => self.input_required,
            Class::Assertion => self.assertion,
            Class::Divergence => self.divergence,
            Class::Http => sum(&self.http),
            Class::Timeout => self.timeout,
            Class::Hang => self.hang,
            Class::Connect => self.connect,
            Class::Io => self.io,
            Class::Protocol => sum(&self.protocol),
            Class::Cancelled => self.cancelled,
            Class::Local => sum(&self.local),
        }
    }

    /// Requests judged (all but cancelled ones): the denominator of error rates.
    pub fn judged(&self) -> u64 {
        Class::ALL
            .iter()
            .filter(|c| **c != Class::Cancelled)
            .map(|c| self.count(*c))
            .sum()
    }

    /// Requests that did not do their job, of one kind (`None`: all kinds).
    pub fn errors(&self, kind: Option<ErrorKind>) -> u64 {
        Class::ALL
            .iter()
            .filter(|c| c.error_kind().is_some() && (kind.is_none() || c.error_kind() == kind))
            .map(|c| self.count(*c))
            .sum()
    }
}

/// The error rate and its parts, over every call judged — the workload's requests and the
/// session openings (`cancelled` ones are in neither part). The parts add up to `rate`: the
/// workload's failures by [`ErrorKind`], and failed session openings (whatever their class).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Errors {
    /// Calls judged: the denominator.
    pub calls: u64,
    /// Calls that did not do their job.
    pub failed: u64,
    pub rate: f64,
    /// `isError: true` results.
    pub tool: f64,
    /// JSON-RPC errors.
    pub rpc: f64,
    /// Transport and protocol failures: HTTP statuses, timeouts and hangs, connection and I/O
    /// failures, protocol violations, the generator's machine out of a resource.
    pub protocol: f64,
    /// Answers that broke an `expect` rule or diverged.
    pub wrong_answer: f64,
    /// Session openings that failed.
    pub session_opening: f64,
}

impl Errors {
    /// Over the workload's operations and the session openings' (either may be empty).
    pub fn of(workload: &[&Operation], openings: &[&Operation]) -> Errors {
        let sum = |ops: &[&Operation], f: &dyn Fn(&Outcomes) -> u64| -> u64 {
            ops.iter().map(|o| f(&o.outcomes)).sum()
        };
        let opened_failed = sum(openings, &|o| o.errors(None));
        let calls = sum(workload, &|o| o.judged()) + sum(openings, &|o| o.judged());
        let share = |n: u64| {
            if calls > 0 {
                n as f64 / calls as f64
            } else {
                0.0
            }
        };
        let kind = |k| share(sum(workload, &|o| o.errors(Some(k))));
        let failed = sum(workload, &|o| o.errors(None)) + opened_failed;
        Errors {
            calls,
            failed,
            rate: share(failed),
            tool: kind(ErrorKind::Tool),
            rpc: kind(ErrorKind::Rpc),
            protocol: kind(ErrorKind::Protocol),
            wrong_answer: kind(ErrorKind::WrongAnswer),
            session_opening: share(opened_failed),
        }
    }

    /// The parts that are not zero, e.g. `tool 1.0% · protocol 0.2%`.
    pub fn parts(&self) -> Vec<(&'static str, f64)> {
        [
            ("tool", self.tool),
            ("rpc", self.rpc),
            ("protocol", self.protocol),
            ("wrong answer", self.wrong_answer),
            ("session opening", self.session_opening),
        ]
        .into_iter()
        .filter(|(_, r)| *r > 0.0)
        .collect()
    }
}

impl From<&OutcomeCounts> for Outcomes {
    fn from(c: &OutcomeCounts) -> Self {
        Outcomes {
            ok: c.get(Class::Ok),
            tool_error: c.get(Class::ToolError),
            rpc_error: c
                .rpc_codes
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            input_required: c.get(Class::InputRequired),
            assertion: c.get(Class::Assertion),
            divergence: c.get(Class::Divergence),
            http: c
                .http_statuses
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            timeout: c.get(Class::Timeout),
            hang: c.get(Class::Hang),
            connect: c.get(Class::Connect),
            io: c.get(Class::Io),
            protocol: ProtocolKind::ALL
                .iter()
                .filter(|k| c.protocol[**k as usize] > 0)
                .map(|k| (k.name().to_string(), c.protocol[*k as usize]))
                .collect(),
            cancelled: c.get(Class::Cancelled),
            local: LocalKind::ALL
                .iter()
                .filter(|k| c.local[**k as usize] > 0)
                .map(|k| (k.name().to_string(), c.local[*k as usize]))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Operation {
    /// `initialize`, `tools/list` or `tools/call:<tool>`.
    pub name: String,
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// ok responses per second over the measured window.
    pub throughput: f64,
    /// Latency of ok responses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Latency of the other outcome classes that occurred.
    pub latency_by_outcome: BTreeMap<String, Latency>,
    pub outcomes: Outcomes,
    /// Responses that arrived as SSE streams.
    pub streamed: u64,
    /// SSE events received on those streams.
    pub events: u64,
    /// Time to the first SSE event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_event: Option<Latency>,
    /// Open loop: service time of ok responses, from the actual send (`latency` runs from the
    /// intended start, so queueing in the generator and the target is in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<Latency>,
    /// What the target's timing header (`target.timing_header`) reported: a gateway's time
    /// upstream, of every response that carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Latency>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WarmupOperation {
    pub name: String,
    pub started: u64,
    pub outcomes: Outcomes,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sessions {
    pub opened: u64,
    pub expired: u64,
    pub connections: u64,
    pub lingering_streams: u64,
    /// `notifications/cancelled` sent for timed-out requests.
    pub cancels_sent: u64,
    /// Responses whose id matched no request in flight (wrong ids, or another session's
    /// traffic); multiplexed transports (stdio, WebSocket, legacy SSE).
    #[serde(default)]
    pub unmatched_responses: u64,
    /// Responses that arrived after their request timed out.
    #[serde(default)]
    pub late_responses: u64,
    /// Server requests (ping, sampling…) answered by mcpbench.
    #[serde(default)]
    pub server_requests: u64,
    /// Second (or later) responses to one request.
    #[serde(default)]
    pub duplicate_responses: u64,
    /// Server requests mcpbench does not support (sampling, elicitation, roots…), answered
    /// -32601 Method not found.
    #[serde(default)]
    pub unsupported_server_requests: u64,
}

impl Sessions {
    /// Adds another run's counters (a merge).
    pub fn add(&mut self, s: &Sessions) {
        self.opened += s.opened;
        self.expired += s.expired;
        self.connections += s.connections;
        self.lingering_streams += s.lingering_streams;
        self.cancels_sent += s.cancels_sent;
        self.unmatched_responses += s.unmatched_responses;
        self.late_responses += s.late_responses;
        self.server_requests += s.server_requests;
        self.duplicate_responses += s.duplicate_responses;
        self.unsupported_server_requests += s.unsupported_server_requests;
    }
}

impl From<SessionCounts> for Sessions {
    fn from(s: SessionCounts) -> Self {
        Sessions {
            opened: s.opened,
            expired: s.expired,
            connections: s.connections,
            lingering_streams: s.lingering_streams,
            cancels_sent: s.cancels_sent,
            unmatched_responses: s.unmatched_responses,
            late_responses: s.late_responses,
            server_requests: s.server_requests,
            duplicate_responses: s.duplicate_responses,
            unsupported_server_requests: s.unsupported_server_requests,
        }
    }
}

/// What the generator itself cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Generator {
    pub workers: usize,
    /// CPU time of the worker threads (user + system), when the platform reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Worker CPU time per request started (warm-up included), in microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// The generator process's peak resident memory (`VmHWM`; an embedded server's share
    /// included). Merged shards: the sum of the shards' peaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// How the workers drove their virtual users: `event_loop` (one task per worker, see
    /// `[load] engine`) or `tasks` (one per virtual user). Merged shards that differ: `mixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Event loop: how many times a virtual user was handed to a task of its own (an answer
    /// that was not plain JSON, a failure, a session to open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handovers: Option<u64>,
    /// Open loop: how late the generator released arrivals after their intended start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lateness: Option<Latency>,
}

impl Operation {
    pub fn from_shard(name: &str, s: &OpShard, seconds: f64) -> Self {
        let c = &s.counts;
        let completed = Class::ALL
            .iter()
            .filter(|cl| cl.is_completed())
            .map(|cl| c.get(*cl))
            .sum::<u64>();
        let cancelled = c.get(Class::Cancelled);
        let failed = c.total() - completed - cancelled;
        let latency_by_outcome = Class::ALL
            .iter()
            .filter(|cl| **cl != Class::Ok)
            .filter_map(|cl| {
                s.hist(*cl)
                    .map(|h| (cl.name().to_string(), Latency::from_hist(h)))
            })
            .collect();
        Operation {
            name: name.to_string(),
            started: s.started,
            completed,
            failed,
            cancelled,
            throughput: rate(c.get(Class::Ok), seconds),
            latency: s.hist(Class::Ok).map(Latency::from_hist),
            latency_by_outcome,
            outcomes: c.into(),
            streamed: s.streamed,
            events: s.events,
            first_event: s
                .first_event
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(Latency::from_hist),
            service: s
                .service
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(Latency::from_hist),
            upstream: s
                .upstream
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(Latency::from_hist),
        }
    }
}

/// The workload's operations: every one but the session opening (which has its own row and
/// line).
pub fn workload(operations: &[Operation]) -> Vec<&Operation> {
    operations
        .iter()
        .enumerate()
        .filter(|(i, o)| crate::scenario::plan::is_workload_op(*i, &o.name))
        .map(|(_, o)| o)
        .collect()
}

/// Per second, rounded to a tenth.
pub fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        (n as f64 / seconds * 10.0).round() / 10.0
    } else {
        0.0
    }
}

/// Totals over some operations; `dropped` open-loop arrivals are theirs.
pub fn totals(ops: &[&Operation], dropped: u64, seconds: f64) -> Totals {
    let sum = |f: fn(&Operation) -> u64| ops.iter().map(|o| f(o)).sum::<u64>();
    let started = sum(|o| o.started);
    let completed = sum(|o| o.completed);
    let failed = sum(|o| o.failed);
    let cancelled = sum(|o| o.cancelled);
    let ok = sum(|o| o.outcomes.ok);
    // The same definition as everywhere (`Class::error_kind`): cancelled requests (cut short
    // by the generator) are neither errors nor judged.
    let errors = sum(|o| o.outcomes.errors(None));
    let judged = completed + failed;
    let ended = judged + cancelled;
    Totals {
        started,
        completed,
        failed,
        cancelled,
        ok,
        unaccounted: started as i64 - ended as i64,
        throughput: rate(ok, seconds),
        error_rate: if judged > 0 {
            errors as f64 / judged as f64
        } else {
            0.0
        },
        dropped,
        latency: None,
    }
}

/// What the Prometheus text shows: a finished run's summary, or a running one's live view.
#[derive(Debug, Clone, Copy)]
pub struct Figures<'a> {
    pub scenario: &'a str,
    pub operations: &'a [Operation],
    /// Ok responses per second, the workload's operations together.
    pub throughput: f64,
    /// The error rate and its parts (the summary's `errors`).
    pub errors: Errors,
    pub dropped: u64,
    pub cpu_us_per_request: Option<f64>,
    pub thresholds: &'a [ThresholdResult],
    /// A running test: requests in flight and seconds since the start.
    pub running: Option<(u64, f64)>,
}

impl<'a> From<&'a Summary> for Figures<'a> {
    fn from(s: &'a Summary) -> Self {
        Figures {
            scenario: &s.scenario.name,
            operations: &s.operations,
            throughput: s.totals.throughput,
            errors: s.errors,
            dropped: s.totals.dropped,
            cpu_us_per_request: s.generator.cpu_us_per_request,
            thresholds: &s.thresholds,
            running: None,
        }
    }
}
