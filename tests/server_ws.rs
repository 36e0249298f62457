//! WebSocket at `/ws` (non-standard, mcp-protocol.md §3.5): subprotocol `mcp` required and
//! echoed, one message per text frame, many requests in flight per connection, binary frames
//! closed with 1003, Host/Origin checks, progress and cancellation, 2026-07-28 messages.

use std::net::{SocketAddr, TcpStream};

use mcpbench::server::ResponseMode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{ClientRequestBuilder, Message, WebSocket};

use crate::support::{HANG, MODERN_META, http, servers, wait_until};

type Ws = WebSocket<TcpStream>;

fn connect(a: SocketAddr) -> Ws {
    let stream = TcpStream::connect(a).unwrap();
    stream.set_read_timeout(Some(HANG)).unwrap();
    let uri = format!("ws://{a}/ws").parse().unwrap();
    let req = ClientRequestBuilder::new(uri).with_sub_protocol("mcp");
    let (ws, resp) =
        tokio_tungstenite::tungstenite::client(req, stream).expect("WebSocket handshake");
    assert_eq!(resp.status(), 101);
    assert_eq!(resp.headers()["sec-websocket-protocol"], "mcp");
    ws
}

fn send(ws: &mut Ws, msg: &str) {
    ws.send(Message::text(msg)).unwrap();
}

/// The next JSON-RPC message (text frames only).
fn recv(ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("a frame") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON text frame"),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

fn init(ws: &mut Ws, version: &str) -> Value {
    send(
        ws,
        &format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
        ),
    );
    let r = recv(ws);
    send(
        ws,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    r
}

fn upgrade_headers(protocol: Option<&'static str>) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    if let Some(p) = protocol {
        h.push(("Sec-WebSocket-Protocol", p));
    }
    h
}

#[test]
fn subprotocol_mcp_is_required() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    for offered in [None, Some("chat"), Some("MCP")] {
        let r = http(a, "GET", "/ws", &upgrade_headers(offered), b"");
        assert_eq!(r.status, 400, "{offered:?}");
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("subprotocol `mcp`"),
            "a clear message: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let plain = http(a, "GET", "/ws", &[], b"");
    assert_eq!(plain.status, 400, "not an upgrade");
    let mut evil = upgrade_headers(Some("mcp"));
    evil.push(("Origin", "http://evil.example"));
    assert_eq!(http(a, "GET", "/ws", &evil, b"").status, 403);
    let mut offers = upgrade_headers(Some("chat, mcp"));
    offers.push(("X-Unused", "1"));
    let ok = crate::support::Streamed::open(a, "GET", "/ws", &offers, b"");
    assert_eq!(ok.status, 101);
    assert_eq!(ok.header("sec-websocket-protocol"), Some("mcp"));
    assert_eq!(
        ok.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
}

#[test]
fn requests_responses_and_concurrency_on_one_connection() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let state = srv.state().clone();
    let mut ws = connect(srv.mcp_addr);
    send(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":"early","method":"tools/list"}"#,
    );
    assert_eq!(recv(&mut ws)["error"]["code"], -32600, "initialize first");
    let r = init(&mut ws, "2025-06-18");
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    send(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-invoice","arguments":{"id":7}}}"#,
    );
    let inv = recv(&mut ws);
    assert_eq!(inv["result"]["structuredContent"]["id"], 7);

    // Three slow calls in flight at once, and the connection still answers.
    for id in 10..13 {
        send(
            &mut ws,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":60000}}}}}}"#
            ),
        );
    }
    wait_until("three calls in flight", || state.active_calls() == 3);
    send(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo","arguments":{"message":"meanwhile"}}}"#,
    );
    let m = recv(&mut ws);
    assert_eq!(
        (m["id"].clone(), m["result"]["content"][0]["text"].clone()),
        (json!(20), json!("meanwhile"))
    );
    // Cancel them: no responses, tasks freed.
    send(
        &mut ws,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}"#,
    );
    for id in 10..13 {
        send(
            &mut ws,
            &format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"test"}}}}"#
            ),
        );
    }
    wait_until("the cancelled calls to be freed", || {
        state.active_calls() == 0
    });
    send(&mut ws, r#"{"jsonrpc":"2.0","id":21,"method":"ping"}"#);
    let m = recv(&mut ws);
    assert_eq!(
        m,
        json!({"jsonrpc": "2.0", "id": 21, "result": {}}),
        "nothing for the cancelled calls"
    );

    // Garbage text is a parse error with id null; the connection stays up.
    send(&mut ws, "not json");
    let m = recv(&mut ws);
    assert_eq!(
        (m["id"].clone(), m["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    // A 2026-07-28 message on the same connection is handled statelessly.
    send(
        &mut ws,
        &format!(r#"{{"jsonrpc":"2.0","id":22,"method":"tools/list","params":{{{MODERN_META}}}}}"#),
    );
    let m = recv(&mut ws);
    assert_eq!(m["result"]["resultType"], "complete");
    assert_eq!(m["result"]["cacheScope"], "public");
    send(
        &mut ws,
        &format!(r#"{{"jsonrpc":"2.0","id":23,"method":"ping","params":{{{MODERN_META}}}}}"#),
    );
    assert_eq!(
        recv(&mut ws)["error"]["code"],
        -32601,
        "no ping in 2026-07-28"
    );
}

#[test]
fn progress_notifications_precede_the_result() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let mut ws = connect(srv.mcp_addr);
    init(&mut ws, "2025-11-25");
    send(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","arguments":{"steps":5,"interval_ms":1},"_meta":{"progressToken":"w"}}}"#,
    );
    for i in 1..=5 {
        let n = recv(&mut ws);
        assert_eq!(n["method"], "notifications/progress");
        assert_eq!(
            n["params"],
            json!({"progressToken": "w", "progress": i, "total": 5})
        );
    }
    let r = recv(&mut ws);
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["content"][0]["text"], "done after 5 steps");
    send(&mut ws, r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    assert_eq!(recv(&mut ws)["id"], 4, "no notification after the response");
}

#[test]
fn binary_frames_close_with_1003() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let mut ws = connect(srv.mcp_addr);
    init(&mut ws, "2025-11-25");
    ws.send(Message::binary(b"{}".to_vec())).unwrap();
    loop {
        match ws.read() {
            Ok(Message::Close(Some(f))) => {
                assert_eq!(f.code, CloseCode::Unsupported);
                break;
            }
            Ok(Message::Close(None)) => panic!("close without a code"),
            Ok(_) => {}
            Err(e) => panic!("connection ended without a close frame: {e}"),
        }
    }
}
