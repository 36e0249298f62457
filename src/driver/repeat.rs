//! `mcpbench run --repeat N`: the scenario run N times, one after the other, into
//! `DIR/run-1` … `DIR/run-N` — one side of a `mcpbench compare` that sees the drift between
//! runs (see `report::compare`). Each run is a whole run (its own preflight, warm-up and
//! files); the table printed says how much the runs differed.

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Interrupt, RunError, RunOptions, RunOutput};
use crate::report::files;
use crate::scenario::Plan;

/// Runs `plan` `n` times; the runs done (an interrupt ends the series after the run it
/// stopped) and the directory holding them.
pub fn repeat(
    plan: Arc<Plan>,
    opts: &RunOptions,
    n: usize,
    interrupt: Interrupt,
) -> Result<(Vec<RunOutput>, PathBuf), RunError> {
    let dir = opts.output.clone().unwrap_or_else(|| {
        let name = format!("{}-x{n}", plan.name);
        files::default_dir(&opts.results_root, &name, time::OffsetDateTime::now_utc())
    });
    let mut runs = Vec::with_capacity(n);
    for i in 1..=n {
        let one = RunOptions {
            output: Some(dir.join(format!("run-{i}"))),
            label: Some(format!("run {i}/{n}")),
            ..opts.clone()
        };
        let out = super::run(plan.clone(), &one, interrupt.clone())?;
        let stopped = out.summary.interrupted || interrupt.is_requested();
        runs.push(out);
        if stopped {
            break;
        }
    }
    Ok((runs, dir))
}

/// Mean and coefficient of variation (sample standard deviation over the mean).
fn spread(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n.max(1.0);
    if v.len() < 2 || mean == 0.0 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

/// One line per run, then the spread between them: what `compare` will take as the noise.
pub fn render(runs: &[RunOutput], dir: &std::path::Path) -> String {
    let mut out = String::new();
    let ms = crate::report::text::ms;
    let mut cols: [Vec<f64>; 4] = Default::default();
    for (i, r) in runs.iter().enumerate() {
        let s = &r.summary;
        let l = s.totals.latency.as_ref();
        let pick = |f: fn(&crate::report::summary::Latency) -> f64| l.map_or(0.0, f);
        let (p50, p95, p99) = (pick(|l| l.p50_ms), pick(|l| l.p95_ms), pick(|l| l.p99_ms));
        let _ = writeln!(
            out,
            "run {}/{}: {:.1} ok/s, p50 {} p95 {} p99 {}, errors {:.2}%{}",
            i + 1,
            runs.len(),
            s.totals.throughput,
            ms(p50),
            ms(p95),
            ms(p99),
            s.errors.rate * 100.0,
            if s.interrupted { " (INTERRUPTED)" } else { "" }
        );
        for (c, v) in cols.iter_mut().zip([s.totals.throughput, p50, p95, p99]) {
            c.push(v);
        }
    }
    if runs.len() >= 2 {
        let [t, p50, p95, p99] = cols.map(|c| spread(&c));
        let _ = writeln!(
            out,
            "across {} runs: {:.1} ok/s ±{:.1}%, p50 {} ±{:.1}%, p95 {} ±{:.1}%, p99 {} ±{:.1}% (mean ± coefficient of variation: the run-to-run noise `mcpbench compare` judges by)",
            runs.len(),
            t.0,
            t.1 * 100.0,
            ms(p50.0),
            p50.1 * 100.0,
            ms(p95.0),
            p95.1 * 100.0,
            ms(p99.0),
            p99.1 * 100.0
        );
    }
    let _ = writeln!(
        out,
        "results: {}/run-1 … run-{} (each: summary.json, latency.hlog, timeseries.csv, report.md, report.html)",
        dir.display(),
        runs.len()
    );
    out
}
