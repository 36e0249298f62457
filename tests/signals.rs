//! Signals on real runs of the binary: SIGTERM, SIGINT and SIGHUP drain the requests in flight
//! and write complete results marked interrupted (exit 2); a second signal cancels what is in
//! flight at once; SIGKILL leaves the interval log and time series readable; `serve` drains.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::{repo, scenario, scratch};

/// Every call waits `latency` in the embedded backend.
fn slow_scenario(dir: &Path, latency: &str) -> String {
    scenario(
        dir,
        "slow.toml",
        &format!(
            r#"name = "slow"
[embedded]
backend_latency = "{latency}"
[load]
concurrency = 4
duration = "60s"
timeout = "30s"
[[workload]]
method = "tools/call"
tool = "search-contacts"
arguments = {{ query = "Leanne" }}
"#
        ),
    )
    .display()
    .to_string()
}

/// Starts `mcpbench run FILE --no-tui --output OUT ARGS…`; returns once it reported progress
/// (so requests are in flight), with its stderr reader. (The caller waits for the child.)
fn start_run(
    file: &str,
    out: &Path,
    args: &[&str],
) -> (Child, BufReader<std::process::ChildStderr>) {
    start_run_until(file, out, args, |line| line.trim_start().starts_with('['))
}

/// Starts the run; returns once it wrote a line on stderr that `until` accepts.
#[allow(clippy::zombie_processes)]
fn start_run_until(
    file: &str,
    out: &Path,
    args: &[&str],
    until: fn(&str) -> bool,
) -> (Child, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args(["run", file, "--no-tui", "--output"])
        .arg(out)
        .args(args)
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run ended early");
        }
        if until(&line) {
            return (child, err);
        }
    }
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal}");
}

/// The exit code and what was said on stderr after the signal.
fn wait(mut child: Child, mut err: BufReader<std::process::ChildStderr>) -> (Option<i32>, String) {
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    (child.wait().unwrap().code(), rest)
}

/// A complete results directory: every file, a summary that accounts for every request.
fn complete(out: &Path) -> serde_json::Value {
    for f in [
        "summary.json",
        "latency.hlog",
        "timeseries.csv",
        "report.md",
        "report.html",
    ] {
        assert!(out.join(f).is_file(), "{f} missing in {}", out.display());
    }
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["interrupted"], true, "{s}");
    assert_eq!(s["totals"]["unaccounted"], 0, "{s}");
    s
}

fn call(s: &serde_json::Value) -> &serde_json::Value {
    s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "tools/call:search-contacts")
        .unwrap()
}

fn notes(s: &serde_json::Value) -> String {
    s["notes"].to_string()
}

/// A signal while a shard waits for the agreed start (a pod deleted before its run began):
/// results are written, empty and marked interrupted, saying no load was sent; exit 2.
#[test]
fn a_signal_before_the_agreed_start_writes_results_without_load() {
    let dir = scratch();
    let file = slow_scenario(dir.path(), "1ms");
    let out = dir.path().join("early");
    let at = mcpbench::driver::start::rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(120),
    );
    let (child, err) = start_run_until(&file, &out, &["--start-at", &at], |l| {
        l.starts_with("start:")
    });
    kill(&child, "TERM");
    let (code, said) = wait(child, err);
    assert_eq!(code, Some(2), "{said}");
    let s = complete(&out);
    assert_eq!(s["totals"]["started"], 0, "{s}");
    assert!(
        notes(&s).contains("interrupted by SIGTERM before the agreed start: no load was sent"),
        "{}",
        notes(&s)
    );
    assert_eq!(s["start"]["agreed"], at.as_str());
}

/// SIGTERM (what Kubernetes, systemd and CI runners send): the calls in flight finish within
/// the grace, nothing is cancelled, the results are complete, exit code 2.
#[test]
fn sigterm_drains_in_flight_requests_and_writes_results() {
    let dir = scratch();
    let file = slow_scenario(dir.path(), "300ms");
    let out = dir.path().join("term");
    let (child, err) = start_run(&file, &out, &[]);
    kill(&child, "TERM");
    let (code, said) = wait(child, err);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("SIGTERM"), "{said}");
    let s = complete(&out);
    let c = call(&s);
    assert_eq!(c["cancelled"], 0, "drained: {c}");
    assert!(c["outcomes"]["ok"].as_u64().unwrap() >= 4, "{c}");
    assert!(
        notes(&s).contains("interrupted by SIGTERM"),
        "{}",
        notes(&s)
    );
    assert_eq!(s["totals"]["error_rate"], 0.0);
}

