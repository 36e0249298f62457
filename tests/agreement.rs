//! One run, every view, the same numbers: for real runs — closed loop with tool errors, open
//! loop, a run stopped by a signal, a slice of an A/B run, two runs merged — every output is
//! rendered and read back: the dashboard's final view (drawn on ratatui's TestBackend from the
//! last live view the run published), the terminal table, summary.json, report.md,
//! report.html, Prometheus (of the summary and of the live view), JUnit, OTLP and
//! timeseries.csv. Throughput, error rates, counts and percentiles must agree within the
//! rounding each format prints. (The dashboard once divided by the drain second too, and its
//! per-operation rates were the last interval's: this test would have caught both.)

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpbench::driver::{self, Interrupt, RunOptions};
use mcpbench::report::export;
use mcpbench::report::live::{Live, LiveSink};
use mcpbench::report::summary::{Operation, Summary};
use mcpbench::report::text::ms;
use mcpbench::ui::format::{latency_ms, percent, rate};
use mcpbench::ui::view::{self, ViewState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::support::scratch;

/// Every rendering of one finished run.
struct Views {
    summary: Summary,
    dir: std::path::PathBuf,
    /// The last live view the run published (`None` for a merged result, which has none).
    live: Option<Live>,
    table: String,
}

fn file(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A live sink whose latest view the test reads afterwards.
fn sink() -> (LiveSink, tokio::sync::watch::Receiver<Option<Arc<Live>>>) {
    let (tx, rx) = tokio::sync::watch::channel(None);
    (Arc::new(tx), rx)
}

/// Runs `text` (a scenario) into `dir/out`, interrupting it after `stop_after` if given.
fn run(text: &str, dir: &Path, stop_after: Option<Duration>) -> Views {
    let plan = Arc::new(mcpbench::scenario::parse("agree.toml", text, &|_| None).unwrap());
    let (live, rx) = sink();
    let opts = RunOptions {
        output: Some(dir.join("out")),
        live: Some(live),
        interval: Duration::from_millis(250),
        ..RunOptions::default()
    };
    let interrupt = Interrupt::default();
    let stopper = stop_after.map(|after| {
        let i = interrupt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            i.request("the test");
        })
    });
    let out = driver::run(plan, &opts, interrupt).expect("the run finishes");
    if let Some(s) = stopper {
        s.join().unwrap();
    }
    let live = rx.borrow().as_ref().map(|l| (**l).clone());
    Views {
        table: driver::render(&out),
        summary: out.summary,
        dir: out.dir,
        live,
    }
}

/// A Prometheus sample's value: the line `name{labels}` (labels exactly as written).
fn sample(prom: &str, name: &str, labels: &str) -> f64 {
    let head = format!("{name}{{{labels}}} ");
    prom.lines()
        .find_map(|l| l.strip_prefix(&head))
        .unwrap_or_else(|| panic!("no sample {head} in:\n{prom}"))
        .parse()
        .unwrap()
}

fn close(a: f64, b: f64, within: f64, what: &str) {
    assert!(
        (a - b).abs() <= within,
        "{what}: {a} vs {b} (within {within})"
    );
}

