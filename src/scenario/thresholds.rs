//! `[thresholds]`: pass/fail conditions on a run's result, k6-style but typed. Overall metrics
//! are keys of the table, per-operation ones live in a table named after the operation:
//!
//! ```toml
//! [thresholds]
//! p99 = "< 20ms"                                # every operation of the workload together
//! error_rate = "< 0.1%"
//! throughput = "> 1000/s"
//! "tools/call:search-contacts".p99 = "< 50ms"   # one operation
//! abort_on_fail = false                         # stop the run once one is breached
//! ```
//!
//! `p99.9` must be quoted as a key (`"p99.9" = …`; TOML reads a bare `p99.9` as two keys) or
//! written `p999`. Latency bounds take `us`/`µs`, `ms` or `s`; error rates a `%` or a fraction; throughput
//! `/s` or a bare number. Each condition is checked here for its grammar and its unit, and
//! each operation named must be one the workload sends. They are evaluated, and listed, in the
//! order written.

use std::collections::BTreeMap;

use toml::Spanned;

use super::check::closest;
use super::{ScenarioError, Source};

/// The thresholds of a scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds {
    pub checks: Vec<Threshold>,
    /// Stop the run as soon as one condition is breached (checked once per interval).
    pub abort_on_fail: bool,
}

/// One condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The operation it is about; `None` for the workload as a whole.
    pub operation: Option<String>,
    pub metric: Metric,
    pub cmp: Cmp,
    /// In the metric's unit: milliseconds, a fraction, or per second.
    pub bound: f64,
    /// The condition as written, e.g. `< 50ms`.
    pub written: String,
}

impl Threshold {
    /// What it is about, e.g. `tools/call:search-contacts p99` or `error_rate`.
    pub fn name(&self) -> String {
        match &self.operation {
            Some(op) => format!("{op} {}", self.metric.name()),
            None => self.metric.name().to_string(),
        }
    }

    /// Whether `value` (in the metric's unit) meets the condition.
    pub fn holds(&self, value: f64) -> bool {
        match self.cmp {
            Cmp::Lt => value < self.bound,
            Cmp::Le => value <= self.bound,
            Cmp::Gt => value > self.bound,
            Cmp::Ge => value >= self.bound,
        }
    }
}

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
    Mean,
    /// Calls that did not do their job (every kind), of all judged.
    ErrorRate,
    /// `isError: true` results, of all judged.
    ToolErrorRate,
    /// Transport and protocol failures, of all judged.
    ProtocolErrorRate,
    Throughput,
    /// The target's CPU time per request (its watched processes together), µs.
    TargetCpu,
    /// The growth of the target's resident memory from the first sample to the last, MB.
    TargetMemoryGrowth,
    /// The target's resident memory per session opened (the slope over the run), bytes.
    TargetMemoryPerSession,
}

