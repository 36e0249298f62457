//! The small version of `benches/scale.sh`: 1 000 and then 5 000 concurrent MCP sessions (each
//! virtual user its own session, opened at 2 500 a second, then one `echo` call every few
//! seconds) against the release
//! `mcpbench serve` in a process of its own. Every session opens and every call succeeds, and
//! memory per session stays within the bounds: the generator's peak resident memory grows by at
//! most 12 KiB per session, and the server's resident memory with every session open (its last
//! sample in the run, which watches it by pid: the sessions idle between calls) by at most
//! 16 KiB — slopes from 1 000 to 5 000 sessions, so that fixed costs drop out. (The server's
//! peak also holds the opening storm's transient requests: about 1 KiB per session more.) Memory, not time: the figures do not depend on how
//! busy the machine is. Release binaries (a debug build's futures and buffers are other sizes).

use std::path::Path;
use std::process::Command;

use crate::support::{listening, release, scenario, scratch};

/// What the issue set: KiB per session in the generator and in the reference server.
const GENERATOR_KIB: f64 = 12.0;
const SERVER_KIB: f64 = 16.0;

/// Resident memory of one run, from its summary: the generator's peak, and the server's with
/// every session open.
struct Memory {
    generator: u64,
    server: u64,
}

/// `users` sessions for a few seconds against a fresh server; `target` adds lines to
/// `[target]`. Asserts that every session opened and every call succeeded.
fn run(bin: &Path, users: u64, target: &str) -> Memory {
    let (server, addr) = listening(Command::new(bin.join("mcpbench")).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--max-connections",
        "15000",
    ]));
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "scale.toml",
        &format!(
            r#"name = "scale"
[target]
url = "http://{addr}/mcp"
{target}
[load]
concurrency = {users}
open_rate = 2500
think = "3s"
duration = "8s"
timeout = "30s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hello" }}
"#
        ),
    );
    let out = dir.path().join("run");
    let run = Command::new(bin.join("mcpbench"))
        .args(["run", file.to_str().unwrap(), "--quiet", "--target-pid"])
        .arg(server.0.id().to_string())
        .arg("--output")
        .arg(&out)
        .output()
        .expect("mcpbench run");
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let (t, o) = (&s["totals"], &s["session_opening"]);
    assert_eq!(o["ok"], users, "every session opens: {text}");
    assert_eq!(t["completed"], t["started"], "every call completes: {text}");
    assert_eq!(t["ok"], t["started"], "every call succeeds: {text}");
    assert!(
        t["ok"].as_u64().unwrap() >= users,
        "each user called at least once: {text}"
    );
    let last = &s["target_processes"][0]["rss_last_bytes"];
    Memory {
        generator: s["generator"]["peak_rss_bytes"]
            .as_u64()
            .expect("peak_rss_bytes"),
        server: last.as_u64().expect("the server is watched"),
    }
}

/// Runs 1 000 and 5 000 sessions of a shape and holds the slopes to the bounds.
fn per_session_memory_is_bounded(target: &str) {
    let bin = release::binaries();
    let (small, large) = (1_000, 5_000);
    let a = run(&bin, small, target);
    let b = run(&bin, large, target);
    let kib = |x: u64, y: u64| (y as f64 - x as f64) / (large - small) as f64 / 1024.0;
    let (g, s) = (kib(a.generator, b.generator), kib(a.server, b.server));
    eprintln!("{target:?}: generator {g:.1} KiB/session, server {s:.1} KiB/session");
    assert!(
        g <= GENERATOR_KIB,
        "generator: {g:.1} KiB per session (at most {GENERATOR_KIB})"
    );
    assert!(
        s <= SERVER_KIB,
        "server: {s:.1} KiB per session (at most {SERVER_KIB})"
    );
}

#[test]
#[ignore = "needs the release build: scripts/test runs this"]
fn sessions_each_on_a_connection_fit_the_memory_bounds() {
    per_session_memory_is_bounded("");
}

#[test]
#[ignore = "needs the release build: scripts/test runs this"]
fn sessions_sharing_http2_connections_fit_the_memory_bounds() {
    per_session_memory_is_bounded("http = \"2\"\nsessions_per_connection = 500");
}