/// Every view of `v` shows the summary's figures.
fn agree(v: &Views, label: &str) {
    let s = &v.summary;
    let from_file: Summary = serde_json::from_str(&file(&v.dir, "summary.json")).unwrap();
    assert_eq!(&from_file, s, "{label}: summary.json is the summary");
    let t = s.totals.throughput;
    let e = &s.errors;
    let sc = format!("scenario=\"{}\"", s.scenario.name);

    // The terminal table and the reports: one decimal of ok/s, two of the error rate.
    let thr = format!("{t:.1} ok/s over {:.1}s", s.measured_seconds);
    assert!(
        v.table.contains(&thr),
        "{label}: table lacks `{thr}`:\n{}",
        v.table
    );
    let err = format!("errors {:.2}% of {} calls", e.rate * 100.0, e.calls);
    assert!(
        v.table.contains(&err),
        "{label}: table lacks `{err}`:\n{}",
        v.table
    );
    let md = file(&v.dir, "report.md");
    assert!(md.contains(&thr), "{label}: report.md lacks `{thr}`");
    assert!(
        md.contains(&format!(
            "Errors {:.2}% of {} calls",
            e.rate * 100.0,
            e.calls
        )),
        "{label}: report.md errors"
    );
    let html = file(&v.dir, "report.html");
    assert!(html.contains(&thr), "{label}: report.html lacks `{thr}`");

    // Prometheus and JUnit of the summary.
    let prom = export::prometheus(s);
    close(
        sample(&prom, "mcpbench_throughput_ok_per_second", &sc),
        t,
        1e-9,
        label,
    );
    close(
        sample(&prom, "mcpbench_error_ratio", &sc),
        e.rate,
        1e-9,
        label,
    );
    let junit = export::junit(s);
    assert!(
        junit.contains(&format!("{t:.1} ok/s, error rate {:.4} %", e.rate * 100.0)),
        "{label}: junit"
    );

    // Per operation: the table's row, Prometheus' quantiles.
    for o in s.operations.iter().filter(|o| o.started > 0) {
        per_operation(v, o, &prom, &sc, label);
    }

    // The measured window's ok responses, interval by interval, add up to the summary's.
    let csv = file(&v.dir, "timeseries.csv");
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (phase, ok, errors, ended) = (col("phase"), col("ok"), col("errors"), col("ended"));
    for row in csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
    {
        let n = |i: usize| row[i].parse::<u64>().unwrap();
        assert!(
            n(errors) <= n(ended),
            "{label}: an interval with more errors than calls: {row:?}"
        );
    }
    let measured_ok: u64 = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[phase] != "warmup")
        .map(|c| c[ok].parse::<u64>().unwrap())
        .sum();
    assert_eq!(measured_ok, s.totals.ok, "{label}: timeseries.csv ok");

    if let Some(live) = &v.live {
        live_agrees(live, s, label);
    }
}

fn per_operation(v: &Views, o: &Operation, prom: &str, sc: &str, label: &str) {
    let Some(l) = &o.latency else { return };
    let short: String = if o.name.chars().count() > 26 {
        o.name.chars().take(25).chain(['…']).collect()
    } else {
        o.name.clone()
    };
    let row: Vec<&str> = v
        .table
        .lines()
        .find(|r| r.starts_with(&format!("{short} ")))
        .unwrap_or_else(|| panic!("{label}: no row {short}"))
        .split_whitespace()
        .rev()
        .take(8)
        .collect();
    let want = [
        ms(l.max_ms),
        ms(l.p999_ms),
        ms(l.p99_ms),
        ms(l.p95_ms),
        ms(l.p90_ms),
        ms(l.p50_ms),
        format!("{:.1}", o.throughput),
        o.started.to_string(),
    ];
    assert_eq!(row, want, "{label}: the table's row of {}", o.name);
    let op = format!("{sc},operation=\"{}\"", o.name);
    close(
        sample(prom, "mcpbench_throughput_ok_per_second", &op),
        o.throughput,
        1e-9,
        label,
    );
    for (q, v) in [("0.5", l.p50_ms), ("0.95", l.p95_ms), ("0.99", l.p99_ms)] {
        let got = sample(
            prom,
            "mcpbench_latency_seconds",
            &format!("{op},quantile=\"{q}\""),
        );
        close(got * 1000.0, v, 1e-6, &format!("{label} {} q{q}", o.name));
    }
}

