//! A session-opening storm (`load.open_rate`) against the embedded server: the virtual users
//! open their sessions at the set pace, not all at once, and every interval with openings
//! reports them with their `connect` and `initialize` latency. Counts per interval, not timing.

use crate::support::{csv_column, mcpbench, scenario, scratch, valid_summary};

#[test]
fn a_storm_opens_sessions_at_its_rate_and_times_each_second_of_openings() {
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "storm.toml",
        r#"name = "storm"
[load]
concurrency = 600
open_rate = 200
duration = "5s"
think = "1s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hello" }
"#,
    );
    let out = dir.path().join("run");
    let (code, stdout, stderr) = mcpbench(
        &[
            "run",
            file.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--no-tui",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let s = valid_summary(&out);
    assert_eq!(s["load"]["open_rate"], 200.0, "{}", s["load"]);
    assert_eq!(s["sessions"]["opened"], 600, "{}", s["sessions"]);
    let connect = s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "connect")
        .expect("connect timed on its own");
    assert_eq!(connect["started"], 600, "{connect}");
    assert!(
        stdout.contains("600 virtual users started at 200/s"),
        "{stdout}"
    );
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let opened: Vec<u64> = csv_column(&csv, "sessions_opened")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(opened.iter().sum::<u64>(), 600, "{csv}");
    // At 200/s, not all at once: the first second opens at most a third (and a margin), and
    // the openings spread over at least three seconds.
    assert!(opened[0] <= 300, "{opened:?}");
    assert!(opened.iter().filter(|&&n| n > 0).count() >= 3, "{opened:?}");
    let init = csv_column(&csv, "initialize_p99_ms");
    let conn = csv_column(&csv, "connect_p99_ms");
    for (i, n) in opened.iter().enumerate() {
        if *n > 0 {
            assert!(init[i].parse::<f64>().unwrap() > 0.0, "{i}: {csv}");
            assert!(conn[i].parse::<f64>().is_ok(), "{i}: {csv}");
        }
    }
}

#[test]
fn a_storm_that_cannot_start_every_user_in_time_is_refused_with_the_fix() {
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "slow.toml",
        "[load]\nconcurrency = 1000\nopen_rate = 100\nduration = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hi\" }\n",
    );
    let (code, _, err) = mcpbench(&["validate", file.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("slow.toml:3:") && err.contains("takes 10.0 s"),
        "{err}"
    );
    assert!(err.contains("open_rate = 200 or more"), "{err}");
}
