//! The target's own resources: a real `mcpbench serve` process watched by pid, and stdio
//! servers the generator spawns, sampled from procfs every interval — in the summary, the time
//! series and the thresholds, and matching what `ps` and `/proc` say.

use std::path::Path;
use std::process::Command;

use crate::support::{csv_column, launch, listening, mcpbench, scenario, scratch, valid_summary};

/// User + system CPU time of `pid` so far, seconds (`/proc/PID/stat` fields 14 and 15).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server's stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields from 3 (state) on: utime is field 14, stime 15.
    (f[14 - 3] + f[15 - 3]) as f64 / 100.0
}

/// Resident memory of `pid` as `ps` reports it, bytes.
fn ps_rss(pid: u32) -> u64 {
    let out = Command::new("ps")
        .args(["-o", "rss=", "-p", &pid.to_string()])
        .output()
        .expect("ps");
    let kib: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("an RSS in KiB");
    kib * 1024
}

/// `mcpbench run FILE --output OUT --no-tui EXTRA…` in `dir`.
fn run(dir: &Path, file: &Path, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--no-tui",
    ];
    args.extend_from_slice(extra);
    mcpbench(&args, dir)
}

#[test]
fn a_server_watched_by_pid_matches_ps_and_proc_and_its_thresholds_are_judged() {
    let (server, addr) = listening(Command::new(env!("CARGO_BIN_EXE_mcpbench")).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "1",
    ]));
    let pid = server.0.id();
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "watched.toml",
        &format!(
            r#"name = "watched"
[target]
url = "http://{addr}/mcp"
[load]
concurrency = 4
duration = "3s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hello" }}
[thresholds]
target_cpu_per_request = "< 100ms"
target_memory_growth = "< 1GB"
"#
        ),
    );
    let before = cpu_seconds(pid);
    let out = dir.path().join("run");
    let pid_arg = pid.to_string();
    let (code, stdout, stderr) = run(dir.path(), &file, &out, &["--target-pid", &pid_arg]);
    let used = cpu_seconds(pid) - before;
    let rss_now = ps_rss(pid);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let s = valid_summary(&out);
    let rows = s["target_processes"].as_array().expect("target_processes");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let p = &rows[0];
    assert_eq!(p["name"], format!("pid {pid} (mcpbench)"));
    // The run watched a window inside [before, after]: at most what /proc saw in all, and
    // most of it (the server only works while the run sends).
    let cpu = p["cpu_seconds"].as_f64().unwrap();
    assert!(
        cpu > 0.0 && cpu <= used + 0.02 && cpu >= used * 0.5 - 0.02,
        "sampled {cpu} s of the {used} s /proc saw"
    );
    let started: u64 = s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["started"].as_u64().unwrap())
        .sum::<u64>()
        + s["warmup"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["started"].as_u64().unwrap_or(0))
            .sum::<u64>();
    let per = p["cpu_us_per_request"].as_f64().unwrap();
    assert!(
        (per - cpu * 1e6 / started as f64).abs() < 0.01 * per + 0.01,
        "{per} µs/request for {cpu} s over {started} requests"
    );
    // Resident memory: what ps says a moment later, within 25 % (the server is idle by then).
    let rss = p["rss_last_bytes"].as_u64().unwrap();
    assert!(
        (rss as f64 - rss_now as f64).abs() <= 0.25 * rss_now as f64,
        "sampled {rss} B, ps {rss_now} B"
    );
    assert!(p["rss_peak_bytes"].as_u64().unwrap() >= rss);
    // A listener, four connections, stdio: at least seven descriptors; tokio's threads.
    assert!(p["fds_max"].as_u64().unwrap() >= 7, "{p}");
    assert!(p["threads_max"].as_u64().unwrap() >= 2, "{p}");
    // The time series: a value in every row, adding up to the summary's CPU time.
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let per_interval: Vec<f64> = csv_column(&csv, "target_cpu_ms")
        .iter()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("target_cpu_ms `{v}`")))
        .collect();
    let total_ms: f64 = per_interval.iter().sum();
    assert!(
        (total_ms - cpu * 1000.0).abs() < 1.0,
        "intervals add to {total_ms} ms, summary {cpu} s"
    );
    for col in ["target_rss_mb", "target_fds", "target_threads"] {
        assert!(
            csv_column(&csv, col)
                .iter()
                .all(|v| v.parse::<f64>().is_ok_and(|x| x > 0.0)),
            "{col}: {csv}"
        );
    }
    // Judged: both hold, with their units; the text says what was watched.
    let results = s["thresholds"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|r| r["passed"] == true), "{results:?}");
    assert_eq!(results[0]["unit"], "µs");
    assert_eq!(results[1]["unit"], "MB");
    assert!(
        stdout.contains(&format!("target pid {pid} (mcpbench): CPU")),
        "{stdout}"
    );
    // The same run with a bound no server meets: exit 1.
    let strict = std::fs::read_to_string(&file)
        .unwrap()
        .replace("< 100ms", "< 0.001us");
    let file = scenario(dir.path(), "strict.toml", &strict);
    let out = dir.path().join("strict");
    let (code, stdout, _) = run(
        dir.path(),
        &file,
        &out,
        &["--target-pid", &pid_arg, "--set", "load.duration=1s"],
    );
    assert_eq!(code, 1, "{stdout}");
    let s = valid_summary(&out);
    assert_eq!(s["thresholds"][0]["passed"], false, "{}", s["thresholds"]);
    drop(server);
}

