//! `mcpbench doctor`: what a load test needs of this machine, and what would make its
//! measurements unreliable — each finding with the one-line fix.
//!
//! Linux only (procfs and sysfs); elsewhere every check says it was not checked here. The
//! open-file and port arithmetic is `driver::limits`' (the same a run is refused by), not a
//! copy. Parsers are pure functions of the files' text, tested on fixtures; reading the files
//! and measuring (timer, clock reads, a 1 s sample of the cores) happen at the edges.
//!
//! Here the model, [`examine`] and the table; the findings (`findings`), the parsers of
//! procfs and sysfs (`procfs`), the reading and measuring on Linux (`measure`).
//!
//! The JSON form (`--format json`) is [`Report`]: `schema_version` (1), `concurrency`,
//! `quick`, and `findings`, a list of `{check, value, verdict, detail, fix}` — `check` a stable
//! id (`open-files`, `ephemeral-ports`, `time-wait-reuse`, `timer`, `clock`, `cpu-frequency`,
//! `cpu-quota`, `other-load`, `load-average`, `somaxconn`, `transparent-hugepages`, `swap`),
//! `verdict` one of `ok`, `info`, `warn`, `fix` a one-line command or advice (`null` when
//! there is nothing to do). Any `warn` is exit code 1.

// Elsewhere the findings are not made, so neither are the parsers used.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

mod findings;
#[cfg(target_os = "linux")]
mod measure;
mod procfs;

use std::time::Duration;

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing to do.
    Ok,
    /// Worth knowing; does not by itself make measurements unreliable.
    Info,
    /// Would make measurements unreliable (or a run impossible): exit 1.
    Warn,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Info => "info",
            Verdict::Warn => "warn",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// A stable id (`open-files`, `timer`…).
    pub check: &'static str,
    /// What was read or measured, short.
    pub value: String,
    pub verdict: Verdict,
    /// Why it matters (or why it does not), a sentence.
    pub detail: String,
    /// What to do, one line; `None` when there is nothing to do.
    pub fix: Option<String>,
}

impl Finding {
    fn new(check: &'static str, verdict: Verdict, value: impl Into<String>) -> Self {
        Finding {
            check,
            value: value.into(),
            verdict,
            detail: String::new(),
            fix: None,
        }
    }

    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// What `doctor` found, in the order checked.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of this JSON shape.
    pub schema_version: u32,
    /// The load the open-file, port and backlog checks were sized for.
    pub concurrency: u64,
    /// Whether the timer measurement and the CPU sample were skipped.
    pub quick: bool,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Findings that would make measurements unreliable.
    pub fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Warn)
            .count()
    }
}

/// What to check for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The virtual users (connections to one target) planned.
    pub concurrency: u64,
    /// Skip what takes time: the timer measurement and the 1 s sample of the cores.
    pub quick: bool,
    /// The open-file soft limit before mcpbench raised it at start (`u64::MAX`: unlimited).
    pub soft_files_at_start: u64,
}

/// Every check, in order: ids of the JSON form.
pub const CHECKS: [&str; 12] = [
    "open-files",
    "ephemeral-ports",
    "time-wait-reuse",
    "timer",
    "clock",
    "cpu-frequency",
    "cpu-quota",
    "other-load",
    "load-average",
    "somaxconn",
    "transparent-hugepages",
    "swap",
];

/// Sleeps of the timer measurement, and how long each asks for.
const TIMER_SLEEPS: usize = 200;
const TIMER_SLEEP: Duration = Duration::from_micros(50);

/// Runs every check (Linux), or says none was checked (elsewhere).
pub fn examine(o: &Options) -> Report {
    #[cfg(target_os = "linux")]
    let findings = measure::examine(o);
    #[cfg(not(target_os = "linux"))]
    let findings = CHECKS
        .iter()
        .map(|&c| {
            Finding::new(c, Verdict::Info, "not checked here")
                .detail("these checks read Linux procfs and sysfs")
        })
        .collect();
    Report {
        schema_version: 1,
        concurrency: o.concurrency,
        quick: o.quick,
        findings,
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// Words of `text` in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The table: one row per check; under each that is not ok, why and the fix.
pub fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let width = CHECKS.iter().map(|c| c.len()).max().unwrap_or(0) + 2;
    let mut out = format!("{:width$}{:9}value\n", "check", "verdict");
    let indent = " ".repeat(width + 9);
    for f in &r.findings {
        let _ = writeln!(out, "{:width$}{:9}{}", f.check, f.verdict.as_str(), f.value);
        if f.verdict != Verdict::Ok {
            for line in wrap(&f.detail, 100usize.saturating_sub(indent.len()).max(40)) {
                let _ = writeln!(out, "{indent}{line}");
            }
            if let Some(fix) = &f.fix {
                let _ = writeln!(out, "{indent}fix: {fix}");
            }
        }
    }
    let _ = match r.warnings() {
        0 => writeln!(
            out,
            "\nnothing found that would make measurements on this machine unreliable"
        ),
        n => writeln!(
            out,
            "\n{n} warning{}: measurements on this machine may be unreliable",
            if n == 1 { "" } else { "s" }
        ),
    };
    if r.quick {
        out.push_str("(--quick: the timer and the other load on the cores were not measured)\n");
    }
    out
}

#[cfg(test)]
mod tests;
