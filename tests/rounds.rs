//! First-call rounds, cold starts, divergence and timed replays, against real child processes
//! and the reference server.

use crate::support::{repo, run_in, scratch};
use mcpbench::report::summary::{Operation, Summary};

fn op(s: &Summary, name: &str) -> Operation {
    s.operations
        .iter()
        .find(|o| o.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no operation {name} in {:?}", s.operations))
}

fn lazy_init_target() -> String {
    format!(
        "[target]\ncommand = [\"python3\", \"{}\"]\n",
        repo().join("tests/fixtures/lazy_init_stdio.py").display()
    )
}

fn calls(tools: &[&str], extra: &str) -> String {
    tools
        .iter()
        .map(|t| format!("[[workload]]\nmethod = \"tools/call\"\ntool = \"{t}\"\n{extra}"))
        .collect()
}

/// A server that passes initialize and tools/list and deadlocks when the first calls of two
/// tools arrive together: `first_call` rounds catch it as hangs of exactly those tools; a
/// closed loop of one user, calling them one after the other, never does.
#[test]
fn a_lazy_init_deadlock_is_caught_by_first_call_and_never_by_one_user() {
    let tools = ["index", "cache", "ping"];
    let text = format!(
        "name = \"first-call\"\n{}[load]\npattern = \"first_call\"\nconcurrency = 3\nduration = \"3s\"\ntimeout = \"2s\"\nhang_after = \"400ms\"\n{}",
        lazy_init_target(),
        calls(&tools, "")
    );
    let dir = scratch();
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    assert_eq!(s.load.pattern.as_deref(), Some("first_call"));
    assert_eq!(s.totals.unaccounted, 0);
    let (index, cache, ping) = (
        op(s, "tools/call:index"),
        op(s, "tools/call:cache"),
        op(s, "tools/call:ping"),
    );
    assert!(ping.outcomes.ok > 0, "{:?}", ping.outcomes);
    assert_eq!(ping.outcomes.hang, 0, "{:?}", ping.outcomes);
    assert!(
        index.outcomes.hang > 0 && cache.outcomes.hang > 0,
        "index {:?}, cache {:?}",
        index.outcomes,
        cache.outcomes
    );
    // Rounds: each opened a new process and sent one call per user.
    let init = op(s, "initialize");
    assert!(init.outcomes.ok >= 2, "several rounds: {:?}", init.outcomes);
    // (The end of the run may cut the last round.)
    assert!(
        index.started.abs_diff(ping.started) <= 1,
        "{} {}",
        index.started,
        ping.started
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("requests of tools/call:index hung")),
        "{:?}",
        s.notes
    );

    // The same server and tools, one user at a time: every call answered.
    let text = format!(
        "name = \"one-user\"\n{}[load]\nconcurrency = 1\nduration = \"1500ms\"\ntimeout = \"2s\"\nhang_after = \"400ms\"\n{}",
        lazy_init_target(),
        calls(&tools, "")
    );
    let dir = scratch();
    let out = run_in(&text, dir.path()).expect("the run finishes");
    for t in tools {
        let o = op(&out.summary, &format!("tools/call:{t}"));
        assert!(o.started > 0, "{t} never sent");
        assert_eq!(o.outcomes.ok, o.started, "{t}: {:?}", o.outcomes);
    }
}

/// A tool whose answer depends on the session (here: the server process) is caught as
/// divergence when declared deterministic; a truly deterministic tool is not.
#[test]
fn a_server_answering_differently_per_session_is_caught_as_divergence() {
    let text = format!(
        "name = \"divergence\"\n{}[load]\nconcurrency = 3\nduration = \"1500ms\"\n{}",
        lazy_init_target(),
        calls(&["session", "ping"], "deterministic = true\n")
    );
    let dir = scratch();
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    let (session, ping) = (op(s, "tools/call:session"), op(s, "tools/call:ping"));
    assert!(ping.outcomes.ok > 10, "{:?}", ping.outcomes);
    assert_eq!(ping.outcomes.divergence, 0, "{:?}", ping.outcomes);
    // Three processes: the first answer's process agrees with itself, the other two do not.
    assert!(session.outcomes.divergence > 0, "{:?}", session.outcomes);
    assert!(session.outcomes.ok > 0, "{:?}", session.outcomes);
    let note = s
        .notes
        .iter()
        .find(|n| n.contains("answers of tools/call:session diverged"))
        .unwrap_or_else(|| panic!("{:?}", s.notes));
    assert!(
        note.contains("the same call answered differently") && note.contains("process "),
        "{note}"
    );
    assert!(s.totals.error_rate > 0.0);
}

