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
        err.contains("is not usable: cannot open an MCP session: cannot connect"),
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
    assert!(out.contains("error rate 0.00%"), "{out}");
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
