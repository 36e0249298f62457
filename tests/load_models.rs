//! Load models: closed and open loop measure what they should, open loop corrects for
//! coordinated omission (latency from the intended start), stages, request counts, think time,
//! session modes, argument checks, rows, the time series, and find-max.

use std::sync::Arc;

use mcpbench::driver::{self, RunOptions};
use mcpbench::report::Summary;
use mcpbench::server::ResponseMode;

use crate::support::{capacity, csv_numbers, run_in, scratch, servers};

fn run(text: &str) -> Summary {
    let dir = scratch();
    run_in(text, dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .summary
}

fn op<'a>(s: &'a Summary, name: &str) -> &'a mcpbench::report::summary::Operation {
    s.operations
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

const SLEEP: &str =
    "[[workload]]\nmethod = \"tools/call\"\ntool = \"sleep\"\narguments = { ms = 50 }\n";

/// Injected latency is what both models measure: p50 of a 50 ms tool within 50–100 ms
/// (the upper bound leaves room for a busy machine; double counting would exceed it).
#[test]
fn closed_and_open_loop_measure_injected_latency() {
    let closed = run(&format!(
        "[load]\nconcurrency = 4\nduration = \"2s\"\nwarmup = \"300ms\"\n{SLEEP}"
    ));
    let l = op(&closed, "tools/call:sleep").latency.clone().unwrap();
    assert!((50.0..100.0).contains(&l.p50_ms), "closed p50 {}", l.p50_ms);
    assert_eq!(closed.totals.failed, 0);

    let open = run(&format!(
        "[load]\nmodel = \"open\"\nrate = 40\narrival = \"poisson\"\nmax_in_flight = 16\nduration = \"3s\"\nwarmup = \"500ms\"\n{SLEEP}"
    ));
    let sleep = op(&open, "tools/call:sleep");
    let (l, s) = (
        sleep.latency.clone().unwrap(),
        sleep
            .service
            .clone()
            .expect("open loop reports service time"),
    );
    assert!((50.0..100.0).contains(&l.p50_ms), "open p50 {}", l.p50_ms);
    assert!(
        (50.0..100.0).contains(&s.p50_ms),
        "open service p50 {}",
        s.p50_ms
    );
    assert!(
        l.p50_ms >= s.p50_ms,
        "latency from the intended start includes the service time"
    );
    // 40/s for 2.5 measured seconds ≈ 100 calls; Poisson: well within 50..150.
    assert!((50..150).contains(&sleep.started), "{}", sleep.started);
    assert_eq!((open.totals.dropped, open.totals.failed), (0, 0));
    assert_eq!(open.load.model, "open");
    assert!(open.generator.lateness.is_some());
}