/// The final live view — what the dashboard, `/metrics` and OTLP show — is the summary.
fn live_agrees(live: &Live, s: &Summary, label: &str) {
    assert!(live.finished, "{label}");
    close(live.measured.as_secs_f64(), s.measured_seconds, 5e-4, label);
    assert_eq!(live.totals.throughput, s.totals.throughput, "{label}");
    assert_eq!(live.totals.started, s.totals.started, "{label}");
    assert_eq!(live.error_rates, s.errors, "{label}");
    for (a, b) in live.ops.iter().zip(&s.operations) {
        assert_eq!(
            (a.started, a.throughput, &a.outcomes, &a.latency),
            (b.started, b.throughput, &b.outcomes, &b.latency),
            "{label}: live {}",
            a.name
        );
    }
    // The dashboard's final overview.
    let mut term = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let state = ViewState::default();
    term.draw(|f| view::draw(f, Some(live), &state)).unwrap();
    let screen = term.backend().to_string();
    let mean = format!("mean {} ok/s", rate(s.totals.throughput));
    assert!(
        screen.contains(&mean),
        "{label}: dashboard lacks `{mean}`:\n{screen}"
    );
    let errors = format!("errors {}", percent(s.errors.rate));
    assert!(
        screen.contains(&errors),
        "{label}: dashboard lacks `{errors}`"
    );
    for o in s.operations.iter().filter(|o| o.started > 0) {
        let Some(l) = &o.latency else { continue };
        let cells = [
            rate(o.throughput),
            latency_ms(l.p50_ms),
            latency_ms(l.p95_ms),
        ];
        let row = screen
            .lines()
            .find(|r| r.contains(&format!("│{} ", o.name)))
            .unwrap_or_else(|| panic!("{label}: no dashboard row {}:\n{screen}", o.name));
        for c in &cells {
            assert!(
                row.contains(&format!(" {c} ")),
                "{label}: `{c}` not in {row}"
            );
        }
    }
    // Prometheus of the live view (`--metrics-listen`) is Prometheus of the summary.
    let figures = live.figures();
    let sc = format!("scenario=\"{}\"", live.header.scenario);
    let prom = export::prometheus_of(&figures);
    close(
        sample(&prom, "mcpbench_throughput_ok_per_second", &sc),
        s.totals.throughput,
        1e-9,
        label,
    );
    close(
        sample(&prom, "mcpbench_error_ratio", &sc),
        s.errors.rate,
        1e-9,
        label,
    );
    // OTLP: requests started per operation.
    let run = mcpbench::otlp::encode::RunInfo {
        scenario: s.scenario.name.clone(),
        id: "agree".into(),
        started_at: std::time::SystemTime::now(),
        shard: None,
        label: None,
    };
    let req = mcpbench::otlp::encode::request(&run, live);
    let started: i64 = req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .filter(|m| m.name == mcpbench::otlp::encode::names::STARTED)
        .flat_map(|m| match &m.data {
            Some(opentelemetry_proto::tonic::metrics::v1::metric::Data::Sum(sum)) => {
                sum.data_points.clone()
            }
            _ => Vec::new(),
        })
        .map(|p| match p.value {
            Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n)) => n,
            _ => 0,
        })
        .sum();
    let all: u64 = s.operations.iter().map(|o| o.started).sum();
    assert_eq!(started as u64, all, "{label}: OTLP started");
}

const CLOSED_WITH_TOOL_ERRORS: &str = "name = \"agree-closed\"\n[embedded]\nbackend_error_rate = 0.05\n[load]\nconcurrency = 4\nduration = \"2s\"\nwarmup = \"500ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"m\" }\n[[workload]]\nmethod = \"tools/call\"\ntool = \"search-contacts\"\narguments = { query = \"a\" }\n[[workload]]\nmethod = \"tools/list\"\n";

#[test]
fn a_closed_loop_run_with_tool_errors() {
    let dir = scratch();
    let v = run(CLOSED_WITH_TOOL_ERRORS, dir.path(), None);
    let tool = v.summary.errors.tool;
    assert!(
        tool > 0.0,
        "the backend's errors are tool errors: {:?}",
        v.summary.errors
    );
    assert!(v.summary.errors.rate >= tool, "and count in the error rate");
    agree(&v, "closed");
}

/// A server that keeps two sessions, and six users: most session openings fail (503), and the
/// headline says so — its session-opening part, in every view alike.
#[test]
fn a_run_whose_session_openings_mostly_fail() {
    let srv = crate::support::launch(mcpbench::server::Config {
        max_sessions: 2,
        ..mcpbench::server::Config::default()
    });
    let dir = scratch();
    let v = run(
        &format!(
            "name = \"agree-openings\"\n[target]\nurl = \"{}\"\n[load]\nconcurrency = 6\nduration = \"2s\"\nwarmup = \"200ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"m\" }}\n",
            srv.mcp_url()
        ),
        dir.path(),
        None,
    );
    let e = v.summary.errors;
    assert!(e.session_opening > 0.0, "{e:?}");
    assert!(e.rate >= e.session_opening && e.rate <= 1.0, "{e:?}");
    assert!(v.table.contains("session opening "), "{}", v.table);
    agree(&v, "openings");
}

