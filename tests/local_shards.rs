//! One machine, many connections: virtual users spread over a list or block of loopback source
//! addresses (the server sees the spread), and `--local-shards N` running a scenario as N
//! processes against one `mcpbench serve`, merged into one result; the combinations that make
//! no sense refused.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::support::{listening, mcpbench, scenario, scratch, valid_summary};

/// A TCP relay in front of `upstream` that notes the address each connection comes from.
fn relay(upstream: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<IpAddr>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let noted = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            noted.lock().unwrap().push(client.peer_addr().unwrap().ip());
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    (addr, seen)
}

/// `mcpbench serve` on 127.0.0.1:0, killed when dropped.
fn serve() -> (crate::support::Killed, SocketAddr) {
    listening(Command::new(env!("CARGO_BIN_EXE_mcpbench")).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]))
}

/// Connections per source address the relay saw.
fn spread(seen: &Mutex<Vec<IpAddr>>) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for ip in seen.lock().unwrap().iter() {
        *by.entry(ip.to_string()).or_insert(0) += 1;
    }
    by
}

fn scenario_for(dir: &std::path::Path, addr: SocketAddr, extra: &str) -> String {
    scenario(
        dir,
        "spread.toml",
        &format!(
            "name = \"spread\"\n[target]\nurl = \"http://{addr}/mcp\"\n{extra}\n[load]\n\
             concurrency = 8\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n"
        ),
    )
    .display()
    .to_string()
}

/// `target.source_address` as a block: user g connects from address g mod 4, so each of the
/// four addresses carries two users' connections (the preflight's session comes from the
/// first).
#[test]
fn users_spread_over_a_block_of_source_addresses() {
    let (_server, upstream) = serve();
    let (addr, seen) = relay(upstream);
    let dir = scratch();
    let file = scenario_for(dir.path(), addr, "source_address = \"127.0.0.9/30\"");
    let (code, out, err) = mcpbench(&["run", &file, "--quiet", "-o", "r"], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    let by = spread(&seen);
    let addrs: Vec<&str> = by.keys().map(String::as_str).collect();
    assert_eq!(
        addrs,
        ["127.0.0.10", "127.0.0.11", "127.0.0.8", "127.0.0.9"],
        "{by:?}"
    );
    for (ip, n) in &by {
        // Two users each; the first address also had the preflight's connection.
        let want = if ip == "127.0.0.8" { 3 } else { 2 };
        assert_eq!(*n, want, "{by:?}");
    }
    // The flag replaces the scenario's list.
    seen.lock().unwrap().clear();
    let (code, out, err) = mcpbench(
        &[
            "run",
            &file,
            "--quiet",
            "-o",
            "r2",
            "--source-address",
            "127.0.0.2,127.0.0.3",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let by = spread(&seen);
    assert_eq!(by.get("127.0.0.2"), Some(&5), "{by:?}");
    assert_eq!(by.get("127.0.0.3"), Some(&4), "{by:?}");
    assert_eq!(by.len(), 2, "{by:?}");
}

/// `--local-shards 2`: two shard processes against one server, from the addresses of the
/// block (user g from address g mod 4 whichever shard runs it), merged into the run directory
/// with both shards' requests; exit 0 as for one run.
#[test]
fn local_shards_run_as_processes_and_merge() {
    let (_server, upstream) = serve();
    let (addr, seen) = relay(upstream);
    let dir = scratch();
    let file = scenario_for(dir.path(), addr, "");
    let (code, out, err) = mcpbench(
        &[
            "run",
            &file,
            "--local-shards",
            "2",
            "--source-address",
            "127.0.0.4/30",
            "-o",
            "split",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("merged runs, each on its own"), "{out}");
    assert!(out.contains("results: split/"), "{out}");
    let merged = valid_summary(&dir.path().join("split"));
    let mut sum = 0;
    for i in 0..2 {
        let shard = valid_summary(&dir.path().join(format!("split/shard-{i}")));
        let started = shard["totals"]["started"].as_u64().unwrap();
        assert!(started > 0, "shard {i} sent nothing");
        sum += started;
    }
    assert_eq!(merged["totals"]["started"].as_u64(), Some(sum));
    assert_eq!(merged["totals"]["failed"].as_u64(), Some(0), "{merged}");
    // The merged page draws each shard's health over time, both shards on it.
    let page = std::fs::read_to_string(dir.path().join("split/report.html")).unwrap();
    for title in ["merged shard's throughput", "merged shard's p99"] {
        let at = page
            .find(title)
            .unwrap_or_else(|| panic!("{title}: {page}"));
        let chart = &page[at..at + page[at..].find("</svg>").unwrap()];
        assert!(
            chart.contains(">shard 1/2<") && chart.contains(">shard 2/2<"),
            "{chart}"
        );
    }
    // Both shards' users, from every address of the block (two users each, plus a
    // preflight per shard from the first).
    let by = spread(&seen);
    assert_eq!(by.len(), 4, "{by:?}");
    assert_eq!(by.values().sum::<usize>(), 8 + 2, "{by:?}");
}

/// What --local-shards and --source-address refuse, with the reason.
#[test]
fn nonsense_combinations_are_refused() {
    let dir = scratch();
    let remote = scenario_for(dir.path(), "127.0.0.1:9".parse().unwrap(), "");
    let embedded = scenario(
        dir.path(),
        "embedded.toml",
        "name = \"e\"\n[load]\nconcurrency = 2\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n",
    );
    let embedded = embedded.display().to_string();
    let cases: [(&[&str], &str); 9] = [
        (
            &["run", &embedded, "--local-shards", "2"],
            "embedded server",
        ),
        (&["run", &remote, "--local-shards", "1"], "is one run"),
        (
            &["run", &remote, "--local-shards", "2", "--shard", "0/2"],
            "one shard already",
        ),
        (
            &["run", &remote, "--local-shards", "2", "--repeat", "2"],
            "--repeat",
        ),
        (
            &["run", "http://127.0.0.1:9/mcp", "--local-shards", "2"],
            "scenario file",
        ),
        (
            &["run", &remote, "--source-address", "127.0.0.0/0"],
            "more than the 4096",
        ),
        (
            &["run", &remote, "--source-address", "127.0.0.1,::1"],
            "mixes IPv4 and IPv6",
        ),
        (
            &["run", &remote, "--source-address", "127.0.0.0/40"],
            "from 0 to 32",
        ),
        (
            &["run", &remote, "--source-address", "127.0.0.2,192.0.2.1"],
            "192.0.2.1",
        ),
    ];
    for (args, says) in cases {
        let (code, out, err) = mcpbench(args, dir.path());
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = std::io::stderr().flush();
}
