//! A sweep over load levels (`[find_max]`): its steps, the knee, the throughput frontier, and
//! its renderings (terminal table, `report.md`, `report.html`) from `findmax.json` alone, so
//! `mcpbench report DIR` re-renders a finished search like a finished run.
//!
//! Following Envoy's benchmarking guidance, latency is quoted below the knee, not at
//! saturation: levels at or past the knee are named, and the frontier ignores them.

use std::fmt::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::document::{Block, Tile, html, markdown};
use super::svg::{Axis, Chart, Series, Unit, line_chart};

/// The p99 bounds of the throughput frontier, in milliseconds.
pub const FRONTIER_BOUNDS_MS: [f64; 5] = [1.0, 5.0, 10.0, 50.0, 100.0];

/// Why a step ran.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Searching (a stepping, exponential or bisection step).
    #[default]
    Probe,
    /// Held at the level found, for longer, to confirm it.
    Confirm,
}

/// One level tried.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepResult {
    pub level: f64,
    #[serde(default)]
    pub stage: Stage,
    /// ok responses per second.
    pub throughput: f64,
    pub p50_ms: f64,
    /// Worst workload operation's p99 of ok responses.
    pub p99_ms: f64,
    /// (errors + dropped) / (ended + dropped).
    pub error_rate: f64,
    pub dropped: u64,
    pub passed: bool,
    /// At or past the knee: saturated, its latency is not quoted on the frontier.
    #[serde(default)]
    pub past_knee: bool,
    /// This step's results directory.
    pub dir: String,
}

/// One bound of the throughput frontier.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FrontierPoint {
    pub p99_bound_ms: f64,
    /// The highest level below the knee whose p99 met the bound (and the error SLO).
    pub level: Option<f64>,
    /// ok responses per second at that level.
    pub throughput: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// The search's result, written as `findmax.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FindMaxReport {
    /// `rate` (requests per second, open model) or `vus` (closed model).
    pub level: String,
    /// `step` (fixed increments) or `adaptive` (exponential, bisection, confirmation).
    #[serde(default)]
    pub search: String,
    pub slo_p99_ms: Option<f64>,
    pub slo_error_rate: Option<f64>,
    /// In the order run.
    pub steps: Vec<StepResult>,
    /// The highest level that met the SLO (adaptive: the one the confirmation held).
    pub best: Option<f64>,
    /// Adaptive: whether the confirmation stage held at `best`.
    #[serde(default)]
    pub confirmed: Option<bool>,
    /// The lowest level at or past the knee (see [`mark_knee`]).
    pub knee: Option<f64>,
    #[serde(default)]
    pub frontier: Vec<FrontierPoint>,
    pub interrupted: bool,
    /// The search stopped at this many steps, its limit, before it was done.
    #[serde(default)]
    pub step_limit: Option<usize>,
}

impl FindMaxReport {
    /// Marks the knee and computes the frontier from the steps.
    pub fn finish(&mut self) {
        self.knee = mark_knee(&mut self.steps, self.level == "rate");
        self.frontier = frontier(&self.steps, self.slo_error_rate);
    }

    /// The levels at or past the knee, ascending, without repeats.
    pub fn past_knee(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .steps
            .iter()
            .filter(|s| s.past_knee)
            .map(|s| s.level)
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }
}

/// Flags every step at or past the knee and returns the knee: the lowest level where the
/// target saturates — it failed the SLO, its median latency is more than twice the lowest
/// median of the levels below it (and 0.5 ms more, so sub-millisecond noise is not a knee), or
/// (open loop) it served less than 90 % of the offered rate. Every level at or above the knee
/// is past it. The median, not p99: a short step's p99 rests on a few samples and jumps with
/// the machine's noise, while queueing in front of a saturated target moves the median.
pub fn mark_knee(steps: &mut [StepResult], open: bool) -> Option<f64> {
    let base = |level: f64| {
        steps
            .iter()
            .filter(|s| s.level < level && s.throughput > 0.0)
            .map(|s| s.p50_ms)
            .min_by(f64::total_cmp)
    };
    let knee = steps
        .iter()
        .filter(|s| {
            !s.passed
                || base(s.level).is_some_and(|b| s.p50_ms > 2.0 * b && s.p50_ms > b + 0.5)
                || (open && s.throughput < 0.9 * s.level)
        })
        .map(|s| s.level)
        .min_by(f64::total_cmp);
    for s in steps.iter_mut() {
        s.past_knee = knee.is_some_and(|k| s.level >= k);
    }
    knee
}