/// SIGINT with no grace: the calls in flight are cancelled at once — counted as cancelled,
/// not as errors — and the results are still complete.
#[test]
fn sigint_without_grace_cancels_in_flight_requests_and_writes_results() {
    let dir = scratch();
    let file = slow_scenario(dir.path(), "2s");
    let out = dir.path().join("int");
    let (child, err) = start_run(&file, &out, &["--grace", "0s"]);
    kill(&child, "INT");
    let (code, said) = wait(child, err);
    assert_eq!(code, Some(2), "{said}");
    let s = complete(&out);
    let c = call(&s);
    let cancelled = c["cancelled"].as_u64().unwrap();
    assert!((1..=4).contains(&cancelled), "{c}");
    assert_eq!(s["totals"]["error_rate"], 0.0, "cancelled is not an error");
    assert!(notes(&s).contains("interrupted by SIGINT"), "{}", notes(&s));
}

/// Two signals: the second cancels the calls still in flight without waiting out the grace,
/// and the results are still written. SIGHUP (a closed terminal) counts like the others.
#[test]
fn a_second_signal_skips_the_drain_and_still_writes_results() {
    let dir = scratch();
    let file = slow_scenario(dir.path(), "20s");
    let out = dir.path().join("twice");
    let (child, err) = start_run(&file, &out, &["--grace", "25s"]);
    let t0 = std::time::Instant::now();
    kill(&child, "HUP");
    std::thread::sleep(std::time::Duration::from_millis(300));
    kill(&child, "TERM");
    let (code, said) = wait(child, err);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(15),
        "the second signal did not wait for the 20 s calls"
    );
    let s = complete(&out);
    let c = call(&s);
    assert!(c["cancelled"].as_u64().unwrap() >= 1, "{c}");
    let n = notes(&s);
    assert!(
        n.contains("interrupted by SIGHUP") && n.contains("second interrupt"),
        "{n}"
    );
}

/// SIGKILL cannot be caught: what was flushed per interval (time series, interval log) is
/// readable up to the last complete interval.
#[test]
fn sigkill_leaves_a_readable_time_series_and_interval_log() {
    let dir = scratch();
    let file = slow_scenario(dir.path(), "50ms");
    let out = dir.path().join("killed");
    let (child, mut err) = start_run(&file, &out, &[]);
    // Three intervals reported: at least two written.
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        err.read_line(&mut line).unwrap();
    }
    kill(&child, "KILL");
    let (code, _) = wait(child, err);
    assert_eq!(code, None, "killed by a signal");
    assert!(!out.join("summary.json").exists());
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let ok = crate::support::csv_numbers(&csv, "ok");
    assert!(ok.len() >= 2 && ok.iter().sum::<u64>() > 0, "{csv}");
    let hlog = std::fs::read_to_string(out.join("latency.hlog")).unwrap();
    let intervals = hlog
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("\"StartTimestamp\""))
        .count();
    assert!(intervals >= 2, "{hlog}");
    // Every interval line decodes: the log up to the kill is whole.
    let mut reader =
        hdrhistogram::serialization::interval_log::IntervalLogIterator::new(hlog.as_bytes());
    let decoded = reader.by_ref().filter(|r| r.is_ok()).count();
    assert!(decoded >= 2, "{hlog}");
}

/// `mcpbench serve` on SIGTERM: no new connections, a call in flight is answered in full,
/// then it exits 0.
#[test]
fn serve_drains_a_call_in_flight_on_sigterm() {
    let dir = scratch();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--inject-delay", "1s"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line}"));
    let addr: std::net::SocketAddr = url.split('/').next().unwrap().parse().unwrap();
    let (sid, r) = crate::support::initialize(addr, "2025-11-25");
    assert_eq!(r.status, 200);
    let slow = std::thread::spawn(move || {
        crate::support::post(
            addr,
            &[("Mcp-Session-Id", &sid)],
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"drained"}}}"#,
        )
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    kill(&child, "TERM");
    let answered = slow.join().unwrap();
    assert_eq!(answered.status, 200);
    assert!(
        String::from_utf8_lossy(&answered.body).contains("drained"),
        "{}",
        String::from_utf8_lossy(&answered.body)
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("SIGTERM: stopping"), "{said}");
}
