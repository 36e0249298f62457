//! A cluster simulated on one machine: one scenario split over N `mcpbench run --shard` processes
//! against one reference server, started together (`--start-at`, or the barrier with the index
//! from JOB_COMPLETION_INDEX as in a Kubernetes Indexed Job), then `mcpbench merge`d. The
//! shards add up to the scenario, and the merge is exact: its totals are the shards' sums, its
//! histograms the union of their recordings, and thresholds are judged on the whole.
//! Each shard connects from its own loopback address (127.0.0.2, .3 …: its own port range, as
//! a pod has); network namespaces would need addresses beyond loopback, where load tests do
//! not go.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use mcpbench::report::Summary;
use mcpbench::report::read_back::read_intervals;

use crate::support::{launch, mcpbench, scenario, scratch, valid_summary};

/// How a split run's shards agree on their start.
#[derive(Clone, Copy)]
enum Start {
    /// `--start-at`, a few seconds ahead.
    At,
    /// `--shards N --start-barrier DIR`, the index from JOB_COMPLETION_INDEX.
    Barrier,
}

/// Runs `file` as `n` shard processes side by side, results in `dir/shards/I`; returns each
/// shard's exit code and summary.
fn run_shards(file: &Path, dir: &Path, n: usize, start: Start) -> Vec<(i32, Summary)> {
    let shards = dir.join("shards");
    let at =
        mcpbench::driver::start::rfc3339(SystemTime::now() + Duration::from_secs(2 + n as u64 / 2));
    let children: Vec<_> = (0..n)
        .map(|i| {
            let out = shards.join(i.to_string());
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpbench"));
            // Each shard from its own address, like pods: 127.0.0.2, 127.0.0.3 …
            let source = format!("127.0.0.{}", 2 + i);
            cmd.arg("run")
                .arg(file)
                .arg("--output")
                .arg(&out)
                .args(["--quiet", "--workers", "1", "--source-address", &source])
                .env("RUST_LOG", "warn")
                .env_remove("MCPBENCH_SHARD")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            match start {
                Start::At => {
                    cmd.args(["--shard", &format!("{i}/{n}"), "--start-at", &at]);
                }
                Start::Barrier => {
                    cmd.args(["--shards", &n.to_string(), "--start-barrier"])
                        .arg(dir.join("barrier"))
                        .args(["--barrier-timeout", "60s"])
                        .env("JOB_COMPLETION_INDEX", i.to_string());
                }
            }
            (out, cmd.spawn().expect("spawn a shard"))
        })
        .collect();
    children
        .into_iter()
        .map(|(out, child)| {
            let o = child.wait_with_output().expect("shard finishes");
            let code = o.status.code().unwrap_or(-1);
            let summary = read_summary(&out).unwrap_or_else(|| {
                panic!(
                    "{} wrote no summary (exit {code}): {}",
                    out.display(),
                    String::from_utf8_lossy(&o.stderr)
                )
            });
            (code, summary)
        })
        .collect()
}

fn read_summary(dir: &Path) -> Option<Summary> {
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    Some(serde_json::from_str(&text).expect("summary.json parses"))
}

/// Every operation's histogram, added over every interval of a run's latency.hlog.
fn histograms(dir: &Path) -> BTreeMap<String, Histogram<u64>> {
    let bytes = std::fs::read(dir.join("latency.hlog")).expect("latency.hlog");
    let mut out: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for i in read_intervals(&bytes).expect("a readable interval log") {
        match out.get_mut(&i.tag) {
            Some(h) => h.add(&i.hist).unwrap(),
            None => {
                out.insert(i.tag, i.hist);
            }
        }
    }
    out
}