impl Metric {
    /// Every metric name a threshold may use (`p99.9` and `p999` are one metric).
    pub const NAMES: [(&'static str, Metric); 15] = [
        ("p50", Metric::P50),
        ("p90", Metric::P90),
        ("p95", Metric::P95),
        ("p99", Metric::P99),
        ("p99.9", Metric::P999),
        ("p999", Metric::P999),
        ("max", Metric::Max),
        ("mean", Metric::Mean),
        ("error_rate", Metric::ErrorRate),
        ("tool_error_rate", Metric::ToolErrorRate),
        ("protocol_error_rate", Metric::ProtocolErrorRate),
        ("throughput", Metric::Throughput),
        ("target_cpu_per_request", Metric::TargetCpu),
        ("target_memory_growth", Metric::TargetMemoryGrowth),
        ("target_memory_per_session", Metric::TargetMemoryPerSession),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    pub fn is_latency(self) -> bool {
        !self.is_rate() && !self.is_target() && self != Metric::Throughput
    }

    /// A share of the calls (a fraction; written as a percentage or a fraction).
    pub fn is_rate(self) -> bool {
        matches!(
            self,
            Metric::ErrorRate | Metric::ToolErrorRate | Metric::ProtocolErrorRate
        )
    }

    /// About the target's processes (`target.pid`, `--target-pid`, stdio servers), not an
    /// operation: only for the run as a whole.
    pub fn is_target(self) -> bool {
        matches!(
            self,
            Metric::TargetCpu | Metric::TargetMemoryGrowth | Metric::TargetMemoryPerSession
        )
    }

    /// The unit values are compared in.
    pub fn unit(self) -> &'static str {
        match self {
            m if m.is_rate() => "",
            Metric::Throughput => "/s",
            Metric::TargetCpu => "µs",
            Metric::TargetMemoryGrowth => "MB",
            Metric::TargetMemoryPerSession => "B",
            _ => "ms",
        }
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reads `[thresholds]`; `ops` are the operations the workload sends.
pub(crate) fn thresholds(
    src: &Source<'_>,
    raw: &Spanned<BTreeMap<String, Spanned<toml::Value>>>,
    ops: &[String],
) -> Result<Thresholds, ScenarioError> {
    let mut out = Thresholds::default();
    let metric_names: Vec<&str> = Metric::NAMES.iter().map(|(n, _)| *n).collect();
    // In the order written.
    let mut entries: Vec<(&String, &Spanned<toml::Value>)> = raw.get_ref().iter().collect();
    entries.sort_by_key(|(_, v)| v.span().start);
    for (key, value) in entries {
        let dotted = format!("thresholds.{}", quoted(key));
        if key == "abort_on_fail" {
            out.abort_on_fail = value.get_ref().as_bool().ok_or_else(|| {
                src.error_at_key(
                    value.span(),
                    &dotted,
                    "abort_on_fail is true or false",
                    Some("abort_on_fail = true".into()),
                )
            })?;
            continue;
        }
        if let Some((_, metric)) = Metric::NAMES.iter().find(|(n, _)| n == key) {
            out.checks
                .push(condition(src, value, &dotted, None, *metric)?);
            continue;
        }
        // An operation's table.
        let Some(table) = value.get_ref().as_table() else {
            let mut known = metric_names.clone();
            known.push("abort_on_fail");
            let hint = match closest(key, &known) {
                Some(k) => format!("did you mean `{k}`? Metrics: {}", metric_names.join(", ")),
                None => format!(
                    "a metric ({}), or an operation's table: \"tools/call:NAME\".p99 = \"< 50ms\"",
                    metric_names.join(", ")
                ),
            };
            return Err(src.error_at_key(
                value.span(),
                &dotted,
                format!("`{key}` is not a threshold metric"),
                Some(hint),
            ));
        };
        if !ops.iter().any(|o| o == key) {
            let known: Vec<&str> = ops.iter().map(String::as_str).collect();
            let hint = match closest(key, &known) {
                Some(k) => format!("did you mean \"{k}\"?"),
                None => format!("the workload's operations: {}", known.join(", ")),
            };
            return Err(src.error_at_key(
                value.span(),
                &dotted,
                format!("the workload sends no `{key}`"),
                Some(hint),
            ));
        }
        for (m, cond) in table {
            let sub = format!("{dotted}.{}", quoted(m));
            let Some((_, metric)) = Metric::NAMES.iter().find(|(n, _)| n == m) else {
                let hint = closest(m, &metric_names).map_or_else(
                    || format!("metrics: {}", metric_names.join(", ")),
                    |k| format!("did you mean `{k}`?"),
                );
                return Err(src.error_at_key(
                    value.span(),
                    &sub,
                    format!("`{m}` is not a threshold metric"),
                    Some(hint),
                ));
            };
            if metric.is_target() {
                return Err(src.error_at_key(
                    value.span(),
                    &sub,
                    format!("`{m}` is about the target's processes, not one operation"),
                    Some(format!("write it for the whole run: [thresholds] {m} = …")),
                ));
            }
            let spanned = Spanned::new(value.span(), cond.clone());
            out.checks
                .push(condition(src, &spanned, &sub, Some(key.clone()), *metric)?);
        }
    }
    Ok(out)
}

fn quoted(key: &str) -> String {
    if key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_string()
    } else {
        format!("\"{key}\"")
    }
}

/// One condition: `< 50ms`, `>= 1000/s`, `< 0.1%`.
fn condition(
    src: &Source<'_>,
    value: &Spanned<toml::Value>,
    key: &str,
    operation: Option<String>,
    metric: Metric,
) -> Result<Threshold, ScenarioError> {
    let example = match metric {
        m if m.is_rate() => "\"< 0.1%\"",
        Metric::Throughput => "\"> 1000/s\"",
        Metric::TargetCpu => "\"< 40us\"",
        Metric::TargetMemoryGrowth => "\"< 50MB\"",
        Metric::TargetMemoryPerSession => "\"< 4KiB\"",
        _ => "\"< 50ms\"",
    };
    let bad = |why: &str| {
        src.error_at_key(
            value.span(),
            key,
            why.to_string(),
            Some(format!(
                "a comparison and a bound, e.g. {} = {example}",
                key.rsplit('.').next().unwrap_or(key)
            )),
        )
    };
    let Some(text) = value.get_ref().as_str() else {
        return Err(bad("a threshold is a string"));
    };
    let (cmp, bound) = parse_condition(text, metric).map_err(|why| bad(&why))?;
    Ok(Threshold {
        operation,
        metric,
        cmp,
        bound,
        written: text.trim().to_string(),
    })
}

/// A condition as written (`< 50ms`, `>= 1000/s`, `< 0.1%`): the comparison and the bound in
/// the metric's unit.
fn parse_condition(text: &str, metric: Metric) -> Result<(Cmp, f64), String> {
    let t = text.trim();
    let (cmp, rest) = if let Some(r) = t.strip_prefix("<=") {
        (Cmp::Le, r)
    } else if let Some(r) = t.strip_prefix(">=") {
        (Cmp::Ge, r)
    } else if let Some(r) = t.strip_prefix('<') {
        (Cmp::Lt, r)
    } else if let Some(r) = t.strip_prefix('>') {
        (Cmp::Gt, r)
    } else {
        return Err(format!("`{text}` does not start with <, <=, > or >="));
    };
    let rest = rest.trim();
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(split);
    let n: f64 = number
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{text}` has no number after the comparison"))?;
    let unit = unit.trim();
    let bound = match metric {
        m if m.is_rate() => match unit {
            "%" => n / 100.0,
            "" if n <= 1.0 => n,
            _ => {
                return Err(format!(
                    "an error rate is a percentage or a fraction, not `{text}`"
                ));
            }
        },
        Metric::Throughput => match unit {
            "/s" | "" => n,
            _ => return Err(format!("throughput is per second (`/s`), not `{text}`")),
        },
        Metric::TargetCpu => match unit {
            "us" | "µs" => n,
            "ms" => n * 1000.0,
            _ => {
                return Err(format!(
                    "CPU time per request needs a unit (us, ms): `{text}`"
                ));
            }
        },
        // Binary units, as the reports print memory.
        Metric::TargetMemoryGrowth => match unit {
            "KB" | "KiB" => n / 1024.0,
            "MB" | "MiB" => n,
            "GB" | "GiB" => n * 1024.0,
            _ => {
                return Err(format!("memory growth needs a unit (KB, MB, GB): `{text}`"));
            }
        },
        Metric::TargetMemoryPerSession => match unit {
            "B" => n,
            "KB" | "KiB" => n * 1024.0,
            "MB" | "MiB" => n * 1_048_576.0,
            _ => {
                return Err(format!(
                    "memory per session needs a unit (B, KB, MB; binary): `{text}`"
                ));
            }
        },
        _ => match unit {
            "us" | "µs" => n / 1000.0,
            "ms" => n,
            "s" => n * 1000.0,
            _ => {
                return Err(format!(
                    "a latency bound needs a unit (us, ms, s): `{text}`"
                ));
            }
        },
    };
    Ok((cmp, bound))
}

impl Threshold {
    /// The threshold a result recorded (its name, e.g. `tools/call:echo p99` or `error_rate`,
    /// and its condition as written): how merged runs are judged by the thresholds their
    /// scenario set.
    pub fn from_recorded(name: &str, condition: &str) -> Result<Threshold, String> {
        let (operation, metric_name) = match name.rsplit_once(' ') {
            Some((op, m)) => (Some(op.to_string()), m),
            None => (None, name),
        };
        let metric = Metric::NAMES
            .iter()
            .find(|(n, _)| *n == metric_name)
            .map(|(_, m)| *m)
            .ok_or_else(|| format!("`{metric_name}` is not a threshold metric"))?;
        let (cmp, bound) = parse_condition(condition, metric)?;
        Ok(Threshold {
            operation,
            metric,
            cmp,
            bound,
            written: condition.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{parse, refusal};

    const BASE: &str = "[load]\nconcurrency = 1\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"x\" }\n";

    #[test]
    fn conditions_are_typed() {
        let text = format!(
            "{BASE}[thresholds]\np99 = \"< 20ms\"\nerror_rate = \"<= 0.1%\"\nthroughput = \"> 1_000/s\"\n\"tools/call:echo\".\"p99.9\" = \"< 250us\"\n\"tools/call:echo\".max = \">= 1s\"\nabort_on_fail = true\n"
        );
        let plan = parse("t.toml", &text, &|_| None).unwrap();
        let t = plan.thresholds;
        assert!(t.abort_on_fail);
        let by = |name: &str| t.checks.iter().find(|c| c.name() == name).unwrap().clone();
        assert_eq!((by("p99").cmp, by("p99").bound), (Cmp::Lt, 20.0));
        assert_eq!(
            (by("error_rate").cmp, by("error_rate").bound),
            (Cmp::Le, 0.001)
        );
        assert_eq!(by("throughput").bound, 1000.0);
        assert_eq!(by("tools/call:echo p99.9").bound, 0.25);
        assert_eq!(
            (
                by("tools/call:echo max").cmp,
                by("tools/call:echo max").bound
            ),
            (Cmp::Ge, 1000.0)
        );
        assert!(by("p99").holds(19.9) && !by("p99").holds(20.0));
    }

    #[test]
    fn memory_per_session_takes_sizes() {
        for (written, bytes) in [
            ("< 4KiB", 4096.0),
            ("<= 512 B", 512.0),
            ("< 1.5KB", 1536.0),
            ("< 1MiB", 1_048_576.0),
        ] {
            let text = format!("{BASE}[thresholds]\ntarget_memory_per_session = \"{written}\"\n");
            let plan = parse("t.toml", &text, &|_| None).unwrap();
            let t = &plan.thresholds.checks[0];
            assert_eq!(
                (t.metric, t.bound),
                (Metric::TargetMemoryPerSession, bytes),
                "{written}"
            );
            assert_eq!(t.metric.unit(), "B");
        }
    }

    #[test]
    fn mistakes_name_the_key_and_a_fix() {
        let cases = [
            ("p99 = \"50ms\"", "thresholds.p99", "does not start with <"),
            ("p99 = \"< 50\"", "thresholds.p99", "needs a unit"),
            (
                "target_memory_per_session = \"< 4\"",
                "thresholds.target_memory_per_session",
                "memory per session needs a unit (B, KB, MB",
            ),
            (
                "\"tools/call:echo\".target_memory_per_session = \"< 4KiB\"",
                "thresholds.\"tools/call:echo\".target_memory_per_session",
                "not one operation",
            ),
            (
                "error_rate = \"< 5\"",
                "thresholds.error_rate",
                "percentage or a fraction",
            ),
            ("p98 = \"< 5ms\"", "thresholds.p98", "did you mean `p90`"),
            (
                "\"tools/call:ecko\".p99 = \"< 5ms\"",
                "thresholds.\"tools/call:ecko\"",
                "did you mean \"tools/call:echo\"",
            ),
            (
                "\"tools/call:echo\".p42 = \"< 5ms\"",
                "thresholds.\"tools/call:echo\".p42",
                "not a threshold metric",
            ),
        ];
        for (line, key, says) in cases {
            let d = refusal(&format!("{BASE}[thresholds]\n{line}\n"));
            assert_eq!(d.key, key, "{line}: {d}");
            assert!(d.to_string().contains(says), "{line}: {d}");
            assert_eq!(d.line, 9, "{line}: {d}");
        }
    }
}
