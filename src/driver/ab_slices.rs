//! `[[targets]]` and `[ab]`: the same load on several targets, in short slices that alternate
//! between them, so the machine's drift hits every target alike. Round `r` runs one slice on
//! each target, starting with target `r mod n` (with two targets, which one goes first
//! alternates). Every slice is a full run with its own results; afterwards each target's
//! slices are merged exactly into one result per target (and level), and the comparison —
//! added latency and throughput ratio with 95 % confidence intervals — is `report::ab`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{RunError, RunOptions, run};
use crate::report::ab::{AbLevel, AbReport, Slice};
use crate::scenario::Plan;
use crate::scenario::plan::Model;

/// Runs the comparison; results under `<dir>/`: `slices/L<level>-r<round>-<target>/`, one
/// merged directory per target (`<target>/`, or `L<level>/<target>/` for a sweep), `ab.json`,
/// `report.md` and `report.html`.
pub fn ab(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: super::Interrupt,
) -> Result<(AbReport, PathBuf), RunError> {
    let ab = plan.ab.clone().ok_or_else(|| {
        RunError::Runtime(std::io::Error::other("the scenario has no [[targets]]"))
    })?;
    let dir = super::parent_dir(&plan, opts, "ab")?;
    let output_error = |path: &Path, source: std::io::Error| RunError::Output {
        path: path.display().to_string(),
        source,
    };
    let names: Vec<String> = ab.targets.iter().map(|(n, _)| n.clone()).collect();
    let mut report = AbReport {
        scenario: plan.name.clone(),
        targets: names.clone(),
        level: match plan.load.model {
            Model::Open { .. } => "rate",
            Model::Closed { .. } => "vus",
        }
        .into(),
        slice_seconds: ab.slice.as_secs_f64(),
        rounds: ab.pairs,
        levels: Vec::new(),
        interrupted: false,
        breached: Vec::new(),
    };
    same_tools(&plan, &ab.targets, opts)?;
    let n = ab.targets.len();
    // Deterministic calls are held to their first answer through every target.
    let seen = Arc::new(super::divergence::Seen::default());
    'levels: for &level in &ab.levels {
        let mut lv = AbLevel {
            level,
            slices: Vec::new(),
            comparisons: Vec::new(),
            upstream_bound: None,
        };
        for round in 0..ab.pairs {
            for position in 0..n {
                let (name, target) = &ab.targets[(round + position) % n];
                let slice_dir = dir
                    .join("slices")
                    .join(format!("L{level}-r{:02}-{name}", round + 1));
                let label = format!(
                    "A/B level {level} · round {}/{} · {name}{}",
                    round + 1,
                    ab.pairs,
                    so_far(&report, &lv)
                );
                let p = plan.for_target(target).at_level(level, ab.slice);
                let slice_opts = RunOptions {
                    output: Some(slice_dir.clone()),
                    label: Some(label),
                    ab_divergence: Some((seen.clone(), name.clone())),
                    ..opts.clone()
                };
                let out = run(Arc::new(p), &slice_opts, interrupt.clone())?;
                if opts.progress {
                    eprintln!(
                        "{}",
                        progress_line(level, round, ab.pairs, name, &out.summary)
                    );
                }
                lv.slices.push(Slice::from_summary(
                    &out.summary,
                    name,
                    round,
                    position,
                    &slice_dir,
                ));
                if out.summary.interrupted {
                    report.interrupted = true;
                    report.levels.push(lv);
                    break 'levels;
                }
            }
        }
        report.levels.push(lv);
    }
    report.finish();
    report.breached = merge_targets(&report, &names, &dir, ab.levels.len() > 1)?;
    crate::report::ab_page::write(&report, &dir).map_err(|e| output_error(&dir, e))?;
    Ok((report, dir))
}

/// One slice's line on stderr (`--progress`).
fn progress_line(
    level: f64,
    round: usize,
    rounds: usize,
    name: &str,
    summary: &crate::report::Summary,
) -> String {
    format!(
        "A/B: level {level}, round {}/{rounds}, {name}: {:.1} ok/s, p50 {}",
        round + 1,
        summary.totals.throughput,
        summary
            .totals
            .latency
            .as_ref()
            .map_or("-".into(), |l| format!("{:.3} ms", l.p50_ms))
    )
}

