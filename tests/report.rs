//! Reports: every run directory gets report.md and report.html, rendered from its files, and
//! `mcpbench report DIR` renders the same again. The HTML is one self-contained file.

use crate::support::{mcpbench, repo, scratch};

fn run(dir: &std::path::Path, sets: &[&str]) -> std::path::PathBuf {
    let mut extra = vec!["--duration", "3s", "--set", "load.warmup=1s"];
    for s in sets {
        extra.extend_from_slice(&["--set", s]);
    }
    let (code, o, e, out) = crate::support::quickstart(dir, &extra);
    assert!(code == 0 || code == 1, "{o}{e}");
    out
}

#[test]
fn every_run_writes_reports_that_report_renders_again() {
    let dir = scratch();
    let out = run(dir.path(), &["thresholds.p99=< 1us"]);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for op in [
        "tools/list",
        "tools/call:echo",
        "tools/call:search-contacts",
    ] {
        assert!(md.contains(&format!("| {op} |")), "{op}: {md}");
        assert!(html.contains(&format!("<td>{op}</td>")), "{op}");
    }
    assert!(md.contains("| BREACHED | p99 | < 1us |"), "{md}");
    assert!(
        md.contains("protocol 2025-11-25 offered, 2025-11-25 negotiated"),
        "{md}"
    );
    // Self-contained: no scripts, stylesheets or images fetched.
    for outside in ["<script", "<link", "src=", "@import"] {
        assert!(!html.contains(outside), "{outside} in report.html");
    }
    assert!(
        html.matches("<svg").count() >= 4,
        "the plots are inline SVG"
    );
    assert!(html.contains("<polyline"), "lines are drawn");

    std::fs::remove_file(out.join("report.md")).unwrap();
    std::fs::remove_file(out.join("report.html")).unwrap();
    let (code, stdout, err) = mcpbench(&["report", &out.display().to_string()], &repo());
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("report.html"), "{stdout}");
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
    assert_eq!(
        std::fs::read_to_string(out.join("report.html")).unwrap(),
        html
    );

    let (code, _, err) = mcpbench(
        &["report", &dir.path().join("nothing").display().to_string()],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("summary.json"), "{err}");
}

/// The spectrum in the report comes from latency.hlog merged exactly: its maximum per
/// operation equals the summary's (same histograms, same buckets).
#[test]
fn the_interval_log_adds_up_to_the_summary() {
    let dir = scratch();
    let out = run(dir.path(), &[]);
    let files = mcpbench::report::read_back::RunFiles::read(&out).unwrap();
    for op in files
        .summary
        .operations
        .iter()
        .filter(|o| o.latency.is_some())
    {
        let l = op.latency.as_ref().unwrap();
        let (_, pts) = files
            .spectra
            .iter()
            .find(|(tag, _)| *tag == op.name)
            .unwrap_or_else(|| panic!("{} not in latency.hlog", op.name));
        let max_ms = pts.last().unwrap().1 as f64 / 1000.0;
        let p50_ms = pts.iter().find(|(p, _)| *p == 50.0).unwrap().1 as f64 / 1000.0;
        assert!(
            (max_ms - l.max_ms).abs() < 0.002,
            "{}: {max_ms} vs {}",
            op.name,
            l.max_ms
        );
        assert!(
            (p50_ms - l.p50_ms).abs() < 0.002,
            "{}: {p50_ms} vs {}",
            op.name,
            l.p50_ms
        );
    }
}

