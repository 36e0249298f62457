//! A misbehaving server: every failure lands in its own outcome class, nothing vanishes, and
//! the run finishes and writes its results.

use crate::support::{broken, run_in, scratch};

/// Run in the workers' event loop (the default for this load), where every misbehaviour
/// hands its virtual user over to a task.
#[test]
fn each_misbehaviour_lands_in_its_own_class() {
    let s = misbehaviours_land_in_their_classes("auto");
    assert_eq!(s.generator.engine.as_deref(), Some("event_loop"));
    assert!(
        s.generator.handovers.unwrap() > 0,
        "misbehaviours are handed over"
    );
}

/// The same with a task per virtual user: the same classes, the same notes.
#[test]
fn each_misbehaviour_lands_in_its_own_class_with_a_task_per_user() {
    let s = misbehaviours_land_in_their_classes("tasks");
    assert_eq!(s.generator.engine.as_deref(), Some("tasks"));
    assert_eq!(s.generator.handovers, None);
}

fn misbehaviours_land_in_their_classes(engine: &str) -> mcpbench::report::summary::Summary {
    let server = broken::start();
    let mut text = format!(
        "name = \"broken\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 10\nduration = \"2s\"\ntimeout = \"300ms\"\nengine = \"{engine}\"\n",
        server.addr
    );
    for tool in broken::TOOLS {
        text.push_str(&format!(
            "[[workload]]\nmethod = \"tools/call\"\ntool = \"{tool}\"\n"
        ));
    }
    let dir = scratch();
    let out = run_in(&text, dir.path()).expect("the run finishes despite the server");
    let s = &out.summary;
    let expect: &[(&str, &str)] = &[
        ("ok", "ok"),
        ("toolerror", "tool_error"),
        ("rpcerror", "rpc_error(-32603)"),
        ("inputrequired", "input_required"),
        ("badresulttype", "protocol(bad_result_type)"),
        ("http500", "http(500)"),
        ("auth401", "http(401 auth)"),
        ("forbidden403", "http(403 forbidden)"),
        ("limited429", "http(429 rate_limited)"),
        ("badjson", "protocol(bad_json)"),
        ("wrongid", "protocol(wrong_id)"),
        ("reset", "io"),
        ("stall", "timeout"),
        ("truncated", "io"),
        ("ssenoresp", "protocol(no_response)"),
        ("badtype", "protocol(bad_content_type)"),
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
    for note in [
        "wrong JSON-RPC id",
        "responses were 401 (auth): credentials missing, wrong or expired",
        "responses were 403 (forbidden): a policy denied the call",
        "responses were 429 (rate_limited), advising Retry-After p50 2.00s max 2.00s",
        // The sample of a content type MCP does not use names the type that arrived.
        "answers to tools/call:badtype were neither JSON nor an SSE stream \
         (protocol(bad_content_type)), e.g. expected application/json or text/event-stream, \
         got text/plain; charset=utf-8",
    ] {
        assert!(
            s.notes.iter().any(|n| n.contains(note)),
            "{note}: {:?}",
            s.notes
        );
    }
    // Bounded: requests stop at the end and stragglers get at most the timeout.
    assert!(
        s.measured_seconds < 2.0 + 0.3 + 1.0,
        "{}",
        s.measured_seconds
    );
    assert!(out.dir.join("summary.json").is_file() && out.dir.join("latency.hlog").is_file());
    out.summary
}

/// The same over stdio (multiplexed, id-matched): a child that misbehaves per tool name. One
/// tool per run, so a broken child can only affect its own requests.
#[test]
fn stdio_misbehaviours_land_in_their_classes() {
    let script = crate::support::repo().join("tests/fixtures/broken_stdio.py");
    let cases: &[(&str, &str)] = &[
        ("ok", "ok"),
        ("noisy", "ok"),
        ("toolerror", "tool_error"),
        ("rpcerror", "rpc_error(-32603)"),
        ("inputrequired", "input_required"),
        ("wrongid", "timeout"),
        ("garbage", "protocol(bad_json)"),
        ("exit", "io"),
        ("stall", "timeout"),
    ];
    for (tool, class) in cases {
        let text = format!(
            "name = \"broken-stdio\"\n[target]\ncommand = [\"python3\", \"{}\"]\n[load]\nconcurrency = 2\nduration = \"1s\"\ntimeout = \"300ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"{tool}\"\n",
            script.display()
        );
        let dir = scratch();
        let out = run_in(&text, dir.path()).expect("the run finishes");
        let op = out
            .summary
            .operations
            .iter()
            .find(|o| o.name == format!("tools/call:{tool}"))
            .unwrap();
        let line = mcpbench::report::text::outcomes_line(&op.outcomes);
        assert!(op.started > 0, "{tool}: never sent");
        assert_eq!(line, format!("{class} {}", op.started), "{tool}");
        assert_eq!(out.summary.totals.unaccounted, 0, "{tool}");
        let se = &out.summary.sessions;
        if *tool == "wrongid" {
            assert!(
                se.unmatched_responses > 0,
                "wrong ids are counted, not dropped silently"
            );
            assert!(
                out.summary
                    .notes
                    .iter()
                    .any(|n| n.contains("ids never sent")),
                "{:?}",
                out.summary.notes
            );
        } else {
            assert_eq!(se.unmatched_responses, 0, "{tool}");
        }
        if *tool == "stall" {
            assert!(
                out.summary.sessions.cancels_sent > 0,
                "timed-out requests are cancelled with notifications/cancelled"
            );
        }
    }
}

/// Unusual but correct server behaviour the client must handle: a response stream closed
/// after a priming event with `retry` (resumed with GET + Last-Event-ID, 2025-11-25), and a
/// server `ping` on the response stream that must be answered before the response comes.
#[test]
fn resumed_streams_and_server_pings_succeed() {
    let server = broken::start();
    let mut text = format!(
        "name = \"unusual\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 1\nduration = \"1s\"\ntimeout = \"3s\"\n",
        server.addr
    );
    for tool in broken::UNUSUAL {
        text.push_str(&format!(
            "[[workload]]\nmethod = \"tools/call\"\ntool = \"{tool}\"\n"
        ));
    }
    let dir = scratch();
    let out = run_in(&text, dir.path()).unwrap();
    for tool in broken::UNUSUAL {
        let op = out
            .summary
            .operations
            .iter()
            .find(|o| o.name == format!("tools/call:{tool}"))
            .unwrap();
        assert!(op.started > 0, "{tool}: never sent");
        assert_eq!(op.outcomes.ok, op.started, "{tool}: {:?}", op.outcomes);
    }
}

/// `hang_after`: a request left unanswered while the server goes on answering others is a
/// `hang` (with its operation and session noted); a server that answers nothing any more is a
/// `timeout`, as without it.
#[test]
fn a_request_stuck_while_others_are_answered_is_a_hang() {
    let script = crate::support::repo().join("tests/fixtures/broken_stdio.py");
    let run = |stuck: &str| {
        let text = format!(
            "name = \"hang\"\n[target]\ncommand = [\"python3\", \"{}\"]\n[load]\nconcurrency = 4\nworkers = 1\nsessions = \"shared\"\nduration = \"1500ms\"\ntimeout = \"1s\"\nhang_after = \"200ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"ok\"\nweight = 9\n[[workload]]\nmethod = \"tools/call\"\ntool = \"{stuck}\"\nweight = 1\n",
            script.display()
        );
        let dir = scratch();
        let out = run_in(&text, dir.path()).expect("the run finishes");
        let op = |name: &str| {
            out.summary
                .operations
                .iter()
                .find(|o| o.name == format!("tools/call:{name}"))
                .cloned()
                .unwrap()
        };
        assert_eq!(out.summary.totals.unaccounted, 0);
        (op("ok"), op(stuck), out.summary)
    };
    // Lost requests, the server answering the rest: each lost one is a hang, none a timeout.
    let (ok, lost, summary) = run("lost");
    assert!(ok.outcomes.ok > 10, "{:?}", ok.outcomes);
    assert!(lost.started > 0, "never sent");
    // (Every virtual user stuck at once leaves nothing answered: those end as timeouts.)
    assert_eq!(
        lost.outcomes.hang + lost.outcomes.timeout,
        lost.started - lost.outcomes.cancelled,
        "{:?}",
        lost.outcomes
    );
    assert!(
        lost.outcomes.hang > lost.outcomes.timeout,
        "{:?}",
        lost.outcomes
    );
    assert!(
        summary.notes.iter().any(|n| n
            .contains("no answer after 200ms while the target answered requests sent after it")),
        "{:?}",
        summary.notes
    );
    // A server that stalls answers nothing after it: the stalled request and every one after
    // it time out; none is a hang.
    let (ok, stall, _) = run("stall");
    assert!(stall.started > 0, "never sent");
    assert_eq!(
        stall.outcomes.hang + ok.outcomes.hang,
        0,
        "{:?}",
        stall.outcomes
    );
    assert!(stall.outcomes.timeout > 0, "{:?}", stall.outcomes);
}
