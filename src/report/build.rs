//! From what a run measured to its [`Summary`]: the collector's totals (per-operation shards),
//! the plan, and the facts of the run the driver knows (target, revision, times, CPU). The
//! driver only orchestrates; everything a summary says is decided here, so a finished run can
//! be summarized again from the same inputs.

use std::time::Duration;

use super::summary::{
    self, Generator, Latency, LoadInfo, Operation, ProfileInfo, ScenarioInfo, StageInfo, Summary,
    TargetInfo, Totals, WarmupOperation,
};
use super::verdict;
use crate::metrics::outcome::Class;
use crate::metrics::recorder::{Recorder, SessionCounts};
use crate::scenario::plan::{Arrival, Model, OP_INITIALIZE};
use crate::scenario::{Plan, Sessions};

/// What the driver knows about a run beyond its measurements.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// The scenario file as given on the command line.
    pub scenario_file: String,
    /// UTC, RFC 3339.
    pub started_at: String,
    pub target: TargetInfo,
    pub workers: usize,
    /// From the end of warm-up to the end of the run.
    pub measured: Duration,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
    /// CPU time of the worker threads, where the platform reports it.
    pub cpu: Option<Duration>,
    /// The process's peak resident memory, where the platform reports it.
    pub peak_rss: Option<u64>,
    /// The workers ran the event loop: its hand-overs to tasks, summed.
    pub handovers: Option<u64>,
    /// Things the driver noticed (an incomplete interval log, …).
    pub notes: Vec<String>,
    /// A start agreed with other generators, and how late this run was.
    pub start: Option<summary::StartInfo>,
    /// The target's processes as the run watched them.
    pub target_processes: Vec<crate::metrics::target_procs::TargetProcess>,
    /// The target's memory against the sessions opened, when its processes were watched.
    pub session_fit: Option<crate::metrics::target_procs::SessionFit>,
}

/// The summary of a run. `ops` names the operations (index [`OP_INITIALIZE`] is the session
/// opening), `totals` is the collector's merge of every interval.
pub fn summarize(plan: &Plan, ops: &[String], totals: &Recorder, facts: RunFacts) -> Summary {
    let seconds = facts.measured.as_secs_f64();
    let operations: Vec<Operation> = ops
        .iter()
        .zip(&totals.ops)
        .map(|(name, s)| Operation::from_shard(name, s, seconds))
        .collect();
    let warmup = ops
        .iter()
        .zip(&totals.warmup)
        .filter(|(_, w)| w.0 > 0)
        .map(|(name, w)| WarmupOperation {
            name: name.clone(),
            started: w.0,
            outcomes: (&w.1).into(),
        })
        .collect();
    // The workload's totals leave the session opening out: it has its own row and line.
    let workload = summary::workload(&operations);
    let mut work_totals = summary::totals(&workload, totals.dropped, seconds);
    work_totals.latency = workload_latency(totals, ops);
    let opening = summary::totals(&[&operations[OP_INITIALIZE]], 0, seconds);
    let all_started: u64 = totals.ops.iter().map(|o| o.started).sum::<u64>()
        + totals.warmup.iter().map(|w| w.0).sum::<u64>();
    let mut notes = notes(plan, &operations, &work_totals, &opening, &totals.sessions);
    notes.extend(gateway_refusals(&operations, totals.retry_after.as_ref()));
    notes.extend(assertions(ops, &operations, totals));
    notes.extend(facts.notes);
    let mut summary = Summary {
        schema_version: summary::SCHEMA_VERSION,
        mcpbench_version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: ScenarioInfo {
            name: plan.name.clone(),
            file: facts.scenario_file,
            description: plan.description.clone(),
        },
        started_at: facts.started_at,
        target: facts.target,
        load: load_info(plan, facts.workers),
        measured_seconds: (seconds * 1000.0).round() / 1000.0,
        interrupted: facts.interrupted,
        totals: work_totals,
        session_opening: opening,
        errors: summary::Errors::of(&workload, &[&operations[OP_INITIALIZE]]),
        operations,
        tenants: tenant_rows(plan, totals, seconds),
        warmup,
        sessions: totals.sessions.into(),
        generator: Generator {
            workers: facts.workers,
            cpu_seconds: facts.cpu.map(|c| c.as_secs_f64()),
            cpu_us_per_request: facts
                .cpu
                .filter(|_| all_started > 0)
                .map(|c| (c.as_secs_f64() * 1e6 / all_started as f64 * 100.0).round() / 100.0),
            peak_rss_bytes: facts.peak_rss,
            engine: Some(engine_name(facts.handovers).into()),
            handovers: facts.handovers,
            lateness: totals
                .lateness
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(Latency::from_hist),
        },
        target_processes: facts
            .target_processes
            .into_iter()
            .map(|p| p.per_request(all_started))
            .collect(),
        target_memory_per_session: facts.session_fit.as_ref().map(summary::SessionMemory::of),
        notes,
        thresholds: Vec::new(),
        budgets: plan.budgets.clone(),
        shard: (!plan.load.shard.is_whole()).then_some(summary::ShardInfo {
            index: plan.load.shard.index,
            count: plan.load.shard.count,
        }),
        start: facts.start,
        shards: Vec::new(),
    };
    summary.thresholds = verdict::evaluate(&plan.thresholds.checks, &summary);
    if let Some(note) = generator_ceiling(&summary) {
        summary.notes.push(note);
    }
    summary
}

