//! `mcpbench report` (a finished run's report rendered again), `mcpbench compare` (two sides
//! of runs, with verdicts) and `mcpbench merge` (shards of one scenario made one result).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{EXIT_FAILED, SummaryFormat, error};

/// `report`'s command line.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The run directory (or its summary.json).
    pub run: PathBuf,
    /// Print the result in this format instead of writing report.md and report.html:
    /// `prometheus` or `junit`.
    #[arg(long)]
    pub format: Option<SummaryFormat>,
}

/// `compare`'s command line.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The base side: a run directory (or its summary.json), or a directory of runs.
    pub base: PathBuf,
    /// The current side, as BASE.
    pub current: PathBuf,
    /// The smallest change, in percent, that can be a regression or an improvement (also
    /// what absorbs some drift between two single runs of a shared machine).
    #[arg(long, default_value_t = 10.0, value_name = "PERCENT")]
    pub min_change: f64,
    /// How much worse each metric may get before it is a regression (when clear of the
    /// noise): METRIC=CHANGE,… with p50…p99.9 and throughput in % and errors in percentage
    /// points, e.g. `p95=+15%,throughput=-10%,errors=+0.5pp`. Default: the current runs'
    /// scenario's `[compare]` table.
    #[arg(long, value_name = "BUDGETS")]
    pub budget: Option<String>,
    /// `markdown` (for a pull-request comment) or `json`.
    #[arg(long, default_value = "markdown")]
    pub format: CompareFormat,
}

/// `merge`'s command line.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The run directories; or one directory holding them (every subdirectory with a
    /// summary.json), e.g. the shards' results on a shared volume.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The merged run's directory.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Merge the shards present even when some of a split run are missing (the result
    /// is then a part of the scenario, and says so).
    #[arg(long)]
    pub partial: bool,
}

/// `compare` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Markdown,
    Json,
}

/// `report`: a find-max directory gets its sweep's report, a run its report.md and
/// report.html (or, with --format, its result printed).
pub(super) fn report(a: ReportArgs) -> ExitCode {
    if a.run.join("findmax.json").is_file() {
        sweep_report(&a.run, a.format)
    } else {
        run_report(&a.run, a.format)
    }
}

/// `report` of a find-max directory: the sweep's report written and printed.
fn sweep_report(run: &Path, format: Option<SummaryFormat>) -> ExitCode {
    if format.is_some_and(|f| f != SummaryFormat::Text) {
        return error(format_args!(
            "{} is a find-max search: each step-NN/ inside it is a run with a summary to export",
            run.display()
        ));
    }
    let written = crate::report::sweep::read(run).and_then(|r| {
        crate::report::sweep::write(&r, run)
            .map(|()| r)
            .map_err(|e| format!("cannot write the report into {}: {e}", run.display()))
    });
    match written {
        Ok(r) => {
            print!("{}", crate::report::sweep::render(&r, run));
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

/// `report` of one run: report.md and report.html written into its directory, or its result
/// printed as --format asks.
fn run_report(run: &Path, format: Option<SummaryFormat>) -> ExitCode {
    match crate::report::read_back::RunFiles::read(run) {
        Ok(files) if format.is_some_and(|f| f != SummaryFormat::Text) => {
            print!(
                "{}",
                format
                    .and_then(|f| f.render(&files.summary))
                    .unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(files) => match crate::report::document::write(&files) {
            Ok(()) => {
                println!(
                    "{}\n{}",
                    files.dir.join("report.md").display(),
                    files.dir.join("report.html").display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => error(format_args!(
                "cannot write the report into {}: {e}",
                files.dir.display()
            )),
        },
        Err(e) => error(e),
    }
}

/// `merge`: the merged result printed and written; exit 1 if the scenario's thresholds are
/// breached by it.
pub(super) fn merge(a: MergeArgs) -> ExitCode {
    match crate::report::merge::merge(&a.runs, &a.output, a.partial) {
        Ok(s) => {
            print!("{}", crate::report::text::render(&s));
            println!(
                "results: {}/ (summary.json, latency.hlog, timeseries.csv, report.md, report.html)",
                a.output.display()
            );
            // The scenario's thresholds, judged on the merged result.
            if s.breached().next().is_some() {
                ExitCode::from(EXIT_FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => error(e),
    }
}

/// `compare`: prints the comparison; exit 1 on a regression.
pub(super) fn compare(a: CompareArgs) -> ExitCode {
    let CompareArgs {
        base,
        current,
        min_change,
        budget,
        format,
    } = a;
    use crate::report::{compare, read_back::RunFiles};
    let (b, c) = match (RunFiles::read_side(&base), RunFiles::read_side(&current)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(e), _) | (_, Err(e)) => return error(e),
    };
    let names: std::collections::BTreeSet<&str> = b
        .iter()
        .chain(&c)
        .map(|r| r.summary.scenario.name.as_str())
        .collect();
    if names.len() > 1 {
        let names: Vec<&str> = names.into_iter().collect();
        eprintln!(
            "warning: comparing different scenarios ({})",
            names.join(", ")
        );
    }
    // Budgets: as given, else the current runs' scenario's `[compare]`.
    let budgets = match budget.as_deref() {
        Some(text) => match compare::Budget::parse_list(text) {
            Ok(b) => b,
            Err(e) => return error(format_args!("--budget: {e}")),
        },
        None => c[0].summary.budgets.clone(),
    };
    let cmp = compare::compare(&b, &c, min_change / 100.0, &budgets);
    match format {
        CompareFormat::Markdown => print!("{}", compare::markdown(&cmp)),
        CompareFormat::Json => match serde_json::to_string_pretty(&cmp) {
            Ok(j) => println!("{j}"),
            Err(e) => return error(e),
        },
    }
    if cmp.regressed() > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}