/// The recorded (value, count) pairs: equal lists mean equal histograms.
fn recorded(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn merge(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let mut all = vec!["merge"];
    all.extend_from_slice(args);
    mcpbench(&all, cwd)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Request mode: 601 requests from 6 virtual users, unsplit and in 2 and 4 shards (started
/// at a time, and through the barrier with the index from the environment). Every split starts
/// exactly 601 requests; users keep their global numbers, so user g still speaks with
/// credential g mod 2 (shard I of an even split has only tenant I mod 2's users); each shard
/// starts on the agreed time line; the merge's totals are the sums and its histograms the union
/// of the shards' own, value by value.
#[test]
fn a_split_scenario_adds_up_to_the_whole_and_merges_exactly() {
    let servers = launch(mcpbench::server::Config::default());
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "split.toml",
        &format!(
            r#"name = "split"
[target]
url = "{}"
[[target.credentials]]
tenant = "even"
token = "token-of-even-users"
[[target.credentials]]
tenant = "odd"
token = "token-of-odd-users"
[load]
concurrency = 6
requests = 601
timeout = "10s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hi" }}
[[workload]]
method = "tools/list"
weight = 1
"#,
            servers.mcp_url()
        ),
    );
    for (n, start) in [(1, Start::At), (2, Start::At), (4, Start::Barrier)] {
        let d = dir.path().join(format!("n{n}"));
        let shards = run_shards(&file, &d, n, start);
        let mut started = 0;
        let mut ok = 0;
        for (i, (code, s)) in shards.iter().enumerate() {
            assert_eq!(*code, 0, "shard {i}/{n}: {:?}", s.notes);
            assert_eq!(s.totals.unaccounted, 0);
            // The share: 601 split n ways, remainder first; users too.
            let share = 601 / n as u64 + u64::from((i as u64) < 601 % n as u64);
            assert_eq!(s.totals.started, share, "shard {i}/{n}");
            assert_eq!(s.load.requests, Some(share));
            assert_eq!(s.load.concurrency, 6 / n + usize::from(i < 6 % n));
            // On the agreed time line: started at the agreed time, or whole intervals after.
            let st = s.start.as_ref().expect("an agreed start");
            assert_eq!(
                st.by,
                if matches!(start, Start::At) {
                    "start-at"
                } else {
                    "barrier"
                }
            );
            let agreed = mcpbench::driver::start::parse_time(&st.agreed).unwrap();
            let began = mcpbench::driver::start::parse_time(&s.started_at).unwrap();
            assert_eq!(
                began.duration_since(agreed).unwrap().as_secs_f64(),
                st.late_seconds,
                "shard {i}/{n}"
            );
            assert_eq!(st.late_seconds.fract(), 0.0, "whole intervals late");
            if n > 1 {
                assert_eq!(s.shard.map(|s| (s.index, s.count)), Some((i, n)));
            }
            let tenants: Vec<&str> = s
                .tenants
                .iter()
                .filter(|t| t.started > 0)
                .map(|t| t.name.as_str())
                .collect();
            let expected: &[&str] = match (n, i % 2) {
                (1, _) => &["even", "odd"],
                (_, 0) => &["even"],
                _ => &["odd"],
            };
            assert_eq!(tenants, expected, "shard {i}/{n}");
            started += s.totals.started;
            ok += s.totals.ok;
        }
        assert_eq!(started, 601, "{n} shards together");
        assert_eq!(ok, 601, "{n} shards together");
        if n > 1 {
            let agreed: Vec<&str> = shards
                .iter()
                .map(|(_, s)| s.start.as_ref().unwrap().agreed.as_str())
                .collect();
            assert!(
                agreed.iter().all(|a| *a == agreed[0]),
                "one start: {agreed:?}"
            );
        }
        if n == 1 {
            continue;
        }
        // Merged from the directory that holds the shards (as the merge Job does).
        let merged = d.join("merged");
        let (code, out, err) = merge(
            &[path(&d.join("shards")), "--output", path(&merged)],
            dir.path(),
        );
        assert_eq!(code, 0, "{out}{err}");
        valid_summary(&merged);
        valid_summary(&d.join("shards/0"));
        let m = read_summary(&merged).unwrap();
        assert_eq!(m.totals.started, 601);
        assert_eq!(m.totals.ok, 601);
        assert_eq!(m.load.requests, Some(601));
        assert_eq!(m.load.concurrency, 6);
        assert_eq!(m.shards.len(), n, "each shard's health kept");
        let by_tenant: u64 = m.tenants.iter().map(|t| t.started).sum();
        assert_eq!(by_tenant, 601, "{:?}", m.tenants);
        assert!(out.contains("merged runs, each on its own"), "{out}");
        for (op, o) in m.operations.iter().enumerate() {
            let sum: u64 = shards.iter().map(|(_, s)| s.operations[op].started).sum();
            assert_eq!(o.started, sum, "{}", o.name);
        }
        // The merged histograms are the union of the shards' recordings, value by value.
        let mut union: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        for i in 0..n {
            for (tag, h) in histograms(&d.join("shards").join(i.to_string())) {
                match union.get_mut(&tag) {
                    Some(u) => u.add(&h).unwrap(),
                    None => {
                        union.insert(tag, h);
                    }
                }
            }
        }
        let got = histograms(&merged);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            union.keys().collect::<Vec<_>>()
        );
        for (tag, h) in &union {
            assert_eq!(recorded(&got[tag]), recorded(h), "{tag}");
            let row = m.operations.iter().find(|o| &o.name == tag).unwrap();
            let lat = row.latency.as_ref().expect("merged latency");
            assert_eq!(lat.count, h.len(), "{tag}");
            assert_eq!(
                lat.p99_ms,
                mcpbench::report::summary::Latency::from_hist(h).p99_ms
            );
        }
    }
}

