//! `[find_max]`: the highest load that still meets an SLO.
//!
//! Every step runs the scenario at a constant level (requests per second for the open model,
//! virtual users for the closed one) and checks the SLO: p99 of ok responses of the worst
//! workload operation; errors — and, open loop, dropped arrivals — over requests. Every step is
//! a full run with its own results directory. Two searches choose the levels ([`Searcher`]):
//! `step` goes up by fixed increments until a step breaks; `adaptive` grows exponentially until
//! one breaks, bisects the last bracket down to `precision`, and holds the level found for a
//! longer confirmation stage (as Envoy's Nighthawk does). The sweep's report — knee, throughput
//! frontier, charts — is `report::sweep`.

use std::path::PathBuf;
use std::sync::Arc;

use super::{RunError, RunOptions, run};
use crate::report::Summary;
use crate::report::sweep::{self, FindMaxReport, Stage, StepResult};
use crate::scenario::Plan;
use crate::scenario::plan::{FindMax, Model, Search, Step};

/// At most this many steps, whatever the search (a bound on a misconfigured search's time);
/// the report says when a search stopped there.
pub const MAX_STEPS: usize = 100;
/// Confirmation stages tried, each a notch lower than the last, before giving up.
const MAX_CONFIRMS: usize = 3;

/// What a step measured, in SLO terms: (p50, p99, error rate).
pub fn evaluate(s: &Summary) -> (f64, f64, f64) {
    let workload = s
        .operations
        .iter()
        .filter(|o| o.name != "initialize" && o.name != "server/discover");
    let (mut p50, mut p99) = (0f64, 0f64);
    for o in workload {
        if let Some(l) = &o.latency {
            p50 = p50.max(l.p50_ms);
            p99 = p99.max(l.p99_ms);
        }
    }
    let t = &s.totals;
    let ended = t.completed + t.failed;
    let errors = (t.error_rate * ended as f64).round() + t.dropped as f64;
    let denom = ended as f64 + t.dropped as f64;
    let error_rate = if denom > 0.0 { errors / denom } else { 0.0 };
    (p50, p99, error_rate)
}

/// Which level to try next, given the verdicts so far: the search alone, without running
/// anything (so it is tested against simulated targets).
#[derive(Debug, Clone)]
pub struct Searcher {
    fm: FindMax,
    /// Closed model: levels are whole virtual users.
    whole: bool,
    phase: Phase,
    /// Highest level that passed a probe, lowest that failed one.
    lo: Option<f64>,
    hi: Option<f64>,
    confirms: usize,
    /// The level the confirmation held, and whether one ran and failed.
    confirmed: Option<f64>,
    confirm_failed: bool,
    /// Adaptive: levels below this are not tried while looking for a first level that holds.
    floor: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Grow,
    Bisect,
    Confirm(f64),
    Done,
}

impl Searcher {
    pub fn new(fm: &FindMax, whole: bool) -> Self {
        let start = if whole {
            fm.start.round().max(1.0)
        } else {
            fm.start
        };
        Searcher {
            fm: FindMax {
                start,
                ..fm.clone()
            },
            whole,
            phase: Phase::Grow,
            lo: None,
            hi: None,
            confirms: 0,
            confirmed: None,
            confirm_failed: false,
            floor: if whole { 1.0 } else { start / 1024.0 },
        }
    }

    fn round(&self, v: f64) -> f64 {
        if self.whole { v.round().max(1.0) } else { v }
    }

    /// The next level and why, or `None` when the search is over.
    pub fn next(&self) -> Option<(f64, Stage)> {
        match self.phase {
            Phase::Done => None,
            Phase::Confirm(level) => Some((level, Stage::Confirm)),
            Phase::Bisect => {
                let (lo, hi) = (self.lo.unwrap_or(0.0), self.hi?);
                Some((self.round((lo + hi) / 2.0), Stage::Probe))
            }
            Phase::Grow => {
                let level = match (self.lo, self.hi) {
                    (None, None) => self.fm.start,
                    (Some(lo), _) => self.grow(lo),
                    // Adaptive, the start broke: halve until a level holds.
                    (None, Some(hi)) => self.round(hi / 2.0),
                };
                Some((level, Stage::Probe))
            }
        }
    }