/// Cold starts: every request spawns the server, initializes, calls and closes; the spawn, the
/// handshake, the call and the whole are timed apart, one of each per request.
#[test]
fn cold_starts_time_each_phase() {
    let text = format!(
        "name = \"cold\"\n{}[load]\npattern = \"cold_start\"\nconcurrency = 1\nduration = \"2s\"\n{}",
        lazy_init_target(),
        calls(&["ping"], "")
    );
    let dir = scratch();
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    assert_eq!(s.load.pattern.as_deref(), Some("cold_start"));
    let (connect, init, call, whole) = (
        op(s, "connect"),
        op(s, "initialize"),
        op(s, "tools/call:ping"),
        op(s, "cold_start"),
    );
    assert!(call.outcomes.ok >= 2, "{:?}", call.outcomes);
    assert_eq!(
        connect.outcomes.ok, init.outcomes.ok,
        "a spawn per handshake"
    );
    assert_eq!(whole.outcomes.ok, call.outcomes.ok, "a whole per call");
    let mean = |o: &Operation| o.latency.as_ref().map_or(0.0, |l| l.mean_ms);
    // The whole holds its parts.
    assert!(
        mean(&whole) >= mean(&init) && mean(&whole) >= mean(&call) && mean(&init) >= mean(&connect),
        "connect {} init {} call {} whole {}",
        mean(&connect),
        mean(&init),
        mean(&call),
        mean(&whole)
    );
    // The workload's rows are the workload's: phases are not counted as requests of it.
    assert_eq!(s.totals.started, call.started);
    // Servers too short-lived for any sample still have their CPU time counted (reaped
    // children's): a Python interpreter's start is milliseconds of it each.
    let servers = s
        .target_processes
        .iter()
        .find(|p| p.name.starts_with("stdio servers"))
        .unwrap_or_else(|| panic!("{:?}", s.target_processes));
    assert!(
        servers.cpu_seconds >= 0.001 * init.outcomes.ok as f64,
        "{servers:?} for {} servers",
        init.outcomes.ok
    );
}

fn trace_file(dir: &std::path::Path, entries: &[(f64, u64, &str, &str)]) -> std::path::PathBuf {
    let mut t = String::from("{\"mcpbench_trace\":1,\"source\":\"test\"}\n");
    for (at, session, message, digest) in entries {
        t.push_str(&format!(
            "{{\"t\":{at},\"session\":{session},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"message\":\"{message}\"}}}},\"digest\":{digest},\"latency\":0.001,\"outcome\":\"ok\"}}\n"
        ));
    }
    let p = dir.join("trace.jsonl");
    std::fs::write(&p, t).unwrap();
    p
}

