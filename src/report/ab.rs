//! An A/B comparison (`[[targets]]`): short slices of identical load alternated between
//! targets, and per operation and percentile the latency a target adds over the baseline and
//! its throughput ratio, each with a 95 % confidence interval across rounds (Student's t over
//! the paired differences, so the machine's drift, which hits both slices of a round alike,
//! cancels out). Rendered for the terminal and as `report.md` / `report.html`; written as
//! `ab.json`.

use std::fmt::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::diagnose::median;
use super::summary::Summary;

/// The percentiles compared.
pub const METRICS: [&str; 5] = ["p50", "p90", "p95", "p99", "p99.9"];

/// One operation's figures in one slice.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SliceOp {
    pub name: String,
    /// Latency of ok responses at [`METRICS`], ms; absent without ok responses.
    pub latency_ms: Option<[f64; 5]>,
    /// ok responses per second.
    pub throughput: f64,
    /// Median the target's timing header reported (time upstream), ms.
    #[serde(default)]
    pub upstream_p50_ms: Option<f64>,
}

/// One slice: one target, one round, one level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Slice {
    pub target: String,
    pub round: usize,
    /// Its place in the round (0 = ran first).
    pub position: usize,
    pub throughput: f64,
    pub error_rate: f64,
    pub dropped: u64,
    pub ops: Vec<SliceOp>,
    pub dir: String,
}

impl Slice {
    /// A slice's figures from its run's summary (the workload's operations).
    pub fn from_summary(
        s: &Summary,
        target: &str,
        round: usize,
        position: usize,
        dir: &Path,
    ) -> Slice {
        let ops = super::summary::workload(&s.operations)
            .into_iter()
            .map(|o| SliceOp {
                name: o.name.clone(),
                latency_ms: o
                    .latency
                    .as_ref()
                    .map(|l| [l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.p999_ms]),
                throughput: o.throughput,
                upstream_p50_ms: o.upstream.as_ref().map(|u| u.p50_ms),
            })
            .collect();
        Slice {
            target: target.to_string(),
            round,
            position,
            throughput: s.totals.throughput,
            error_rate: s.totals.error_rate,
            dropped: s.totals.dropped,
            ops,
            dir: dir.display().to_string(),
        }
    }
}

/// A mean with its 95 % confidence interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// Pairs it rests on.
    pub n: usize,
}

impl Estimate {
    /// Mean and Student-t 95 % interval of `v` (`None` below two values).
    pub fn of(v: &[f64]) -> Option<Estimate> {
        let n = v.len();
        if n < 2 {
            return None;
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t975(n - 1) * (var / n as f64).sqrt();
        Some(Estimate {
            mean,
            low: mean - half,
            high: mean + half,
            n,
        })
    }
}

/// Student's t, two-sided 95 % (the 0.975 quantile), for `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Cornish-Fisher: z + (z³ + z) / 4df.
        _ => 1.959_964 + 2.373 / df as f64,
    }
}

/// One percentile of one operation: the baseline's and the target's means, and the latency
/// the target adds (paired by round).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Delta {
    pub metric: String,
    pub baseline_ms: f64,
    pub target_ms: f64,
    pub added_ms: Estimate,
}

/// One operation through one target, against the baseline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub target: String,
    pub operation: String,
    pub deltas: Vec<Delta>,
    /// Target throughput over the baseline's, per round.
    pub throughput_ratio: Option<Estimate>,
    /// The target's median time upstream by its timing header (mean over rounds), ms: the
    /// part of its latency spent behind it.
    #[serde(default)]
    pub upstream_p50_ms: Option<f64>,
}

/// Everything measured at one level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AbLevel {
    pub level: f64,
    pub slices: Vec<Slice>,
    pub comparisons: Vec<Comparison>,
    /// Set when the baseline itself ran at its capacity: the added latency is then bounded by
    /// the upstream, not a measure of the gateway.
    pub upstream_bound: Option<String>,
}

/// The whole comparison, written as `ab.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AbReport {
    pub scenario: String,
    /// The targets in order; the first is the baseline.
    pub targets: Vec<String>,
    /// `vus` (closed model) or `rate` (open).
    pub level: String,
    pub slice_seconds: f64,
    pub rounds: usize,
    pub levels: Vec<AbLevel>,
    pub interrupted: bool,
    /// Thresholds breached by a target's merged result (`target: name condition`).
    #[serde(default)]
    pub breached: Vec<String>,
}

impl AbReport {
    pub fn baseline(&self) -> &str {
        self.targets.first().map_or("", String::as_str)
    }

