//! Legacy HTTP+SSE (2024-11-05) at `/sse` + `/messages` (mcp-protocol.md §3.2, §7.2): the
//! `endpoint` event first, 202 on POST, every response on the stream, 400/404 for bad session
//! ids, keep-alives, cleanup when the stream closes; progress and cancellation over it.

use std::net::SocketAddr;
use std::time::Duration;

use mcpbench::server::Config;
use serde_json::{Value, json};

use crate::support::{Resp, Streamed, http, launch, wait_until};

/// Opens `GET /sse`; returns the stream and the message endpoint it announced.
fn open(a: SocketAddr) -> (Streamed, String) {
    let mut s = Streamed::open(a, "GET", "/sse", &[("Accept", "text/event-stream")], b"");
    assert_eq!(s.status, 200);
    assert!(
        s.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let first = s.next_event().expect("an endpoint event");
    assert_eq!(
        first.event, "endpoint",
        "the first event names the endpoint: {first:?}"
    );
    let endpoint = first.data.unwrap();
    (s, endpoint)
}

fn send(a: SocketAddr, endpoint: &str, body: &str) -> Resp {
    http(
        a,
        "POST",
        endpoint,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// The next JSON-RPC message on the stream (`message` events only).
fn next(s: &mut Streamed) -> Value {
    loop {
        let ev = s.next_event().expect("stream still open");
        if ev.data.is_some() {
            assert_eq!(ev.event, "message", "{ev:?}");
            return ev.json();
        }
    }
}

fn handshake(a: SocketAddr, s: &mut Streamed, endpoint: &str, version: &str) -> Value {
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    );
    let r = send(a, endpoint, &init);
    assert_eq!((r.status, r.body.as_slice()), (202, &b"Accepted"[..]));
    let result = next(s);
    assert_eq!(
        send(
            a,
            endpoint,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        )
        .status,
        202
    );
    result
}

#[test]
fn endpoint_event_then_responses_on_the_stream() {
    let srv = launch(Config::default());
    let a = srv.mcp_addr;
    let (mut s, endpoint) = open(a);
    let id = endpoint
        .strip_prefix("/messages?sessionId=")
        .expect("relative endpoint");
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));

    let init = handshake(a, &mut s, &endpoint, "2024-11-05");
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");

    let r = send(
        a,
        &endpoint,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"over sse"}}}"#,
    );
    assert_eq!(r.status, 202);
    let m = next(&mut s);
    assert_eq!(m["id"], 2);
    assert_eq!(m["result"]["content"][0]["text"], "over sse");
    assert!(m["result"].get("structuredContent").is_none());
    let r = send(
        a,
        &endpoint,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 202);
    let list = next(&mut s);
    let tool = &list["result"]["tools"][0];
    assert!(
        tool.get("annotations").is_none() && tool.get("title").is_none(),
        "2024-11-05 tools: {tool}"
    );

    // Bad posts.
    assert_eq!(
        http(
            a,
            "POST",
            "/messages",
            &[("Content-Type", "application/json")],
            b"{}"
        )
        .status,
        400
    );
    let unknown = send(
        a,
        "/messages?sessionId=0123456789abcdef0123456789abcdef",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(send(a, "/messages?sessionId=nothex", "{}").status, 404);
    let bad = send(a, &endpoint, "{nope");
    assert_eq!(
        (bad.status, bad.json()["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    // Host/Origin rules apply here too.
    let evil = http(a, "GET", "/sse", &[("Origin", "http://evil.example")], b"");
    assert_eq!(evil.status, 403);
    let evil = http(
        a,
        "POST",
        &endpoint,
        &[
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        b"{}",
    );
    assert_eq!(evil.status, 403);

    // A client offering a newer revision gets it (same negotiation as /mcp).
    let (mut s2, endpoint2) = open(a);
    assert_eq!(
        handshake(a, &mut s2, &endpoint2, "2025-06-18")["result"]["protocolVersion"],
        "2025-06-18"
    );

    // Closing the stream ends the session.
    assert_eq!(srv.state().legacy_sessions(), 2);
    drop(s);
    wait_until("the closed session to be removed", || {
        srv.state().legacy_sessions() == 1
    });
    assert_eq!(
        send(a, &endpoint, r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#).status,
        404
    );
}

#[test]
fn keepalive_comments_while_idle() {
    let srv = launch(Config {
        keepalive: Duration::from_millis(20),
        ..Config::default()
    });
    let (mut s, _) = open(srv.mcp_addr);
    let ev = s.next_event().unwrap();
    assert_eq!(ev.comments, ["keepalive"], "{ev:?}");
    assert!(ev.data.is_none());
}

#[test]
fn progress_and_cancellation_over_legacy_sse() {
    let srv = launch(Config::default());
    let a = srv.mcp_addr;
    let state = srv.state().clone();
    let (mut s, endpoint) = open(a);
    handshake(a, &mut s, &endpoint, "2024-11-05");

    let p = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "progress", "arguments": {"steps": 3, "interval_ms": 1}, "_meta": {"progressToken": 77}}});
    assert_eq!(send(a, &endpoint, &p.to_string()).status, 202);
    for i in 1..=3 {
        let n = next(&mut s);
        assert_eq!(n["method"], "notifications/progress");
        assert_eq!(
            n["params"],
            json!({"progressToken": 77, "progress": i, "total": 3})
        );
    }
    let done = next(&mut s);
    assert_eq!(done["id"], 5);
    assert_eq!(done["result"]["content"][0]["text"], "done after 3 steps");

    let slow = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":5000}}}"#;
    assert_eq!(send(a, &endpoint, slow).status, 202);
    wait_until("the sleep call to start", || state.active_calls() == 1);
    let cancel = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        )
    };
    assert_eq!(
        send(a, &endpoint, &cancel(404)).status,
        202,
        "unknown ids are ignored"
    );
    assert_eq!(send(a, &endpoint, &cancel(6)).status, 202);
    wait_until("the cancelled call to be freed", || {
        state.active_calls() == 0
    });
    assert_eq!(
        send(a, &endpoint, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).status,
        202
    );
    let m = next(&mut s);
    assert_eq!(m["id"], 7, "the cancelled request got no response: {m}");
}