/// One row per tenant of the target's credentials, in their order.
fn tenant_rows(plan: &Plan, totals: &Recorder, seconds: f64) -> Vec<Operation> {
    let names = match &plan.target {
        crate::scenario::Target::Remote(r) => r.tenants(),
        crate::scenario::Target::Embedded(_) => Vec::new(),
    };
    let none = crate::metrics::recorder::OpShard::default();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            Operation::from_shard(name, totals.tenants.get(i).unwrap_or(&none), seconds)
        })
        .collect()
}

/// Answers that broke the scenario's `expect` rules, requests that hung, and answers of a
/// content type MCP does not use, per operation, with the first example of each.
fn assertions(names: &[String], ops: &[Operation], totals: &Recorder) -> Vec<String> {
    use crate::metrics::outcome::{Outcome, ProtocolKind};
    type Count = fn(&Operation) -> u64;
    let kinds: [(Outcome, Count, &str); 4] = [
        (
            Outcome::Assertion,
            |o| o.outcomes.assertion,
            "answers of {op} broke its expect rules (assertion)",
        ),
        (
            Outcome::Divergence,
            |o| o.outcomes.divergence,
            "answers of {op} diverged (the same call answered differently)",
        ),
        (Outcome::Hang, |o| o.outcomes.hang, "requests of {op} hung"),
        (
            Outcome::Protocol(ProtocolKind::BadContentType),
            |o| {
                o.outcomes
                    .protocol
                    .get("bad_content_type")
                    .copied()
                    .unwrap_or(0)
            },
            "answers to {op} were neither JSON nor an SSE stream (protocol(bad_content_type))",
        ),
    ];
    let mut out = Vec::new();
    for (outcome, count, what) in kinds {
        for (i, o) in ops.iter().enumerate().filter(|(_, o)| count(o) > 0) {
            let example = totals
                .failures
                .iter()
                .find(|f| f.op == i && f.outcome == outcome)
                .and_then(|f| f.message.as_deref())
                .map_or_else(String::new, |m| format!(", e.g. {m}"));
            let what = what.replace("{op}", names.get(i).map_or("?", String::as_str));
            out.push(format!("{} {what}{example}", count(o)));
        }
    }
    out
}

/// What a gateway's refusals mean: 401 (credentials), 403 (policy), 429 (its rate limit, with
/// the `Retry-After` it advised).
fn gateway_refusals(
    ops: &[Operation],
    retry_after: Option<&hdrhistogram::Histogram<u64>>,
) -> Vec<String> {
    let count = |status: &str| -> u64 {
        ops.iter()
            .map(|o| o.outcomes.http.get(status).copied().unwrap_or(0))
            .sum()
    };
    let mut n = Vec::new();
    let auth = count("401");
    if auth > 0 {
        n.push(format!(
            "{auth} responses were 401 (auth): credentials missing, wrong or expired"
        ));
    }
    let forbidden = count("403");
    if forbidden > 0 {
        n.push(format!("{forbidden} responses were 403 (forbidden): a policy denied the call (is the tool in this tenant's set?)"));
    }
    let limited = count("429");
    if limited > 0 {
        let advice = retry_after
            .filter(|h| !h.is_empty())
            .map_or_else(String::new, |h| {
                let l = Latency::from_hist(h);
                format!(
                    ", advising Retry-After p50 {} max {}",
                    super::text::ms(l.p50_ms),
                    super::text::ms(l.max_ms)
                )
            });
        n.push(format!("{limited} responses were 429 (rate_limited){advice}: the target admits less than this load, so its limit, not its latency, shapes these results"));
    }
    n
}

