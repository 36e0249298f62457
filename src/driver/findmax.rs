//! `[find_max]`: the highest load that still meets an SLO.
//!
//! Runs the scenario at a constant level (requests per second for the open model, virtual
//! users for the closed one) for `step_duration`, checks the SLO (p99 of ok responses of the
//! worst workload operation; errors — and, open loop, dropped arrivals — over requests), and
//! steps the level up until a step fails or `max` is reached. Every step is a full run with
//! its own results directory. The report names the highest level that held, and the knee:
//! the first level whose p99 is more than twice the first step's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{RunError, RunOptions, run};
use crate::report::Summary;
use crate::report::files;
use crate::scenario::Plan;
use crate::scenario::plan::{Model, Profile, Step};

/// One level tried.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepResult {
    pub level: f64,
    /// ok responses per second.
    pub throughput: f64,
    pub p50_ms: f64,
    /// Worst workload operation's p99 of ok responses.
    pub p99_ms: f64,
    /// (errors + dropped) / (ended + dropped).
    pub error_rate: f64,
    pub dropped: u64,
    pub passed: bool,
    /// This step's results directory.
    pub dir: String,
}

/// The search's result, written as `findmax.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FindMaxReport {
    /// `rate` (requests per second, open model) or `vus` (closed model).
    pub level: String,
    pub slo_p99_ms: Option<f64>,
    pub slo_error_rate: Option<f64>,
    pub steps: Vec<StepResult>,
    /// The highest level that met the SLO.
    pub best: Option<f64>,
    /// The first level whose p99 exceeded twice the first step's.
    pub knee: Option<f64>,
    pub interrupted: bool,
}

/// What a step measured, in SLO terms.
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
    let ended = t.completed + t.failed + t.cancelled;
    let errors = (t.error_rate * ended as f64).round() + t.dropped as f64;
    let denom = ended as f64 + t.dropped as f64;
    let error_rate = if denom > 0.0 { errors / denom } else { 0.0 };
    (p50, p99, error_rate)
}

/// The plan of one step: a constant level for the step's duration.
fn at_level(plan: &Plan, level: f64, duration: Duration) -> Plan {
    let mut p = plan.clone();
    p.find_max = None;
    p.load.duration = duration;
    p.load.warmup = (duration / 5).min(Duration::from_secs(2));
    p.load.requests = None;
    p.load.model = match &plan.load.model {
        Model::Open { arrival, .. } => Model::Open {
            rate: Profile::constant(level, duration),
            arrival: *arrival,
        },
        Model::Closed { .. } => {
            let vus = level.round().max(1.0);
            p.load.concurrency = vus as usize;
            Model::Closed {
                vus: Profile::constant(vus, duration),
            }
        }
    };
    p
}

/// Runs the search; results under `<dir>/step-NN/` and `<dir>/findmax.json`.
pub fn find_max(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: CancellationToken,
) -> Result<(FindMaxReport, PathBuf), RunError> {
    let fm = plan.find_max.clone().ok_or_else(|| {
        RunError::Runtime(std::io::Error::other("the scenario has no [find_max]"))
    })?;
    let dir = opts.output.clone().unwrap_or_else(|| {
        files::default_dir(
            &opts.results_root,
            &format!("{}-findmax", plan.name),
            time::OffsetDateTime::now_utc(),
        )
    });
    std::fs::create_dir_all(&dir).map_err(|source| RunError::Output {
        path: dir.display().to_string(),
        source,
    })?;
    let open = matches!(plan.load.model, Model::Open { .. });
    let mut report = FindMaxReport {
        level: if open { "rate" } else { "vus" }.into(),
        slo_p99_ms: fm.p99.map(|d| d.as_secs_f64() * 1000.0),
        slo_error_rate: fm.error_rate,
        steps: Vec::new(),
        best: None,
        knee: None,
        interrupted: false,
    };
    let mut level = fm.start;
    loop {
        let step_dir = dir.join(format!("step-{:02}", report.steps.len() + 1));
        let step_opts = RunOptions {
            output: Some(step_dir.clone()),
            ..opts.clone()
        };
        let out = run(
            Arc::new(at_level(&plan, level, fm.step_duration)),
            &step_opts,
            interrupt.clone(),
        )?;
        let (p50, p99, error_rate) = evaluate(&out.summary);
        let passed = !out.summary.interrupted
            && fm.p99.is_none_or(|slo| p99 <= slo.as_secs_f64() * 1000.0)
            && fm.error_rate.is_none_or(|slo| error_rate <= slo);
        if opts.progress {
            eprintln!(
                "find-max: {} {level:.1}: {:.1} ok/s, p99 {p99:.2} ms, errors {:.3}% → {}",
                report.level,
                out.summary.totals.throughput,
                error_rate * 100.0,
                if passed { "holds" } else { "breaks the SLO" }
            );
        }
        report.steps.push(StepResult {
            level,
            throughput: out.summary.totals.throughput,
            p50_ms: p50,
            p99_ms: p99,
            error_rate,
            dropped: out.summary.totals.dropped,
            passed,
            dir: step_dir.display().to_string(),
        });
        if out.summary.interrupted {
            report.interrupted = true;
            break;
        }
        if passed {
            report.best = Some(level);
        }
        if !passed || level >= fm.max {
            break;
        }
        level = match fm.step {
            Step::Add(s) => level + s,
            Step::Multiply(f) => level * f,
        }
        .min(fm.max);
    }
    let base = report.steps.first().map(|s| s.p99_ms).unwrap_or(0.0);
    report.knee = report
        .steps
        .iter()
        .find(|s| s.p99_ms > 2.0 * base || !s.passed)
        .map(|s| s.level);
    let path = dir.join("findmax.json");
    let text = serde_json::to_string_pretty(&report).map_err(|e| RunError::Output {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })? + "\n";
    std::fs::write(&path, text).map_err(|source| RunError::Output {
        path: path.display().to_string(),
        source,
    })?;
    Ok((report, dir))
}

/// The search as a table.
pub fn render(r: &FindMaxReport, dir: &std::path::Path) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let slo = [
        r.slo_p99_ms.map(|p| format!("p99 ≤ {p:.1} ms")),
        r.slo_error_rate
            .map(|e| format!("errors ≤ {:.2}%", e * 100.0)),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ");
    let _ = writeln!(out, "find-max: SLO {slo}");
    let _ = writeln!(
        out,
        "{:>10} {:>10} {:>10} {:>10} {:>9} {:>8}  verdict",
        r.level, "ok/s", "p50 ms", "p99 ms", "errors", "dropped"
    );
    for s in &r.steps {
        let _ = writeln!(
            out,
            "{:>10.1} {:>10.1} {:>10.2} {:>10.2} {:>8.3}% {:>8}  {}",
            s.level,
            s.throughput,
            s.p50_ms,
            s.p99_ms,
            s.error_rate * 100.0,
            s.dropped,
            if s.passed { "holds" } else { "breaks" }
        );
    }
    match r.best {
        Some(b) => {
            let _ = write!(out, "highest {} that held: {b:.1}", r.level);
        }
        None => {
            let _ = write!(out, "no level held the SLO");
        }
    }
    if let Some(k) = r.knee {
        let _ = write!(out, "; knee at {k:.1}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "results: {}/ (findmax.json, step-NN/)", dir.display());
    out
}
