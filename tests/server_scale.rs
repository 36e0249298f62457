//! `mcpbench serve` holding many sessions: idle sessions expire by `--session-idle` and are
//! counted, the default connection cap follows the open-file limit, and `--reuse-port` lets
//! several processes share one port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{initialize, post};

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const V: (&str, &str) = ("MCP-Protocol-Version", "2025-06-18");

/// Starts `sh -c SCRIPT` (which execs `mcpbench serve …`), stderr piped; the child and the
/// address of its banner.
fn serve(script: &str) -> (Child, SocketAddr) {
    let mut child = Command::new("sh")
        .args(["-c", script, "sh", env!("CARGO_BIN_EXE_mcpbench")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("listening on http://")
        .and_then(|l| l.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not an address line: {line}"));
    (child, addr)
}

/// SIGTERM, then what the server said on stderr (it exits 0).
fn stop(mut child: Child) -> String {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut said = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    said
}

/// The `N` of `sessions: N open` in a server's shutdown line.
fn open_at_shutdown(said: &str) -> usize {
    said.split("sessions: ")
        .nth(1)
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sessions line: {said}"))
}

#[test]
fn idle_sessions_expire_by_the_flag_and_are_counted() {
    let (child, addr) = serve(r#"exec "$1" serve --listen 127.0.0.1:0 --session-idle 300ms"#);
    let (idle, r) = initialize(addr, "2025-06-18");
    assert_eq!(r.status, 200);
    let (kept, _) = initialize(addr, "2025-06-18");
    // One session is used every 100 ms, the other left alone.
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(100));
        let r = post(addr, &[("Mcp-Session-Id", &kept), V], PING);
        assert_eq!(r.status, 200, "a session in use stays");
    }
    let r = post(addr, &[("Mcp-Session-Id", &idle), V], PING);
    assert_eq!(
        r.status, 404,
        "the idle session is gone: the client initializes again"
    );
    let said = stop(child);
    assert!(
        said.contains("sessions: 1 open, 1 expired after 300ms idle"),
        "{said}"
    );
}

#[test]
fn the_default_connection_cap_follows_the_open_file_limit() {
    // A hard limit of 600: the soft one is raised to it, less 512 is below half, so 300.
    let (child, addr) = serve(r#"ulimit -n 600 && exec "$1" serve --listen 127.0.0.1:0"#);
    let held: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    crate::support::wait_until("the 300 connections accepted", || {
        let mut extra = TcpStream::connect(addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let _ = extra.write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let mut answer = String::new();
        let _ = extra.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 503") && answer.contains("this server takes 300")
    });
    drop(held);
    stop(child);
}

#[test]
fn serve_processes_with_reuse_port_share_one_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!(r#"exec "$1" serve --listen 127.0.0.1:{port} --reuse-port"#);
    let (a, addr) = serve(&script);
    let (b, same) = serve(&script);
    assert_eq!(addr, same);
    // Each initialize on a connection of its own: the kernel spreads them over both.
    for i in 0..40 {
        assert_eq!(initialize(addr, "2025-06-18").1.status, 200, "session {i}");
    }
    let (on_a, on_b) = (open_at_shutdown(&stop(a)), open_at_shutdown(&stop(b)));
    assert_eq!(on_a + on_b, 40);
    assert!(on_a > 0 && on_b > 0, "both accepted: {on_a} and {on_b}");
}