/// The generator itself near its ceiling (its threads busy most of the run, or open-loop
/// arrivals released late): then every other number may describe mcpbench, not the target.
fn generator_ceiling(s: &Summary) -> Option<String> {
    let g = &s.generator;
    let busy = g
        .cpu_seconds
        .map(|c| c / (g.workers.max(1) as f64 * s.load.duration_seconds.max(1e-3)));
    let late = g.lateness.as_ref().map(|l| l.p99_ms);
    match (busy, late) {
        (Some(b), _) if b >= 0.85 => Some(format!(
            "the generator's {} worker threads were busy {:.0} % of the run: it is near its own ceiling, and the latencies may include its own queueing — add workers (--workers) or machines",
            g.workers,
            b * 100.0
        )),
        (_, Some(p99)) if p99 >= 1.0 => Some(format!(
            "the generator released open-loop arrivals late (lateness p99 {}): it is near its own ceiling at this rate",
            super::text::ms(p99)
        )),
        _ => None,
    }
}

/// A summary of a run still going, `measured` into its measured window: what
/// `abort_on_fail` judges once per interval. The target and times are left blank.
pub fn provisional(plan: &Plan, ops: &[String], totals: &Recorder, measured: Duration) -> Summary {
    let facts = RunFacts {
        scenario_file: String::new(),
        started_at: String::new(),
        target: TargetInfo {
            kind: String::new(),
            transport: String::new(),
            http: String::new(),
            url: String::new(),
            headers: Vec::new(),
            protocol_offered: String::new(),
            protocol_negotiated: String::new(),
        },
        workers: 0,
        measured,
        interrupted: false,
        cpu: None,
        peak_rss: None,
        handovers: None,
        target_processes: Vec::new(),
        session_fit: None,
        notes: Vec::new(),
        start: None,
    };
    summarize(plan, ops, totals, facts)
}

/// Latency of ok responses over the workload's operations (the session opening left out).
fn workload_latency(totals: &Recorder, ops: &[String]) -> Option<Latency> {
    let mut all = crate::metrics::recorder::new_histogram();
    for ((i, s), name) in totals.ops.iter().enumerate().zip(ops) {
        if let (true, Some(h)) = (
            crate::scenario::plan::is_workload_op(i, name),
            s.hist(Class::Ok),
        ) {
            let _ = all.add(h);
        }
    }
    (!all.is_empty()).then(|| Latency::from_hist(&all))
}

/// The load as the plan set it.
pub fn load_info(plan: &Plan, workers: usize) -> LoadInfo {
    let l = &plan.load;
    let (model, arrival, release, profile) = match &l.model {
        Model::Closed { vus } => ("closed", None, None, vus),
        Model::Open {
            rate,
            arrival,
            release,
        } => (
            "open",
            Some(match arrival {
                Arrival::Poisson => "poisson".to_string(),
                Arrival::Uniform => "uniform".to_string(),
            }),
            Some(release.as_secs_f64()),
            rate,
        ),
    };
    LoadInfo {
        model: model.into(),
        concurrency: l.concurrency,
        arrival,
        release_interval_seconds: release,
        open_rate: l.open_rate,
        pattern: match l.pattern {
            crate::scenario::Pattern::Steady => None,
            crate::scenario::Pattern::FirstCall => Some("first_call".into()),
            crate::scenario::Pattern::ColdStart => Some("cold_start".into()),
        },
        replay: plan.replay.as_ref().map(|r| super::summary::ReplayInfo {
            trace: r.trace.clone(),
            speed: r.speed,
            looped: r.period.is_some(),
            sessions: r.scripts.len(),
        }),
        profile: ProfileInfo {
            start: profile.start,
            stages: profile
                .stages
                .iter()
                .map(|(d, t)| StageInfo {
                    duration_seconds: d.as_secs_f64(),
                    target: *t,
                })
                .collect(),
        },
        duration_seconds: l.duration.as_secs_f64(),
        requests: l.requests,
        warmup_seconds: l.warmup.as_secs_f64(),
        timeout_seconds: l.timeout.as_secs_f64(),
        think_seconds: l.think.map(|(a, b)| [a.as_secs_f64(), b.as_secs_f64()]),
        sessions: match l.sessions {
            Sessions::PerVu => "per-vu",
            Sessions::PerRequest => "per-request",
            Sessions::Shared => "shared",
        }
        .into(),
        workers,
    }
}

