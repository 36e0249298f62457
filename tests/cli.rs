//! The command line: validation errors, exit codes, unreachable targets, a real short run.

use crate::support::{DEAD_PORT, mcpbench, repo, scenario, scratch};

const GOOD: &str = r#"name = "cli-test"
[load]
concurrency = 2
duration = "1s"
timeout = "2s"

[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hi" }
"#;

#[test]
fn validate_accepts_every_shipped_scenario() {
    let dir = repo().join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let (code, out, err) = mcpbench(&["validate", p.to_str().unwrap()], &repo());
            assert_eq!(code, 0, "{}: {out}{err}", p.display());
            n += 1;
        }
    }
    assert!(n >= 1);
}

/// Each malformed scenario names file, line, column and key, gives a hint, and exits 2.
#[test]
fn malformed_scenarios_get_precise_errors_and_exit_2() {
    let dir = scratch();
    let cases: &[(&str, String, &str, &str)] = &[
        (
            "bad_toml.toml",
            GOOD.replace("[load]", "[load"),
            "bad_toml.toml:2:",
            "hint",
        ),
        (
            "unknown_key.toml",
            GOOD.replace("concurrency = 2", "concurency = 2"),
            "unknown_key.toml:3:1: `load.concurency`: unknown key `concurency`",
            "did you mean `concurrency`?",
        ),
        (
            "wrong_type.toml",
            GOOD.replace("concurrency = 2", "concurrency = \"two\""),
            "wrong_type.toml:3:15: `load.concurrency`: invalid type",
            "virtual users",
        ),
        // Asked of the built-in server itself (its tools/list), like any target.
        (
            "unknown_tool.toml",
            GOOD.replace("tool = \"echo\"", "tool = \"ecoh\""),
            "unknown_tool.toml:9:8: `workload[1].tool`: unknown tool `ecoh`",
            "did you mean `echo`?",
        ),
        (
            "bad_duration.toml",
            GOOD.replace("duration = \"1s\"", "duration = \"1 fortnight\""),
            "bad_duration.toml:4:12: `load.duration`",
            "a duration",
        ),
        (
            "bad_generator.toml",
            GOOD.replace("message = \"hi\"", "message = \"${range:9..1}\""),
            "`workload[1].arguments.message`: `${range:9..1}`: the range is empty",
            "generators",
        ),
    ];
    for (name, text, expect, hint) in cases {
        let p = scenario(dir.path(), name, text);
        let (code, _out, err) = mcpbench(&["validate", p.to_str().unwrap()], dir.path());
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains(expect),
            "{name}: expected {expect:?} in:\n{err}"
        );
        assert!(
            err.contains(hint),
            "{name}: expected hint {hint:?} in:\n{err}"
        );
        // `run` refuses the same file the same way, before doing anything.
        let (code, _, err2) = mcpbench(&["run", p.to_str().unwrap()], dir.path());
        assert_eq!(code, 2);
        assert!(err2.contains(expect), "{name} (run): {err2}");
    }
    let (code, _, err) = mcpbench(&["validate", "does-not-exist.toml"], dir.path());
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read scenario does-not-exist.toml"),
        "{err}"
    );
}

