//! The run directory: `results/<UTC time>-<name>/` with `summary.json` and `latency.hlog`.

use std::path::{Path, PathBuf};

use super::summary::Summary;

/// `results/20261130T101500Z-quickstart`.
pub fn default_dir(root: &Path, name: &str, started: time::OffsetDateTime) -> PathBuf {
    let stamp = started
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_else(|_| "run".into());
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join(format!("{stamp}-{safe}"))
}

/// Writes `summary.json` (pretty, with a trailing newline).
pub fn write_summary(dir: &Path, s: &Summary) -> std::io::Result<PathBuf> {
    let path = dir.join("summary.json");
    let mut text = serde_json::to_string_pretty(s).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Reads a `summary.json` back (one written before schema 3 gets its error rates derived
/// from its operations, as a new one has them).
pub fn read_summary(path: &Path) -> std::io::Result<Summary> {
    let text = std::fs::read_to_string(path)?;
    let mut s: Summary = serde_json::from_str(&text).map_err(std::io::Error::other)?;
    if s.schema_version < 3 {
        let workload = super::summary::workload(&s.operations);
        s.errors =
            super::summary::Errors::of(&workload, &s.operations.iter().take(1).collect::<Vec<_>>());
    }
    Ok(s)
}

/// The runs a path names: a run directory (or its `summary.json`), or a directory of run
/// directories (`mcpbench run --repeat`, shards on a shared volume), sorted.
pub fn run_dirs(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.join("summary.json").is_file() || path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: neither a run directory (summary.json) nor a directory of them",
            path.display()
        )));
    }
    Ok(found)
}
