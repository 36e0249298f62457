//! The real binary: flags, the "listening on" line, exit codes.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Command, Stdio},
};

use hyper::{Method, StatusCode};
use serde_json::json;

use crate::support::request;

const BIN: &str = env!("CARGO_BIN_EXE_mock-backend");

/// Kills the child even when an assertion fails first.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_prints_address_and_serves() {
    let mut child = Child(
        Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--contacts", "20"])
            .args([
                "--route",
                "echo:latency=lognormal:p50=1ms,p99=2ms,payload=8",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mock-backend"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("reader task")
    .expect("read stdout");
    let addr: SocketAddr = line
        .trim_end()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("socket address");
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);

    let reply = request(addr, Method::GET, "/health", None).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json(), json!({"status": "ok"}));
    let v = request(addr, Method::GET, "/contacts", None).await.json();
    assert_eq!(v["total"], 20);
    let v = request(addr, Method::GET, "/echo?msg=hi", None)
        .await
        .json();
    assert_eq!(v["padding"], "xxxxxxxx");
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    for (args, expected) in [
        (&["--latency", "sometimes"][..], "expected \"5ms\""),
        (&["--error-rate", "2"][..], "between 0 and 1"),
        (&["--route", "users:payload=1"][..], "unknown route"),
        (&["--listen", "nowhere"][..], "--listen"),
        (&["--frobnicate"][..], "--frobnicate"),
    ] {
        let out = Command::new(BIN)
            .args(args)
            .output()
            .expect("run mock-backend");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn bind_failure_exits_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = Command::new(BIN)
        .args(["--listen", &addr])
        .output()
        .expect("run mock-backend");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
}

/// Regression: the address line used to be printed before the signal handlers were installed,
/// so a signal sent right after reading it could be lost (SIGINT ignored by a background job)
/// or kill the process without a graceful shutdown.
#[cfg(unix)]
#[test]
fn signal_right_after_the_line_shuts_down_cleanly() {
    for signal in ["-INT", "-TERM"] {
        let mut child = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mock-backend");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).expect("read");
        assert!(line.starts_with("listening on http://"), "{line:?}");
        let child = Child(child);
        let killed = Command::new("kill")
            .args([signal, &child.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(killed.success());
        let mut child = child;
        let status = child.0.wait().expect("wait");
        // Exit code 0 means the graceful path ran; death by signal has no code.
        assert_eq!(status.code(), Some(0), "{signal}: {status:?}");
    }
}
