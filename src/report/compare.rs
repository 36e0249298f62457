//! `mcpbench compare BASE CURRENT`: per operation, how p50/p90/p95/p99/p99.9, throughput and
//! error rate moved, and a verdict per metric that accounts for noise.
//!
//! Each side is one run or several (the runs of `mcpbench run --repeat N`, or a directory of
//! run directories). Where the noise comes from depends on that:
//! - **Several runs a side** (three or more for a useful test): each run's own value of the
//!   metric is one sample, and Welch's t over those samples — with the Student-t critical value
//!   of its degrees of freedom at a two-sided 1 % — says whether the difference stands out of
//!   the spread *between runs*, which is where a shared machine's drift shows.
//! - **One run a side**: only the spread *inside* each run is seen — Welch's t over the
//!   measured intervals (warm-up and drain left out), |t| ≥ [`CLEAR`] — and error rates by a
//!   two-proportion z test. Drift between the two runs is invisible to it, which the output
//!   says; `min_change` (default 10 %) is what absorbs some of it.
//!
//! A verdict needs the difference to be clear of the noise and to matter: at least
//! `min_change`, or, for a metric with a budget (`--budget p95=+15%,errors=+0.5pp` or the
//! scenario's `[compare]`), beyond its budget.

use serde::Serialize;

use super::read_back::{IntervalPoint, RunFiles};
use super::summary::{Errors, Latency, Operation};
pub use crate::scenario::budget::Budget;
use crate::scenario::budget::METRICS;

/// |t| (or |z|) at which a difference between single runs is clear of the noise inside them:
/// about 3 standard errors.
pub const CLEAR: f64 = 3.0;

/// Runs a side from which the spread between runs is the noise.
pub const MIN_RUNS: usize = 3;

/// What one metric did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Improved,
    Unchanged,
    Regressed,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Unchanged => "unchanged",
            Verdict::Regressed => "regressed",
        }
    }
}

/// A compared value as every view shows it: latency as `text::ms`, a rate in %, else with its
/// unit.
pub fn shown(v: f64, unit: &str) -> String {
    match unit {
        "ms" => super::text::ms(v),
        "" => format!("{:.3} %", v * 100.0),
        u => format!("{v:.1}{u}"),
    }
}

/// Where a comparison takes its noise from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Each run's value a sample: the spread between runs (drift included).
    BetweenRuns,
    /// Per-interval values inside single runs: drift between the runs is not seen.
    WithinRuns,
}

/// One metric of one operation, compared.
#[derive(Debug, Clone, Serialize)]
pub struct Delta {
    pub operation: String,
    pub metric: &'static str,
    /// The value (the mean of the runs, with several runs a side).
    pub base: f64,
    pub current: f64,
    pub unit: &'static str,
    /// (current − base) / base, as a fraction; absent when base is 0.
    pub change: Option<f64>,
    /// The test statistic (Welch t, or z for error rates of single runs); absent without
    /// enough samples.
    pub statistic: Option<f64>,
    /// |statistic| at which the difference is clear of the noise.
    pub critical: Option<f64>,
    /// The metric's budget, if one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    pub verdict: Verdict,
}

/// The comparison of two sides of one or more runs each.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: Vec<String>,
    pub current: Vec<String>,
    pub method: Method,
    pub min_change: f64,
    pub budgets: Vec<Budget>,
    pub deltas: Vec<Delta>,
    /// Operations in only one of the sides.
    pub unmatched: Vec<String>,
}

impl Comparison {
    pub fn regressed(&self) -> usize {
        self.deltas
            .iter()
            .filter(|d| d.verdict == Verdict::Regressed)
            .count()
    }
}

/// Mean and variance of a sample.
fn moments(v: &[f64]) -> Option<(f64, f64, f64)> {
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var, n))
}

/// Welch's t for the difference of the means of two samples, and its degrees of freedom
/// (Welch–Satterthwaite).
fn welch(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let (ma, va, na) = moments(a)?;
    let (mb, vb, nb) = moments(b)?;
    let (sa, sb) = (va / na, vb / nb);
    let se = (sa + sb).sqrt();
    let dof = if sa + sb > 0.0 {
        (sa + sb).powi(2) / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0))
    } else {
        na + nb - 2.0
    };
    let t = if se > 0.0 {
        (mb - ma) / se
    } else if (mb - ma).abs() > 0.0 {
        f64::INFINITY.copysign(mb - ma)
    } else {
        0.0
    };
    Some((t, dof))
}