    /// Pairs every target's slices with the baseline's of the same round and level, and
    /// estimates the differences; marks levels where the baseline was at its own capacity.
    pub fn finish(&mut self) {
        let open = self.level == "rate";
        let baseline = self.baseline().to_string();
        let targets = self.targets.clone();
        let mut previous: Option<(f64, f64)> = None;
        for lv in &mut self.levels {
            lv.comparisons = targets[1..]
                .iter()
                .flat_map(|t| compare(lv, &baseline, t))
                .collect();
            let base: Vec<&Slice> = lv.slices.iter().filter(|s| s.target == baseline).collect();
            let served = median(base.iter().map(|s| s.throughput).collect());
            let dropping = base.iter().filter(|s| s.dropped > 0).count() * 2 > base.len();
            lv.upstream_bound = if open && (served < 0.95 * lv.level || dropping) {
                Some(format!(
                    "{baseline} itself served {served:.1} of {:.1} requests/s offered{}: it ran at its capacity, so the added latency here is bounded by the upstream, not a measure of the gateway",
                    lv.level,
                    if dropping { ", dropping arrivals" } else { "" }
                ))
            } else {
                match previous {
                    Some((l0, x0)) if !open && lv.level >= 1.5 * l0 && served < 1.1 * x0 => {
                        Some(format!(
                            "{baseline}'s throughput stopped growing ({x0:.1} ok/s at {l0:.0} users, {served:.1} at {:.0}): it ran at its capacity, so the added latency here is bounded by the upstream, not a measure of the gateway",
                            lv.level
                        ))
                    }
                    _ => None,
                }
            };
            previous = Some((lv.level, served));
        }
    }
}

/// `target` against `baseline` at one level, per operation.
fn compare(lv: &AbLevel, baseline: &str, target: &str) -> Vec<Comparison> {
    let slice =
        |t: &str, round: usize| lv.slices.iter().find(|s| s.target == t && s.round == round);
    let rounds: Vec<(&Slice, &Slice)> = (0..=lv.slices.iter().map(|s| s.round).max().unwrap_or(0))
        .filter_map(|r| Some((slice(baseline, r)?, slice(target, r)?)))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for (a, _) in &rounds {
        for o in &a.ops {
            if !names.contains(&o.name.as_str()) {
                names.push(&o.name);
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let pair: Vec<(&SliceOp, &SliceOp)> = rounds
                .iter()
                .filter_map(|(a, b)| {
                    Some((
                        a.ops.iter().find(|o| o.name == name)?,
                        b.ops.iter().find(|o| o.name == name)?,
                    ))
                })
                .collect();
            let deltas = METRICS
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let both: Vec<(f64, f64)> = pair
                        .iter()
                        .filter_map(|(a, b)| Some((a.latency_ms?[i], b.latency_ms?[i])))
                        .collect();
                    let diffs: Vec<f64> = both.iter().map(|(a, b)| b - a).collect();
                    let n = both.len().max(1) as f64;
                    Some(Delta {
                        metric: m.to_string(),
                        baseline_ms: both.iter().map(|p| p.0).sum::<f64>() / n,
                        target_ms: both.iter().map(|p| p.1).sum::<f64>() / n,
                        added_ms: Estimate::of(&diffs)?,
                    })
                })
                .collect();
            let ratios: Vec<f64> = pair
                .iter()
                .filter(|(a, _)| a.throughput > 0.0)
                .map(|(a, b)| b.throughput / a.throughput)
                .collect();
            let upstream: Vec<f64> = pair.iter().filter_map(|(_, b)| b.upstream_p50_ms).collect();
            Comparison {
                target: target.to_string(),
                operation: name.to_string(),
                deltas,
                throughput_ratio: Estimate::of(&ratios),
                upstream_p50_ms: (!upstream.is_empty())
                    .then(|| upstream.iter().sum::<f64>() / upstream.len() as f64),
            }
        })
        .collect()
}

pub(crate) fn level_text(r: &AbReport, v: f64) -> String {
    if r.level == "rate" {
        format!("{v:.1}/s")
    } else {
        format!("c={v:.0}")
    }
}

fn ms_ci(e: &Estimate) -> String {
    format!("{:+.3} ms (95% CI {:+.3} … {:+.3})", e.mean, e.low, e.high)
}

/// One line per target, operation and level: the added p50 and p99 and the throughput ratio.
pub(crate) fn lines(r: &AbReport) -> Vec<String> {
    let mut out = Vec::new();
    for lv in &r.levels {
        for c in &lv.comparisons {
            let pick = |m: &str| c.deltas.iter().find(|d| d.metric == m);
            let mut parts = Vec::new();
            for m in ["p50", "p99"] {
                if let Some(d) = pick(m) {
                    parts.push(format!("added {m} {}", ms_ci(&d.added_ms)));
                }
            }
            if let Some(t) = &c.throughput_ratio {
                parts.push(format!(
                    "throughput ×{:.3} ({:.3} … {:.3})",
                    t.mean, t.low, t.high
                ));
            }
            if let (Some(u), Some(d)) = (c.upstream_p50_ms, pick("p50")) {
                parts.push(format!(
                    "of its p50 {:.3} ms, {u:.3} ms upstream by its timing header and {:.3} ms its own",
                    d.target_ms,
                    (d.target_ms - u).max(0.0)
                ));
            }
            out.push(format!(
                "{} {} vs {}, {}: {}",
                level_text(r, lv.level),
                c.target,
                r.baseline(),
                c.operation,
                parts.join(", ")
            ));
        }
        if let Some(b) = &lv.upstream_bound {
            out.push(format!("{}: {b}", level_text(r, lv.level)));
        }
    }
    out
}