/// `compare`: two runs of the same scenario are unchanged (exit 0); doubling the embedded
/// backend's latency is a regression of the REST-backed tools' latency (exit 1), while the
/// noise of a single slow interval is not.
#[test]
fn compare_flags_an_injected_regression_and_not_noise() {
    let dir = scratch();
    let scenario = crate::support::scenario(
        dir.path(),
        "cmp.toml",
        "name = \"cmp\"\n[embedded]\nbackend_latency = \"30ms\"\n[load]\nconcurrency = 4\nduration = \"6s\"\nwarmup = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"search-contacts\"\narguments = { query = \"a\" }\n[[workload]]\nmethod = \"tools/call\"\ntool = \"get-invoice\"\narguments = { id = \"${range:1..100}\" }\n",
    );
    let file = scenario.display().to_string();
    let run_to = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name).display().to_string();
        let mut args = vec!["run", &file, "--quiet", "--output", &out];
        args.extend_from_slice(extra);
        let (code, o, e) = mcpbench(&args, &repo());
        assert_eq!(code, 0, "{o}{e}");
        out
    };
    let a = run_to("a", &[]);
    let b = run_to("b", &[]);
    let slow = run_to("slow", &["--set", "embedded.backend_latency=60ms"]);

    let (code, md, err) = mcpbench(&["compare", &a, &b], &repo());
    assert_eq!(code, 0, "the same scenario twice: {md}{err}");
    assert!(md.contains("**0 regressed**"), "{md}");

    let (code, md, _) = mcpbench(&["compare", &a, &slow], &repo());
    assert_eq!(code, 1, "{md}");
    for op in ["tools/call:search-contacts", "tools/call:get-invoice"] {
        assert!(md.contains(&format!("| {op} | p50 |")), "{md}");
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| {op} | p50 |")))
            .unwrap();
        assert!(line.ends_with("| **regressed** |"), "{line}");
    }
    let (code, json, _) = mcpbench(&["compare", &a, &slow, "--format", "json"], &repo());
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let p50 = v["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["operation"] == "tools/call:get-invoice" && d["metric"] == "p50")
        .unwrap();
    assert_eq!(p50["verdict"], "regressed");
    assert!(p50["change"].as_f64().unwrap() > 0.5, "{p50}");
    assert!(p50["statistic"].as_f64().unwrap() >= 3.0, "{p50}");
}

/// Diagnosis with its evidence: requests that all time out at the limit are called what they
/// are (no answer at all, not a slow one).
#[test]
fn timeouts_at_the_limit_are_diagnosed() {
    let dir = scratch();
    let out = crate::support::run_in(
        "[load]\nconcurrency = 2\nduration = \"2s\"\ntimeout = \"200ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"sleep\"\narguments = { ms = 2000 }\n",
        dir.path(),
    )
    .unwrap();
    let note = note_in_summary_and_report(&out, "timed out, clustered at the 200ms limit");
    assert!(note.starts_with("tools/call:sleep: "), "{note}");
}

/// The note that contains `text`, which report.md carries too.
fn note_in_summary_and_report(out: &mcpbench::driver::RunOutput, text: &str) -> String {
    let note = out
        .summary
        .notes
        .iter()
        .find(|n| n.contains(text))
        .unwrap_or_else(|| panic!("{text}: {:?}", out.summary.notes))
        .clone();
    let md = std::fs::read_to_string(out.dir.join("report.md")).unwrap();
    assert!(md.contains(&note), "the report carries it: {md}");
    note
}

/// A target that serves one call at a time (1 slot × 10 ms): more virtual users (a ramp from
/// one to two, then eight) leave throughput flat and multiply the median; the run's notes
/// (terminal, summary.json, report.md) say the target serialises, with the figures, read from
/// the run's own time line.
#[test]
fn a_serialising_target_is_diagnosed() {
    let server = crate::support::capacity::start(1, std::time::Duration::from_millis(10));
    let dir = scratch();
    let out = crate::support::run_in(
        &format!(
            "[target]\nurl = \"http://{}/mcp\"\n[load]\nwarmup = \"0s\"\ntimeout = \"5s\"\n[[load.stages]]\nduration = \"3s\"\nconcurrency = 2\n[[load.stages]]\nduration = \"0s\"\nconcurrency = 8\n[[load.stages]]\nduration = \"3s\"\nconcurrency = 8\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
            server.addr
        ),
        dir.path(),
    )
    .unwrap();
    let note =
        note_in_summary_and_report(&out, "throughput stopped growing with the virtual users: ");
    assert!(
        note.contains("8 users") && note.contains("the target serialises requests"),
        "{note}"
    );
}