/// Rate mode: 300 arrivals/s for 3 s, Poisson and uniform, unsplit and in 2 and 4 shards:
/// the arrivals (sent + dropped) add up to the same count — within Poisson tolerance (4σ) for
/// Poisson arrivals, within one per worker lane for uniform ones.
#[test]
fn a_split_rate_keeps_the_arrival_rate() {
    let servers = launch(mcpbench::server::Config::default());
    let dir = scratch();
    for arrival in ["poisson", "uniform"] {
        let file = scenario(
            dir.path(),
            &format!("{arrival}.toml"),
            &format!(
                r#"name = "rate-{arrival}"
[target]
url = "{}"
[load]
model = "open"
rate = 300
arrival = "{arrival}"
max_in_flight = 64
duration = "3s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hi" }}
"#,
                servers.mcp_url()
            ),
        );
        let expected: f64 = 900.0;
        for n in [1usize, 2, 4] {
            let d = dir.path().join(format!("{arrival}-{n}"));
            let shards = run_shards(&file, &d, n, Start::At);
            let arrivals: u64 = shards
                .iter()
                .map(|(code, s)| {
                    assert_eq!(*code, 0, "{arrival} {n}: {:?}", s.notes);
                    s.totals.started + s.totals.dropped
                })
                .sum();
            let tolerance = match arrival {
                "poisson" => 4.0 * expected.sqrt(),
                _ => n as f64 + 1.0,
            };
            assert!(
                (arrivals as f64 - expected).abs() <= tolerance,
                "{arrival}, {n} shards: {arrivals} arrivals, expected {expected} ± {tolerance:.0}"
            );
        }
    }
}

