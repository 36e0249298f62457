//! `mcpbench report` (a finished run's report rendered again), `mcpbench compare` (two sides
//! of runs, with verdicts) and `mcpbench merge` (shards of one scenario made one result).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::values::Number;
use super::{EXIT_FAILED, SummaryFormat, error};
use crate::driver::RunOutput;
use crate::report::document::markdown;
use crate::report::read_back::RunFiles;
use crate::report::{ab, sweep};

/// `report`'s command line.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The run directory (or its summary.json); or the directory of a find-max search, an A/B
    /// run or repeated runs (`run --repeat`).
    pub run: PathBuf,
    /// What to print: the table, with report.md and report.html written again; or another
    /// rendering, and nothing written. Of repeated runs, JUnit prints a test suite per run
    /// and the other formats the last run's; a search or an A/B run has a table, Markdown and
    /// JSON.
    #[arg(long, default_value = "text")]
    pub format: SummaryFormat,
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
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "PERCENT",
        allow_negative_numbers = true,
        value_parser = Number::<f64>::at_least(0.0, "percent")
    )]
    pub min_change: f64,
    /// How much worse each metric may get before it is a regression (when clear of the
    /// noise): METRIC=CHANGE,… with p50…p99.9 and throughput in % and errors in percentage
    /// points, e.g. `p95=+15%,throughput=-10%,errors=+0.5pp`. Default: the current runs'
    /// scenario's `[compare]` table.
    #[arg(long, value_name = "BUDGETS")]
    pub budget: Option<String>,
    /// How the comparison is printed.
    #[arg(long, default_value = "markdown")]
    pub format: CompareFormat,
    /// Also write the comparison as one self-contained page: verdicts and budgets first, each
    /// operation's latency spectra of both sides overlaid, every metric with its verdict.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `merge`'s command line.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The run directories; or one directory holding them (every subdirectory with a
    /// summary.json), e.g. the shards' results on a shared volume.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The merged run's directory.
    #[arg(long, short, value_name = "DIR")]
    pub output: PathBuf,
    /// Merge the shards present even when some of a split run are missing (the result
    /// is then a part of the scenario, and says so).
    #[arg(long)]
    pub partial: bool,
}

/// `compare` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// For a pull-request comment.
    Markdown,
    Json,
}

/// `report`: what the directory holds, printed as `run` printed it at its end (or as
/// --format asks), its report.md and report.html written again.
pub(super) fn report(a: ReportArgs) -> ExitCode {
    let dir = a.run.as_path();
    let printed = if dir.join("findmax.json").is_file() {
        sweep_report(dir, a.format)
    } else if dir.join("ab.json").is_file() {
        ab_report(dir, a.format)
    } else {
        runs_report(dir, a.format)
    };
    match printed {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

/// Why a directory's reports could not be written.
fn cannot_write(dir: &Path) -> impl Fn(std::io::Error) -> String {
    move |e| format!("cannot write the report into {}: {e}", dir.display())
}

/// A find-max directory: the sweep's table (its reports written again), Markdown or JSON.
fn sweep_report(dir: &Path, format: SummaryFormat) -> Result<String, String> {
    let r = sweep::read(dir)?;
    match format {
        SummaryFormat::Text => {
            sweep::write(&r, dir).map_err(cannot_write(dir))?;
            Ok(sweep::render(&r, dir))
        }
        SummaryFormat::Markdown => Ok(markdown(&sweep::document(&r))),
        SummaryFormat::Json => serde_json::to_string_pretty(&r)
            .map(|j| j + "\n")
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "{} is a find-max search: each step-NN/ inside it is a run with a summary to export",
            dir.display()
        )),
    }
}

/// An A/B directory: the comparison's table (its reports written again), Markdown or JSON.
fn ab_report(dir: &Path, format: SummaryFormat) -> Result<String, String> {
    let r = ab::read(dir)?;
    match format {
        SummaryFormat::Text => {
            crate::report::ab_page::write(&r, dir).map_err(cannot_write(dir))?;
            Ok(ab::render(&r, dir))
        }
        SummaryFormat::Markdown => Ok(markdown(&crate::report::ab_page::document(&r, dir))),
        SummaryFormat::Json => serde_json::to_string_pretty(&r)
            .map(|j| j + "\n")
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "{} is an A/B run: each target's directory inside it is a run with a summary to \
             export",
            dir.display()
        )),
    }
}

/// A run directory (or a directory of runs): the table `run` printed, each run's reports
/// written again; or another rendering, nothing written.
fn runs_report(path: &Path, format: SummaryFormat) -> Result<String, String> {
    if !path.exists() {
        return Err(format!(
            "{}: no such file or directory (give a run directory, the one holding summary.json)",
            path.display()
        ));
    }
    let runs = RunFiles::read_side(path).map_err(|e| e.to_string())?;
    if format == SummaryFormat::Text {
        for r in &runs {
            crate::report::document::write(r).map_err(cannot_write(&r.dir))?;
        }
    }
    let runs: Vec<RunOutput> = runs
        .into_iter()
        .map(|f| RunOutput {
            summary: f.summary,
            dir: f.dir,
        })
        .collect();
    match runs.as_slice() {
        [one] => format.render(one),
        many => format.render_runs(many, path),
    }
    .map_err(|e| e.to_string())
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
        html,
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
    if let Some(path) = &html {
        let page = crate::report::compare_page::page(&cmp, &b, &c);
        if let Err(e) = std::fs::write(path, page) {
            return error(format_args!("--html {}: {e}", path.display()));
        }
    }
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
