//! Scenario files: TOML as written (`raw`) → a validated [`Plan`] (`plan`), with argument
//! generators (`args`). Every error names the file, line, column and key, with a hint.
//!
//! The plan is built by concern: `target` (where load goes; its headers and credentials in
//! `target_headers`), `load` (how much, for how long, and `[find_max]`), `workload` (what is
//! sent), `replay` (a trace as the workload); `assemble` puts them together into the plan and
//! holds the checks that span tables. The model (`plan`) imports none of its builders.
//! `check` holds what every check shares (the range helper, closed sets of names, key hints,
//! "did you mean"), `locate` turns a byte offset into line, column and key. Nothing here knows the reference server: whether a tool
//! exists is asked of the target itself, before load (`client::workload_fit`), with the
//! [`Place`] each workload entry keeps.
//!
//! `overrides` applies command-line flags (`--concurrency`, `--set load.timeout=2s`) to the
//! file's TOML before the same checks run; their errors name the flag. `quick` builds the
//! scenario of a one-line quick test (`mcpbench run URL --tool NAME`) from its flags.

pub mod args;
mod assemble;
pub mod budget;
mod check;
mod derived;
mod load;
mod locate;
pub mod overrides;
pub mod plan;
mod quick;
pub mod raw;
mod replay;
pub mod shard;
mod target;
mod target_headers;
pub mod thresholds;
mod workload;

use std::fmt;
use std::ops::Range;
use std::path::Path;

pub use crate::transport::url::parse_url;
pub use check::closest;
pub use overrides::{Override, apply_all, load_with};
pub use plan::{
    Connection, Embedded, Load, Method, Pattern, Plan, ProtocolChoice, Remote, Replay, Sessions,
    Target, WorkItem,
};
pub use quick::{
    DEFAULT_CONCURRENCY, DEFAULT_DURATION, DEFAULT_TIMEOUT, Quick, QuickTarget, json_to_toml,
    text_of,
};
pub use shard::Shard;
pub use thresholds::{Threshold, Thresholds};

/// A problem at a place in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Where a value is written in a scenario file, kept for problems found after the file was
/// read: a tool the target does not list, arguments its input schema rejects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Dotted key, e.g. `workload[2].tool`.
    pub key: String,
}

impl Place {
    /// A diagnostic at this place.
    pub fn diagnostic(&self, message: impl Into<String>, hint: Option<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            key: self.key.clone(),
            message: message.into(),
            hint,
        }
    }
}

/// Why a scenario could not become a plan.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    /// `--shard I/N` of a scenario that cannot be split.
    #[error("{file}: {reason}")]
    Unsplittable { file: String, reason: String },
}

/// The finished plan of a scenario file as a run takes it: the command line's overrides
/// applied before the same checks as the file's values, then the shard's share taken
/// (`--shard I/N`). Nothing after this edits the plan.
pub fn load_finished(
    path: &Path,
    overrides: &[Override],
    shard: Shard,
) -> Result<Plan, ScenarioError> {
    load_with(path, overrides)?
        .sharded(shard)
        .map_err(|reason| ScenarioError::Unsplittable {
            file: path.display().to_string(),
            reason,
        })
}

/// `file:line:column: `key`: ` (a flag's name instead of the file when line is 0).
fn write_at(
    f: &mut fmt::Formatter<'_>,
    file: &str,
    line: usize,
    column: usize,
    key: &str,
) -> fmt::Result {
    if line == 0 {
        // A command-line flag, not a place in a file.
        write!(f, "{file}: ")?;
    } else {
        write!(f, "{file}:{line}:{column}: ")?;
    }
    if !key.is_empty() {
        write!(f, "`{key}`: ")?;
    }
    Ok(())
}

/// As a message starts: `file:line:column: `key`: `, or `--flag value: `key`: `.
impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_at(f, &self.file, self.line, self.column, &self.key)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_at(f, &self.file, self.line, self.column, &self.key)?;
        f.write_str(&self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Source text plus its name, for building diagnostics.
pub(crate) struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    pub fn error(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ScenarioError {
        let key = locate::locate(self.text, span.start).key;
        self.error_at_key(span, &key, message, hint)
    }

    /// Like [`Source::error`] but with the key given (for spans that cover a whole table).
    pub fn error_at_key(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ScenarioError {
        ScenarioError::Invalid(Box::new(
            self.place_at_key(span, key).diagnostic(message, hint),
        ))
    }

    /// Where `span` starts, named by the key found there.
    pub fn place(&self, span: Range<usize>) -> Place {
        let key = locate::locate(self.text, span.start).key;
        self.place_at_key(span, &key)
    }

    fn place_at_key(&self, span: Range<usize>, key: &str) -> Place {
        let loc = locate::locate(self.text, span.start);
        Place {
            file: self.name.to_string(),
            line: loc.line,
            column: loc.column,
            key: key.to_string(),
        }
    }
}

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Plan, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        file: path.display().to_string(),
        source,
    })?;
    parse(&path.display().to_string(), &text, &|k| {
        std::env::var(k).ok()
    })
}

/// Validates scenario text; `name` is used in diagnostics, `env` resolves `${NAME}`.
pub fn parse(
    name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, ScenarioError> {
    assemble::build(&Source { name, text }, env)
}

/// The diagnostic a scenario text (file `t.toml`, empty environment) is refused with.
#[cfg(test)]
pub(crate) fn refusal(text: &str) -> Diagnostic {
    match parse("t.toml", text, &|_| None) {
        Err(ScenarioError::Invalid(d)) => *d,
        other => panic!("expected a diagnostic, got {other:?}"),
    }
}