/// The comparison for the terminal.
pub fn render(r: &AbReport, dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A/B: {} against {} — {} rounds of {:.1} s slices per level, order rotating{}",
        r.targets[1..].join(", "),
        r.baseline(),
        r.rounds,
        r.slice_seconds,
        if r.interrupted {
            " (stopped early: partial results)"
        } else {
            ""
        }
    );
    for l in lines(r) {
        let _ = writeln!(out, "{l}");
    }
    for b in &r.breached {
        let _ = writeln!(out, "threshold BREACHED: {b}");
    }
    let _ = writeln!(
        out,
        "results: {}/ (ab.json, report.md, report.html; each target's slices merged in its own directory)",
        dir.display()
    );
    out
}

/// Reads an A/B run's `ab.json` back.
pub fn read(dir: &Path) -> Result<AbReport, String> {
    let path = dir.join("ab.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn slice(target: &str, round: usize, p50: f64, thr: f64, dropped: u64) -> Slice {
        Slice {
            target: target.into(),
            round,
            position: 0,
            throughput: thr,
            error_rate: 0.0,
            dropped,
            ops: vec![SliceOp {
                name: "tools/call:echo".into(),
                latency_ms: Some([p50, p50 * 2.0, p50 * 3.0, p50 * 4.0, p50 * 8.0]),
                throughput: thr,
                upstream_p50_ms: None,
            }],
            dir: String::new(),
        }
    }

    pub(crate) fn report(level: &str, levels: Vec<(f64, Vec<Slice>)>) -> AbReport {
        let mut r = AbReport {
            scenario: "s".into(),
            targets: vec!["direct".into(), "gateway".into()],
            level: level.into(),
            slice_seconds: 2.0,
            rounds: 6,
            levels: levels
                .into_iter()
                .map(|(level, slices)| AbLevel {
                    level,
                    slices,
                    comparisons: Vec::new(),
                    upstream_bound: None,
                })
                .collect(),
            interrupted: false,
            breached: Vec::new(),
        };
        r.finish();
        r
    }

    /// Paired differences cancel the drift both slices of a round share: the added latency is
    /// the constant offset, tight, even though the level of both drifts by 50 %.
    #[test]
    fn paired_rounds_cancel_drift() {
        let mut slices = Vec::new();
        for round in 0..6 {
            let drift = 1.0 + 0.1 * round as f64;
            let jitter = if round % 2 == 0 { 0.01 } else { -0.01 };
            slices.push(slice("direct", round, drift, 1000.0 / drift, 0));
            slices.push(slice(
                "gateway",
                round,
                drift + 0.2 + jitter,
                900.0 / drift,
                0,
            ));
        }
        let r = report("vus", vec![(1.0, slices)]);
        let c = &r.levels[0].comparisons[0];
        let p50 = &c.deltas[0];
        assert_eq!(p50.metric, "p50");
        assert!((p50.added_ms.mean - 0.2).abs() < 1e-9, "{p50:?}");
        assert!(
            p50.added_ms.low > 0.18 && p50.added_ms.high < 0.22,
            "{p50:?}"
        );
        let t = c.throughput_ratio.unwrap();
        assert!(
            (t.mean - 0.9).abs() < 1e-9 && t.high - t.low < 1e-9,
            "{t:?}"
        );
        let text = render(&r, Path::new("out"));
        assert!(
            text.contains("c=1 gateway vs direct, tools/call:echo: added p50 +0.200 ms (95% CI"),
            "{text}"
        );
        assert!(r.levels[0].upstream_bound.is_none());
    }

    #[test]
    fn student_t_and_estimates() {
        assert_eq!(t975(5), 2.571);
        assert!((t975(1000) - 1.962).abs() < 0.001);
        let e = Estimate::of(&[1.0, 2.0, 3.0]).unwrap();
        // mean 2, sd 1, half-width 4.303 / √3.
        assert!((e.high - 2.0 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert!(Estimate::of(&[1.0]).is_none());
    }

    /// The ceiling guard: an open-loop baseline that cannot serve the offered rate, or a closed
    /// loop whose baseline stops scaling with users, marks the level as bounded by the upstream.
    #[test]
    fn ceiling_guard() {
        let at = |thr: f64, dropped: u64| -> Vec<Slice> {
            (0..6)
                .flat_map(|r| {
                    [
                        slice("direct", r, 1.0, thr, dropped),
                        slice("gateway", r, 1.1, thr, dropped),
                    ]
                })
                .collect()
        };
        let r = report(
            "rate",
            vec![(1000.0, at(999.0, 0)), (2000.0, at(1500.0, 40))],
        );
        assert!(r.levels[0].upstream_bound.is_none());
        let b = r.levels[1].upstream_bound.as_deref().unwrap();
        assert!(
            b.starts_with(
                "direct itself served 1500.0 of 2000.0 requests/s offered, dropping arrivals"
            ),
            "{b}"
        );
        let r = report("vus", vec![(1.0, at(500.0, 0)), (32.0, at(520.0, 0))]);
        assert!(
            r.levels[1]
                .upstream_bound
                .as_deref()
                .unwrap()
                .contains("stopped growing")
        );
    }
}