/// Two-sided 1 % critical value of Student's t with `dof` degrees of freedom (rounded down:
/// the stricter side).
fn t_critical(dof: f64) -> f64 {
    const T995: [f64; 30] = [
        63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012,
        2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779,
        2.771, 2.763, 2.756, 2.750,
    ];
    let k = dof.floor().max(1.0) as usize;
    T995.get(k - 1).copied().unwrap_or(2.576)
}

/// Two-proportion z for error rates: k errors of n.
fn two_proportions(ka: f64, na: f64, kb: f64, nb: f64) -> Option<f64> {
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    let p = (ka + kb) / (na + nb);
    let se = (p * (1.0 - p) * (1.0 / na + 1.0 / nb)).sqrt();
    if se > 0.0 {
        Some((kb / nb - ka / na) / se)
    } else {
        Some(0.0)
    }
}

/// Samples beyond a percentile that each interval must hold (median over intervals) for the
/// percentile's interval-to-interval spread to mean anything: 5 (p99 needs 500 per interval).
const MIN_TAIL: f64 = 5.0;

/// A latency metric: its name, quantile, the summary's figure and the interval's.
type Percentile = (
    &'static str,
    f64,
    fn(&Latency) -> f64,
    fn(&IntervalPoint) -> u64,
);

const PERCENTILES: [Percentile; 5] = [
    ("p50", 0.5, |l| l.p50_ms, |p| p.p50),
    ("p90", 0.9, |l| l.p90_ms, |p| p.p90),
    ("p95", 0.95, |l| l.p95_ms, |p| p.p95),
    ("p99", 0.99, |l| l.p99_ms, |p| p.p99),
    ("p99.9", 0.999, |l| l.p999_ms, |p| p.p999),
];

/// An operation's measured intervals (warm-up and drain left out) that saw ok responses.
fn measured(run: &RunFiles, name: &str) -> Vec<IntervalPoint> {
    let s = &run.summary;
    let (from, to) = (
        s.load.warmup_seconds - 1e-3,
        s.load.warmup_seconds + s.measured_seconds + 1e-3,
    );
    run.intervals
        .iter()
        .find(|(t, _)| t == name)
        .map(|(_, v)| {
            v.iter()
                .filter(|p| p.count > 0 && p.start >= from && p.start + p.length <= to)
                .copied()
                .collect()
        })
        .unwrap_or_default()
}

/// One side's samples of one metric of one operation.
struct Samples {
    /// The value shown: the mean over runs.
    value: f64,
    /// One per run (between runs) or per interval (within a run).
    points: Vec<f64>,
    /// Error counts and calls judged, for a single run's z test.
    errors: Option<(f64, f64)>,
    /// A single run's percentile: whether its intervals hold enough samples beyond it.
    enough_tail: bool,
}

fn op<'a>(run: &'a RunFiles, name: &str) -> Option<&'a Operation> {
    run.summary
        .operations
        .iter()
        .find(|o| o.name == name && o.started > 0)
}

/// The samples of `metric` of operation `name` on one side; `None` when no run has them.
fn samples(side: &[RunFiles], name: &str, metric: &str, method: Method) -> Option<Samples> {
    let ops: Vec<&Operation> = side.iter().filter_map(|r| op(r, name)).collect();
    let value_of = |o: &Operation| -> Option<f64> {
        match metric {
            "throughput" => Some(o.throughput),
            "error_rate" => Some(Errors::of(&[o], &[]).rate),
            m => {
                let (_, _, pick, _) = PERCENTILES.iter().find(|p| p.0 == m)?;
                o.latency.as_ref().map(pick)
            }
        }
    };
    let values: Vec<f64> = ops.iter().filter_map(|o| value_of(o)).collect();
    if values.is_empty() {
        return None;
    }
    let value = values.iter().sum::<f64>() / values.len() as f64;
    if method == Method::BetweenRuns {
        return Some(Samples {
            value,
            points: values,
            errors: None,
            enough_tail: true,
        });
    }
    let ivs = measured(&side[0], name);
    let o = ops[0];
    let (points, enough_tail) = match metric {
        "throughput" => (
            ivs.iter()
                .map(|p| p.count as f64 / p.length.max(1e-3))
                .collect(),
            true,
        ),
        "error_rate" => (Vec::new(), true),
        m => {
            let (_, q, _, pick) = PERCENTILES.iter().find(|p| p.0 == m)?;
            // An interval's percentile means something only with samples beyond it.
            let mut counts: Vec<u64> = ivs.iter().map(|p| p.count).collect();
            counts.sort_unstable();
            let enough = counts
                .get(counts.len() / 2)
                .is_some_and(|&n| n as f64 * (1.0 - q) >= MIN_TAIL);
            (ivs.iter().map(|p| pick(p) as f64).collect(), enough)
        }
    };
    let e = Errors::of(&[o], &[]);
    Some(Samples {
        value,
        points,
        errors: Some((e.failed as f64, e.calls as f64)),
        enough_tail,
    })
}

