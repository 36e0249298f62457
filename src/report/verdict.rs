//! The scenario's thresholds evaluated on a summary: each condition with the value measured
//! and whether it held. The same function serves the end of a run and `abort_on_fail` during
//! it, so a run stopped early and a finished one are judged alike.

use super::summary::{Errors, Latency, Operation, Summary, ThresholdResult};
use crate::scenario::thresholds::{Metric, Threshold};

/// Evaluates every threshold on `s`.
pub fn evaluate(checks: &[Threshold], s: &Summary) -> Vec<ThresholdResult> {
    checks
        .iter()
        .map(|t| {
            let value = measured(t, s);
            ThresholdResult {
                name: t.name(),
                condition: t.written.clone(),
                value: value.map(|v| (v * 1000.0).round() / 1000.0),
                unit: t.metric.unit().to_string(),
                passed: value.is_some_and(|v| t.holds(v)),
                unjudged: value.is_none().then(|| unmeasured(t, s)).flatten(),
            }
        })
        .collect()
}

/// The value a threshold is about, in its metric's unit; `None` when there is nothing to
/// measure (an operation that never answered ok, for a latency).
fn measured(t: &Threshold, s: &Summary) -> Option<f64> {
    // The run's error rates are the headline's (session openings in); an operation's, its own.
    let (latency, throughput, errors) = match &t.operation {
        None => (s.totals.latency.as_ref(), s.totals.throughput, s.errors),
        Some(name) => {
            let op: &Operation = s.operations.iter().find(|o| &o.name == name)?;
            (op.latency.as_ref(), op.throughput, Errors::of(&[op], &[]))
        }
    };
    let pick = |l: &Latency| match t.metric {
        Metric::P50 => l.p50_ms,
        Metric::P90 => l.p90_ms,
        Metric::P95 => l.p95_ms,
        Metric::P99 => l.p99_ms,
        Metric::P999 => l.p999_ms,
        Metric::Max => l.max_ms,
        _ => l.mean_ms,
    };
    let target = &s.target_processes;
    match t.metric {
        Metric::Throughput => Some(throughput),
        Metric::ErrorRate => Some(errors.rate),
        Metric::ToolErrorRate => Some(errors.tool),
        Metric::ProtocolErrorRate => Some(errors.protocol),
        Metric::TargetCpu if !target.is_empty() => {
            Some(target.iter().filter_map(|p| p.cpu_us_per_request).sum())
        }
        Metric::TargetMemoryGrowth if !target.is_empty() => {
            Some(target.iter().map(|p| p.rss_growth_bytes()).sum::<i64>() as f64 / 1_048_576.0)
        }
        Metric::TargetMemoryPerSession => s
            .target_memory_per_session
            .as_ref()
            .and_then(|m| m.bytes_per_session),
        Metric::TargetCpu | Metric::TargetMemoryGrowth => None,
        _ => latency.map(pick),
    }
}

/// Why a threshold about the target has no value, when that is known.
fn unmeasured(t: &Threshold, s: &Summary) -> Option<String> {
    if !t.metric.is_target() {
        return None;
    }
    let watched = "no target process was watched (target.pid, --target-pid, a stdio target)";
    match (t.metric, &s.target_memory_per_session) {
        (Metric::TargetMemoryPerSession, Some(m)) => m.unmeasured.clone(),
        _ if s.target_processes.is_empty() => Some(watched.into()),
        _ => None,
    }
}