/// Each target's slices of a level, merged exactly into one result (`<dir>/<target>/`, or
/// `L<level>/<target>/` for a sweep); the scenario's thresholds judged on each: what they
/// breached.
fn merge_targets(
    report: &AbReport,
    names: &[String],
    dir: &Path,
    sweep: bool,
) -> Result<Vec<String>, RunError> {
    let mut breached = Vec::new();
    for lv in &report.levels {
        for name in names {
            let slices: Vec<PathBuf> = lv
                .slices
                .iter()
                .filter(|s| &s.target == name)
                .map(|s| PathBuf::from(&s.dir))
                .collect();
            let out = if sweep {
                dir.join(format!("L{}", lv.level)).join(name)
            } else {
                dir.join(name)
            };
            if slices.len() >= 2 {
                let merged = crate::report::merge::merge(&slices, &out, false).map_err(|e| {
                    RunError::Output {
                        path: out.display().to_string(),
                        source: std::io::Error::other(e.to_string()),
                    }
                })?;
                for t in merged.breached() {
                    breached.push(format!("{name}: {} {}", t.name, t.condition));
                }
            }
        }
    }
    Ok(breached)
}

/// The comparison so far at this level (for the dashboard's header): the first compared
/// target's added p50 on the first operation, once two rounds are complete.
fn so_far(report: &AbReport, lv: &AbLevel) -> String {
    let mut partial = AbReport {
        levels: vec![lv.clone()],
        ..report.clone()
    };
    partial.finish();
    partial.levels[0]
        .comparisons
        .first()
        .and_then(|c| {
            let d = c.deltas.iter().find(|d| d.metric == "p50")?;
            Some(format!(
                " · so far {} adds {:+.3} ms p50 (±{:.3})",
                c.target,
                d.added_ms.mean,
                (d.added_ms.high - d.added_ms.low) / 2.0
            ))
        })
        .unwrap_or_default()
}

/// Before any load: every target resolves each workload tool to a tool of the same input
/// schema (with its `tool_prefix`), or the comparison would measure different things — a
/// gateway's own `echo` beside the upstream's, say. Each target passes the preflight (its
/// tools listed) and the first that differs is named.
fn same_tools(
    plan: &Plan,
    targets: &[(String, crate::scenario::Target)],
    opts: &RunOptions,
) -> Result<(), RunError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    // The first target's (tool, input schema) per workload call, to hold the others to.
    type Schemas = Vec<(String, Option<Value>)>;
    let mut first: Option<(&str, Schemas)> = None;
    for (name, target) in targets {
        let p = plan.for_target(target);
        let checked = super::check(&p, opts, &rt)?;
        let prefix = match target {
            crate::scenario::Target::Remote(r) => r.tool_prefix.clone().unwrap_or_default(),
            _ => String::new(),
        };
        // The workload's tools as written (the operations), and as this target lists them.
        let schemas: Schemas = plan
            .workload
            .iter()
            .zip(&p.workload)
            .filter_map(|(written, here)| match (&written.method, &here.method) {
                (
                    crate::scenario::plan::Method::ToolsCall { tool },
                    crate::scenario::plan::Method::ToolsCall { tool: listed },
                ) => Some((tool.clone(), listed.clone())),
                _ => None,
            })
            .map(|(tool, listed)| {
                let schema = checked
                    .preflight
                    .tools
                    .iter()
                    .find(|(n, _)| *n == listed)
                    .and_then(|(_, d)| d.get("inputSchema").cloned());
                (tool, schema)
            })
            .collect();
        match &first {
            None => first = Some((name.as_str(), schemas)),
            Some((base, base_schemas)) => {
                for ((tool, a), (_, b)) in base_schemas.iter().zip(&schemas) {
                    if a != b {
                        return Err(RunError::Incomparable(format!(
                            "A/B: the workload's tool `{tool}` is not the same tool on every target: its input schema at `{name}`{} differs from the one at `{base}`; a gateway that namespaces its upstreams' tools needs `tool_prefix` on its target (and lists its own tools only with --local-tools)",
                            if prefix.is_empty() {
                                String::new()
                            } else {
                                format!(" (as `{prefix}{tool}`)")
                            }
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}