/// A timed replay sends each recorded request once (a virtual user per recorded session), at
/// its recorded time; answers are held to recorded digests.
#[test]
fn a_timed_replay_sends_the_trace_at_its_times_and_checks_digests() {
    let dir = scratch();
    trace_file(
        dir.path(),
        &[
            (0.0, 1, "a", "\"fnv1a64:0000000000000000\""),
            (0.1, 2, "b", "null"),
            (0.3, 1, "a", "\"fnv1a64:0000000000000000\""),
            (0.5, 2, "c", "null"),
            (0.6, 1, "d", "null"),
            // Recorded with two different answers: not one to hold the replay to.
            (0.7, 1, "e", "\"fnv1a64:0000000000000001\""),
            (0.8, 2, "e", "\"fnv1a64:0000000000000002\""),
        ],
    );
    let text = "name = \"replay\"\n[replay]\ntrace = \"trace.jsonl\"\n[load]\nduration = \"5s\"\n";
    let out = run_in(text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    let echo = op(s, "tools/call:echo");
    assert_eq!(echo.started, 7, "each recorded request once");
    assert_eq!(s.load.concurrency, 2, "a user per recorded session");
    // The two answers recorded with one digest do not match it (it is made up): divergence.
    assert_eq!(echo.outcomes.divergence, 2, "{:?}", echo.outcomes);
    assert_eq!(echo.outcomes.ok, 5, "{:?}", echo.outcomes);
    // One pass ends the run (the trace starts 0.5 s in): far shorter than the 5 s allowed.
    assert!(s.measured_seconds < 3.5, "{}", s.measured_seconds);
    assert!(s.measured_seconds >= 1.3, "{}", s.measured_seconds);
    let replay = s.load.replay.as_ref().unwrap();
    assert_eq!((replay.sessions, replay.looped), (2, false));

    // Unchecked, twice as fast, looped for a second: every answer ok, passes repeated.
    let text = "name = \"replay-loop\"\n[replay]\ntrace = \"trace.jsonl\"\nspeed = 2.0\nloop = true\ncheck = false\n[load]\nduration = \"2s\"\n";
    let out = run_in(text, dir.path()).expect("the run finishes");
    let echo = op(&out.summary, "tools/call:echo");
    assert_eq!(echo.outcomes.divergence, 0, "{:?}", echo.outcomes);
    assert!(echo.started > 7, "looped: {}", echo.started);

    // Weighted: the distinct requests under the [load] as written.
    let text = "name = \"replay-mix\"\n[replay]\ntrace = \"trace.jsonl\"\nmode = \"weighted\"\ncheck = false\n[load]\nconcurrency = 2\nrequests = 40\n";
    let out = run_in(text, dir.path()).expect("the run finishes");
    let echo = op(&out.summary, "tools/call:echo");
    assert_eq!(echo.started, 40);
    assert_eq!(echo.outcomes.ok, 40, "{:?}", echo.outcomes);
}

/// Bad replays are refused before load, naming the place and the fix.
#[test]
fn bad_replays_name_their_place() {
    let dir = scratch();
    trace_file(dir.path(), &[(0.0, 1, "a", "null")]);
    let parse = |text: &str| {
        let file = dir.path().join("t.toml").display().to_string();
        mcpbench::scenario::parse(&file, text, &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e =
        parse("[replay]\ntrace = \"trace.jsonl\"\n[load]\nconcurrency = 4\nduration = \"1s\"\n");
    assert!(
        e.contains("t.toml:4:") && e.contains("`concurrency` would change it"),
        "{e}"
    );
    let e = parse("[replay]\ntrace = \"missing.jsonl\"\n[load]\nduration = \"1s\"\n");
    assert!(
        e.contains("t.toml:2:") && e.contains("missing.jsonl"),
        "{e}"
    );
    let e = parse(
        "[replay]\ntrace = \"trace.jsonl\"\n[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n",
    );
    assert!(
        e.contains("[replay] makes the workload from its trace"),
        "{e}"
    );
    std::fs::write(
        dir.path().join("secret.jsonl"),
        "{\"mcpbench_trace\":1}\n{\"t\":0,\"session\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"api_key\":\"abc123\"}}}\n",
    )
    .unwrap();
    let e = parse("[replay]\ntrace = \"secret.jsonl\"\n[load]\nduration = \"1s\"\n");
    assert!(
        e.contains("looks like a secret") && e.contains("mcpbench trace redact"),
        "{e}"
    );
    let e = parse(
        "[load]\nmodel = \"open\"\nrate = 5\nduration = \"1s\"\npattern = \"first_call\"\n[[workload]]\nmethod = \"tools/list\"\n",
    );
    assert!(e.contains("closed model"), "{e}");
    let e = parse(
        "[load]\nduration = \"1s\"\npattern = \"cold_start\"\nsessions = \"shared\"\n[[workload]]\nmethod = \"tools/list\"\n",
    );
    assert!(
        e.contains("a cold start opens a session per request"),
        "{e}"
    );
}

/// An A/B run holds deterministic calls to their first answer through every target: a tool
/// answered the same by both is never a divergence; one whose answer depends on the process
/// (each target here is its own server process) is, named with its target.
#[test]
fn ab_runs_hold_deterministic_calls_across_targets() {
    let fixture = repo().join("tests/fixtures/lazy_init_stdio.py");
    let target = |name: &str| {
        format!(
            "[[targets]]\nname = \"{name}\"\ncommand = [\"python3\", \"{}\"]\n",
            fixture.display()
        )
    };
    let text = format!(
        "name = \"ab-divergence\"\n{}{}[ab]\nslice = \"500ms\"\npairs = 5\n[load]\nconcurrency = 1\nduration = \"5s\"\n{}",
        target("direct"),
        target("gateway"),
        calls(&["ping", "session"], "deterministic = true\n")
    );
    let dir = scratch();
    let plan = std::sync::Arc::new(
        mcpbench::scenario::parse("ab.toml", &text, &|_| None).unwrap_or_else(|e| panic!("{e}")),
    );
    let opts = mcpbench::driver::RunOptions {
        output: Some(dir.path().join("ab")),
        ..Default::default()
    };
    let (report, out) =
        mcpbench::driver::ab_slices::ab(plan, &opts, mcpbench::driver::Interrupt::default())
            .unwrap();
    assert_eq!(report.levels[0].slices.len(), 10);
    let mut diverged = 0;
    let mut notes = Vec::new();
    for name in ["direct", "gateway"] {
        let text = std::fs::read_to_string(out.join(name).join("summary.json")).unwrap();
        let s: Summary = serde_json::from_str(&text).unwrap();
        let ping = op(&s, "tools/call:ping");
        assert!(ping.outcomes.ok > 0, "{name}: {:?}", ping.outcomes);
        assert_eq!(ping.outcomes.divergence, 0, "{name}: {:?}", ping.outcomes);
        diverged += op(&s, "tools/call:session").outcomes.divergence;
        notes.extend(s.notes);
    }
    // The first slice's answer is the reference: every later slice's process differs.
    assert!(diverged >= 5, "{diverged}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("diverged") && n.contains("target ")),
        "{notes:?}"
    );
}
