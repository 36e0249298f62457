//! What the tests need beyond Rust, kept honest: a test that needs something installed
//! (the pinned peers, tmux, chromium, the release build) carries
//! `#[ignore = "needs …: scripts/test …"]`, so a plain `cargo test` on a fresh machine runs only what can pass there; `scripts/test`
//! installs the rest (`scripts/prerequisites`, `interop/setup.sh`) and runs them all; `.ci/run`
//! goes through the same scripts instead of keeping its own list.

use std::path::Path;

use crate::support::repo;

/// The files (a folder: every file in it; with a name prefix, those tests of a file) that need
/// something installed.
const NEEDS: &[(&str, &str, &str)] = &[
    ("tests/terminal.rs", "", "tmux"),
    ("tests/browser.rs", "", "chromium"),
    ("tests/accounting.rs", "", "release"),
    ("tests/sessions_at_scale.rs", "", "release"),
    ("tests/deploy.rs", "", "peers"),
    ("tests/interop/", "", "peers"),
    ("tests/mcp_server.rs", "interop_", "peers"),
    ("tests/record.rs", "interop_", "peers"),
];

/// Every test function of a file: (name, the `#[ignore = …]` reason if any).
fn tests_of(path: &Path) -> Vec<(String, Option<String>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t != "#[test]" && !t.starts_with("#[tokio::test") {
            continue;
        }
        let mut reason = None;
        for next in &lines[i + 1..] {
            let n = next.trim();
            if let Some(r) = n.strip_prefix("#[ignore = \"") {
                reason = Some(r.trim_end_matches("\"]").to_string());
            } else if let Some(rest) = n.split_once("fn ").map(|(_, r)| r) {
                let name = rest.split(['(', '<']).next().unwrap_or("").to_string();
                out.push((name, reason));
                break;
            }
        }
    }
    out
}

#[test]
fn tests_that_need_an_install_are_ignored_with_the_reason() {
    let mut seen = 0;
    for (entry, prefix, what) in NEEDS {
        for file in files_of(entry) {
            check_ignored(&file, prefix, what, &mut seen);
        }
    }
    assert!(seen >= 30, "only {seen} tests found: did the files move?");
}

/// The file an entry names, or every `.rs` file of the folder it names.
fn files_of(entry: &str) -> Vec<String> {
    if !entry.ends_with('/') {
        return vec![entry.to_string()];
    }
    let mut out: Vec<String> = std::fs::read_dir(repo().join(entry))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs"))
        .map(|n| format!("{entry}{n}"))
        .collect();
    out.sort();
    out
}

/// Asserts the tests of `file` whose name starts with `prefix` are ignored with the reason.
fn check_ignored(file: &str, prefix: &str, what: &str, seen: &mut usize) {
    for (name, reason) in tests_of(&repo().join(file)) {
        if !name.starts_with(prefix) {
            continue;
        }
        *seen += 1;
        let reason = reason.unwrap_or_else(|| {
            panic!("{file}: {name} needs {what} but has no #[ignore = \"needs …: scripts/test …\"]")
        });
        assert!(
            reason.contains("scripts/test") && reason.contains(what.trim_end_matches('s')),
            "{file}: {name}: the reason should name {what} and scripts/test: {reason:?}"
        );
    }
}

#[test]
fn nothing_else_is_ignored() {
    let mut files = Vec::new();
    let mut dirs = vec![repo().join("tests"), repo().join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests/needs.rs") {
                files.push(p);
            }
        }
    }
    for p in files {
        let rel = p.strip_prefix(repo()).unwrap().display().to_string();
        let listed = NEEDS
            .iter()
            .find(|(f, _, _)| *f == rel || (f.ends_with('/') && rel.starts_with(f)));
        for (name, reason) in tests_of(&p) {
            let expected = listed.is_some_and(|(_, prefix, _)| name.starts_with(prefix));
            assert!(
                reason.is_none() || expected,
                "{rel}: {name} is ignored but not listed in tests/needs.rs NEEDS: \
                 say what it needs there (or run it)"
            );
        }
    }
}

#[test]
fn scripts_test_installs_and_runs_the_ignored_tests_and_ci_uses_it() {
    let read = |f: &str| std::fs::read_to_string(repo().join(f)).unwrap();
    let test = read("scripts/test");
    let lines: Vec<&str> = test.lines().filter(|l| !l.starts_with('#')).collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
    let (pre, peers, run) = (
        at("scripts/prerequisites").expect("scripts/test runs scripts/prerequisites"),
        at("interop/setup.sh").expect("scripts/test installs the peers"),
        at("cargo nextest run").expect("scripts/test runs nextest"),
    );
    assert!(pre < run && peers < run, "installs come before the tests");
    assert!(lines[run].contains("--run-ignored all") && lines[run].contains("--profile full"));
    let prerequisites = read("scripts/prerequisites");
    for what in ["cargo-nextest", "tmux", "chromium", "python3-venv"] {
        assert!(
            prerequisites.contains(what),
            "scripts/prerequisites: {what}"
        );
    }
    let ci = read(".ci/run");
    assert!(
        ci.contains("\nscripts/test"),
        ".ci/run runs the README's test command"
    );
    assert!(
        !ci.contains("apt-get") && !ci.contains("cargo install cargo-nextest"),
        ".ci/run installs through scripts/prerequisites, not a list of its own"
    );
}
