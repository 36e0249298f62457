//! The `mock-backend` binary (the root package's, built from `mock_backend::cli`): flags, the
//! "listening on" line, exit codes, signals.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{Killed, http, listening};

const BIN: &str = env!("CARGO_BIN_EXE_mock-backend");

#[test]
fn binary_prints_address_and_serves() {
    let (_child, addr) = listening(Command::new(BIN).args([
        "--listen",
        "127.0.0.1:0",
        "--contacts",
        "20",
        "--route",
        "echo:latency=lognormal:p50=1ms,p99=2ms,payload=8",
    ]));
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);

    let reply = http(addr, "GET", "/health", &[], b"");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), serde_json::json!({"status": "ok"}));
    assert_eq!(http(addr, "GET", "/contacts", &[], b"").json()["total"], 20);
    let echo = http(addr, "GET", "/echo?msg=hi", &[], b"").json();
    assert_eq!(echo["padding"], "xxxxxxxx");
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
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: mock-backend"));
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
        let mut child = Killed(child);
        let killed = Command::new("kill")
            .args([signal, &child.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(killed.success());
        let status = child.0.wait().expect("wait");
        // Exit code 0 means the graceful path ran; death by signal has no code.
        assert_eq!(status.code(), Some(0), "{signal}: {status:?}");
    }
}
