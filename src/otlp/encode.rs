//! A live view as one OTLP `ExportMetricsServiceRequest`: pure, so what a collector receives
//! is tested without a network.
//!
//! Every counter is cumulative from the run's start (a restarted series — the next step of a
//! find-max search — has a new start time, which is how OTLP marks a reset), every gauge is
//! the last interval's value. Requests count the measured window, as `summary.json` does.

use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::metrics::outcome::Class;
use crate::report::live::{LATENCY_BOUNDS_US, Live};
use crate::report::summary::Operation;

/// Which run the figures are of: the resource every data point belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The scenario's name.
    pub scenario: String,
    /// The run directory's name: unique per run (and per shard of a split run).
    pub id: String,
    /// The start of the load (the agreed start for a shard): time zero of every interval.
    pub started_at: SystemTime,
    /// `--shard I/N`: (I, N).
    pub shard: Option<(usize, usize)>,
    /// What this run is part of (a find-max step, an A/B slice).
    pub label: Option<String>,
}

/// Metric names, as sent (a Prometheus backend shows `mcpbench_requests_started_total`, …).
pub mod names {
    pub const STARTED: &str = "mcpbench.requests.started";
    pub const ENDED: &str = "mcpbench.requests.ended";
    pub const DROPPED: &str = "mcpbench.requests.dropped";
    pub const IN_FLIGHT: &str = "mcpbench.requests.in_flight";
    pub const DURATION: &str = "mcpbench.request.duration";
    pub const CPU: &str = "mcpbench.generator.cpu.time";
    pub const UTILIZATION: &str = "mcpbench.generator.cpu.utilization";
    pub const LATENESS: &str = "mcpbench.generator.lateness.p99";
    pub const TARGET_CPU: &str = "mcpbench.target.cpu.time";
    pub const TARGET_RSS: &str = "mcpbench.target.memory.usage";
    pub const TARGET_FDS: &str = "mcpbench.target.file_descriptor.count";
    pub const TARGET_THREADS: &str = "mcpbench.target.thread.count";
    pub const TARGET_PROCESSES: &str = "mcpbench.target.process.count";
}

/// Attribute keys of data points and of the resource.
pub mod keys {
    /// The operation as `summary.json` names it: `initialize`, `tools/list`,
    /// `tools/call:search-contacts`.
    pub const OPERATION: &str = "mcpbench.operation";
    /// The MCP method and tool, as the OpenTelemetry MCP conventions name them.
    pub const METHOD: &str = "mcp.method.name";
    pub const TOOL: &str = "gen_ai.tool.name";
    /// The outcome class: `ok`, `tool_error`, `rpc_error`, `http`, `timeout`, …
    pub const OUTCOME: &str = "mcpbench.outcome";
    pub const SERVICE: &str = "service.name";
    pub const VERSION: &str = "service.version";
    pub const INSTANCE: &str = "service.instance.id";
    pub const SCENARIO: &str = "mcpbench.scenario";
    pub const RUN_ID: &str = "mcpbench.run.id";
    pub const STARTED_AT: &str = "mcpbench.run.started_at";
    pub const LABEL: &str = "mcpbench.run.label";
    pub const SHARD_INDEX: &str = "mcpbench.shard.index";
    pub const SHARD_COUNT: &str = "mcpbench.shard.count";
}