/// Compares the `current` side with the `base` side (each one run or more).
pub fn compare(
    base: &[RunFiles],
    current: &[RunFiles],
    min_change: f64,
    budgets: &[Budget],
) -> Comparison {
    let method = if base.len() >= 2 && current.len() >= 2 {
        Method::BetweenRuns
    } else {
        Method::WithinRuns
    };
    let names = |side: &[RunFiles]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in side {
            for o in r.summary.operations.iter().filter(|o| o.started > 0) {
                if !v.contains(&o.name) {
                    v.push(o.name.clone());
                }
            }
        }
        v
    };
    let (nb, nc) = (names(base), names(current));
    let mut deltas = Vec::new();
    for name in nb.iter().filter(|n| nc.contains(n)) {
        for (metric, higher_is_worse) in METRICS {
            let (Some(b), Some(c)) = (
                samples(base, name, metric, method),
                samples(current, name, metric, method),
            ) else {
                continue;
            };
            let budget = budgets.iter().find(|x| x.metric == metric);
            deltas.push(delta(
                name,
                metric,
                (&b, &c),
                (method, higher_is_worse, min_change),
                budget,
            ));
        }
    }
    let mut unmatched: Vec<String> = nb.iter().filter(|n| !nc.contains(n)).cloned().collect();
    unmatched.extend(nc.iter().filter(|n| !nb.contains(n)).cloned());
    let dirs = |side: &[RunFiles]| side.iter().map(|r| r.dir.display().to_string()).collect();
    Comparison {
        base: dirs(base),
        current: dirs(current),
        method,
        min_change,
        budgets: budgets.to_vec(),
        deltas,
        unmatched,
    }
}

/// One metric's delta and verdict.
fn delta(
    name: &str,
    metric: &'static str,
    (b, c): (&Samples, &Samples),
    (method, higher_is_worse, min_change): (Method, bool, f64),
    budget: Option<&Budget>,
) -> Delta {
    let (statistic, critical) = match (method, metric) {
        (Method::WithinRuns, "error_rate") => {
            let ((kb, nb), (kc, nc)) = (b.errors.unwrap_or_default(), c.errors.unwrap_or_default());
            (two_proportions(kb, nb, kc, nc), Some(CLEAR))
        }
        (Method::WithinRuns, _) => {
            let t = (b.enough_tail && c.enough_tail)
                .then(|| welch(&b.points, &c.points))
                .flatten();
            (t.map(|t| t.0), Some(CLEAR))
        }
        (Method::BetweenRuns, _) => match welch(&b.points, &c.points) {
            Some((t, dof)) => (Some(t), Some(t_critical(dof))),
            None => (None, None),
        },
    };
    let (vb, vc) = (b.value, c.value);
    let change = (vb != 0.0).then(|| (vc - vb) / vb);
    let clear = statistic.zip(critical).is_some_and(|(t, k)| t.abs() >= k);
    let worse = (vc > vb) == higher_is_worse && vc != vb;
    let matters = match budget {
        // A budget judges only the bad direction; improvements still need min_change.
        Some(bu) if worse => bu.exceeded(vb, vc, higher_is_worse),
        _ => match change {
            Some(ch) => ch.abs() >= min_change,
            None => vc != vb,
        },
    };
    let verdict = match (clear && matters, worse) {
        (false, _) => Verdict::Unchanged,
        (true, true) => Verdict::Regressed,
        (true, false) => Verdict::Improved,
    };
    Delta {
        operation: name.to_string(),
        metric,
        base: vb,
        current: vc,
        unit: match metric {
            "throughput" => "/s",
            "error_rate" => "",
            _ => "ms",
        },
        change,
        statistic,
        critical,
        budget: budget.map(|b| b.written.clone()),
        verdict,
    }
}

