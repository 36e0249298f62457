//! `mcpbench compare BASE CURRENT`: per operation, how p50/p90/p99/p99.9, throughput and error
//! rate moved, and a verdict per metric that accounts for noise.
//!
//! The noise comes from the runs themselves: each metric is also measured per interval
//! (latency.hlog), and Welch's t statistic over those per-interval values says whether the
//! difference stands out of the spread inside each run. Error rates are counts, compared with
//! a two-proportion z test. A verdict needs both: the difference is clear of the noise
//! (|t| ≥ [`CLEAR`]) and it matters (at least `min_change`, default 10 %, which also absorbs the
//! drift between two runs on a shared machine that no within-run spread can see).

use serde::Serialize;

use super::run::{IntervalPoint, RunFiles};
use super::summary::{self, Operation};

/// |t| (or |z|) at which a difference is clear of the noise: about 3 standard errors.
pub const CLEAR: f64 = 3.0;

/// What one metric did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Improved,
    Unchanged,
    Regressed,
}

/// One metric of one operation, compared.
#[derive(Debug, Clone, Serialize)]
pub struct Delta {
    pub operation: String,
    pub metric: &'static str,
    pub base: f64,
    pub current: f64,
    pub unit: &'static str,
    /// (current − base) / base, as a fraction; absent when base is 0.
    pub change: Option<f64>,
    /// The test statistic (Welch t over intervals, or z for error rates); absent without
    /// enough intervals.
    pub statistic: Option<f64>,
    pub verdict: Verdict,
}

/// The comparison of two runs.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: String,
    pub current: String,
    pub min_change: f64,
    pub deltas: Vec<Delta>,
    /// Operations in only one of the runs.
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

/// Welch's t for the difference of the means of two samples.
fn welch(a: &[f64], b: &[f64]) -> Option<f64> {
    let (ma, va, na) = moments(a)?;
    let (mb, vb, nb) = moments(b)?;
    let se = (va / na + vb / nb).sqrt();
    if se > 0.0 {
        Some((mb - ma) / se)
    } else if (mb - ma).abs() > 0.0 {
        Some(f64::INFINITY.copysign(mb - ma))
    } else {
        Some(0.0)
    }
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

/// How many of an operation's requests ended and how many were errors.
fn errors(op: &Operation, seconds: f64) -> (f64, f64) {
    let t = summary::totals(&[op], 0, seconds);
    let ended = (t.completed + t.failed + t.cancelled) as f64;
    (ended * t.error_rate, ended)
}

/// Compares `current` with `base`.
/// Samples beyond a percentile that each interval must hold (median over intervals) for the
/// percentile's interval-to-interval spread to mean anything: 5 (p99 needs 500 per interval).
const MIN_TAIL: f64 = 5.0;

pub fn compare(base: &RunFiles, current: &RunFiles, min_change: f64) -> Comparison {
    let mut deltas = Vec::new();
    let mut unmatched = Vec::new();
    let find = |run: &RunFiles, name: &str| -> Vec<IntervalPoint> {
        run.intervals
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, v)| v.iter().filter(|p| p.count > 0).copied().collect())
            .unwrap_or_default()
    };
    for b in base.summary.operations.iter().filter(|o| o.started > 0) {
        let Some(c) = current
            .summary
            .operations
            .iter()
            .find(|o| o.name == b.name && o.started > 0)
        else {
            unmatched.push(b.name.clone());
            continue;
        };
        let (ib, ic) = (find(base, &b.name), find(current, &c.name));
        let mut push = |metric: &'static str,
                        unit: &'static str,
                        vb: f64,
                        vc: f64,
                        statistic: Option<f64>,
                        higher_is_worse: bool| {
            let change = (vb != 0.0).then(|| (vc - vb) / vb);
            let clear = statistic.is_some_and(|t| t.abs() >= CLEAR);
            let big = match change {
                Some(c) => c.abs() >= min_change,
                None => vc != vb,
            };
            let worse = (vc > vb) == higher_is_worse;
            let verdict = match (clear && big, worse) {
                (false, _) => Verdict::Unchanged,
                (true, true) => Verdict::Regressed,
                (true, false) => Verdict::Improved,
            };
            deltas.push(Delta {
                operation: b.name.clone(),
                metric,
                base: vb,
                current: vc,
                unit,
                change,
                statistic,
                verdict,
            });
        };
        if let (Some(lb), Some(lc)) = (&b.latency, &c.latency) {
            type Pick = fn(&IntervalPoint) -> u64;
            let pcts: [(&'static str, f64, f64, f64, Pick); 4] = [
                ("p50", 0.5, lb.p50_ms, lc.p50_ms, |p| p.p50),
                ("p90", 0.9, lb.p90_ms, lc.p90_ms, |p| p.p90),
                ("p99", 0.99, lb.p99_ms, lc.p99_ms, |p| p.p99),
                ("p99.9", 0.999, lb.p999_ms, lc.p999_ms, |p| p.p999),
            ];
            for (name, q, vb, vc, pick) in pcts {
                // An interval's percentile means something only with samples beyond it: at
                // least MIN_TAIL of them per interval (p99 of 60 samples is their maximum, and
                // its spread says nothing about a change). Otherwise no verdict is claimed.
                let enough = |v: &[IntervalPoint]| {
                    let mut counts: Vec<u64> = v.iter().map(|p| p.count).collect();
                    counts.sort_unstable();
                    counts
                        .get(counts.len() / 2)
                        .is_some_and(|&n| n as f64 * (1.0 - q) >= MIN_TAIL)
                };
                let xs: Vec<f64> = ib.iter().map(|p| pick(p) as f64).collect();
                let ys: Vec<f64> = ic.iter().map(|p| pick(p) as f64).collect();
                let t = (enough(&ib) && enough(&ic))
                    .then(|| welch(&xs, &ys))
                    .flatten();
                push(name, "ms", vb, vc, t, true);
            }
        }
        let rate = |v: &[IntervalPoint]| -> Vec<f64> {
            v.iter()
                .map(|p| p.count as f64 / p.length.max(1e-3))
                .collect()
        };
        push(
            "throughput",
            "/s",
            b.throughput,
            c.throughput,
            welch(&rate(&ib), &rate(&ic)),
            false,
        );
        let (kb, nb) = errors(b, base.summary.measured_seconds);
        let (kc, nc) = errors(c, current.summary.measured_seconds);
        let (rb, rc) = (
            if nb > 0.0 { kb / nb } else { 0.0 },
            if nc > 0.0 { kc / nc } else { 0.0 },
        );
        push(
            "error_rate",
            "",
            rb,
            rc,
            two_proportions(kb, nb, kc, nc),
            true,
        );
    }
    for c in current.summary.operations.iter().filter(|o| o.started > 0) {
        if !base
            .summary
            .operations
            .iter()
            .any(|b| b.name == c.name && b.started > 0)
        {
            unmatched.push(c.name.clone());
        }
    }
    Comparison {
        base: base.dir.display().to_string(),
        current: current.dir.display().to_string(),
        min_change,
        deltas,
        unmatched,
    }
}

