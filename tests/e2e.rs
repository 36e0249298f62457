//! End to end through the library: accounting against the mock backend's counters, the results
//! files against their schema, and the quickstart scenario itself.

use std::sync::Arc;

use mcpbench::driver::{self, RunOptions};
use mcpbench::server::ResponseMode;

use crate::support::{
    backend_stats, repo, scratch, servers, summary_schema, valid_summary, wait_until,
};

fn run_text(text: &str, dir: &std::path::Path) -> driver::RunOutput {
    crate::support::run_in(text, dir).expect("run completes")
}

fn op<'a>(
    s: &'a mcpbench::report::Summary,
    name: &str,
) -> &'a mcpbench::report::summary::Operation {
    s.operations
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no operation {name}"))
}

/// Every successful REST-backed call the generator counted really reached the backend, and
/// started = completed + failed + cancelled for every operation.
#[test]
fn successful_calls_equal_backend_counter() {
    for response in [ResponseMode::Json, ResponseMode::Sse] {
        let srv = servers(response, 0, 100, mock_backend::Knobs::default());
        let dir = scratch();
        let text = format!(
            r#"name = "accounting"
[target]
url = "{}"
[load]
concurrency = 6
duration = "2s"
warmup = "500ms"
timeout = "5s"
[[workload]]
method = "tools/call"
tool = "search-contacts"
weight = 3
arguments = {{ query = "${{pick:Leanne,Ervin}}" }}
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "x" }}
"#,
            srv.mcp_url()
        );
        let out = run_text(&text, dir.path());
        let s = &out.summary;
        let search = op(s, "tools/call:search-contacts");
        let warm_ok = s
            .warmup
            .iter()
            .find(|w| w.name == "tools/call:search-contacts")
            .map_or(0, |w| w.outcomes.ok);
        let stats = backend_stats(srv.backend_addr.unwrap());
        let backend_ok = stats["routes"]["contacts"]["ok"]
            .as_u64()
            .expect("contacts counter");
        assert!(
            search.outcomes.ok > 100,
            "{response:?}: too few calls to prove anything: {}",
            search.outcomes.ok
        );
        assert_eq!(
            search.outcomes.ok + warm_ok,
            backend_ok,
            "{response:?}: generator ok (measured + warm-up) vs backend"
        );
        assert_eq!(
            stats["routes"]["contacts"]["requests"].as_u64(),
            Some(backend_ok),
            "{response:?}: no failed backend calls"
        );
        for o in &s.operations {
            assert_eq!(
                o.started,
                o.completed + o.failed + o.cancelled,
                "{response:?} {}",
                o.name
            );
        }
        assert_eq!(s.totals.unaccounted, 0);
        assert_eq!(
            s.totals.failed + s.totals.cancelled,
            0,
            "{response:?}: {:?}",
            s.operations
        );
        assert_eq!(s.target.protocol_negotiated, "2025-11-25");
        if response == ResponseMode::Sse {
            assert_eq!(
                search.streamed, search.started,
                "every SSE response counted as streamed"
            );
            assert!(search.first_event.is_some());
        } else {
            assert_eq!(search.streamed, 0);
        }
    }
}

/// summary.json validates against results/schema.json; latency.hlog is a readable interval log
/// with one tag per operation whose counts add up to the summary's.
#[test]
fn results_files_match_schema_and_hlog_adds_up() {
    let dir = scratch();
    let text = r#"name = "files"
[load]
concurrency = 4
duration = "2500ms"
timeout = "5s"
[[workload]]
method = "tools/list"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "${random:12}" }
"#;
    let out = run_text(text, dir.path());
    let summary = valid_summary(&out.dir);
    let validator = summary_schema();
    // The schema really constrains: a summary missing a field or with a bad outcome fails.
    let mut broken = summary.clone();
    broken["operations"][0]["outcomes"]["protocol"] = serde_json::json!({"made_up": 1});
    assert!(!validator.is_valid(&broken));
    let mut broken = summary.clone();
    broken.as_object_mut().unwrap().remove("totals");
    assert!(!validator.is_valid(&broken));

    let back = mcpbench::report::files::read_summary(&out.dir.join("summary.json")).unwrap();
    assert_eq!(back, out.summary);

    let log = std::fs::read(out.dir.join("latency.hlog")).unwrap();
    let mut per_tag: std::collections::HashMap<String, u64> = Default::default();
    let mut deser = hdrhistogram::serialization::Deserializer::new();
    let mut intervals = 0;
    for entry in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&log) {
        if let hdrhistogram::serialization::interval_log::LogEntry::Interval(h) =
            entry.expect("valid log line")
        {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(h.encoded_histogram())
                .unwrap();
            let hist: hdrhistogram::Histogram<u64> = deser.deserialize(&mut &bytes[..]).unwrap();
            *per_tag
                .entry(h.tag().expect("tagged").as_str().to_string())
                .or_default() += hist.len();
            intervals += 1;
        }
    }
    assert!(intervals >= 3, "{intervals} intervals");
    for o in &out.summary.operations {
        assert_eq!(
            per_tag.get(&o.name).copied().unwrap_or(0),
            o.outcomes.ok,
            "hlog vs summary for {}",
            o.name
        );
    }
}