/// Things in the numbers a reader should not miss.
fn notes(
    plan: &Plan,
    ops: &[Operation],
    totals: &Totals,
    opening: &Totals,
    sessions: &SessionCounts,
) -> Vec<String> {
    let mut n = Vec::new();
    if !plan.load.shard.is_whole() && plan.thresholds.abort_on_fail {
        n.push(
            "abort_on_fail does not apply to a shard: its share cannot tell whether the whole \
             breaches; `mcpbench merge` judges the thresholds"
                .into(),
        );
    }
    if totals.unaccounted != 0 || opening.unaccounted != 0 {
        n.push(format!(
            "{} requests are unaccounted for (started but never ended): this is a bug in mcpbench",
            totals.unaccounted + opening.unaccounted
        ));
    }
    let local: u64 = ops.iter().flat_map(|o| o.outcomes.local.values()).sum();
    if local > 0 {
        n.push(format!(
            "{local} requests never reached the target: this machine ran out of file descriptors (local(fd_limit): raise `ulimit -n`), ephemeral ports (local(no_ports): ports held in TIME_WAIT by connection churn, or too many connections) or processes (local(process_limit)); these are limits of the test, not failures of the target"
        ));
    }
    let opening_name = &ops[OP_INITIALIZE].name;
    if opening.failed > 0 {
        n.push(format!(
            "{} of {} session openings ({opening_name}) failed: virtual users without a session retry with back-off and send no workload requests meanwhile; see the {opening_name} row",
            opening.failed, opening.started
        ));
    }
    if plan.load.sessions == Sessions::PerRequest {
        let open_loop = matches!(plan.load.model, Model::Open { .. });
        n.push(format!(
            "per-request sessions: every workload request opened a session of its own ({opening_name}, measured in its own row){}",
            if open_loop {
                "; open-loop latency runs from the intended start, so it includes the opening"
            } else {
                "; the workload latencies start after it"
            }
        ));
    }
    for op in ops {
        if let Some(l) = &op.latency
            && l.count >= 20
            && l.p50_ms >= 38.0
            && l.p50_ms <= 46.0
            && l.p90_ms <= 48.0
        {
            n.push(format!(
                "{}: latency clusters at ~40 ms, the signature of Nagle's algorithm meeting delayed ACKs; check that the server sets TCP_NODELAY",
                op.name
            ));
        }
        if op.outcomes.protocol.contains_key("wrong_id") {
            n.push(format!(
                "{}: responses carried the wrong JSON-RPC id (a proxy rewriting ids?)",
                op.name
            ));
        }
        // Timeouts that all end at the limit: the target did not answer at all, rather than
        // slowly (a hang, a lost request, a full queue).
        let limit_ms = plan.load.timeout.as_secs_f64() * 1000.0;
        if let Some(t) = op.latency_by_outcome.get("timeout")
            && t.count >= 3
            && t.p50_ms >= limit_ms * 0.95
        {
            n.push(format!(
                "{}: {} requests timed out, clustered at the {} limit (p50 of the timed-out {}): they got no answer at all, not a slow one — a hang, a lost request or a full queue",
                op.name,
                t.count,
                mcpbench_knobs::format_duration(plan.load.timeout),
                super::text::ms(t.p50_ms)
            ));
        }
    }
    if sessions.lingering_streams > 0 {
        n.push(format!(
            "{} SSE responses were not ended by the server after the response; those connections were dropped instead of reused",
            sessions.lingering_streams
        ));
    }
    if sessions.unmatched_responses > 0 {
        n.push(format!(
            "{} responses carried ids never sent on their connection (wrong ids, or a gateway copying other sessions' traffic); counted, not matched to any request",
            sessions.unmatched_responses
        ));
    }
    if sessions.duplicate_responses > 0 {
        n.push(format!(
            "{} responses answered a request a second time (a server or gateway retrying, or replaying a stream); the first answer counted, the others only here",
            sessions.duplicate_responses
        ));
    }
    if sessions.late_responses > 0 {
        n.push(format!(
            "{} responses arrived after their request had timed out (counted as timeout); the server went on working on requests the client had given up on",
            sessions.late_responses
        ));
    }
    if sessions.unsupported_server_requests > 0 {
        n.push(format!(
            "{} of {} requests from the server asked for what a load generator does not do (sampling, elicitation, roots…); each was answered -32601 Method not found",
            sessions.unsupported_server_requests, sessions.server_requests
        ));
    }
    n
}

/// The engine's name in the summary: the event loop when the workers ran it.
pub fn engine_name(handovers: Option<u64>) -> &'static str {
    if handovers.is_some() {
        "event_loop"
    } else {
        "tasks"
    }
}
