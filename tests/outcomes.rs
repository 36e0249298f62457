//! A misbehaving server: every failure lands in its own outcome class, nothing vanishes, and
//! the run finishes and writes its results.

use std::sync::Arc;

use mcpbench::driver::{self, RunOptions};
use tokio_util::sync::CancellationToken;

use crate::support::{broken, scratch};

#[test]
fn each_misbehaviour_lands_in_its_own_class() {
    let server = broken::start();
    let mut text = format!(
        "name = \"broken\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 10\nduration = \"2s\"\ntimeout = \"300ms\"\n",
        server.addr
    );
    for tool in broken::TOOLS {
        text.push_str(&format!(
            "[[workload]]\nmethod = \"tools/call\"\ntool = \"{tool}\"\n"
        ));
    }
    let plan = Arc::new(mcpbench::scenario::parse("broken.toml", &text, &|_| None).unwrap());
    let dir = scratch();
    let opts = RunOptions {
        output: Some(dir.path().join("run")),
        ..RunOptions::default()
    };
    let out = driver::run(plan, &opts, CancellationToken::new())
        .expect("the run finishes despite the server");
    let s = &out.summary;
    let expect: &[(&str, &str)] = &[
        ("ok", "ok"),
        ("toolerror", "tool_error"),
        ("rpcerror", "rpc_error(-32603)"),
        ("http500", "http(500)"),
        ("badjson", "protocol(bad_json)"),
        ("wrongid", "protocol(wrong_id)"),
        ("reset", "io"),
        ("stall", "timeout"),
        ("truncated", "io"),
        ("ssenoresp", "protocol(no_response)"),
    ];
    for (tool, class) in expect {
        let op = s
            .operations
            .iter()
            .find(|o| o.name == format!("tools/call:{tool}"))
            .unwrap();
        let line = mcpbench::report::text::outcomes_line(&op.outcomes);
        assert!(op.started > 0, "{tool}: never sent");
        assert_eq!(
            line,
            format!("{class} {}", op.started),
            "{tool}: every request ends as {class}"
        );
        assert_eq!(
            op.started,
            op.completed + op.failed + op.cancelled,
            "{tool}"
        );
    }
    assert_eq!(s.totals.unaccounted, 0);
    assert!(
        s.notes.iter().any(|n| n.contains("wrong JSON-RPC id")),
        "{:?}",
        s.notes
    );
    // Bounded: requests stop at the end and stragglers get at most the timeout.
    assert!(
        s.measured_seconds < 2.0 + 0.3 + 1.0,
        "{}",
        s.measured_seconds
    );
    assert!(out.dir.join("summary.json").is_file() && out.dir.join("latency.hlog").is_file());
}