/// The README's quickstart scenario, shortened, runs clean against the embedded servers.
#[test]
fn quickstart_scenario_runs_clean() {
    let text = std::fs::read_to_string(repo().join("scenarios/quickstart.toml")).unwrap();
    let mut plan = mcpbench::scenario::parse("quickstart.toml", &text, &|_| None).unwrap();
    plan.load.duration = std::time::Duration::from_secs(2);
    plan.load.warmup = std::time::Duration::from_millis(500);
    let dir = scratch();
    let opts = RunOptions {
        output: Some(dir.path().join("q")),
        ..RunOptions::default()
    };
    let out = driver::run(
        Arc::new(plan),
        &opts,
        mcpbench::driver::Interrupt::default(),
    )
    .unwrap();
    let t = &out.summary.totals;
    assert!(t.ok > 100, "{t:?}");
    assert_eq!((t.failed, t.cancelled, t.unaccounted), (0, 0, 0), "{t:?}");
    assert_eq!(
        out.summary
            .operations
            .iter()
            .map(|o| o.outcomes.tool_error)
            .sum::<u64>(),
        0
    );
    let rendered = driver::render(&out);
    assert!(
        rendered.contains("tools/call:search-contacts") && rendered.contains("summary.json"),
        "{rendered}"
    );
}

/// Ctrl-C (an interrupt) stops the run early: no new requests, those in flight drain for the
/// grace (or are cancelled when it is zero, or at a second interrupt), and the results are
/// still written, every request counted once.
#[test]
fn interrupt_drains_then_writes_partial_results() {
    // Drained: the 4 calls in flight (300 ms each) finish within the 5 s grace.
    let s = interrupted_run(std::time::Duration::from_secs(5), 1);
    let call = op(&s, "tools/call:search-contacts");
    assert_eq!(call.outcomes.cancelled, 0, "{:?}", call.outcomes);
    assert!(call.outcomes.ok >= 8, "{:?}", call.outcomes);
    // No grace: the 4 in flight are cancelled, not lost.
    let s = interrupted_run(std::time::Duration::ZERO, 1);
    let call = op(&s, "tools/call:search-contacts");
    assert_eq!(call.outcomes.cancelled, 4, "{:?}", call.outcomes);
    // A second interrupt skips the drain.
    let s = interrupted_run(std::time::Duration::from_secs(30), 2);
    let call = op(&s, "tools/call:search-contacts");
    assert_eq!(call.outcomes.cancelled, 4, "{:?}", call.outcomes);
    assert!(
        s.notes.iter().any(|n| n.contains("interrupted by test")),
        "{:?}",
        s.notes
    );
}

/// A run of 4 users against a backend that answers in 300 ms, interrupted `times` once 8 calls
/// reached the backend.
fn interrupted_run(grace: std::time::Duration, times: usize) -> mcpbench::report::Summary {
    let dir = scratch();
    // Every call waits 300 ms in the backend, whose counters say how far the run got.
    let knobs = mock_backend::Knobs {
        latency: Some(mock_backend::Latency::Fixed(
            std::time::Duration::from_millis(300),
        )),
        ..Default::default()
    };
    let srv = servers(ResponseMode::Json, 0, 100, knobs);
    let text = format!(
        r#"name = "interrupted"
[target]
url = "{}"
[load]
concurrency = 4
duration = "60s"
timeout = "30s"
[[workload]]
method = "tools/call"
tool = "search-contacts"
arguments = {{ query = "Leanne" }}
"#,
        srv.mcp_url()
    );
    let plan = Arc::new(mcpbench::scenario::parse("i.toml", &text, &|_| None).unwrap());
    let interrupt = mcpbench::driver::Interrupt::default();
    let trigger = interrupt.clone();
    let backend = srv.backend_addr.expect("a mock backend");
    std::thread::spawn(move || {
        // 8 calls reached the backend: with 4 virtual users one call at a time, at least 4
        // have been answered, and the next ones are in flight.
        wait_until("8 calls at the backend", || {
            backend_stats(backend)["routes"]["contacts"]["requests"]
                .as_u64()
                .is_some_and(|n| n >= 8)
        });
        for _ in 0..times {
            trigger.request("test");
        }
    });
    let opts = RunOptions {
        output: Some(dir.path().join("i")),
        grace,
        ..RunOptions::default()
    };
    let out = driver::run(plan, &opts, interrupt).unwrap();
    let s = out.summary;
    assert!(s.interrupted);
    let call = op(&s, "tools/call:search-contacts");
    assert!(call.outcomes.ok >= 4, "{:?}", call.outcomes);
    assert_eq!(call.started, call.completed + call.failed + call.cancelled);
    // Every call the generator started and did not cancel reached the backend.
    let reached = backend_stats(backend)["routes"]["contacts"]["requests"]
        .as_u64()
        .unwrap_or(0);
    assert!(reached >= call.completed, "{reached} < {}", call.completed);
    assert!(out.dir.join("summary.json").is_file());
    assert!(
        s.measured_seconds < 30.0,
        "stopped early: {}",
        s.measured_seconds
    );
    s
}