    fn grow(&self, level: f64) -> f64 {
        let next = match self.fm.step {
            Step::Add(s) => level + s,
            Step::Multiply(f) => level * f,
        };
        // Whole users always grow by at least one.
        let next = if self.whole {
            next.round().max(level + 1.0)
        } else {
            next
        };
        next.min(self.fm.max)
    }

    /// Whether a bracket [lo, hi] is as narrow as the search wants.
    fn narrow(&self, lo: f64, hi: f64) -> bool {
        if self.whole {
            hi - lo <= 1.0
        } else {
            hi - lo <= self.fm.precision * hi
        }
    }

    /// Records a step's verdict and moves the search on.
    pub fn observe(&mut self, level: f64, stage: Stage, passed: bool) {
        let adaptive = self.fm.search == Search::Adaptive;
        if stage == Stage::Confirm {
            if passed {
                self.confirmed = Some(level);
                self.phase = Phase::Done;
                return;
            }
            self.confirm_failed = true;
            self.confirms += 1;
            // A notch lower: the bracket's precision (or one user less).
            let lower = if self.whole {
                level - 1.0
            } else {
                level * (1.0 - self.fm.precision)
            };
            self.phase = if self.confirms >= MAX_CONFIRMS || lower < self.floor {
                Phase::Done
            } else {
                Phase::Confirm(self.round(lower))
            };
            return;
        }
        if passed {
            self.lo = Some(self.lo.map_or(level, |l| l.max(level)));
        } else {
            self.hi = Some(self.hi.map_or(level, |h| h.min(level)));
        }
        self.phase = match (self.phase, adaptive) {
            (Phase::Grow, false) if !passed || level >= self.fm.max => Phase::Done,
            (Phase::Grow, false) => Phase::Grow,
            (Phase::Grow, true) => match (self.lo, self.hi) {
                (Some(lo), None) if lo >= self.fm.max => Phase::Confirm(lo),
                (Some(_), None) => Phase::Grow,
                (None, Some(hi)) if hi / 2.0 < self.floor || (self.whole && hi <= 1.0) => {
                    Phase::Done
                }
                (None, Some(_)) => Phase::Grow,
                (Some(_), Some(_)) => Phase::Bisect,
                (None, None) => Phase::Done,
            },
            (phase, _) => phase,
        };
        if self.phase == Phase::Bisect {
            let (lo, hi) = (self.lo.unwrap_or(0.0), self.hi.unwrap_or(0.0));
            if self.narrow(lo, hi) {
                self.phase = Phase::Confirm(lo);
            }
        }
    }

    /// The answer: the highest level that held (adaptive: the one a confirmation held, else the
    /// highest probe that held), and whether a confirmation held it (`None` when stepping).
    pub fn answer(&self) -> (Option<f64>, Option<bool>) {
        match self.fm.search {
            Search::Step => (self.lo, None),
            Search::Adaptive => match self.confirmed {
                Some(c) => (Some(c), Some(true)),
                None if self.confirm_failed => (self.lo, Some(false)),
                None => (self.lo, None),
            },
        }
    }
}

