//! Exact accounting, end to end: a million REST-backed calls, open loop, against the release
//! build of `mcpbench serve` in front of the release mock backend injecting errors and latency
//! spikes. Every request is in exactly one outcome class, and the backend's own counters equal
//! the calls the generator saw reach it. (Release binaries: a debug build makes a few hundred
//! calls a second. Runs in the `full` profile, as CI does.)

use std::process::Command;

use crate::support::{http, listening, release, scenario, scratch};

/// Calls in the run.
const CALLS: u64 = 1_000_000;

#[test]
#[ignore = "builds the release binaries and drives a million calls: scripts/test runs this"]
fn a_million_rest_backed_calls_are_each_counted_once_and_match_the_backend() {
    let bin = release::binaries();
    let (_backend, backend_addr) = listening(Command::new(bin.join("mock-backend")).args([
        "--listen",
        "127.0.0.1:0",
        "--latency",
        "lognormal:p50=100us,p99=20ms",
        "--error-rate",
        "0.05",
    ]));
    let (_server, server_addr) = listening(Command::new(bin.join("mcpbench")).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--backend",
        &format!("http://{backend_addr}"),
    ]));
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "million.toml",
        &format!(
            r#"name = "million"
[target]
url = "http://{server_addr}/mcp"
[load]
model = "open"
rate = 6000
arrival = "poisson"
max_in_flight = 512
max_queued = {CALLS}
requests = {CALLS}
timeout = "60s"
[[workload]]
method = "tools/call"
tool = "get-invoice"
weight = 2
arguments = {{ id = "${{range:1..10000}}" }}
[[workload]]
method = "tools/call"
tool = "search-contacts"
weight = 1
arguments = {{ query = "${{pick:Leanne,Ervin,Clementine}}" }}
"#
        ),
    );
    let out = dir.path().join("run");
    let run = Command::new(bin.join("mcpbench"))
        .args(["run", file.to_str().unwrap(), "--quiet", "--workers", "1"])
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let t = &s["totals"];
    // Every arrival was sent (none dropped: a machine slower than the rate queues them, the
    // backlog holds them all) and every one ended exactly once.
    assert_eq!(t["dropped"], 0, "{t}");
    assert_eq!(t["started"], CALLS, "{t}");
    assert_eq!(t["unaccounted"], 0, "{t}");
    let (mut reached, mut ok, mut tool_error) = (0, 0, 0);
    for op in s["operations"].as_array().unwrap().iter().skip(1) {
        let o = &op["outcomes"];
        let in_classes: u64 = ["ok", "tool_error", "input_required", "assertion", "timeout"]
            .iter()
            .chain(&["connect", "io", "cancelled"])
            .map(|k| o[*k].as_u64().unwrap_or(0))
            .sum::<u64>()
            + ["rpc_error", "http", "protocol", "local"]
                .iter()
                .flat_map(|k| o[*k].as_object().into_iter().flatten())
                .map(|(_, n)| n.as_u64().unwrap())
                .sum::<u64>();
        assert_eq!(op["started"], in_classes, "one class each: {op}");
        // The backend answers every call (injected 500s become tool errors): no other class.
        assert_eq!(
            o["ok"].as_u64().unwrap() + o["tool_error"].as_u64().unwrap(),
            op["started"].as_u64().unwrap(),
            "{op}"
        );
        ok += o["ok"].as_u64().unwrap();
        tool_error += o["tool_error"].as_u64().unwrap();
        reached += op["started"].as_u64().unwrap();
    }
    assert_eq!(reached, CALLS);
    let stats = http(backend_addr, "GET", "/stats", &[], b"").json();
    let total = &stats["total"];
    assert_eq!(total["requests"], reached, "backend {stats}");
    assert_eq!(total["ok"], ok, "backend {stats}");
    assert_eq!(total["injected_errors"], tool_error, "backend {stats}");
    // The injected rate shows through, within sampling error (5 % of a million: ±0.2 %).
    let rate = tool_error as f64 / reached as f64;
    assert!((0.045..0.055).contains(&rate), "{rate}");
}