/// Thresholds are judged on the merged result, as the scenario set them: two shards running
/// side by side at 40/s each both breach `throughput > 60/s` (exit 1), and their merge (about
/// 80/s) holds it (exit 0); a latency bound no shard met is breached by the merge too.
#[test]
fn merged_runs_are_judged_by_their_thresholds() {
    let dir = scratch();
    let shards: Vec<(std::process::Child, std::path::PathBuf)> = ["a", "b"]
        .iter()
        .map(|h| {
            let out = dir.path().join(h);
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"))
                .args([
                    "run",
                    "scenarios/quickstart.toml",
                    "--rate",
                    "40",
                    "--duration",
                    "3s",
                    "--set",
                    "load.warmup=0s",
                    "--set",
                    "thresholds.throughput=> 60/s",
                    "--set",
                    "thresholds.error_rate=< 1%",
                    "--quiet",
                    "--output",
                ])
                .arg(&out)
                .current_dir(repo())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut dirs = Vec::new();
    for (mut child, out) in shards {
        assert_eq!(
            child.wait().unwrap().code(),
            Some(1),
            "a shard alone is under 60/s"
        );
        dirs.push(out.display().to_string());
    }
    let whole = dir.path().join("whole").display().to_string();
    let (code, out, err) = mcpbench(&["merge", &dirs[0], &dirs[1], "--output", &whole], &repo());
    assert_eq!(code, 0, "the merge holds: {out}{err}");
    let s = mcpbench::report::read_back::RunFiles::read(std::path::Path::new(&whole))
        .unwrap()
        .summary;
    let names: Vec<(&str, bool)> = s
        .thresholds
        .iter()
        .map(|t| (t.name.as_str(), t.passed))
        .collect();
    assert_eq!(
        names,
        vec![("throughput", true), ("error_rate", true)],
        "{:?}",
        s.thresholds
    );
    assert!(s.thresholds[0].value.unwrap() > 60.0);

    // A bound no shard met: the merge breaches it too, and says so with exit 1.
    for d in &dirs {
        let path = std::path::Path::new(d).join("summary.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["thresholds"][1]["name"] = "tools/call:echo p99".into();
        v["thresholds"][1]["condition"] = "< 1us".into();
        std::fs::write(&path, v.to_string()).unwrap();
    }
    let again = dir.path().join("again").display().to_string();
    let (code, out, _) = mcpbench(&["merge", &dirs[0], &dirs[1], "--output", &again], &repo());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("tools/call:echo p99"), "{out}");
}

/// `merge`: two runs merged equal their sum — counters exactly, and each operation's latency
/// exactly the percentiles of the two runs' histograms added (read back from their logs).
#[test]
fn merging_two_runs_equals_their_sum_exactly() {
    use mcpbench::report::read_back::read_intervals;
    use mcpbench::report::summary::Latency;
    let dir = scratch();
    let halves: Vec<std::path::PathBuf> = ["a", "b"]
        .iter()
        .map(|h| {
            let d = dir.path().join(h);
            std::fs::create_dir_all(&d).unwrap();
            run(&d, &[])
        })
        .collect();
    let whole = dir.path().join("whole");
    let args: Vec<String> = ["merge".to_string()]
        .into_iter()
        .chain(halves.iter().map(|h| h.display().to_string()))
        .chain(["--output".to_string(), whole.display().to_string()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = mcpbench(&args, &repo());
    assert_eq!(code, 0, "{out}{err}");
    let read = |p: &std::path::Path| mcpbench::report::read_back::RunFiles::read(p).unwrap();
    let (a, b, m) = (read(&halves[0]), read(&halves[1]), read(&whole));
    let logs: Vec<_> = halves
        .iter()
        .map(|h| read_intervals(&std::fs::read(h.join("latency.hlog")).unwrap()).unwrap())
        .collect();
    for op in &m.summary.operations {
        let find = |r: &mcpbench::report::read_back::RunFiles| {
            r.summary
                .operations
                .iter()
                .find(|o| o.name == op.name)
                .unwrap()
                .clone()
        };
        let (oa, ob) = (find(&a), find(&b));
        assert_eq!(op.started, oa.started + ob.started, "{}", op.name);
        assert_eq!(op.completed, oa.completed + ob.completed, "{}", op.name);
        assert_eq!(
            op.outcomes.ok,
            oa.outcomes.ok + ob.outcomes.ok,
            "{}",
            op.name
        );
        let mut sum = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for log in &logs {
            for i in log.iter().filter(|i| i.tag == op.name) {
                sum.add(&i.hist).unwrap();
            }
        }
        let expect = (!sum.is_empty()).then(|| Latency::from_hist(&sum));
        assert_eq!(op.latency, expect, "{}: percentiles exactly", op.name);
    }
    assert_eq!(
        m.summary.totals.started,
        a.summary.totals.started + b.summary.totals.started
    );
    let merged_log = read_intervals(&std::fs::read(whole.join("latency.hlog")).unwrap()).unwrap();
    let count = |v: &[mcpbench::report::read_back::LoggedInterval]| {
        v.iter().map(|i| i.hist.len()).sum::<u64>()
    };
    assert_eq!(
        count(&merged_log),
        count(&logs[0]) + count(&logs[1]),
        "the merged log holds every sample"
    );
    assert!(whole.join("report.html").exists() && whole.join("timeseries.csv").exists());

    let (code, _, err) = mcpbench(
        &["merge", &halves[0].display().to_string(), "--output", "x"],
        &repo(),
    );
    assert_eq!(code, 2, "one run is not a merge: {err}");
}

/// `run --repeat 3` makes a side of three runs, and `compare` then takes its noise from the
/// spread between runs: three more runs of the same scenario are unchanged, a backend 50 %
/// slower regresses p50 and throughput; budgets replace `min_change` for the metrics they name
/// (held when the change is within them, breached beyond).
#[test]
fn compare_with_repeated_runs_flags_injected_regressions_and_judges_budgets() {
    let dir = scratch();
    let scenario = crate::support::scenario(
        dir.path(),
        "rep.toml",
        "name = \"rep\"\n[embedded]\nbackend_latency = \"10ms\"\n[load]\nconcurrency = 4\nduration = \"1500ms\"\nwarmup = \"500ms\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"get-invoice\"\narguments = { id = \"${range:1..100}\" }\n",
    );
    let file = scenario.display().to_string();
    let runs = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name).display().to_string();
        let mut args = vec!["run", &file, "--quiet", "--repeat", "3", "--output", &out];
        args.extend_from_slice(extra);
        let (code, o, e) = mcpbench(&args, &repo());
        assert_eq!(code, 0, "{o}{e}");
        for i in 1..=3 {
            assert!(
                std::path::Path::new(&out)
                    .join(format!("run-{i}/summary.json"))
                    .is_file()
            );
        }
        out
    };
    let base = runs("base", &[]);
    let same = runs("same", &[]);
    let slow = runs("slow", &["--set", "embedded.backend_latency=15ms"]);
    let json = |a: &str, b: &str, extra: &[&str]| {
        let mut args = vec!["compare", a, b, "--format", "json"];
        args.extend_from_slice(extra);
        let (code, out, err) = mcpbench(&args, &repo());
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (code, v)
    };
    let verdict = |v: &serde_json::Value, metric: &str| {
        v["deltas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["metric"] == metric)
            .unwrap()["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (code, v) = json(&base, &same, &[]);
    assert_eq!(v["method"], "between_runs");
    assert_eq!(code, 0, "the same scenario, three runs a side: {v:#}");
    let (code, v) = json(&base, &slow, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(verdict(&v, "p50"), "regressed", "{v:#}");
    assert_eq!(verdict(&v, "throughput"), "regressed", "{v:#}");
    // Budgets wider than the change: held, exit 0; a narrower p50 budget: breached.
    let wide = "p50=+80%,p90=+80%,p95=+80%,p99=+80%,p99.9=+80%,throughput=-50%";
    let (code, v) = json(&base, &slow, &["--budget", wide]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(verdict(&v, "p50"), "unchanged");
    let narrow = "p50=+20%,p90=+80%,p95=+80%,p99=+80%,p99.9=+80%,throughput=-50%";
    let (code, md, _) = mcpbench(&["compare", &base, &slow, "--budget", narrow], &repo());
    assert_eq!(code, 1, "{md}");
    assert!(
        md.contains("- p50 +20%: **breached** by tools/call:get-invoice"),
        "{md}"
    );
    assert!(md.contains("- throughput -50%: held"), "{md}");
}