#[test]
fn spawned_stdio_servers_are_watched_by_themselves() {
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "stdio.toml",
        &format!(
            r#"name = "stdio-watched"
[target]
command = ["{}", "serve", "--stdio"]
[load]
concurrency = 2
duration = "2s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hello" }}
"#,
            env!("CARGO_BIN_EXE_mcpbench")
        ),
    );
    let out = dir.path().join("run");
    let (code, stdout, stderr) = run(dir.path(), &file, &out, &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let s = valid_summary(&out);
    let rows = s["target_processes"].as_array().expect("target_processes");
    assert_eq!(rows.len(), 1, "{rows:?}");
    // The preflight's own child and one per virtual user.
    let name = rows[0]["name"].as_str().unwrap();
    assert!(name.starts_with("stdio servers ("), "{name}");
    assert!(
        rows[0]["cpu_seconds"].as_f64().unwrap() > 0.0,
        "{}",
        rows[0]
    );
    assert!(
        rows[0]["rss_peak_bytes"].as_u64().unwrap() > 1 << 20,
        "{}",
        rows[0]
    );
}

#[test]
fn what_cannot_be_watched_is_refused_before_any_load() {
    let dir = scratch();
    let server = launch(mcpbench::server::Config::default());
    let text = |extra: &str| {
        format!(
            "name = \"refused\"\n[target]\nurl = \"{}\"\n{extra}\n[load]\nconcurrency = 1\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n",
            server.mcp_url()
        )
    };
    // No such process (pids are below 2^22 on Linux).
    let file = scenario(dir.path(), "a.toml", &text(""));
    let (code, _, stderr) = mcpbench(
        &[
            "run",
            file.to_str().unwrap(),
            "--target-pid",
            "4194305",
            "--no-tui",
        ],
        dir.path(),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("target process 4194305 cannot be read"),
        "{stderr}"
    );
    // A threshold on the target, and nothing to watch.
    let file = scenario(
        dir.path(),
        "b.toml",
        &format!(
            "{}[thresholds]\ntarget_cpu_per_request = \"< 50us\"\n",
            text("")
        ),
    );
    let (code, _, stderr) = mcpbench(&["run", file.to_str().unwrap(), "--no-tui"], dir.path());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("none are watched"), "{stderr}");
    // A bad pid in the scenario names its key.
    let file = scenario(dir.path(), "c.toml", &text("pid = -3"));
    let (code, _, stderr) = mcpbench(&["validate", file.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("target.pid"), "{stderr}");
    // A target threshold is for the whole run, not one operation.
    let file = scenario(
        dir.path(),
        "d.toml",
        &format!(
            "{}[thresholds]\n\"tools/list\".target_cpu_per_request = \"< 50us\"\n",
            text("pid = 1")
        ),
    );
    let (code, _, stderr) = mcpbench(&["validate", file.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not one operation"), "{stderr}");
}
