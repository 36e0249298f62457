//! The session-leak check: session churn (open, call, close) against a real `mcpbench serve`
//! process watched by pid; the target's memory per session opened is the slope of its
//! resident memory over the sessions opened. It flags the leaking fixture (`serve
//! --leak-sessions`: DELETE answers 200, the session and 16 KiB stay for ever) and passes the
//! reference server. Memory, not time: the churn is paced so any machine makes enough samples.

use std::process::Command;

use crate::support::{listening, mcpbench, scenario, scratch, valid_summary};

/// What the leaking fixture keeps per session beyond the session itself.
const LEAKED: f64 = 16.0 * 1024.0;

/// Three thousand per-request sessions at 500/s against `mcpbench serve EXTRA…`, watched by
/// pid: the exit code, summary.json and the printed table.
fn churn(extra: &[&str]) -> (i32, serde_json::Value, String) {
    watched_run(
        extra,
        "model = \"open\"\nrate = 500\nconcurrency = 16\nrequests = 3000\nduration = \"60s\"\nsessions = \"per-request\"",
    )
}

/// `[load]` as given, `echo` calls, the threshold `target_memory_per_session < 4KiB`, against
/// `mcpbench serve EXTRA…` watched by pid: the exit code, summary.json and the printed table.
fn watched_run(extra: &[&str], load: &str) -> (i32, serde_json::Value, String) {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_mcpbench"));
    serve.args(["serve", "--listen", "127.0.0.1:0", "--threads", "1"]);
    let (server, addr) = listening(serve.args(extra));
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "leak.toml",
        &format!(
            r#"name = "session-leak"
[target]
url = "http://{addr}/mcp"
[load]
{load}
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hello" }}
[thresholds]
target_memory_per_session = "< 4KiB"
"#
        ),
    );
    let out = dir.path().join("run");
    let pid = server.0.id().to_string();
    let (code, stdout, stderr) = mcpbench(
        &[
            "run",
            file.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--no-tui",
            "--target-pid",
            &pid,
        ],
        dir.path(),
    );
    drop(server);
    (code, valid_summary(&out), format!("{stdout}\n{stderr}"))
}

#[test]
fn the_leak_check_flags_a_server_that_never_frees_sessions_and_passes_the_reference() {
    let (code, s, text) = churn(&["--leak-sessions"]);
    assert_eq!(code, 1, "{text}");
    let m = &s["target_memory_per_session"];
    let per = m["bytes_per_session"].as_f64().expect("a figure");
    // The fixture's 16 KiB and the session it keeps; the leaked list's own growth is noise.
    assert!(
        (LEAKED..LEAKED * 1.5).contains(&per),
        "{per} B per session: {m}\n{text}"
    );
    assert!(m["sessions_opened"].as_u64().unwrap() >= 1000, "{m}");
    let t = &s["thresholds"][0];
    assert_eq!(
        (&t["name"], &t["unit"], &t["passed"], t["value"].as_f64()),
        (
            &serde_json::json!("target_memory_per_session"),
            &serde_json::json!("B"),
            &serde_json::json!(false),
            Some(per)
        ),
        "{t}"
    );
    // The table and the report say the same figure.
    let line = format!("target memory per session opened: {:.1} KiB", per / 1024.0);
    assert!(text.contains(&line), "{line}\n{text}");
    assert!(
        text.contains("FAIL target_memory_per_session < 4KiB"),
        "{text}"
    );

    let (code, s, text) = churn(&[]);
    assert_eq!(code, 0, "{text}");
    let per = s["target_memory_per_session"]["bytes_per_session"]
        .as_f64()
        .expect("a figure");
    assert!(per < 4096.0, "{per} B per session\n{text}");
    assert_eq!(s["thresholds"][0]["passed"], true, "{text}");
}

#[test]
fn too_few_sessions_leave_the_figure_out_and_the_threshold_says_why() {
    let (code, s, text) = watched_run(&[], "concurrency = 2\nduration = \"4s\"\nthink = \"50ms\"");
    assert_eq!(code, 1, "{text}");
    let m = &s["target_memory_per_session"];
    assert!(m.get("bytes_per_session").is_none(), "{m}");
    let why = m["unmeasured"].as_str().expect("why");
    assert!(
        why.contains("sessions opened") && why.contains("1000"),
        "{why}"
    );
    let t = &s["thresholds"][0];
    assert_eq!(
        (&t["passed"], t.get("value")),
        (&serde_json::json!(false), None)
    );
    assert_eq!(t["unjudged"], why, "{t}");
    assert!(text.contains(&format!("not measured: {why}")), "{text}");
}
