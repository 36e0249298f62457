//! A/B comparisons (`[[targets]]`): slices alternate between real servers under identical
//! load, and the added latency is what one server adds over the other.

use std::sync::Arc;
use std::time::Duration;

use mcpbench::driver::{self, RunOptions};

use crate::support::{capacity, scratch};

fn scenario(a: &str, b: &str, load: &str) -> String {
    format!(
        "name = \"ab\"\n[[targets]]\nname = \"direct\"\nurl = \"http://{a}/mcp\"\n[[targets]]\nname = \"gateway\"\nurl = \"http://{b}/mcp\"\ntiming_header = \"server-timing:work\"\n[ab]\nslice = \"1s\"\n[load]\n{load}\nduration = \"10s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n"
    )
}

/// Two servers that differ only by 4 ms of service time (both sleep on tokio's timer, so its
/// rounding is the same on both sides): the reported added p50 is 4 ms within ±0.6 ms, the
/// "gateway"'s timing header splits its time upstream from its own, and the targets' slices
/// are merged into a result each (the time upstream in the gateway's).
#[test]
fn added_latency_matches_an_injected_delay() {
    let direct = capacity::start(64, Duration::from_millis(2));
    let gateway = capacity::start(64, Duration::from_millis(6));
    let dir = scratch();
    let text = scenario(
        &direct.addr.to_string(),
        &gateway.addr.to_string(),
        "concurrency = 1",
    );
    let plan = Arc::new(mcpbench::scenario::parse("ab.toml", &text, &|_| None).unwrap());
    let (live, watched) = tokio::sync::watch::channel(None);
    let opts = RunOptions {
        output: Some(dir.path().join("ab")),
        live: Some(Arc::new(live)),
        ..RunOptions::default()
    };
    let (report, out) =
        driver::ab_slices::ab(plan, &opts, mcpbench::driver::Interrupt::default()).unwrap();
    // The dashboard's header names the slice and the comparison so far.
    let last = watched
        .borrow()
        .clone()
        .expect("the slices published a live view");
    let title = &last.header.scenario;
    assert!(
        title.starts_with("ab · A/B level 1 · round 5/5 · ")
            && title.contains(" · so far gateway adds +"),
        "{title}"
    );
    assert_eq!(report.levels.len(), 1);
    let lv = &report.levels[0];
    assert_eq!(lv.slices.len(), 10, "10 s: 5 rounds × 2 targets × 1 s");
    // The order alternates: direct first in even rounds, the gateway first in odd ones.
    for s in &lv.slices {
        let first = if s.round % 2 == 0 {
            "direct"
        } else {
            "gateway"
        };
        assert_eq!(s.position == 0, s.target == first, "{s:?}");
    }
    let c = lv
        .comparisons
        .iter()
        .find(|c| c.operation == "tools/call:work")
        .unwrap();
    let p50 = c.deltas.iter().find(|d| d.metric == "p50").unwrap();
    assert!(
        (p50.added_ms.mean - 4.0).abs() <= 0.6,
        "added p50 {:?}",
        p50.added_ms
    );
    assert!(p50.added_ms.low <= p50.added_ms.mean && p50.added_ms.mean <= p50.added_ms.high);
    // The gateway's timing header: its 6 ms of work, upstream of its own few tenths.
    let upstream = c
        .upstream_p50_ms
        .expect("the gateway's timing header was read");
    assert!((5.9..7.5).contains(&upstream), "upstream p50 {upstream}");
    let ratio = c.throughput_ratio.unwrap();
    assert!(
        ratio.mean < 0.8,
        "one user: throughput follows latency: {ratio:?}"
    );
    assert!(lv.upstream_bound.is_none());
    for name in ["direct", "gateway"] {
        // Merged over its own slices' time only: the throughput is the slices', not diluted
        // by the other target's turns.
        let merged = mcpbench::report::read_back::RunFiles::read(&out.join(name))
            .unwrap()
            .summary;
        let own: Vec<f64> = lv
            .slices
            .iter()
            .filter(|s| s.target == name)
            .map(|s| s.throughput)
            .collect();
        let mean = own.iter().sum::<f64>() / own.len() as f64;
        assert!(
            (merged.totals.throughput / mean - 1.0).abs() < 0.2,
            "{name}: merged {} vs slices {mean}",
            merged.totals.throughput
        );
    }
    let text = mcpbench::report::ab::render(&report, &out);
    assert!(
        text.contains("c=1 gateway vs direct, tools/call:work: added p50 +"),
        "{text}"
    );
    assert!(
        text.contains("ms upstream by its timing header and"),
        "{text}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| gateway · tools/call:work | p50 |"), "{md}");
    assert!(out.join("ab.json").is_file() && out.join("report.html").is_file());
    // `mcpbench report DIR` prints it again, from ab.json.
    let at = out.display().to_string();
    let (code, again, err) = crate::support::mcpbench(&["report", &at], &crate::support::repo());
    assert_eq!((code, again), (0, text), "{err}");
}

/// Open loop beyond the baseline's own capacity: the added latency is marked as bounded by
/// the upstream (the ceiling guard). 2 slots × 20 ms serve about 95 calls/s; 150/s are offered.
#[test]
fn the_ceiling_guard_marks_a_saturated_baseline() {
    let direct = capacity::start(2, Duration::from_millis(20));
    let gateway = capacity::start(2, Duration::from_millis(20));
    let dir = scratch();
    let text = scenario(
        &direct.addr.to_string(),
        &gateway.addr.to_string(),
        "model = \"open\"\nrate = 150\nmax_in_flight = 4\nmax_queued = 4",
    );
    let plan = Arc::new(mcpbench::scenario::parse("ab.toml", &text, &|_| None).unwrap());
    let opts = RunOptions {
        output: Some(dir.path().join("ab")),
        ..RunOptions::default()
    };
    let (report, _) =
        driver::ab_slices::ab(plan, &opts, mcpbench::driver::Interrupt::default()).unwrap();
    let bound = report.levels[0]
        .upstream_bound
        .as_deref()
        .unwrap_or_else(|| panic!("{:#?}", report.levels[0].slices));
    assert!(bound.starts_with("direct itself served "), "{bound}");
}

/// Two targets whose workload tool has the same name but not the same input schema: the A/B
/// run stops before any load and names the tool and the target that differs (comparing them
/// would measure two different things).
#[test]
fn targets_whose_tool_differs_are_refused_before_load() {
    let dir = scratch();
    let script = crate::support::repo().join("tests/fixtures/schema_stdio.py");
    let s = script.display();
    let text = format!(
        "name = \"ab-differs\"\n[[targets]]\nname = \"plain\"\ntransport = \"stdio\"\ncommand = [\"python3\", \"{s}\"]\n[[targets]]\nname = \"variant\"\ntransport = \"stdio\"\ncommand = [\"python3\", \"{s}\"]\nenv = {{ SCHEMA_VARIANT = \"1\" }}\n[ab]\nslice = \"500ms\"\npairs = 5\n[load]\nconcurrency = 1\nduration = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"pattern\"\narguments = {{ q = \"abc\" }}\n[[workload]]\nmethod = \"tools/call\"\ntool = \"const\"\n"
    );
    let file = crate::support::scenario(dir.path(), "differs.toml", &text);
    let (code, out, err) = crate::support::mcpbench(
        &["run", file.to_str().unwrap(), "--quiet", "--output", "out"],
        dir.path(),
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("tool `const` is not the same tool on every target")
            && err.contains("at `variant` differs from the one at `plain`"),
        "{err}"
    );
    assert!(!dir.path().join("out/slices").exists(), "no load was sent");
}
