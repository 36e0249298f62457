//! The summary for the tools people already run: Prometheus text exposition (the final
//! result, scraped or pushed by CI) and JUnit XML (each threshold and each accounting check a
//! test case, so a CI system shows a breached SLO like a failed test).

use std::fmt::Write;

use super::escape::esc as xml;
pub use super::summary::Figures;
use super::summary::{Errors, Latency, Operation, Summary, ThresholdResult};

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value without float noise (`0.001927`, not `0.0019270000000000001`).
fn value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.9}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Prometheus text format (version 0.0.4) of a finished run.
pub fn prometheus(s: &Summary) -> String {
    prometheus_of(&Figures::from(s))
}

/// Prometheus text format (version 0.0.4), one family per metric, every sample labelled with
/// the scenario.
pub fn prometheus_of(s: &Figures) -> String {
    let mut p = Exposition {
        out: String::new(),
        scenario: label(s.scenario),
    };
    p.family(
        "mcpbench_requests_total",
        "counter",
        "Requests ended in the measured window, by operation and outcome class.",
        ended(s.operations),
    );
    p.latency(s.operations);
    p.family(
        "mcpbench_throughput_ok_per_second",
        "gauge",
        "Ok responses per second of the measured window.",
        s.operations
            .iter()
            .filter(|o| o.started > 0)
            .map(|o| (op(&o.name), o.throughput))
            .chain(std::iter::once((String::new(), s.throughput)))
            .collect(),
    );
    p.family(
        "mcpbench_error_ratio",
        "gauge",
        "Calls that did not do their job (workload requests and session openings; tool errors, JSON-RPC errors, transport and protocol failures, wrong answers) over calls judged; with kind, each part.",
        error_ratios(&s.errors),
    );
    p.family(
        "mcpbench_dropped_arrivals_total",
        "counter",
        "Open loop: arrivals not sent because max_in_flight requests were in flight.",
        vec![(String::new(), s.dropped as f64)],
    );
    if let Some((in_flight, elapsed)) = s.running {
        p.family(
            "mcpbench_in_flight_requests",
            "gauge",
            "Requests in flight at the end of the last interval.",
            vec![(String::new(), in_flight as f64)],
        );
        p.family(
            "mcpbench_elapsed_seconds",
            "gauge",
            "Time covered by the intervals merged so far.",
            vec![(String::new(), elapsed)],
        );
    }
    if let Some(c) = s.cpu_us_per_request {
        p.family(
            "mcpbench_generator_cpu_seconds_per_request",
            "gauge",
            "The generator's worker CPU time per request started.",
            vec![(String::new(), c / 1e6)],
        );
    }
    if !s.thresholds.is_empty() {
        p.family(
            "mcpbench_threshold_passed",
            "gauge",
            "1 when the threshold held, 0 when it was breached.",
            threshold_results(s.thresholds),
        );
    }
    p.out
}

/// The Prometheus text being written: families of one scenario's samples.
struct Exposition {
    out: String,
    /// The scenario, escaped as a label value.
    scenario: String,
}