/// k6-operator judges thresholds per pod; a merge judges the whole. A throughput ceiling that
/// each shard keeps (≈ 100/s each) is breached by the scenario (≈ 200/s), and a floor that each
/// shard misses is met by the scenario: every shard exits 0 (its thresholds are shown on its
/// share, not judged), the merge exits 1 for the ceiling alone. A shard missing fails the merge
/// unless `--partial`, which says so; a shard twice is refused.
#[test]
fn thresholds_are_judged_on_the_merged_result() {
    let servers = launch(mcpbench::server::Config::default());
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "ceiling.toml",
        &format!(
            r#"name = "ceiling"
[target]
url = "{}"
[load]
model = "open"
rate = 200
arrival = "uniform"
duration = "3s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hi" }}
[thresholds]
throughput = "< 150/s"
"tools/call:echo".throughput = "> 150/s"
"#,
            servers.mcp_url()
        ),
    );
    let d = dir.path().join("run");
    let shards = run_shards(&file, &d, 2, Start::At);
    for (code, s) in &shards {
        assert_eq!(*code, 0, "a shard is no verdict: {:?}", s.thresholds);
        let held: Vec<bool> = s.thresholds.iter().map(|t| t.passed).collect();
        assert_eq!(held, [true, false], "on its share: {:?}", s.thresholds);
    }
    let merged = d.join("merged");
    let (code, out, err) = merge(
        &[
            path(&d.join("shards/0")),
            path(&d.join("shards/1")),
            "--output",
            path(&merged),
        ],
        dir.path(),
    );
    assert_eq!(code, 1, "breached on the whole: {out}{err}");
    let m = read_summary(&merged).unwrap();
    let (ceiling, floor) = (&m.thresholds[0], &m.thresholds[1]);
    assert!(
        !ceiling.passed && ceiling.value.unwrap() > 150.0,
        "{ceiling:?}"
    );
    assert!(floor.passed, "{floor:?}");
    assert!(out.contains("BREACHED (exit code 1)"), "{out}");

    // A retried pod's first attempt left beside its second: refused.
    let bad = dir.path().join("bad");
    copy_dir(&d.join("shards/0"), &bad.join("twice/0"));
    copy_dir(&d.join("shards/0"), &bad.join("twice/0-retry"));
    let out_dir = bad.join("merged");
    let (code, _, err) = merge(
        &[path(&bad.join("twice")), "--output", path(&out_dir)],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("shard 0/2 twice"), "{err}");
    // Shards 0 and 2 of 3 (relabelled copies, thresholds dropped): shard 1 is missing.
    let relabel = |to: &Path, shard: Option<(usize, usize)>| {
        copy_dir(&d.join("shards/0"), to);
        let mut s = read_summary(to).unwrap();
        s.shard = shard.map(|(index, count)| mcpbench::report::summary::ShardInfo { index, count });
        s.thresholds.clear();
        std::fs::write(to.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
    };
    relabel(&bad.join("gap/0"), Some((0, 3)));
    relabel(&bad.join("gap/2"), Some((2, 3)));
    let (code, _, err) = merge(
        &[path(&bad.join("gap")), "--output", path(&out_dir)],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("shard 1 of 3 missing") && err.contains("--partial"),
        "{err}"
    );
    let (code, out, err) = merge(
        &[
            path(&bad.join("gap")),
            "--output",
            path(&out_dir),
            "--partial",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PARTIAL: shard 1 of 3 missing"), "{out}");
    // Shards of different splits, or a shard with a whole run: refused.
    relabel(&bad.join("mixed/0"), Some((0, 3)));
    relabel(&bad.join("mixed/1"), Some((1, 2)));
    let (code, _, err) = merge(
        &[path(&bad.join("mixed")), "--output", path(&out_dir)],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("a shard of 2"), "{err}");
    relabel(&bad.join("whole/0"), Some((0, 2)));
    relabel(&bad.join("whole/all"), None);
    let (code, _, err) = merge(
        &[path(&bad.join("whole")), "--output", path(&out_dir)],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("is not a shard"), "{err}");
    // One run is not a merge.
    let (code, _, err) = merge(
        &[path(&d.join("shards/0")), "--output", path(&out_dir)],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("at least two"), "{err}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Mistakes in splitting say what to do, before any load.
#[test]
fn bad_splits_are_refused_with_the_fix() {
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "three.toml",
        r#"name = "three"
[target]
url = "http://127.0.0.1:9/mcp"
[load]
concurrency = 3
duration = "1s"
[[workload]]
method = "tools/list"
"#,
    );
    let f = path(&file);
    let cases: [(&[&str], &str); 7] = [
        (&["--shard", "4/4"], "the last is 3/4"),
        (
            &["--source-address", "192.0.2.1"],
            "not an address of this machine",
        ),
        (&["--source-address", "::1"], "same family"),
        (&["--shard", "3/4"], "use at most 3 shards"),
        (&["--shards", "2"], "JOB_COMPLETION_INDEX"),
        (&["--shard", "0/2", "--start-at", "noon"], "RFC 3339"),
        (&["--start-barrier", "b"], "--shard I/N"),
    ];
    for (args, says) in cases {
        let mut all = vec!["run", f, "--quiet"];
        all.extend_from_slice(args);
        let (code, out, err) = mcpbench(&all, dir.path());
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