#[test]
fn an_open_loop_run() {
    let dir = scratch();
    let v = run(
        "name = \"agree-open\"\n[load]\nmodel = \"open\"\nrate = 400\nduration = \"2s\"\nwarmup = \"500ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"m\" }\n",
        dir.path(),
        None,
    );
    agree(&v, "open");
}

#[test]
fn a_run_stopped_by_a_signal() {
    let dir = scratch();
    let text = CLOSED_WITH_TOOL_ERRORS.replace("duration = \"2s\"", "duration = \"20s\"");
    let v = run(&text, dir.path(), Some(Duration::from_millis(1800)));
    assert!(v.summary.interrupted);
    assert!(
        v.summary.measured_seconds < 5.0,
        "{}",
        v.summary.measured_seconds
    );
    agree(&v, "stopped");
}

/// A slice of an A/B run (the last one, whose view the live sink holds at the end), and each
/// target's slices merged.
#[test]
fn an_ab_slice_and_the_merged_targets() {
    let dir = scratch();
    let up = crate::support::servers(
        mcpbench::server::ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs::default(),
    );
    let url = up.mcp_url();
    let text = format!(
        "name = \"agree-ab\"\n[[targets]]\nname = \"one\"\nurl = \"{url}\"\n[[targets]]\nname = \"two\"\nurl = \"{url}\"\n[ab]\nslice = \"600ms\"\npairs = 5\n[load]\nconcurrency = 2\nduration = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"m\" }}\n"
    );
    let plan = Arc::new(mcpbench::scenario::parse("ab.toml", &text, &|_| None).unwrap());
    let (live, rx) = sink();
    let opts = RunOptions {
        output: Some(dir.path().join("ab")),
        live: Some(live),
        interval: Duration::from_millis(250),
        ..RunOptions::default()
    };
    let (_, out) = driver::ab_slices::ab(plan, &opts, Interrupt::default()).expect("the A/B run");
    let live = rx.borrow().as_ref().map(|l| (**l).clone());
    let mut slices: Vec<std::path::PathBuf> = std::fs::read_dir(out.join("slices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let started = |p: &std::path::PathBuf| {
        let s: Summary = serde_json::from_str(&file(p, "summary.json")).unwrap();
        s.started_at
    };
    slices.sort_by_key(started);
    let last = slices.last().unwrap();
    let summary: Summary = serde_json::from_str(&file(last, "summary.json")).unwrap();
    let table = mcpbench::report::text::render(&summary);
    agree(
        &Views {
            table,
            summary,
            dir: last.clone(),
            live,
        },
        "ab slice",
    );
    for target in ["one", "two"] {
        let d = out.join(target);
        let summary: Summary = serde_json::from_str(&file(&d, "summary.json")).unwrap();
        let table = mcpbench::report::text::render(&summary);
        agree(
            &Views {
                table,
                summary,
                dir: d,
                live: None,
            },
            target,
        );
    }
}

#[test]
fn two_runs_merged() {
    let dir = scratch();
    let a = run(CLOSED_WITH_TOOL_ERRORS, &dir.path().join("a"), None);
    let b = run(CLOSED_WITH_TOOL_ERRORS, &dir.path().join("b"), None);
    let merged = dir.path().join("merged");
    let s = mcpbench::report::merge::merge(&[a.dir.clone(), b.dir.clone()], &merged, false)
        .expect("merge");
    assert_eq!(s.totals.ok, a.summary.totals.ok + b.summary.totals.ok);
    let table = mcpbench::report::text::render(&s);
    agree(
        &Views {
            table,
            summary: s,
            dir: merged,
            live: None,
        },
        "merged",
    );
}