impl Exposition {
    /// One family: its help and type, then each sample (labels beside the scenario's, value).
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>) {
        let sc = &self.scenario;
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let sep = if labels.is_empty() { "" } else { "," };
            let _ = writeln!(
                self.out,
                "{name}{{scenario=\"{sc}\"{sep}{labels}}} {}",
                value(v)
            );
        }
    }

    /// The latency of ok responses as a summary family: quantile samples, then _sum and
    /// _count under the same name.
    fn latency(&mut self, ops: &[Operation]) {
        let mut quantiles = Vec::new();
        let mut sums = Vec::new();
        let mut counts = Vec::new();
        for o in ops {
            if let Some(l) = &o.latency {
                let q =
                    |p: &str, ms: f64| (format!("{},quantile=\"{p}\"", op(&o.name)), ms / 1000.0);
                quantiles.extend([
                    q("0.5", l.p50_ms),
                    q("0.9", l.p90_ms),
                    q("0.95", l.p95_ms),
                    q("0.99", l.p99_ms),
                    q("0.999", l.p999_ms),
                    q("1", l.max_ms),
                ]);
                sums.push((op(&o.name), l.mean_ms / 1000.0 * l.count as f64));
                counts.push((op(&o.name), l.count as f64));
            }
        }
        let sc = &self.scenario;
        let _ = writeln!(
            self.out,
            "# HELP mcpbench_latency_seconds Latency of ok responses (exact quantiles from HdrHistograms).\n# TYPE mcpbench_latency_seconds summary"
        );
        for (suffix, samples) in [("", quantiles), ("_sum", sums), ("_count", counts)] {
            for (labels, v) in samples {
                let _ = writeln!(
                    self.out,
                    "mcpbench_latency_seconds{suffix}{{scenario=\"{sc}\",{labels}}} {}",
                    value(v)
                );
            }
        }
    }
}

/// An operation's label.
fn op(name: &str) -> String {
    format!("operation=\"{}\"", label(name))
}

/// Requests ended per operation and outcome class (classes with none left out).
fn ended(ops: &[Operation]) -> Vec<(String, f64)> {
    let mut ended = Vec::new();
    for o in ops {
        let oc = &o.outcomes;
        let mut add = |class: &str, n: u64| {
            if n > 0 {
                ended.push((format!("{},outcome=\"{class}\"", op(&o.name)), n as f64));
            }
        };
        add("ok", oc.ok);
        add("tool_error", oc.tool_error);
        add("rpc_error", oc.rpc_error.values().sum());
        add("input_required", oc.input_required);
        add("assertion", oc.assertion);
        add("divergence", oc.divergence);
        add("http", oc.http.values().sum());
        add("timeout", oc.timeout);
        add("hang", oc.hang);
        add("connect", oc.connect);
        add("io", oc.io);
        add("protocol", oc.protocol.values().sum());
        add("cancelled", oc.cancelled);
        add("local", oc.local.values().sum());
    }
    ended
}

/// The error rate, then each of its parts labelled with its kind.
fn error_ratios(e: &Errors) -> Vec<(String, f64)> {
    std::iter::once((String::new(), e.rate))
        .chain(
            [
                ("tool", e.tool),
                ("rpc", e.rpc),
                ("protocol", e.protocol),
                ("wrong_answer", e.wrong_answer),
                ("session_opening", e.session_opening),
            ]
            .map(|(k, v)| (format!("kind=\"{k}\""), v)),
        )
        .collect()
}

/// 1 or 0 per threshold, labelled with its name and condition.
fn threshold_results(thresholds: &[ThresholdResult]) -> Vec<(String, f64)> {
    thresholds
        .iter()
        .map(|t| {
            (
                format!(
                    "threshold=\"{}\",condition=\"{}\"",
                    label(&t.name),
                    label(&t.condition)
                ),
                if t.passed { 1.0 } else { 0.0 },
            )
        })
        .collect()
}

/// JUnit XML: one test suite for the run, a test case per threshold, per accounting check and
/// per operation that had failures.
pub fn junit(s: &Summary) -> String {
    junit_runs(&[s])
}

/// JUnit XML of runs of one scenario (`run --repeat`): a test suite per run.
pub fn junit_runs(runs: &[&Summary]) -> String {
    // Fits both common schemas, Ant's (windyroad JUnit.xsd: a bare <testsuites>; package, id,
    // hostname, a timestamp without zone, properties and both system streams required) and
    // Jenkins' junit-4.xsd.
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for (i, s) in runs.iter().enumerate() {
        let name = match runs.len() {
            1 => format!("mcpbench {}", s.scenario.name),
            n => format!("mcpbench {} run {}/{n}", s.scenario.name, i + 1),
        };
        testsuite(&mut out, s, i, &name);
    }
    out.push_str("</testsuites>\n");
    out
}