/// Over capacity, an open loop keeps its schedule: requests wait (generator backlog, server
/// queue) and their latency from the intended start exceeds the service time; beyond the
/// backlog, arrivals are dropped and counted.
#[test]
fn over_capacity_open_loop_shows_queueing_and_drops() {
    // 1 slot × 20 ms = 50 calls/s, offered 150/s.
    let server = capacity::start(1, std::time::Duration::from_millis(20));
    let s = run(&format!(
        "[target]\nurl = \"http://{}/mcp\"\n[load]\nmodel = \"open\"\nrate = 150\narrival = \"uniform\"\nmax_in_flight = 4\nmax_queued = 8\nduration = \"2s\"\ntimeout = \"10s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    ));
    let work = op(&s, "tools/call:work");
    let (l, sv) = (work.latency.clone().unwrap(), work.service.clone().unwrap());
    assert!(
        l.p50_ms > sv.p50_ms * 1.5,
        "corrected p50 {} vs service p50 {}",
        l.p50_ms,
        sv.p50_ms
    );
    assert!(
        l.p99_ms > sv.p99_ms,
        "corrected p99 {} vs service p99 {}",
        l.p99_ms,
        sv.p99_ms
    );
    assert!(s.totals.dropped > 50, "dropped {}", s.totals.dropped);
    assert_eq!(work.started, work.completed, "everything sent was answered");
    assert!(s.totals.ok < 150 * 2, "capacity bounds throughput");
}

/// Servers close idle keep-alive connections. A virtual user that thinks longer than the
/// server's idle timeout finds its connection closed: it must open a new one, not fail the
/// request as `io` (the server did nothing wrong).
#[test]
fn connections_closed_while_idle_are_replaced_not_failed() {
    let idle = std::time::Duration::from_millis(150);
    let server = capacity::start_with(8, std::time::Duration::ZERO, Some(idle));
    let s = run(&format!(
        "[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 2\nduration = \"2s\"\nthink = \"400ms\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    ));
    let work = op(&s, "tools/call:work");
    assert!(work.started >= 6, "started {}", work.started);
    assert_eq!(work.failed, 0, "outcomes {:?}", work.outcomes);
    assert_eq!(s.sessions.opened, 2);
    // Every call after the first of each user came after an idle close: a new connection.
    assert!(
        s.sessions.connections >= work.started,
        "{} connections for {} calls",
        s.sessions.connections,
        work.started
    );
}

#[test]
fn closed_loop_stages_ramp_virtual_users() {
    let dir = scratch();
    let out = run_in(
        &format!("[load]\nconcurrency = 0\ntimeout = \"5s\"\n[[load.stages]]\nduration = \"1500ms\"\nconcurrency = 4\n[[load.stages]]\nduration = \"1500ms\"\nconcurrency = 4\n{SLEEP}"),
        dir.path(),
    )
    .unwrap();
    assert_eq!(out.summary.load.profile.stages.len(), 2);
    let csv = std::fs::read_to_string(out.dir.join("timeseries.csv")).unwrap();
    let started = csv_numbers(&csv, "started");
    assert!(started.len() >= 3, "{csv}");
    // Ramping: 0→2 users in the first second, 4 from 1.5 s on (~80 calls/s).
    assert!(started[0] * 2 < started[2], "{started:?}");
}

#[test]
fn request_count_stops_the_run_exactly() {
    let s = run(&format!("[load]\nconcurrency = 3\nrequests = 37\n{SLEEP}"));
    let sleep = op(&s, "tools/call:sleep");
    let warm: u64 = s
        .warmup
        .iter()
        .filter(|w| w.name == "tools/call:sleep")
        .map(|w| w.started)
        .sum();
    assert_eq!(sleep.started + warm, 37);
    assert_eq!(s.load.requests, Some(37));
    assert!(
        s.measured_seconds < 60.0,
        "stopped by the count, not a duration"
    );
    let open = run(
        "[load]\nmodel = \"open\"\nrate = 200\nrequests = 25\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"x\" }\n",
    );
    assert_eq!(op(&open, "tools/call:echo").started, 25);
}

#[test]
fn per_request_sessions_measure_session_setup() {
    let s = run(
        "[load]\nconcurrency = 2\nduration = \"1s\"\nsessions = \"per-request\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"x\" }\n",
    );
    let (init, echo) = (op(&s, "initialize"), op(&s, "tools/call:echo"));
    assert!(echo.started > 10);
    assert_eq!(init.started, echo.started, "one session opened per request");
    assert_eq!(s.sessions.opened, init.outcomes.ok);
    assert_eq!(s.totals.failed, 0);
    assert_eq!(s.load.sessions, "per-request");
}

#[test]
fn shared_http_session_serves_all_virtual_users_of_a_worker() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let s = run(&format!(
        "[target]\nurl = \"{}\"\n[load]\nconcurrency = 4\nworkers = 1\nduration = \"1s\"\nsessions = \"shared\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"x\" }}\n",
        srv.mcp_url()
    ));
    assert_eq!(
        s.sessions.opened, 1,
        "one session for the worker's 4 virtual users"
    );
    assert!(op(&s, "tools/call:echo").outcomes.ok > 20);
    assert_eq!(s.totals.failed, 0);
}

#[test]
fn think_time_paces_a_closed_loop() {
    let s = run(
        "[load]\nconcurrency = 2\nduration = \"1s\"\nthink = \"100ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"x\" }\n",
    );
    let started = op(&s, "tools/call:echo").started;
    assert!(
        (10..=24).contains(&started),
        "2 users × 1 s / 100 ms ≈ 20, got {started}"
    );
}

#[test]
fn timeseries_csv_adds_up_to_the_summary() {
    let dir = scratch();
    let out = run_in("[load]\nconcurrency = 2\nduration = \"2500ms\"\nwarmup = \"500ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"x\" }\n", dir.path()).unwrap();
    let csv = std::fs::read_to_string(out.dir.join("timeseries.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            mcpbench::metrics::collector::IntervalSnapshot::FIELDS
                .join(",")
                .as_str()
        )
    );
    assert!(lines.count() >= 3);
    let ok: u64 = csv_numbers(&csv, "ok").iter().sum();
    assert_eq!(
        ok, out.summary.totals.ok,
        "the time series' ok column adds up to the total"
    );
    let warm: u64 = csv_numbers(&csv, "warmup_ended").iter().sum();
    assert_eq!(
        warm,
        out.summary.warmup.iter().map(|w| w.started).sum::<u64>(),
        "warm-up requests are in the series too"
    );
}

/// Generated arguments that don't fit the tool's input schema stop the run before any load,
/// with one clear error naming the workload line.
#[test]
fn generated_arguments_are_checked_against_the_schema() {
    let dir = scratch();
    let err = run_in("[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"sleep\"\narguments = { ms = \"${pick:fast,slow}\" }\n", dir.path())
        .expect_err("strings where the schema wants an integer");
    let msg = err.to_string();
    assert!(
        msg.contains(
            ":6:13: `workload[1].arguments.ms`: the arguments generated for tool `sleep` do not fit its input schema"
        ),
        "{msg}"
    );
    assert!(msg.contains("is not of type \"integer\""), "{msg}");
    assert!(msg.contains("rejected rendering: {\"ms\":"), "{msg}");
    assert!(
        msg.contains("tool `sleep` takes `ms` (integer, required)"),
        "the hint says what the tool takes: {msg}"
    );
    assert!(!dir.path().join("run").exists(), "nothing was run");
}

#[test]
fn jsonl_rows_feed_arguments() {
    let dir = scratch();
    std::fs::write(
        dir.path().join("people.jsonl"),
        "{\"name\": \"Leanne\", \"limit\": 1}\n{\"name\": \"Ervin\", \"limit\": 2}\n",
    )
    .unwrap();
    let out = run_in(
        "[load]\nconcurrency = 2\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"search-contacts\"\nrows = \"people.jsonl\"\narguments = { query = \"${row:name}\", limit = \"${row:limit}\" }\n",
        dir.path(),
    )
    .unwrap();
    let s = op(&out.summary, "tools/call:search-contacts");
    assert!(s.outcomes.ok > 10);
    assert_eq!(s.outcomes.tool_error, 0);
}

/// A find-max search over the capacity server's `work` tool, open loop: `load` and `find_max`
/// keys besides the target, the model, a 5 s timeout and a 1 % error SLO.
fn find_max_on(
    server: &crate::support::raw_http::ThreadServer,
    load: &str,
    find_max: &str,
    dir: &std::path::Path,
) -> (mcpbench::report::sweep::FindMaxReport, std::path::PathBuf) {
    let text = format!(
        "name = \"fm\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nmodel = \"open\"\ntimeout = \"5s\"\n{load}\n[find_max]\nerror_rate = 0.01\n{find_max}\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    );
    let plan = Arc::new(mcpbench::scenario::parse("fm.toml", &text, &|_| None).unwrap());
    let opts = RunOptions {
        output: Some(dir.join("fm")),
        ..RunOptions::default()
    };
    driver::findmax::find_max(plan, &opts, mcpbench::driver::Interrupt::default()).unwrap()
}

/// The adaptive find-max (exponential growth, bisection, a confirmation stage) lands within
/// 10 % of a target's known capacity (10 slots × 50 ms ≈ 198 calls/s, tokio's timer rounding
/// the service time up to about 50.5 ms) in fewer steps than stepping by the start level would
/// take to reach the same level. Past capacity the server's queue grows within a step and the
/// p99 SLO (service time + 30 ms) breaks.
#[test]
fn adaptive_find_max_lands_near_a_known_capacity() {
    let server = capacity::start(10, std::time::Duration::from_millis(50));
    let capacity = 10.0 / 0.0505;
    let dir = scratch();
    let (report, out) = find_max_on(
        &server,
        "rate = 10\narrival = \"uniform\"\nmax_in_flight = 64\nduration = \"1s\"",
        "start = 10\nmax = 2000\nstep_duration = \"1s\"\nconfirm_duration = \"2s\"\nprecision = 0.05\np99 = \"80ms\"",
        dir.path(),
    );
    let steps = || format!("{:#?}", report.steps);
    assert_eq!(report.search, "adaptive");
    let best = report
        .best
        .unwrap_or_else(|| panic!("a level held: {}", steps()));
    assert!(
        (best - capacity).abs() <= 0.1 * capacity,
        "best {best} vs capacity {capacity:.0}: {}",
        steps()
    );
    assert_eq!(report.confirmed, Some(true), "{}", steps());
    let last = report.steps.last().unwrap();
    assert!(last.stage == mcpbench::report::sweep::Stage::Confirm && last.passed);
    let linear = (best / 10.0).ceil() as usize + 1;
    assert!(
        report.steps.len() < linear,
        "{} steps vs {linear}: {}",
        report.steps.len(),
        steps()
    );
    // The sweep's report: frontier lines, the knee, levels past it, two charts.
    let rendered = mcpbench::report::sweep::render(&report, &out);
    assert!(rendered.contains("p99 ≤ 100 ms: "), "{rendered}");
    assert!(
        rendered.contains("past it (latency not quoted)"),
        "{rendered}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
    assert!(out.join("report.md").is_file() && out.join("step-01/summary.json").is_file());
}

/// find-max steps the rate until the SLO breaks and lands near the target's known capacity
/// (2 slots × 100 ms = 20 calls/s): the highest rate that held is within 10–20/s. Past
/// capacity the generator's 4 in flight + 4 queued overflow within the step and arrivals are
/// dropped (error rate), which scheduling stalls on a busy machine cannot cause below it; the
/// p99 SLO is loose for the same reason.
#[test]
fn find_max_finds_a_known_capacity() {
    let server = capacity::start(2, std::time::Duration::from_millis(100));
    let dir = scratch();
    let (report, out) = find_max_on(
        &server,
        "rate = 5\narrival = \"uniform\"\nmax_in_flight = 4\nmax_queued = 4\nduration = \"2s\"",
        "start = 5\nstep = 5\nmax = 50\nstep_duration = \"2s\"\np99 = \"1s\"",
        dir.path(),
    );
    let best = report
        .best
        .unwrap_or_else(|| panic!("the first step holds: {:#?}", report.steps));
    assert!(
        (10.0..=20.0).contains(&best),
        "best {best}: {:#?}",
        report.steps
    );
    assert!(!report.steps.last().unwrap().passed || report.steps.last().unwrap().level >= 50.0);
    assert!(
        report.knee.is_some_and(|k| k <= 30.0),
        "knee {:?}",
        report.knee
    );
    assert!(out.join("findmax.json").is_file() && out.join("step-01/summary.json").is_file());
    let rendered = mcpbench::report::sweep::render(&report, &out);
    assert!(rendered.contains("highest rate that held"), "{rendered}");
    // `mcpbench report DIR` prints it again, from findmax.json.
    let at = out.display().to_string();
    let (code, again, err) = crate::support::mcpbench(&["report", &at], &crate::support::repo());
    assert_eq!((code, again), (0, rendered), "{err}");
}