/// For each bound of [`FRONTIER_BOUNDS_MS`], the highest level below the knee whose p99 met
/// it (and whose error rate met the SLO, if there is one).
pub fn frontier(steps: &[StepResult], slo_error_rate: Option<f64>) -> Vec<FrontierPoint> {
    FRONTIER_BOUNDS_MS
        .iter()
        .map(|&bound| {
            let best = steps
                .iter()
                .filter(|s| !s.past_knee && s.p99_ms <= bound && s.throughput > 0.0)
                .filter(|s| slo_error_rate.is_none_or(|e| s.error_rate <= e))
                .max_by(|a, b| a.level.total_cmp(&b.level));
            FrontierPoint {
                p99_bound_ms: bound,
                level: best.map(|s| s.level),
                throughput: best.map(|s| s.throughput),
                p99_ms: best.map(|s| s.p99_ms),
            }
        })
        .collect()
}

fn level_text(r: &FindMaxReport, v: f64) -> String {
    if r.level == "rate" {
        format!("{v:.1}/s")
    } else {
        format!("{v:.0} VUs")
    }
}

fn slo_text(r: &FindMaxReport) -> String {
    [
        r.slo_p99_ms.map(|p| format!("p99 ≤ {p:.1} ms")),
        r.slo_error_rate
            .map(|e| format!("errors ≤ {:.2}%", e * 100.0)),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ")
}

/// The verdict lines: the level found, the knee, the frontier.
fn verdict_lines(r: &FindMaxReport) -> Vec<String> {
    let mut lines = Vec::new();
    let confirm = r.steps.iter().filter(|s| s.stage == Stage::Confirm).count();
    lines.push(match (r.best, r.confirmed) {
        (Some(b), Some(true)) => format!(
            "highest {} that held: {} (confirmed by a longer stage)",
            r.level,
            level_text(r, b)
        ),
        (Some(b), Some(false)) => format!(
            "highest {} that held: {} — NOT confirmed: {confirm} confirmation stage(s) broke the SLO",
            r.level,
            level_text(r, b)
        ),
        (Some(b), None) => format!("highest {} that held: {}", r.level, level_text(r, b)),
        (None, _) => "no level held the SLO".into(),
    });
    if let Some(n) = r.step_limit {
        lines.push(format!(
            "stopped at the limit of {n} steps before the search was done: start higher or step by more"
        ));
    }
    let past = r.past_knee();
    match r.knee {
        Some(k) => lines.push(format!(
            "knee at {}; past it (latency not quoted): {}",
            level_text(r, k),
            past.iter()
                .map(|v| format!("{v:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => lines.push("no knee within the levels tried".into()),
    }
    for f in &r.frontier {
        lines.push(match (f.level, f.throughput, f.p99_ms) {
            (Some(l), Some(t), Some(p)) => format!(
                "p99 ≤ {} ms: {} ({t:.1} ok/s, p99 {p:.2} ms)",
                f.p99_bound_ms,
                level_text(r, l)
            ),
            _ => format!(
                "p99 ≤ {} ms: no level below the knee met it",
                f.p99_bound_ms
            ),
        });
    }
    lines
}

fn step_rows(r: &FindMaxReport) -> Vec<Vec<String>> {
    r.steps
        .iter()
        .map(|s| {
            vec![
                format!("{:.1}", s.level),
                match s.stage {
                    Stage::Probe => "probe".into(),
                    Stage::Confirm => "confirm".into(),
                },
                format!("{:.1}", s.throughput),
                format!("{:.2}", s.p50_ms),
                format!("{:.2}", s.p99_ms),
                format!("{:.3}%", s.error_rate * 100.0),
                s.dropped.to_string(),
                if s.passed { "holds" } else { "breaks" }.into(),
                if s.past_knee { "past knee" } else { "" }.into(),
            ]
        })
        .collect()
}

const HEAD: [&str; 9] = [
    "", "stage", "ok/s", "p50 ms", "p99 ms", "errors", "dropped", "verdict", "knee",
];

/// The search as a terminal table and its verdict lines.
pub fn render(r: &FindMaxReport, dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "find-max ({} search): SLO {}", r.search, slo_text(r));
    let _ = writeln!(
        out,
        "{:>10} {:>8} {:>10} {:>10} {:>10} {:>9} {:>8}  verdict",
        r.level, HEAD[1], HEAD[2], HEAD[3], HEAD[4], HEAD[5], HEAD[6]
    );
    for row in step_rows(r) {
        let _ = writeln!(
            out,
            "{:>10} {:>8} {:>10} {:>10} {:>10} {:>9} {:>8}  {}{}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            row[6],
            row[7],
            if row[8].is_empty() {
                String::new()
            } else {
                format!(" ({})", row[8])
            }
        );
    }
    for line in verdict_lines(r) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "results: {}/ (findmax.json, report.md, report.html, step-NN/)",
        dir.display()
    );
    out
}

/// The search's report as a document: verdict, frontier, steps and two charts.
pub fn document(r: &FindMaxReport) -> Vec<Block> {
    let mut doc = vec![Block::Heading(format!(
        "mcpbench find-max ({} search)",
        r.search
    ))];
    let mut facts = vec![format!("SLO: {}", slo_text(r))];
    if r.interrupted {
        facts.push("stopped early: partial results".into());
    }
    doc.push(Block::Tiles(tiles(r)));
    doc.push(Block::List(facts));
    doc.push(Block::Heading("Verdict".into()));
    doc.push(Block::List(verdict_lines(r)));
    doc.push(Block::Heading("Plots".into()));
    let mut by_level: Vec<&StepResult> = r.steps.iter().filter(|s| s.throughput > 0.0).collect();
    by_level.sort_by(|a, b| a.level.total_cmp(&b.level));
    // By offered level (monotone, unlike the throughput achieved past saturation); one point
    // per level (a confirmation's, if it ran there).
    by_level.dedup_by(|b, a| {
        let same = a.level == b.level;
        if same && b.stage == Stage::Confirm {
            std::mem::swap(a, b);
        }
        same
    });
    let curve = |name: &str, pick: fn(&StepResult) -> f64, keep: &dyn Fn(&StepResult) -> bool| {
        let points = by_level
            .iter()
            .filter(|s| keep(s))
            .map(|s| (s.level, pick(s).max(1e-3)))
            .collect();
        Series::new(name, points)
    };
    // The p99 line past the knee starts at the last level before it, so the two lines join.
    let last_below = by_level
        .iter()
        .filter(|s| !s.past_knee)
        .map(|s| s.level)
        .fold(f64::MIN, f64::max);
    let (level_axis, level_unit) = if r.level == "rate" {
        ("offered load", Unit::Of("requests/s"))
    } else {
        ("virtual users", Unit::Of(""))
    };
    let mut marks: Vec<(f64, String)> = r.knee.iter().map(|k| (*k, "knee".into())).collect();
    if let Some(b) = r.best {
        marks.push((b, "best".into()));
    }
    doc.push(Block::Chart(line_chart(&Chart {
        title: "Latency of ok responses against the level tried: p50 and p99 (log scale)".into(),
        x: Axis::linear(level_axis, level_unit),
        y: Axis::log("latency", Unit::Latency),
        series: vec![
            curve("p50", |s| s.p50_ms, &|_| true),
            curve("p99", |s| s.p99_ms, &|s| !s.past_knee),
            curve("p99 past the knee", |s| s.p99_ms, &|s| {
                s.past_knee || s.level == last_below
            }),
        ],
        marks,
    })));
    doc.push(Block::Chart(line_chart(&Chart {
        title:
            "Throughput frontier: the highest level below the knee whose p99 is within each bound"
                .into(),
        x: Axis {
            ticks: Some(
                FRONTIER_BOUNDS_MS
                    .iter()
                    .map(|b| (*b, format!("{b} ms")))
                    .collect(),
            ),
            ..Axis::log("p99 bound", Unit::Of(""))
        },
        y: Axis::linear(level_axis, level_unit),
        series: vec![Series::new(
            "highest level",
            r.frontier
                .iter()
                .filter_map(|f| Some((f.p99_bound_ms, f.level?)))
                .collect(),
        )],
        marks: Vec::new(),
    })));
    doc.push(Block::Heading("Steps".into()));
    let mut head: Vec<String> = HEAD.iter().map(|h| h.to_string()).collect();
    head[0] = r.level.clone();
    doc.push(Block::Table {
        head,
        rows: step_rows(r),
    });
    doc.push(Block::Para(
        "Each step is a full run with its own results (step-NN/report.html).".into(),
    ));
    doc
}

/// The search's headline: the highest level that held, the knee, the steps it took.
fn tiles(r: &FindMaxReport) -> Vec<Tile> {
    let unit = if r.level == "rate" { "/s" } else { " users" };
    let best = r.best.and_then(|b| {
        r.steps
            .iter()
            .filter(|s| s.level == b && s.passed)
            .max_by_key(|s| s.stage == Stage::Confirm)
    });
    let mut t = vec![match (r.best, best) {
        (Some(b), Some(s)) => Tile::new(
            format!("{b:.0}{unit}"),
            "highest level that held",
            format!(
                "{:.0} ok/s, p99 {:.2} ms{}",
                s.throughput,
                s.p99_ms,
                if r.confirmed == Some(true) {
                    ", confirmed"
                } else {
                    ""
                }
            ),
        ),
        _ => Tile::new("none", "highest level that held", slo_text(r)).bad(true),
    }];
    t.push(match r.knee {
        Some(k) => Tile::new(
            format!("{k:.0}{unit}"),
            "knee",
            "latency not quoted past it",
        ),
        None => Tile::new("not reached", "knee", "no saturation seen"),
    });
    t.push(Tile::new(
        r.steps.len().to_string(),
        "steps",
        format!("{} search", r.search),
    ));
    t
}

/// Writes `report.md` and `report.html` of a search into its directory.
pub fn write(r: &FindMaxReport, dir: &Path) -> std::io::Result<()> {
    let doc = document(r);
    std::fs::write(dir.join("report.md"), markdown(&doc))?;
    std::fs::write(dir.join("report.html"), html(&doc))
}

/// Reads a search's `findmax.json`; the knee and the frontier are derived again from its
/// steps.
pub fn read(dir: &Path) -> Result<FindMaxReport, String> {
    let path = dir.join("findmax.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut r: FindMaxReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    r.finish();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(level: f64, throughput: f64, p99_ms: f64, passed: bool) -> StepResult {
        StepResult {
            level,
            stage: Stage::Probe,
            throughput,
            p50_ms: p99_ms / 4.0,
            p99_ms,
            error_rate: 0.0,
            dropped: 0,
            passed,
            past_knee: false,
            dir: String::new(),
        }
    }

    fn report(steps: Vec<StepResult>) -> FindMaxReport {
        let mut r = FindMaxReport {
            level: "rate".into(),
            search: "adaptive".into(),
            slo_p99_ms: Some(60.0),
            slo_error_rate: Some(0.01),
            steps,
            best: Some(400.0),
            confirmed: Some(true),
            knee: None,
            frontier: Vec::new(),
            interrupted: false,
            step_limit: None,
        };
        r.finish();
        r
    }

    /// The knee is where the median doubles or the offered rate is no longer served;
    /// everything at or above it is past it, and the frontier quotes only levels below it.
    #[test]
    fn knee_and_frontier() {
        let r = report(vec![
            step(100.0, 100.0, 0.8, true),
            step(200.0, 199.0, 4.0, true),
            step(400.0, 398.0, 40.0, true),
            step(800.0, 600.0, 2000.0, false),
            step(300.0, 299.0, 9.0, true),
        ]);
        // Medians 0.2 ms at 100/s, 1.0 ms at 200/s: more than twice, and 0.5 ms more.
        assert_eq!(r.knee, Some(200.0));
        assert_eq!(r.past_knee(), vec![200.0, 300.0, 400.0, 800.0]);
        let levels: Vec<Option<f64>> = r.frontier.iter().map(|f| f.level).collect();
        assert_eq!(
            levels,
            vec![
                Some(100.0),
                Some(100.0),
                Some(100.0),
                Some(100.0),
                Some(100.0)
            ]
        );
        let text = render(&r, Path::new("out"));
        assert!(
            text.contains(
                "knee at 200.0/s; past it (latency not quoted): 200.0, 300.0, 400.0, 800.0"
            ),
            "{text}"
        );
        assert!(
            text.contains("p99 ≤ 1 ms: 100.0/s (100.0 ok/s, p99 0.80 ms)"),
            "{text}"
        );
    }

    /// A p99 that jumps with noise while the median stays flat is not a knee.
    #[test]
    fn p99_noise_is_not_a_knee() {
        let mut steps = vec![
            step(500.0, 499.0, 3.0, true),
            step(2500.0, 2500.0, 7.3, true),
            step(12800.0, 12600.0, 4.0, true),
        ];
        for s in &mut steps {
            s.p50_ms = 0.3;
        }
        let r = report(steps);
        assert_eq!(r.knee, None);
        assert_eq!(r.frontier[1].level, Some(12800.0));
    }

    #[test]
    fn frontier_without_a_knee_and_unserved_rates() {
        let r = report(vec![
            step(100.0, 100.0, 2.0, true),
            step(200.0, 200.0, 3.0, true),
            step(400.0, 400.0, 3.4, true),
        ]);
        assert_eq!(r.knee, None);
        let levels: Vec<Option<f64>> = r.frontier.iter().map(|f| f.level).collect();
        assert_eq!(
            levels,
            vec![None, Some(400.0), Some(400.0), Some(400.0), Some(400.0)]
        );
        assert!(render(&r, Path::new("x")).contains("p99 ≤ 1 ms: no level below the knee"));
        // Open loop: a rate served at 80 % is saturated even with a low p99.
        let r = report(vec![
            step(100.0, 100.0, 2.0, true),
            step(200.0, 160.0, 2.1, true),
        ]);
        assert_eq!(r.knee, Some(200.0));
    }

    /// The HTML is self-contained and carries both charts; old findmax.json files (before
    /// the adaptive search) still read.
    #[test]
    fn documents_and_old_files() {
        let r = report(vec![
            step(100.0, 100.0, 2.0, true),
            step(200.0, 150.0, 9.0, false),
        ]);
        let page = html(&document(&r));
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert!(page.contains("Throughput frontier"));
        let old = r#"{"level":"vus","slo_p99_ms":50.0,"slo_error_rate":null,"steps":[{"level":4.0,"throughput":10.0,"p50_ms":1.0,"p99_ms":2.0,"error_rate":0.0,"dropped":0,"passed":true,"dir":"s"}],"best":4.0,"knee":null,"interrupted":false}"#;
        let r: FindMaxReport = serde_json::from_str(old).unwrap();
        assert_eq!(r.steps[0].stage, Stage::Probe);
        assert!(r.frontier.is_empty());
    }
}