/// One run's test suite.
fn testsuite(out: &mut String, s: &Summary, id: usize, name: &str) {
    // (classname, name, failure message)
    let mut cases: Vec<(String, String, Option<String>)> = Vec::new();
    // A shard's thresholds are judged on the merged result, not here.
    for t in s.thresholds.iter().filter(|_| s.shard.is_none()) {
        let measured = match (t.value, t.unit.as_str()) {
            (None, _) => "nothing measured".to_string(),
            (Some(v), "") => format!("{:.4} %", v * 100.0),
            (Some(v), u) => format!("{v}{u}"),
        };
        cases.push((
            "mcpbench.thresholds".into(),
            format!("{} {}", t.name, t.condition),
            (!t.passed).then(|| format!("breached: measured {measured}")),
        ));
    }
    let t = &s.totals;
    cases.push((
        "mcpbench.accounting".into(),
        "every request started is accounted for".into(),
        (t.unaccounted != 0).then(|| format!("{} requests unaccounted", t.unaccounted)),
    ));
    cases.push((
        "mcpbench.run".into(),
        "the run completed".into(),
        s.interrupted
            .then(|| "stopped early: partial results".to_string()),
    ));
    let lat = |l: &Option<Latency>| {
        l.as_ref()
            .map_or(String::new(), |l| format!(", p99 {:.3} ms", l.p99_ms))
    };
    for o in s.operations.iter().filter(|o| o.started > 0) {
        let failed = o.failed + o.cancelled + o.outcomes.rpc_error.values().sum::<u64>();
        cases.push((
            "mcpbench.operations".into(),
            format!("{} answers without errors", o.name),
            (failed > 0).then(|| {
                format!(
                    "{failed} of {} failed ({}){}",
                    o.started,
                    super::text::outcomes_line(&o.outcomes),
                    lat(&o.latency)
                )
            }),
        ));
    }
    let failures = cases.iter().filter(|c| c.2.is_some()).count();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" package=\"mcpbench\" id=\"{id}\" hostname=\"localhost\" timestamp=\"{ts}\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">",
        n = cases.len(),
        time = s.measured_seconds,
        name = xml(name),
        ts = xml(&junit_timestamp(&s.started_at)),
    );
    out.push_str("    <properties>\n");
    for (name, value) in [
        ("scenario", s.scenario.name.as_str()),
        ("target", s.target.url.as_str()),
        ("transport", s.target.transport.as_str()),
        ("protocol", s.target.protocol_negotiated.as_str()),
        ("mcpbench", s.mcpbench_version.as_str()),
    ] {
        let _ = writeln!(
            out,
            "      <property name=\"{name}\" value=\"{}\"/>",
            xml(value)
        );
    }
    out.push_str("    </properties>\n");
    for (class, name, failure) in &cases {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"0\"",
            xml(name),
            xml(class)
        );
        match failure {
            None => out.push_str("/>\n"),
            Some(m) => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{m}\" type=\"{class}\">{m}</failure>\n    </testcase>",
                    m = xml(m),
                    class = xml(class)
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "    <system-out>{}</system-out>\n    <system-err/>",
        xml(&format!(
            "{} requests, {:.1} ok/s, error rate {:.4} %",
            s.totals.started,
            s.totals.throughput,
            s.errors.rate * 100.0
        ))
    );
    out.push_str("  </testsuite>\n");
}

/// `YYYY-MM-DDTHH:MM:SS` of an RFC 3339 time (JUnit's timestamps carry no zone; ours are UTC).
fn junit_timestamp(rfc3339: &str) -> String {
    match rfc3339.get(..19) {
        Some(t) if t.as_bytes().get(10) == Some(&b'T') => t.to_string(),
        _ => "1970-01-01T00:00:00".to_string(),
    }
}