/// Markdown for a pull-request comment: the verdicts first, then every metric.
pub fn markdown(c: &Comparison) -> String {
    let count = |v: Verdict| c.deltas.iter().filter(|d| d.verdict == v).count();
    let sides = |v: &[String]| match v {
        [one] => format!("`{one}`"),
        many => format!("{} runs ({})", many.len(), many.join(", ")),
    };
    let noise = match c.method {
        Method::BetweenRuns => format!(
            "the noise is the spread between the runs (Welch's t over each run's value, clear at the Student-t 1 % critical value of its degrees of freedom){}",
            if c.base.len().min(c.current.len()) < MIN_RUNS {
                format!("; with fewer than {MIN_RUNS} runs a side that test is weak")
            } else {
                String::new()
            }
        ),
        Method::WithinRuns => format!(
            "single runs: the noise is the spread inside each run (|t| ≥ {CLEAR} over its measured intervals, warm-up and drain left out; for a percentile at least {MIN_TAIL} samples beyond it per interval); drift of the machine between the two runs is not seen — compare {MIN_RUNS}+ runs a side (`mcpbench run --repeat {MIN_RUNS}`) for that"
        ),
    };
    let mut out = format!(
        "## mcpbench compare\n\n{} → {}: **{} regressed**, {} improved, {} unchanged. A verdict needs the difference clear of the noise and a change of at least {:.0} % (or beyond the metric's budget); {noise}.\n\n",
        sides(&c.base),
        sides(&c.current),
        count(Verdict::Regressed),
        count(Verdict::Improved),
        count(Verdict::Unchanged),
        c.min_change * 100.0,
    );
    if !c.budgets.is_empty() {
        out.push_str("Budgets:\n\n");
        for b in &c.budgets {
            let of: Vec<&Delta> = c.deltas.iter().filter(|d| d.metric == b.metric).collect();
            let breached: Vec<&str> = of
                .iter()
                .filter(|d| d.verdict == Verdict::Regressed)
                .map(|d| d.operation.as_str())
                .collect();
            let over_in_noise = of
                .iter()
                .filter(|d| {
                    d.verdict != Verdict::Regressed
                        && Budget::exceeded(b, d.base, d.current, d.metric != "throughput")
                })
                .count();
            let verdict = if !breached.is_empty() {
                format!("**breached** by {}", breached.join(", "))
            } else if over_in_noise > 0 {
                format!("held ({over_in_noise} over it, but within the noise)")
            } else {
                "held".to_string()
            };
            out.push_str(&format!("- {} {}: {verdict}\n", b.metric, b.written));
        }
        out.push('\n');
    }
    out.push_str("| operation | metric | base | current | change | t | verdict |\n|---|---|---:|---:|---:|---:|---|\n");
    let value = shown;
    for d in &c.deltas {
        let mark = match d.verdict {
            Verdict::Regressed => "**regressed**",
            v => v.word(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {mark} |\n",
            d.operation,
            d.metric,
            value(d.base, d.unit),
            value(d.current, d.unit),
            d.change
                .map_or("-".into(), |c| format!("{:+.1} %", c * 100.0)),
            d.statistic.map_or("-".into(), |t| format!("{t:.1}"))
        ));
    }
    if !c.unmatched.is_empty() {
        out.push_str(&format!(
            "\nIn only one of the sides: {}\n",
            c.unmatched.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_see_the_spread() {
        // The same mean with a wide spread is not a difference; a shift far beyond it is.
        let a = [10.0, 12.0, 8.0, 11.0, 9.0];
        assert!(welch(&a, &[10.5, 11.5, 8.5, 10.0, 9.5]).unwrap().0.abs() < 1.0);
        assert!(welch(&a, &[20.0, 21.0, 19.0, 20.5, 19.5]).unwrap().0 > CLEAR);
        assert!(welch(&a, &[5.0]).is_none(), "one interval has no spread");
        assert!(two_proportions(1.0, 10_000.0, 2.0, 10_000.0).unwrap() < CLEAR);
        assert!(two_proportions(1.0, 10_000.0, 100.0, 10_000.0).unwrap() > CLEAR);
        // Three runs a side: about four degrees of freedom, critical value 4.6.
        let (t, dof) = welch(&[100.0, 104.0, 97.0], &[70.0, 73.0, 68.0]).unwrap();
        assert!((3.0..5.0).contains(&dof), "{dof}");
        assert!(t.abs() > t_critical(dof));
        let (t, dof) = welch(&[100.0, 110.0, 92.0], &[98.0, 112.0, 95.0]).unwrap();
        assert!(t.abs() < t_critical(dof));
        assert_eq!(t_critical(4.7), 4.604);
        assert_eq!(t_critical(1000.0), 2.576);
    }
}
