//! `mcpbench doctor`: the JSON shape of its findings, a warning (with its fix, exit 1) for an
//! open-file limit too low for the planned load, and exit 2 on a usage error.

use crate::support::{mcpbench, repo};

/// Every check `doctor` makes, in order (the stable ids of its JSON form).
const CHECKS: [&str; 12] = [
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

/// `doctor --format json --quick ARGS` run under `sh` after `ulimit -n LIMIT` (which lowers the
/// hard limit too, so mcpbench cannot raise its soft limit past it): exit code and the report.
fn doctor_with_open_files(limit: u32, args: &str) -> (i32, serde_json::Value) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {limit} && exec '{}' doctor --format json --quick {args}",
            env!("CARGO_BIN_EXE_mcpbench")
        ))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn finding<'a>(report: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {report:#}"))
}

/// The documented shape: every check in order, each `{check, value, verdict, detail, fix}`,
/// a fix and a reason for each warning, exit 1 exactly when something warns.
fn check_shape(report: &serde_json::Value, code: i32) {
    assert_eq!(report["schema_version"], 1);
    let findings = report["findings"].as_array().expect("findings: a list");
    let checks: Vec<&str> = findings
        .iter()
        .map(|f| f["check"].as_str().expect("check: a string"))
        .collect();
    assert_eq!(checks, CHECKS, "{report:#}");
    let mut warnings = 0;
    for f in findings {
        let obj = f.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["check", "detail", "fix", "value", "verdict"],
            "{f:#}"
        );
        assert!(
            !f["value"].as_str().expect("value: a string").is_empty(),
            "{f:#}"
        );
        assert!(f["detail"].is_string(), "{f:#}");
        assert!(f["fix"].is_string() || f["fix"].is_null(), "{f:#}");
        match f["verdict"].as_str() {
            Some("ok" | "info") => {}
            Some("warn") => {
                warnings += 1;
                let fix = f["fix"].as_str().unwrap_or_default();
                assert!(!fix.trim().is_empty(), "a warning without a fix: {f:#}");
                assert!(!f["detail"].as_str().unwrap().is_empty(), "{f:#}");
            }
            other => panic!("verdict {other:?}: {f:#}"),
        }
    }
    assert_eq!(code, if warnings > 0 { 1 } else { 0 }, "{report:#}");
}

#[test]
fn doctor_json_has_every_check_with_a_verdict_and_a_fix_for_each_warning() {
    let args = [
        "doctor",
        "--format",
        "json",
        "--quick",
        "--concurrency",
        "500",
    ];
    let (code, stdout, stderr) = mcpbench(&args, &repo());
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}{stderr}"));
    check_shape(&report, code);
    assert_eq!(report["concurrency"], 500);
    assert_eq!(report["quick"], true);
    // --quick measures neither the timer nor the cores' load, and says so.
    for skipped in ["timer", "other-load"] {
        let f = finding(&report, skipped);
        assert_eq!(f["verdict"], "info", "{f:#}");
        assert_eq!(f["value"], "not measured (--quick)", "{f:#}");
    }
}

/// `ulimit -n 64` (soft and hard): 100 connections need more descriptors than mcpbench can
/// get, so the open-file check warns with the `ulimit` fix and the exit code is 1; the same
/// load under a limit that fits is not a warning.
#[test]
fn a_low_open_file_limit_warns_with_its_fix_and_exits_1() {
    let (code, report) = doctor_with_open_files(64, "--concurrency 100");
    check_shape(&report, code);
    let f = finding(&report, "open-files");
    assert_eq!(f["verdict"], "warn", "{f:#}");
    assert!(
        f["value"]
            .as_str()
            .unwrap()
            .starts_with("soft 64, hard 64;"),
        "{f:#}"
    );
    assert!(
        f["fix"].as_str().unwrap().starts_with("ulimit -n "),
        "{f:#}"
    );
    assert_eq!(code, 1, "{report:#}");

    let (_, report) = doctor_with_open_files(4096, "--concurrency 100");
    let f = finding(&report, "open-files");
    assert_eq!(f["verdict"], "ok", "{f:#}");
    assert!(
        f["value"]
            .as_str()
            .unwrap()
            .starts_with("soft 4096, hard 4096;"),
        "{f:#}"
    );
}

#[test]
fn doctor_text_is_a_table_and_usage_errors_exit_2() {
    let (code, stdout, stderr) = mcpbench(&["doctor", "--quick"], &repo());
    let header = stdout.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("check") && header.contains("verdict") && header.ends_with("value"),
        "{stdout}{stderr}"
    );
    for check in CHECKS {
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("{check} "))),
            "no row for {check}: {stdout}"
        );
    }
    let last = stdout.lines().rev().find(|l| !l.starts_with('(')).unwrap();
    let warned = last.contains("may be unreliable");
    assert_eq!(code, if warned { 1 } else { 0 }, "{stdout}");

    let (code, _, stderr) = mcpbench(&["doctor", "--concurrency", "0"], &repo());
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = mcpbench(&["doctor", "--format", "yaml"], &repo());
    assert_eq!(code, 2, "{stderr}");
}