/// The OTLP request carrying `live`'s figures for `run`.
pub fn request(run: &RunInfo, live: &Live) -> ExportMetricsServiceRequest {
    let at = Stamps {
        start: nanos(run.started_at),
        now: nanos(run.started_at + live.elapsed()),
    };
    let mut metrics = operation_metrics(live, at);
    generator_metrics(live, at, &mut metrics);
    target_metrics(live, at, &mut metrics);
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource(run),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "mcpbench".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The times every data point of one request carries: the run's start and now.
#[derive(Debug, Clone, Copy)]
struct Stamps {
    start: u64,
    now: u64,
}

impl Stamps {
    /// A data point of `value`, cumulative from the run's start.
    fn point(self, attributes: Vec<KeyValue>, value: number_data_point::Value) -> NumberDataPoint {
        NumberDataPoint {
            attributes,
            start_time_unix_nano: self.start,
            time_unix_nano: self.now,
            value: Some(value),
            ..Default::default()
        }
    }
}

/// A count as a data point's value (`i64::MAX` at most).
fn int(n: u64) -> number_data_point::Value {
    number_data_point::Value::AsInt(n.min(i64::MAX as u64) as i64)
}

/// A duration as a data point's value, in seconds.
fn secs(d: Duration) -> number_data_point::Value {
    number_data_point::Value::AsDouble(d.as_secs_f64())
}

/// Each operation: its index, its attributes and its figures.
fn ops(live: &Live) -> impl Iterator<Item = (usize, Vec<KeyValue>, &Operation)> {
    live.header
        .ops
        .iter()
        .enumerate()
        .zip(&live.ops)
        .map(|((i, name), o)| (i, op_attributes(name), o))
}

/// Per operation: requests started, requests ended by outcome class, latency of ok responses.
fn operation_metrics(live: &Live, at: Stamps) -> Vec<Metric> {
    let started = sum(
        names::STARTED,
        "Requests started in the measured window, per operation.",
        "{request}",
        ops(live)
            .map(|(_, a, o)| at.point(a, int(o.started)))
            .collect(),
    );
    let mut ended = Vec::new();
    for (i, a, _) in ops(live) {
        let by_class = live.classes.get(i).copied().unwrap_or_default();
        for c in Class::ALL {
            let n = by_class[c as usize];
            // ok always (the series exists from the first push); other classes once seen.
            if n > 0 || c == Class::Ok {
                let mut a = a.clone();
                a.push(kv(keys::OUTCOME, c.name()));
                ended.push(at.point(a, int(n)));
            }
        }
    }
    let ended = sum(
        names::ENDED,
        "Requests ended in the measured window, per operation and outcome class.",
        "{request}",
        ended,
    );
    vec![started, ended, duration(live, at)]
}

/// The latency histogram of ok responses, per operation (operations without one left out).
fn duration(live: &Live, at: Stamps) -> Metric {
    Metric {
        name: names::DURATION.into(),
        description: "Latency of ok responses in the measured window, per operation (from the \
                      intended start in an open loop)."
            .into(),
        unit: "s".into(),
        data: Some(metric::Data::Histogram(Histogram {
            data_points: ops(live)
                .filter_map(|(i, attributes, _)| {
                    let b = live.buckets.get(i).filter(|b| b.count > 0)?;
                    Some(HistogramDataPoint {
                        attributes,
                        start_time_unix_nano: at.start,
                        time_unix_nano: at.now,
                        count: b.count,
                        sum: Some(b.sum_us / 1e6),
                        bucket_counts: b.counts.clone(),
                        explicit_bounds: LATENCY_BOUNDS_US
                            .iter()
                            .map(|&b| b as f64 / 1e6)
                            .collect(),
                        min: Some(b.min_us as f64 / 1e6),
                        max: Some(b.max_us as f64 / 1e6),
                        ..Default::default()
                    })
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        })),
        ..Default::default()
    }
}

/// The generator's own figures: dropped arrivals (open loop), requests in flight, CPU time,
/// utilization, lateness (open loop); each once it has a value.
fn generator_metrics(live: &Live, at: Stamps, metrics: &mut Vec<Metric>) {
    let open = live.header.load.model == "open";
    if open {
        metrics.push(sum(
            names::DROPPED,
            "Open loop: arrivals not sent because max_in_flight requests were in flight.",
            "{request}",
            vec![at.point(Vec::new(), int(live.dropped))],
        ));
    }
    let last = live.history.back();
    metrics.push(gauge(
        names::IN_FLIGHT,
        "Requests in flight at the end of the last interval.",
        "{request}",
        vec![at.point(Vec::new(), int(last.map_or(0, |s| s.in_flight)))],
    ));
    if live.cpu > Duration::ZERO {
        metrics.push(sum(
            names::CPU,
            "CPU time of the generator's worker threads.",
            "s",
            vec![at.point(Vec::new(), secs(live.cpu))],
        ));
    }
    if let Some(u) = live.saturation() {
        metrics.push(gauge(
            names::UTILIZATION,
            "How busy the generator's worker threads were in the last interval (1: at its own \
             ceiling, the figures measure the generator).",
            "1",
            vec![at.point(Vec::new(), number_data_point::Value::AsDouble(u))],
        ));
    }
    if open && let Some(s) = last {
        metrics.push(gauge(
            names::LATENESS,
            "Open loop: p99 of how late the generator released arrivals in the last interval.",
            "s",
            vec![at.point(Vec::new(), secs(Duration::from_micros(s.late_p99_us)))],
        ));
    }
}

/// The target's watched processes in the last interval, when there are any: CPU time, memory,
/// descriptors, threads, processes.
fn target_metrics(live: &Live, at: Stamps, metrics: &mut Vec<Metric>) {
    let Some(t) = live.history.back().and_then(|s| s.target) else {
        return;
    };
    metrics.push(sum(
        names::TARGET_CPU,
        "CPU time of the target's watched processes.",
        "s",
        vec![at.point(Vec::new(), secs(live.target_cpu))],
    ));
    for (name, description, unit, n) in [
        (
            names::TARGET_RSS,
            "Resident memory of the target's watched processes.",
            "By",
            t.rss_bytes,
        ),
        (
            names::TARGET_FDS,
            "Open file descriptors of the target's watched processes.",
            "{file_descriptor}",
            t.fds,
        ),
        (
            names::TARGET_THREADS,
            "Threads of the target's watched processes.",
            "{thread}",
            t.threads,
        ),
        (
            names::TARGET_PROCESSES,
            "The target's watched processes alive.",
            "{process}",
            t.processes,
        ),
    ] {
        metrics.push(gauge(
            name,
            description,
            unit,
            vec![at.point(Vec::new(), int(n))],
        ));
    }
}

/// The resource: what produced the figures (service.name = mcpbench) and which run they are.
fn resource(run: &RunInfo) -> Vec<KeyValue> {
    let mut a = vec![
        kv(keys::SERVICE, "mcpbench"),
        kv(keys::VERSION, env!("CARGO_PKG_VERSION")),
        kv(keys::INSTANCE, &run.id),
        kv(keys::SCENARIO, &run.scenario),
        kv(keys::RUN_ID, &run.id),
        kv(keys::STARTED_AT, &rfc3339(run.started_at)),
    ];
    if let Some(l) = &run.label {
        a.push(kv(keys::LABEL, l));
    }
    if let Some((index, count)) = run.shard {
        a.push(int_kv(keys::SHARD_INDEX, index as i64));
        a.push(int_kv(keys::SHARD_COUNT, count as i64));
    }
    a
}

/// An operation's attributes: its name, and the MCP method and tool it is made of.
fn op_attributes(name: &str) -> Vec<KeyValue> {
    let (method, tool) = match name.split_once(':') {
        Some((m, t)) => (m, Some(t)),
        None => (name, None),
    };
    let mut a = vec![kv(keys::OPERATION, name), kv(keys::METHOD, method)];
    if let Some(t) = tool {
        a.push(kv(keys::TOOL, t));
    }
    a
}

fn sum(name: &str, description: &str, unit: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        description: description.into(),
        unit: unit.into(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Default::default()
    }
}

fn gauge(name: &str, description: &str, unit: &str, points: Vec<NumberDataPoint>) -> Metric {
    // A gauge has no start time.
    let data_points = points
        .into_iter()
        .map(|p| NumberDataPoint {
            start_time_unix_nano: 0,
            ..p
        })
        .collect();
    Metric {
        name: name.into(),
        description: description.into(),
        unit: unit.into(),
        data: Some(metric::Data::Gauge(Gauge { data_points })),
        ..Default::default()
    }
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn int_kv(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..Default::default()
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::collector::{IntervalSnapshot, OpInterval};
    use crate::metrics::grid::Phase;
    use crate::metrics::outcome::Outcome;
    use crate::metrics::recorder::{self, Recorder};
    use crate::metrics::target_procs::TargetSample;
    use crate::report::live::{Buckets, RunHeader};
    use crate::report::summary::{LoadInfo, ProfileInfo, TargetInfo};

    const OPS: [&str; 2] = ["initialize", "tools/call:echo"];

    fn header(model: &str) -> RunHeader {
        RunHeader {
            scenario: "otlp-unit".into(),
            target: TargetInfo {
                kind: "embedded".into(),
                transport: "streamable-http".into(),
                http: "1.1".into(),
                url: "http://127.0.0.1:1/mcp".into(),
                headers: Vec::new(),
                protocol_offered: "2025-11-25".into(),
                protocol_negotiated: "2025-11-25".into(),
            },
            load: LoadInfo {
                model: model.into(),
                concurrency: 4,
                arrival: None,
                release_interval_seconds: None,
                open_rate: None,
                pattern: None,
                replay: None,
                profile: ProfileInfo {
                    start: 4.0,
                    stages: Vec::new(),
                },
                duration_seconds: 2.0,
                requests: None,
                warmup_seconds: 0.0,
                timeout_seconds: 5.0,
                think_seconds: None,
                sessions: "per-vu".into(),
                workers: 1,
            },
            ops: OPS.iter().map(|s| s.to_string()).collect(),
            interval: Duration::from_secs(1),
        }
    }

    /// Two intervals: echo answers 100 ok (10…1000 µs) and 3 timeouts per interval; the
    /// target is watched.
    fn live(model: &str) -> Live {
        let mut live = Live::new(header(model), 1);
        let mut totals = Recorder::new(OPS.len());
        for k in 0..2u64 {
            let mut interval = Recorder::new(OPS.len());
            for i in 0..103u64 {
                interval.started(1, recorder::Phase::Measured);
                let outcome = if i < 100 {
                    Outcome::Ok
                } else {
                    Outcome::Timeout
                };
                let latency = Duration::from_micros(10 * (i + 1));
                interval.record(1, recorder::Phase::Measured, outcome, latency);
            }
            totals.merge(&interval);
            let snap = IntervalSnapshot {
                index: k,
                start: Duration::from_secs(k),
                end: Duration::from_secs(k + 1),
                phase: Phase::Measured,
                in_flight: 7,
                late_p99_us: 1500,
                cpu: Duration::from_millis(250),
                ops: vec![OpInterval::default(); OPS.len()],
                target: Some(TargetSample {
                    cpu: Duration::from_millis(100),
                    rss_bytes: 64 << 20,
                    fds: 12,
                    threads: 3,
                    processes: 1,
                }),
                ..Default::default()
            };
            live.update(&snap, &totals);
        }
        live
    }

    fn run() -> RunInfo {
        RunInfo {
            scenario: "otlp-unit".into(),
            id: "20260101T000000Z-otlp-unit-shard-1-of-2".into(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
            shard: Some((1, 2)),
            label: None,
        }
    }

    fn find<'a>(r: &'a ExportMetricsServiceRequest, name: &str) -> Option<&'a Metric> {
        r.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .find(|m| m.name == name)
    }

    fn attr<'a>(a: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
        a.iter()
            .find(|k| k.key == key)
            .and_then(|k| k.value.as_ref()?.value.as_ref())
    }

    fn int_of(p: &NumberDataPoint) -> i64 {
        match p.value {
            Some(number_data_point::Value::AsInt(n)) => n,
            ref v => panic!("not an integer: {v:?}"),
        }
    }

    #[test]
    fn the_resource_names_the_run_and_its_shard() {
        let r = request(&run(), &live("closed"));
        let a = &r.resource_metrics[0].resource.as_ref().unwrap().attributes;
        let s = |k| match attr(a, k) {
            Some(any_value::Value::StringValue(s)) => s.clone(),
            v => panic!("{k}: {v:?}"),
        };
        assert_eq!(s(keys::SERVICE), "mcpbench");
        assert_eq!(s(keys::SCENARIO), "otlp-unit");
        assert_eq!(s(keys::RUN_ID), run().id);
        assert_eq!(s(keys::STARTED_AT), "2026-01-01T00:00:00Z");
        assert_eq!(
            attr(a, keys::SHARD_INDEX),
            Some(&any_value::Value::IntValue(1))
        );
        assert_eq!(
            attr(a, keys::SHARD_COUNT),
            Some(&any_value::Value::IntValue(2))
        );
    }

    #[test]
    fn counters_are_cumulative_per_operation_and_outcome() {
        let r = request(&run(), &live("closed"));
        let Some(metric::Data::Sum(started)) = &find(&r, names::STARTED).unwrap().data else {
            panic!("started is a sum")
        };
        assert!(started.is_monotonic);
        assert_eq!(
            started.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        let echo = started
            .data_points
            .iter()
            .find(|p| {
                attr(&p.attributes, keys::OPERATION)
                    == Some(&any_value::Value::StringValue("tools/call:echo".into()))
            })
            .unwrap();
        assert_eq!(int_of(echo), 206);
        assert_eq!(
            attr(&echo.attributes, keys::TOOL),
            Some(&any_value::Value::StringValue("echo".into()))
        );
        // Two intervals after the start, on the wall clock.
        assert_eq!(
            echo.time_unix_nano - echo.start_time_unix_nano,
            2_000_000_000
        );
        let Some(metric::Data::Sum(ended)) = &find(&r, names::ENDED).unwrap().data else {
            panic!("ended is a sum")
        };
        let count = |op: &str, outcome: &str| {
            ended
                .data_points
                .iter()
                .find(|p| {
                    attr(&p.attributes, keys::OPERATION)
                        == Some(&any_value::Value::StringValue(op.into()))
                        && attr(&p.attributes, keys::OUTCOME)
                            == Some(&any_value::Value::StringValue(outcome.into()))
                })
                .map(int_of)
        };
        assert_eq!(count("tools/call:echo", "ok"), Some(200));
        assert_eq!(count("tools/call:echo", "timeout"), Some(6));
        // ok from the start, other classes once they occur.
        assert_eq!(count("initialize", "ok"), Some(0));
        assert_eq!(count("initialize", "timeout"), None);
    }

    #[test]
    fn the_latency_histogram_holds_every_ok_response_in_fixed_bounds() {
        let r = request(&run(), &live("closed"));
        let Some(metric::Data::Histogram(h)) = &find(&r, names::DURATION).unwrap().data else {
            panic!("duration is a histogram")
        };
        assert_eq!(
            h.data_points.len(),
            1,
            "no point for an operation without ok"
        );
        let p = &h.data_points[0];
        assert_eq!(p.count, 200);
        assert_eq!(p.bucket_counts.iter().sum::<u64>(), 200);
        assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1);
        // 10, 20 ≤ 25 µs; 30…50 ≤ 50 µs; …; 1000 µs ≤ 1 ms: twice each interval's values.
        assert_eq!(&p.bucket_counts[..6], &[4, 6, 10, 30, 50, 100]);
        assert_eq!(p.min, Some(10e-6));
        assert_eq!(p.max, Some(1000e-6));
        let mean = p.sum.unwrap() / p.count as f64;
        assert!((mean - 505e-6).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn gauges_carry_the_last_interval_and_the_target() {
        let r = request(&run(), &live("open"));
        let last = |name| match &find(&r, name).unwrap_or_else(|| panic!("{name}")).data {
            Some(metric::Data::Gauge(g)) => g.data_points[0].value,
            d => panic!("{name}: {d:?}"),
        };
        assert_eq!(
            last(names::IN_FLIGHT),
            Some(number_data_point::Value::AsInt(7))
        );
        assert_eq!(
            last(names::LATENESS),
            Some(number_data_point::Value::AsDouble(0.0015))
        );
        assert_eq!(
            last(names::TARGET_FDS),
            Some(number_data_point::Value::AsInt(12))
        );
        assert_eq!(
            last(names::TARGET_RSS),
            Some(number_data_point::Value::AsInt(64 << 20))
        );
        let Some(metric::Data::Sum(cpu)) = &find(&r, names::TARGET_CPU).unwrap().data else {
            panic!("target cpu is a sum")
        };
        assert_eq!(
            cpu.data_points[0].value,
            Some(number_data_point::Value::AsDouble(0.2))
        );
        assert!(find(&r, names::DROPPED).is_some(), "open loop");
        // A closed loop has no lateness nor drops.
        let closed = request(&run(), &live("closed"));
        assert!(find(&closed, names::LATENESS).is_none());
        assert!(find(&closed, names::DROPPED).is_none());
    }

    #[test]
    fn values_on_a_bound_fall_in_its_bucket() {
        let mut h = recorder::new_histogram();
        for v in [1, 25, 26, 60_000_000, 60_000_001] {
            h.record(v).unwrap();
        }
        let b = Buckets::of(&h);
        assert_eq!(b.counts[0], 2, "{:?}", b.counts);
        assert_eq!(b.counts[1], 1, "{:?}", b.counts);
        // 60 s is at HdrHistogram's resolution: the last bound or just above.
        assert_eq!(b.counts[19] + b.counts[20], 2, "{:?}", b.counts);
        assert_eq!(b.count, 5);
    }
}