/// Markdown for a pull-request comment: the verdicts first, then every metric.
pub fn markdown(c: &Comparison) -> String {
    let count = |v: Verdict| c.deltas.iter().filter(|d| d.verdict == v).count();
    let mut out = format!(
        "## mcpbench compare\n\n`{}` → `{}`: **{} regressed**, {} improved, {} unchanged (a verdict needs |t| ≥ {CLEAR} over the runs' intervals, a change of at least {:.0} %, and for a percentile at least {MIN_TAIL} samples beyond it per interval; t is — where there are fewer).\n\n",
        c.base,
        c.current,
        count(Verdict::Regressed),
        count(Verdict::Improved),
        count(Verdict::Unchanged),
        c.min_change * 100.0
    );
    out.push_str("| operation | metric | base | current | change | t | verdict |\n|---|---|---:|---:|---:|---:|---|\n");
    let value = |v: f64, unit: &str| match unit {
        "ms" => super::text::ms(v),
        "" => format!("{:.3} %", v * 100.0),
        u => format!("{v:.1}{u}"),
    };
    for d in &c.deltas {
        let mark = match d.verdict {
            Verdict::Regressed => "**regressed**",
            Verdict::Improved => "improved",
            Verdict::Unchanged => "unchanged",
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
            "\nIn only one of the runs: {}\n",
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
        assert!(welch(&a, &[10.5, 11.5, 8.5, 10.0, 9.5]).unwrap().abs() < 1.0);
        assert!(welch(&a, &[20.0, 21.0, 19.0, 20.5, 19.5]).unwrap() > CLEAR);
        assert!(welch(&a, &[5.0]).is_none(), "one interval has no spread");
        assert!(two_proportions(1.0, 10_000.0, 2.0, 10_000.0).unwrap() < CLEAR);
        assert!(two_proportions(1.0, 10_000.0, 100.0, 10_000.0).unwrap() > CLEAR);
    }
}
