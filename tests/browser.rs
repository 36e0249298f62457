//! Report pages in a real browser (a run's, an A/B sweep's, a find-max's, a comparison's): the system Chromium driven by playwright-core (pinned in
//! interop/package.json; `scripts/test` installs both) through `tests/browser/pages.mjs`, at
//! 1280 and 390 px wide. What a reader would check: the plots are there and drawn, tick labels
//! are nice numbers, both targets are on an A/B's spectra, nothing is wider than a phone's
//! window except inside a box that scrolls on its own (a chart keeps 480 px and scrolls in
//! place on a phone rather than shrink its text away), no script error and no network request.
//! Screenshots of every page at both widths stay in `target/report-pages/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcpbench::driver::{self, RunOptions};
use serde_json::Value;

use crate::support::{capacity, scratch};

/// Where the screenshots stay after the test (a test artefact).
fn artefacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("report-pages");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Each page at each width, as `pages.mjs` saw it.
fn open(pages: &[(&str, PathBuf)]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/pages.mjs");
    let out = artefacts();
    let mut c = std::process::Command::new("node");
    c.arg(&script).arg(&out);
    for (name, file) in pages {
        c.arg(format!("{name}={}", file.display()));
    }
    let o = c
        .output()
        .expect("node runs (scripts/test installs playwright-core and chromium)");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "pages.mjs failed: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A tick label's value (`15k` is 15 000).
fn value(label: &str) -> Option<f64> {
    match label.strip_suffix('k') {
        Some(k) => k.parse::<f64>().ok().map(|v| v * 1000.0),
        None => label.parse().ok(),
    }
}

/// Whether `v` is 1, 2 or 5 times a power of ten.
fn one_two_five(v: f64) -> bool {
    let m = v.abs() / 10f64.powf(v.abs().log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().any(|n| (m - n).abs() < 1e-6)
}

/// Nice ticks: evenly spaced by 1, 2 or 5 × 10ⁿ (linear), or each 1, 2 or 5 × 10ⁿ (log).
fn nice(labels: &[String]) -> bool {
    let Some(v) = labels
        .iter()
        .map(|l| value(l))
        .collect::<Option<Vec<f64>>>()
    else {
        return false;
    };
    if v.len() < 2 {
        return true;
    }
    let step = v[1] - v[0];
    let even = v
        .windows(2)
        .all(|w| ((w[1] - w[0]) - step).abs() <= 1e-9 * step.abs().max(1.0));
    (even && step > 0.0 && one_two_five(step)) || v.iter().all(|x| *x > 0.0 && one_two_five(*x))
}

/// What every page must show at every width; its charts.
fn readable(p: &Value) -> Vec<Value> {
    let at = format!("{} at {} px", p["name"], p["width"]);
    assert_eq!(p["problems"], serde_json::json!([]), "{at}: {p}");
    assert!(
        p["page_width"].as_f64() <= p["viewport"].as_f64(),
        "{at}: the page scrolls sideways: {p}"
    );
    assert_eq!(
        p["wide"],
        serde_json::json!([]),
        "{at}: wider than the window"
    );
    let charts = p["charts"].as_array().unwrap().clone();
    for c in &charts {
        assert!(
            c["width"].as_f64().unwrap() >= 480.0 && c["height"].as_f64().unwrap() > 60.0,
            "{at}: a chart too small: {c}"
        );
        assert!(c["drawn"].as_u64().unwrap() > 0, "{at}: nothing drawn: {c}");
        assert_eq!(
            c["clipped"],
            serde_json::json!([]),
            "{at}: text cut off: {c}"
        );
        for axis in ["x", "y"] {
            let labels: Vec<String> = serde_json::from_value(c["ticks"][axis].clone()).unwrap();
            assert!(nice(&labels), "{at}: ticks {labels:?} of {}", c["title"]);
        }
    }
    charts
}

/// A scenario's plan and the options that write its results to `out`.
fn planned(text: &str, out: PathBuf) -> (Arc<mcpbench::scenario::Plan>, RunOptions) {
    let plan = mcpbench::scenario::parse("scenario.toml", text, &|_| None).unwrap();
    let opts = RunOptions {
        output: Some(out),
        ..RunOptions::default()
    };
    (Arc::new(plan), opts)
}

/// The A/B scenario: the same server twice, the second slower (a gateway's cost), with a
/// timing header; two levels, so it is a sweep too.
fn ab_page(dir: &Path) -> PathBuf {
    let direct = capacity::start(64, Duration::from_millis(1));
    let gateway = capacity::start(64, Duration::from_millis(3));
    let text = format!(
        "name = \"ab\"\n[[targets]]\nname = \"direct\"\nurl = \"http://{}/mcp\"\n[[targets]]\nname = \"gateway\"\nurl = \"http://{}/mcp\"\ntiming_header = \"server-timing:work\"\n[ab]\nslice = \"500ms\"\npairs = 5\nlevels = [1, 4]\n[load]\nconcurrency = 1\nduration = \"10s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        direct.addr, gateway.addr
    );
    let (plan, opts) = planned(&text, dir.join("ab"));
    let (_, out) =
        driver::ab_slices::ab(plan, &opts, mcpbench::driver::Interrupt::default()).unwrap();
    out.join("report.html")
}

/// A find-max search, open loop, over a server of known capacity (10 slots × 20 ms).
fn find_max_page(dir: &Path) -> PathBuf {
    let server = capacity::start(10, Duration::from_millis(20));
    let text = format!(
        "name = \"fm\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nmodel = \"open\"\ntimeout = \"5s\"\nrate = 50\narrival = \"uniform\"\nmax_in_flight = 64\nduration = \"1s\"\n[find_max]\nerror_rate = 0.01\nstart = 50\nmax = 2000\nstep_duration = \"500ms\"\nconfirm_duration = \"1s\"\nprecision = 0.1\np99 = \"50ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    );
    let (plan, opts) = planned(&text, dir.join("fm"));
    let (_, out) =
        driver::findmax::find_max(plan, &opts, mcpbench::driver::Interrupt::default()).unwrap();
    out.join("report.html")
}

#[test]
#[ignore = "needs chromium and playwright-core: scripts/test installs them and runs this"]
fn report_pages_read_well_in_chromium_at_1280_and_390_px() {
    let dir = scratch();
    let (code, o, e, run) =
        crate::support::quickstart(dir.path(), &["--rate", "300", "--set", "load.warmup=1s"]);
    assert_eq!(code, 0, "{o}{e}");
    let again = scratch();
    let (code, o, e, current) =
        crate::support::quickstart(again.path(), &["--set", "load.duration=3s"]);
    assert_eq!(code, 0, "{o}{e}");
    let compared = dir.path().join("compare.html");
    let args = [
        "compare",
        run.to_str().unwrap(),
        current.to_str().unwrap(),
        "--html",
        compared.to_str().unwrap(),
    ];
    let (code, o, e) = crate::support::mcpbench(&args, dir.path());
    assert!(code == 0 || code == 1, "a verdict, not an error: {o}{e}");
    let pages = [
        ("run", run.join("report.html")),
        ("compare", compared),
        ("ab", ab_page(dir.path())),
        ("find-max", find_max_page(dir.path())),
    ];
    let seen = open(&pages);
    assert_eq!(seen.len(), 8, "four pages at two widths: {seen:?}");
    for p in &seen {
        let charts = readable(p);
        let titles: Vec<&str> = charts
            .iter()
            .map(|c| c["title"].as_str().unwrap())
            .collect();
        let at = format!("{} at {} px: {titles:#?}", p["name"], p["width"]);
        match p["name"].as_str().unwrap() {
            "run" => {
                assert!(charts.len() >= 5, "{at}");
                assert!(titles.iter().any(|t| t.contains("lateness p99")), "{at}");
                assert!(p["tiles"].as_u64().unwrap() >= 5, "{at}");
            }
            "ab" => {
                let spectra: Vec<&Value> = charts
                    .iter()
                    .filter(|c| c["title"].as_str().unwrap().contains("spectrum"))
                    .collect();
                assert_eq!(spectra.len(), 2, "one per level: {at}");
                for s in spectra {
                    assert_eq!(
                        s["legend"],
                        serde_json::json!(["direct", "gateway"]),
                        "{at}"
                    );
                }
                for part in [
                    "added over direct per percentile",
                    "against the level",
                    "by round",
                    "timing header",
                ] {
                    assert!(titles.iter().any(|t| t.contains(part)), "{part}: {at}");
                }
                assert!(p["tiles"].as_u64().unwrap() >= 6, "{at}");
            }
            "compare" => {
                assert!(charts.len() >= 3, "a spectrum per operation: {at}");
                for c in &charts {
                    assert_eq!(c["legend"], serde_json::json!(["base", "current"]), "{at}");
                }
                assert!(p["tiles"].as_u64().unwrap() >= 3, "{at}");
            }
            _ => {
                assert_eq!(charts.len(), 2, "{at}");
                assert!(p["tiles"].as_u64().unwrap() >= 3, "{at}");
            }
        }
    }
    for (name, _) in &pages {
        for w in [1280, 390] {
            let shot = artefacts().join(format!("{name}-{w}.png"));
            let bytes = std::fs::read(&shot).unwrap();
            assert!(
                bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
                "{shot:?}"
            );
        }
    }
}