/// `validate` checks a remote target's file alone; `--connect` also asks the target for its
/// tools, and a misspelt one gets the same diagnostic as on the built-in server.
#[test]
fn validate_connect_checks_the_workload_against_a_remote_target() {
    let dir = scratch();
    let srv = crate::support::launch(mcpbench::server::Config::default());
    let text = format!(
        "[target]\nurl = \"{}\"\n{}",
        srv.mcp_url(),
        GOOD.replace("name = \"cli-test\"\n", "")
            .replace("tool = \"echo\"", "tool = \"ecoh\"")
    );
    let p = scenario(dir.path(), "remote.toml", &text);
    let (code, out, err) = mcpbench(&["validate", p.to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = mcpbench(&["validate", "--connect", p.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("remote.toml:10:8: `workload[1].tool`: unknown tool `ecoh`"),
        "{err}"
    );
    assert!(err.contains("did you mean `echo`?"), "{err}");
    let fixed = scenario(dir.path(), "fixed.toml", &text.replace("ecoh", "echo"));
    let (code, out, err) = mcpbench(
        &["validate", "--connect", fixed.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tools listed, 2025-11-25 negotiated"), "{out}");
}

#[test]
fn unreachable_target_is_a_clear_error_not_a_hang() {
    let dir = scratch();
    let text = format!(
        "[target]\nurl = \"http://127.0.0.1:{}/mcp\"\n{}",
        DEAD_PORT,
        GOOD.replace("name = \"cli-test\"\n", "")
    );
    let p = scenario(dir.path(), "dead.toml", &text);
    let (code, out, err) = mcpbench(
        &[
            "run",
            p.to_str().unwrap(),
            "--results-root",
            dir.path().to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("dead.toml:2:7: `target.url`: ")
            && err.contains("is not usable: nothing listens on 127.0.0.1:0 (connection refused)"),
        "{err}"
    );
    // Nothing half-written: no run directory was made.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_short_run_prints_the_table_and_writes_results() {
    let dir = scratch();
    let p = scenario(dir.path(), "short.toml", GOOD);
    let outdir = dir.path().join("out");
    let (code, out, err) = mcpbench(
        &[
            "run",
            p.to_str().unwrap(),
            "--output",
            outdir.to_str().unwrap(),
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("tools/call:echo"), "{out}");
    assert!(out.contains("errors 0.00%"), "{out}");
    assert!(outdir.join("summary.json").is_file());
    assert!(outdir.join("latency.hlog").is_file());
}

/// `mcpbench serve` prints where it listens (port 0 works), serves MCP with its own mock
/// backend, and shuts down cleanly on SIGINT.
#[test]
fn serve_binds_loopback_prints_its_address_and_stops_on_sigint() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line}"));
    let addr: std::net::SocketAddr = url.split('/').next().unwrap().parse().unwrap();
    assert!(addr.ip().is_loopback());
    let (sid, r) = crate::support::initialize(addr, "2025-11-25");
    assert_eq!(r.status, 200);
    let call = crate::support::post(
        addr,
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search-contacts","arguments":{"query":"Leanne"}}}"#,
    );
    assert!(String::from_utf8_lossy(&call.body).contains("Leanne Graham"));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// `mcpbench init URL` against the reference server: a scenario with every tool that answers
/// a trial call (the `fail` tool is written commented out, with the server's reason), which
/// validates and runs with zero errors.
#[test]
fn init_writes_a_scenario_that_runs_clean_against_the_reference_server() {
    let servers = crate::support::servers(
        mcpbench::server::ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs::default(),
    );
    let dir = scratch();
    let url = servers.mcp_url();
    let (text, out) = crate::support::init_runs_clean("reference server", &[&url], dir.path());
    for tool in mcpbench::server::BUILTIN_TOOLS {
        if *tool == "fail" {
            assert!(
                text.contains(
                    "# left out: a trial call failed: tool_error: the fail tool always fails"
                ) && text.contains("# tool = \"fail\""),
                "{text}"
            );
        } else {
            assert!(
                text.contains(&format!("tool = \"{tool}\"\narguments = ")),
                "{tool}: {text}"
            );
        }
    }
    assert!(out.contains("left out (commented): fail"), "{out}");
    // An existing file is kept unless --force.
    let file = dir.path().join("init.toml").display().to_string();
    let (code, _, err) = mcpbench(&["init", &url, "--output", &file], dir.path());
    assert_eq!(code, 2);
    assert!(
        err.contains("exists; choose another --output, or --force"),
        "{err}"
    );
}

#[test]
fn run_without_a_scenario_says_what_to_do() {
    let (code, out, err) = mcpbench(&["run"], &repo());
    assert_eq!(code, 2, "{out}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("mcpbench run scenarios/quickstart.toml") && err.contains("mcpbench init"),
        "{err}"
    );
}

#[test]
fn overrides_on_the_command_line_are_checked_like_the_file() {
    let dir = scratch();
    let (code, _, err) = mcpbench(
        &[
            "run",
            "scenarios/quickstart.toml",
            "--set",
            "load.timeout=soon",
            "--quiet",
        ],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: --set load.timeout=soon: `load.timeout`:"),
        "{err}"
    );
    let (code, _, err) = mcpbench(
        &[
            "run",
            "scenarios/quickstart.toml",
            "--concurrency",
            "0",
            "--quiet",
        ],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: --concurrency takes a whole number ≥ 1 (virtual users); got 0"),
        "{err}"
    );
    // A value of the right type is held to the scenario's rules, named by its flag.
    let (code, _, err) = mcpbench(
        &[
            "run",
            "scenarios/quickstart.toml",
            "--concurrency",
            "200000",
            "--quiet",
        ],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: --concurrency 200000: `load.concurrency`:"),
        "{err}"
    );
    let out_dir = dir.path().join("run").display().to_string();
    let (code, out, err) = mcpbench(
        &[
            "run",
            "scenarios/quickstart.toml",
            "--concurrency",
            "3",
            "--duration",
            "2s",
            "--set",
            "load.warmup=0s",
            "--quiet",
            "--output",
            &out_dir,
        ],
        &repo(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["load"]["concurrency"], 3);
    assert_eq!(summary["load"]["duration_seconds"], 2.0);
}

#[test]
fn progress_json_is_one_object_per_interval_with_the_csv_fields() {
    let dir = scratch();
    let out_dir = dir.path().join("run").display().to_string();
    let (code, _, err) = mcpbench(
        &[
            "run",
            "scenarios/quickstart.toml",
            "--duration",
            "3s",
            "--set",
            "load.warmup=1s",
            "--progress",
            "json",
            "--output",
            &out_dir,
        ],
        &repo(),
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let csv = std::fs::read_to_string(dir.path().join("run/timeseries.csv")).unwrap();
    let mut header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    header.sort_unstable();
    assert!(rows.len() >= 3, "{err}");
    for r in &rows {
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, header);
    }
    let ok: u64 = rows.iter().map(|r| r["ok"].as_u64().unwrap()).sum();
    let csv_ok: u64 = crate::support::csv_numbers(&csv, "ok").iter().sum();
    assert_eq!(ok, csv_ok, "the lines carry every interval");
}

#[test]
fn completions_and_man_page_come_from_the_cli() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = mcpbench(&["completions", shell], &repo());
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("mcpbench") && out.contains("concurrency"),
            "{shell}"
        );
    }
    let (code, out, _) = mcpbench(&["man"], &repo());
    assert_eq!(code, 0);
    assert!(
        out.starts_with(".ie") || out.contains(".TH mcpbench"),
        "{}",
        &out[..200.min(out.len())]
    );
    assert!(out.contains("init") && out.contains("completions"));
}

/// Runs the quickstart briefly with extra `--set`s; (exit code, stdout, summary.json).
fn quick_run(sets: &[&str], duration: &str) -> (i32, String, serde_json::Value) {
    let dir = scratch();
    let mut extra = vec!["--duration", duration];
    for s in sets {
        extra.extend_from_slice(&["--set", s]);
    }
    let (code, out, err, run) = crate::support::quickstart(dir.path(), &extra);
    let summary = std::fs::read(run.join("summary.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_else(|_| panic!("no summary.json: {out}{err}"));
    (code, out, summary)
}

#[test]
fn thresholds_decide_the_exit_code_both_ways() {
    let (code, out, s) = quick_run(
        &[
            "thresholds.p99=< 10s",
            "thresholds.error_rate=< 1%",
            "thresholds.\"tools/call:echo\".throughput=> 1/s",
        ],
        "2s",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("thresholds: 3 of 3 held"), "{out}");
    assert!(
        s["thresholds"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["passed"] == true),
        "{s}"
    );
    assert!(s["totals"]["latency"]["p99_ms"].as_f64().unwrap() > 0.0);

    let (code, out, s) = quick_run(
        &["thresholds.p99=< 1us", "thresholds.error_rate=< 1%"],
        "2s",
    );
    assert_eq!(code, 1, "a breached threshold is exit code 1: {out}");
    assert!(
        out.contains("thresholds: 1 of 2 held — BREACHED") && out.contains("FAIL p99 < 1us"),
        "{out}"
    );
    let p99 = &s["thresholds"][0];
    assert_eq!(
        (p99["name"].as_str(), p99["passed"].as_bool()),
        (Some("p99"), Some(false)),
        "{s}"
    );
    assert!(p99["value"].as_f64().unwrap() > 0.001);
    assert_eq!(s["interrupted"], false);
}

#[test]
fn abort_on_fail_stops_the_run_at_the_first_breach() {
    let (code, out, s) = quick_run(
        &["thresholds.p99=< 1us", "thresholds.abort_on_fail=true"],
        "60s",
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(s["interrupted"], true);
    assert!(
        s["measured_seconds"].as_f64().unwrap() < 10.0,
        "stopped early: {s}"
    );
    assert!(
        s["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("abort_on_fail")),
        "{s}"
    );
}

/// `--metrics-listen`: while the run goes, GET /metrics answers with the live figures in the
/// Prometheus text format (requests by outcome, latency quantiles, in flight, elapsed).
#[test]
fn a_running_test_serves_prometheus_metrics() {
    use std::io::{BufRead, Read, Write};
    let dir = scratch();
    let out = dir.path().join("run").display().to_string();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args([
            "run",
            "scenarios/quickstart.toml",
            "--duration",
            "6s",
            "--set",
            "load.warmup=0s",
            "--no-tui",
            "--metrics-listen",
            "127.0.0.1:0",
            "--output",
            &out,
        ])
        .current_dir(repo())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("metrics: http://")
        .and_then(|l| l.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("the address is announced first: {line}"))
        .to_string();
    // Wait for two progress lines: data has been published.
    for _ in 0..2 {
        line.clear();
        stderr.read_line(&mut line).unwrap();
    }
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    let r = get("/metrics");
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    assert!(r.contains("Content-Type: text/plain; version=0.0.4"), "{r}");
    assert!(r.contains("mcpbench_requests_total{scenario=\"quickstart\",operation=\"tools/call:echo\",outcome=\"ok\"}"), "{r}");
    assert!(r.contains("mcpbench_latency_seconds{scenario=\"quickstart\",operation=\"tools/call:echo\",quantile=\"0.99\"}"), "{r}");
    assert!(
        r.contains("mcpbench_in_flight_requests{scenario=\"quickstart\"}"),
        "{r}"
    );
    assert!(get("/other").starts_with("HTTP/1.1 404"));
    let status = child.wait().unwrap();
    assert!(status.success());
}

/// `validate` takes `run`'s overrides, applied and checked the same way (errors name the flag).
#[test]
fn validate_takes_the_same_overrides_as_run() {
    let (code, out, err) = mcpbench(
        &[
            "validate",
            "scenarios/quickstart.toml",
            "--concurrency",
            "7",
            "--set",
            "load.duration=3s",
        ],
        &repo(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("7 virtual users for 3s"), "{out}");
    let (code, out, err) = mcpbench(
        &[
            "validate",
            "scenarios/quickstart.toml",
            "--url",
            "http://127.0.0.1:9/mcp",
            "-H",
            "Authorization: Bearer x",
        ],
        &repo(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("against http://127.0.0.1:9/mcp"), "{out}");
    let (code, _, err) = mcpbench(
        &[
            "validate",
            "scenarios/quickstart.toml",
            "--set",
            "load.timeout=soon",
        ],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: --set load.timeout=soon: `load.timeout`:"),
        "{err}"
    );
}

/// `mcpbench report DIR` prints the table `run` printed at its end (from summary.json read
/// back) and writes the reports again; --format prints the other renderings; a directory of
/// repeated runs prints what `run --repeat` printed.
#[test]
fn report_prints_a_finished_runs_table_again() {
    let dir = scratch();
    let (code, printed, err, run) = crate::support::quickstart(dir.path(), &["--duration", "2s"]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(run.join("report.md")).unwrap();
    let at = run.display().to_string();
    let (code, out, err) = mcpbench(&["report", &at], &repo());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, printed, "the same table as the run printed");
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    let file = run.join("summary.json").display().to_string();
    for (format, expected) in [("markdown", &md), ("json", &summary)] {
        let (code, out, err) = mcpbench(&["report", &file, "--format", format], &repo());
        assert_eq!(code, 0, "{err}");
        assert_eq!(&out, expected, "{format}");
    }
    let (code, out, _) = mcpbench(&["report", &at, "--format", "prometheus"], &repo());
    assert_eq!(code, 0);
    assert!(out.contains("# TYPE mcpbench_"), "{out}");

    let dir = scratch();
    let (code, printed, err, runs) =
        crate::support::quickstart(dir.path(), &["--duration", "1s", "--repeat", "2"]);
    assert_eq!(code, 0, "{err}");
    let at = runs.display().to_string();
    let (code, out, err) = mcpbench(&["report", &at], &repo());
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("run 1/2: "), "{out}");
    assert_eq!(out, printed, "the same table as `run --repeat` printed");
    let (_, out, _) = mcpbench(&["report", &at, "--format", "junit"], &repo());
    assert_eq!(out.matches("<testsuite ").count(), 2, "{out}");
}