/// Runs the search; results under `<dir>/step-NN/`, the sweep in `<dir>/findmax.json`,
/// `report.md` and `report.html`.
pub fn find_max(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: super::Interrupt,
) -> Result<(FindMaxReport, PathBuf), RunError> {
    let fm = plan.find_max.clone().ok_or_else(|| {
        RunError::Runtime(std::io::Error::other("the scenario has no [find_max]"))
    })?;
    let dir = super::parent_dir(&plan, opts, "findmax")?;
    let output_error = |path: &std::path::Path, source: std::io::Error| RunError::Output {
        path: path.display().to_string(),
        source,
    };
    let open = matches!(plan.load.model, Model::Open { .. });
    let mut report = FindMaxReport {
        level: if open { "rate" } else { "vus" }.into(),
        search: match fm.search {
            Search::Step => "step",
            Search::Adaptive => "adaptive",
        }
        .into(),
        slo_p99_ms: fm.p99.map(|d| d.as_secs_f64() * 1000.0),
        slo_error_rate: fm.error_rate,
        steps: Vec::new(),
        best: None,
        confirmed: None,
        knee: None,
        frontier: Vec::new(),
        interrupted: false,
        step_limit: None,
    };
    let mut search = Searcher::new(&fm, !open);
    while let Some((level, stage)) = search.next() {
        if report.steps.len() >= MAX_STEPS {
            report.step_limit = Some(MAX_STEPS);
            break;
        }
        let step_dir = dir.join(format!("step-{:02}", report.steps.len() + 1));
        let step_opts = RunOptions {
            output: Some(step_dir.clone()),
            label: Some(format!(
                "find-max step {}{}: {} {level:.1}",
                report.steps.len() + 1,
                if stage == Stage::Confirm {
                    " (confirming)"
                } else {
                    ""
                },
                report.level
            )),
            ..opts.clone()
        };
        let duration = match stage {
            Stage::Probe => fm.step_duration,
            Stage::Confirm => fm.confirm_duration,
        };
        let out = run(
            Arc::new(plan.at_level(level, duration)),
            &step_opts,
            interrupt.clone(),
        )?;
        let (p50, p99, error_rate) = evaluate(&out.summary);
        let passed = !out.summary.interrupted
            && fm.p99.is_none_or(|slo| p99 <= slo.as_secs_f64() * 1000.0)
            && fm.error_rate.is_none_or(|slo| error_rate <= slo);
        if opts.progress {
            eprintln!(
                "find-max: {}{} {level:.1}: {:.1} ok/s, p99 {p99:.2} ms, errors {:.3}% → {}",
                report.level,
                if stage == Stage::Confirm {
                    " (confirming)"
                } else {
                    ""
                },
                out.summary.totals.throughput,
                error_rate * 100.0,
                if passed { "holds" } else { "breaks the SLO" }
            );
        }
        report.steps.push(StepResult {
            level,
            stage,
            throughput: out.summary.totals.throughput,
            p50_ms: p50,
            p99_ms: p99,
            error_rate,
            dropped: out.summary.totals.dropped,
            passed,
            past_knee: false,
            dir: step_dir.display().to_string(),
        });
        if out.summary.interrupted {
            report.interrupted = true;
            break;
        }
        search.observe(level, stage, passed);
    }
    (report.best, report.confirmed) = search.answer();
    report.finish();
    let path = dir.join("findmax.json");
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| output_error(&path, std::io::Error::other(e)))?
        + "\n";
    std::fs::write(&path, text).map_err(|e| output_error(&path, e))?;
    sweep::write(&report, &dir).map_err(|e| output_error(&dir, e))?;
    Ok((report, dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fm(search: Search, start: f64, step: Step) -> FindMax {
        FindMax {
            search,
            start,
            step,
            max: 1e6,
            step_duration: Duration::from_secs(1),
            precision: 0.05,
            confirm_duration: Duration::from_secs(3),
            p99: Some(Duration::from_millis(10)),
            error_rate: None,
        }
    }

    /// Runs a search against a simulated target that holds every level up to `capacity`;
    /// returns (answer, steps).
    fn simulate(
        fm: &FindMax,
        whole: bool,
        holds: impl Fn(f64, Stage) -> bool,
    ) -> (Option<f64>, Option<bool>, usize) {
        let mut s = Searcher::new(fm, whole);
        let mut steps = 0;
        while let Some((level, stage)) = s.next() {
            steps += 1;
            assert!(steps <= 10_000, "the search ends");
            s.observe(level, stage, holds(level, stage));
        }
        let (best, confirmed) = s.answer();
        (best, confirmed, steps)
    }

    /// Against a target of known capacity the adaptive search lands within its precision
    /// below it, confirmed; when the capacity is many times the start level, in fewer steps
    /// than stepping by the start level (the usual `start = step`) takes to get as high.
    #[test]
    fn adaptive_lands_near_capacity_in_fewer_steps() {
        for capacity in [37.0, 180.0, 1234.0, 9_999.0] {
            let holds = |l: f64, _| l <= capacity;
            let (best, confirmed, steps) = simulate(
                &fm(Search::Adaptive, 10.0, Step::Multiply(2.0)),
                false,
                holds,
            );
            let best = best.unwrap();
            assert!(
                best <= capacity && best >= 0.95 * capacity,
                "{capacity}: {best}"
            );
            assert_eq!(confirmed, Some(true));
            let (linear, _, linear_steps) =
                simulate(&fm(Search::Step, 10.0, Step::Add(10.0)), false, holds);
            assert!(linear.unwrap() <= capacity);
            if capacity >= 100.0 {
                assert!(
                    steps < linear_steps,
                    "{capacity}: {steps} vs {linear_steps}"
                );
            }
        }
    }

    /// A start level that already breaks: halve until one holds, then bisect up.
    #[test]
    fn adaptive_searches_down_from_a_start_too_high() {
        let (best, confirmed, _) = simulate(
            &fm(Search::Adaptive, 1000.0, Step::Multiply(2.0)),
            false,
            |l, _| l <= 70.0,
        );
        assert!(best.unwrap() <= 70.0 && best.unwrap() >= 66.5, "{best:?}");
        assert_eq!(confirmed, Some(true));
        // Nothing holds at all: the search gives up at the floor, with no answer.
        let (best, _, steps) = simulate(
            &fm(Search::Adaptive, 1000.0, Step::Multiply(2.0)),
            false,
            |_, _| false,
        );
        assert_eq!(best, None);
        assert!(steps <= 12, "{steps}");
    }

    /// A confirmation that breaks (the target degrades when held longer) steps down and
    /// confirms lower; the answer says when no confirmation held.
    #[test]
    fn failed_confirmations_step_down() {
        let (best, confirmed, _) = simulate(
            &fm(Search::Adaptive, 10.0, Step::Multiply(2.0)),
            false,
            |l, stage| {
                if stage == Stage::Confirm {
                    l <= 92.0
                } else {
                    l <= 100.0
                }
            },
        );
        // 100 and 95 break when held; 90.25 holds.
        assert_eq!(best, Some(90.25));
        assert_eq!(confirmed, Some(true));
        let (best, confirmed, _) = simulate(
            &fm(Search::Adaptive, 10.0, Step::Multiply(2.0)),
            false,
            |_, stage| stage == Stage::Probe,
        );
        assert!(best.is_some());
        assert_eq!(confirmed, Some(false));
    }

    /// Virtual users are whole: the bracket closes at one user, and the answer is exact.
    #[test]
    fn whole_users() {
        let (best, confirmed, steps) = simulate(
            &fm(Search::Adaptive, 1.0, Step::Multiply(2.0)),
            true,
            |l, _| l <= 13.0,
        );
        assert_eq!(best, Some(13.0));
        assert_eq!(confirmed, Some(true));
        assert!(steps <= 10, "{steps}");
        // Stepping stops at the first break, or at max.
        let mut f = fm(Search::Step, 1.0, Step::Add(1.0));
        f.max = 5.0;
        let (best, confirmed, steps) = simulate(&f, true, |_, _| true);
        assert_eq!((best, confirmed, steps), (Some(5.0), None, 5));
    }
}
