//! The reference server's own HTTP/1.1 loop (src/server/h1.rs) against a raw client: requests
//! sent ahead are answered in order, a connection moves to hyper for a request the loop does
//! not take and keeps being served, and a client that hangs up while its call runs cancels it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use mcpbench::server::Config;
use serde_json::{Value, json};

use crate::support::{HANG, MCP_HEADERS, Resp, initialize, launch, parse_response, wait_until};

/// A request to `path` with MCP's headers and the session's, `extra` header lines after them.
fn request(a: SocketAddr, method: &str, sid: &str, extra: &str, body: &str) -> String {
    let mut r = format!("{method} /mcp HTTP/1.1\r\nHost: {a}\r\n");
    for (n, v) in MCP_HEADERS {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str(&format!(
        "Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\n{extra}"
    ));
    if method == "POST" {
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

fn ping(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string()
}

/// Reads one response with a `Content-Length` body from `s`, keeping what follows in `buf`.
fn next_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Resp {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_response(&buf[..end + 4]);
            let len: usize = head
                .header("content-length")
                .expect("a content-length")
                .parse()
                .unwrap();
            if buf.len() >= end + 4 + len {
                let raw: Vec<u8> = buf.drain(..end + 4 + len).collect();
                return parse_response(&raw);
            }
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("a response before the timeout");
        assert!(n > 0, "closed before a whole response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn connect(a: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    s
}

#[test]
fn requests_sent_ahead_are_answered_in_order_on_one_connection() {
    let srv = launch(Config::default());
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-06-18");
    let mut s = connect(a);
    // Three requests in one write, the last closing the connection.
    let all = [
        request(a, "POST", &sid, "", &ping(1)),
        request(a, "POST", &sid, "", &ping(2)),
        request(a, "POST", &sid, "Connection: close\r\n", &ping(3)),
    ]
    .concat();
    s.write_all(all.as_bytes()).unwrap();
    let mut buf = Vec::new();
    for id in 1..=3 {
        let r = next_response(&mut s, &mut buf);
        assert_eq!(r.status, 200);
        assert_eq!(r.json(), json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
        assert_eq!(r.header("connection"), (id == 3).then_some("close"));
    }
    // Closed after the third.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert_eq!(rest, b"");
}

#[test]
fn a_connection_goes_to_hyper_for_another_request_and_keeps_serving() {
    let srv = launch(Config::default());
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-06-18");
    let mut s = connect(a);
    let mut buf = Vec::new();
    let mut exchange = |req: String| {
        s.write_all(req.as_bytes()).unwrap();
        next_response(&mut s, &mut buf)
    };
    let r = exchange(request(a, "POST", &sid, "", &ping(1)));
    assert_eq!(r.json()["id"], 1);
    // A GET without Last-Event-ID: no stream to open here (hyper serves it and what follows).
    let r = exchange(request(a, "GET", &sid, "", ""));
    assert_eq!(r.status, 405);
    let r = exchange(request(a, "POST", &sid, "", &ping(2)));
    assert_eq!(r.json()["id"], 2);
    // A chunked body is hyper's too, on the same connection.
    let body = ping(3);
    let chunked = request(a, "GET", &sid, "", "")
        .replacen("GET", "POST", 1)
        .replace(
            "\r\n\r\n",
            &format!(
                "\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            ),
        );
    let r = exchange(chunked);
    assert_eq!(r.json()["id"], 3);
}

#[test]
fn a_client_that_hangs_up_while_its_call_runs_cancels_it() {
    let srv = launch(Config::default());
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let (sid, _) = initialize(a, "2025-06-18");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 60_000}}})
    .to_string();
    let mut s = connect(a);
    s.write_all(request(a, "POST", &sid, "", &call).as_bytes())
        .unwrap();
    wait_until("the call runs", || state.active_calls() == 1);
    drop(s);
    wait_until("the call is dropped", || state.active_calls() == 0);
    // The server goes on serving.
    let mut s = connect(a);
    let mut buf = Vec::new();
    s.write_all(request(a, "POST", &sid, "", &ping(2)).as_bytes())
        .unwrap();
    let r = next_response(&mut s, &mut buf);
    assert_eq!(r.json()["result"], Value::Object(Default::default()));
}

#[test]
fn an_idle_keep_alive_connection_is_closed_at_shutdown() {
    let srv = launch(Config::default());
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-06-18");
    let mut s = connect(a);
    let mut buf = Vec::new();
    // Two requests answered, so the loop has waited for a head between them once already.
    for id in 1..=2 {
        s.write_all(request(a, "POST", &sid, "", &ping(id)).as_bytes())
            .unwrap();
        assert_eq!(next_response(&mut s, &mut buf).status, 200);
    }
    // Shut down while the connection waits for its next head: it is closed then, not when the
    // server's grace period (5 s) runs out and the connection is dropped.
    let stopping = std::thread::spawn(move || drop(srv));
    s.set_read_timeout(Some(std::time::Duration::from_secs(4)))
        .unwrap();
    let mut rest = Vec::new();
    let read = s.read_to_end(&mut rest);
    assert!(
        matches!(read, Ok(0)),
        "closed at shutdown, nothing sent: {read:?} {rest:?}"
    );
    stopping.join().unwrap();
}

#[test]
fn a_busy_connection_outlives_the_head_timeout_and_an_idle_one_is_closed_after_it() {
    let timeout = std::time::Duration::from_millis(300);
    let srv = launch(Config {
        header_read_timeout: timeout,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-06-18");
    let mut s = connect(a);
    let mut buf = Vec::new();
    // A request every 100 ms for four head timeouts: each head is within its own deadline, so
    // the connection stays, however often the timer of an earlier head fires in between.
    for id in 1..=12 {
        s.write_all(request(a, "POST", &sid, "", &ping(id)).as_bytes())
            .unwrap();
        assert_eq!(next_response(&mut s, &mut buf).status, 200, "request {id}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Then idle: closed once the last wait for a head is a timeout old, and not before.
    let idle_from = std::time::Instant::now() - std::time::Duration::from_millis(100);
    let mut rest = Vec::new();
    let read = s.read_to_end(&mut rest);
    let idle = idle_from.elapsed();
    assert!(matches!(read, Ok(0)), "closed, nothing sent: {read:?}");
    let slack = std::time::Duration::from_millis(50);
    assert!(
        idle >= timeout - slack,
        "closed {idle:?} after the last response"
    );
}
