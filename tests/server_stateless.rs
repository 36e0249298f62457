//! Streamable HTTP for 2026-07-28 on the dual-era `/mcp` endpoint: every status and code of
//! mcp-protocol.md §2.6, §3.4 and the §7.2 modern-era checklist.

use std::net::SocketAddr;

use base64::Engine;
use mcpbench::server::ResponseMode;
use serde_json::{Value, json};

use crate::support::{MODERN_META, Resp, Streamed, http, post, servers, wait_until};

/// A 2026-07-28 request body.
fn req(id: u64, method: &str, params: &str) -> String {
    let sep = if params.is_empty() { "" } else { "," };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{sep}{MODERN_META}}}}}"#
    )
}

/// POSTs with `MCP-Protocol-Version` and `Mcp-Method` set, plus `extra`.
fn modern(a: SocketAddr, method: &str, extra: &[(&str, &str)], body: &str) -> Resp {
    let mut h = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    h.extend_from_slice(extra);
    post(a, &h, body)
}

fn call_body(id: u64, tool: &str, args: Value) -> String {
    req(
        id,
        "tools/call",
        &format!(r#""name":{},"arguments":{args}"#, json!(tool)),
    )
}

fn error(r: &Resp) -> (u16, i64) {
    (r.status, r.json()["error"]["code"].as_i64().unwrap_or(0))
}

fn is_complete(result: &Value) {
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpbench-reference",
        "{result}"
    );
}

#[test]
fn meta_version_and_method_errors() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;

    // Missing required _meta keys: 400 + -32602.
    let no_meta = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let r = modern(a, "tools/list", &[], no_meta);
    assert_eq!(error(&r), (400, -32602));
    assert_eq!(r.json()["id"], 1);
    let only_version = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    assert_eq!(
        error(&modern(a, "tools/list", &[], only_version)),
        (400, -32602)
    );

    // Unsupported version: 400 + -32022 naming what is supported.
    let future = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let r = post(
        a,
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        future,
    );
    assert_eq!(error(&r), (400, -32022));
    assert_eq!(
        r.json()["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2099-01-01"})
    );

    // Unknown methods (ping was removed in 2026-07-28): 404 + -32601.
    for m in ["ping", "resources/list", "no/such"] {
        let r = modern(a, m, &[], &req(3, m, ""));
        assert_eq!(error(&r), (404, -32601), "{m}");
    }
    // Errors inside a known method are JSON-RPC errors with 200.
    let r = modern(
        a,
        "tools/call",
        &[("Mcp-Name", "nope")],
        &call_body(4, "nope", json!({})),
    );
    assert_eq!(error(&r), (200, -32602));
    let r = modern(
        a,
        "tools/list",
        &[],
        &req(5, "tools/list", r#""cursor":"bogus""#),
    );
    assert_eq!(error(&r), (200, -32602));
    // Notifications are accepted; clients never send responses.
    let note = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":1,{MODERN_META}}}}}"#
    );
    let r = modern(a, "notifications/cancelled", &[], &note);
    assert_eq!((r.status, r.body.len()), (202, 0));
    let resp = modern(a, "x", &[], r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(resp.status, 400);
    let batch = modern(
        a,
        "tools/list",
        &[],
        &format!("[{}]", req(1, "tools/list", "")),
    );
    assert_eq!(batch.status, 400, "no batches in 2026-07-28");
}

#[test]
fn headers_must_mirror_the_body() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let list = req(1, "tools/list", "");
    let echo = call_body(2, "echo", json!({"message": "hi"}));

    // MCP-Protocol-Version: missing, or different from _meta.
    assert_eq!(
        error(&post(a, &[("Mcp-Method", "tools/list")], &list)),
        (400, -32020)
    );
    assert_eq!(
        error(&post(
            a,
            &[
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Method", "tools/list")
            ],
            &list
        )),
        (400, -32020)
    );
    // Mcp-Method: missing, or different from the method.
    assert_eq!(
        error(&post(a, &[("MCP-Protocol-Version", "2026-07-28")], &list)),
        (400, -32020)
    );
    assert_eq!(error(&modern(a, "tools/call", &[], &list)), (400, -32020));
    // Mcp-Name: missing, different, undecodable; or matching, plain or base64.
    assert_eq!(error(&modern(a, "tools/call", &[], &echo)), (400, -32020));
    assert_eq!(
        error(&modern(a, "tools/call", &[("Mcp-Name", "sleep")], &echo)),
        (400, -32020)
    );
    assert_eq!(
        error(&modern(
            a,
            "tools/call",
            &[("Mcp-Name", "=?base64?!!!?=")],
            &echo
        )),
        (400, -32020)
    );
    let b64 = |s: &str| {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    };
    assert_eq!(
        error(&modern(
            a,
            "tools/call",
            &[("Mcp-Name", &b64("sleep"))],
            &echo
        )),
        (400, -32020),
        "decoded before comparing"
    );
    let ok = modern(a, "tools/call", &[("Mcp-Name", &b64("echo"))], &echo);
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["result"]["content"][0]["text"], "hi");
    let ok = modern(a, "tools/call", &[("Mcp-Name", "echo")], &echo);
    assert_eq!(ok.json()["result"]["content"][0]["text"], "hi");
    is_complete(&ok.json()["result"]);
}

#[test]
fn discover_list_and_call_results() {
    let srv = servers(ResponseMode::Json, 150, 100, Default::default());
    let a = srv.mcp_addr;

    let d = modern(a, "server/discover", &[], &req(1, "server/discover", ""));
    assert_eq!(d.status, 200);
    assert!(
        d.header("mcp-session-id").is_none(),
        "no session is ever minted"
    );
    let r = &d.json()["result"];
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    assert!(r["capabilities"]["tools"].is_object());
    assert_eq!(r["serverInfo"]["name"], "mcpbench-reference");
    assert!(r["instructions"].as_str().unwrap().contains("progress"));
    assert!(r["ttlMs"].as_u64().is_some());
    assert_eq!(r["cacheScope"], "public");
    is_complete(r);

    let first = modern(a, "tools/list", &[], &req(2, "tools/list", ""));
    let again = modern(a, "tools/list", &[], &req(2, "tools/list", ""));
    assert_eq!(first.body, again.body, "tools/list is deterministic");
    let mut names = Vec::new();
    let mut page = first.json()["result"].clone();
    loop {
        is_complete(&page);
        assert!(page["ttlMs"].as_u64().is_some(), "{page}");
        assert_eq!(page["cacheScope"], "public");
        for t in page["tools"].as_array().unwrap() {
            assert!(
                t.get("execution").is_none(),
                "2026-07-28 tools have no execution: {t}"
            );
            assert_eq!(t["inputSchema"]["type"], "object");
            names.push(t["name"].as_str().unwrap().to_string());
        }
        let Some(c) = page["nextCursor"].as_str() else {
            break;
        };
        let body = req(3, "tools/list", &format!(r#""cursor":{}"#, json!(c)));
        page = modern(a, "tools/list", &[], &body).json()["result"].clone();
    }
    assert_eq!(names.len(), 9 + 150);
    assert!(names.contains(&"progress".to_string()));

    let call = modern(
        a,
        "tools/call",
        &[("Mcp-Name", "search-contacts")],
        &call_body(4, "search-contacts", json!({"query": "Leanne"})),
    );
    let r = &call.json()["result"];
    assert_eq!(
        r["structuredContent"]["results"][0]["name"],
        "Leanne Graham"
    );
    is_complete(r);
    let tool_error = modern(
        a,
        "tools/call",
        &[("Mcp-Name", "fail")],
        &call_body(5, "fail", json!({})),
    );
    assert_eq!(tool_error.json()["result"]["isError"], true);
    is_complete(&tool_error.json()["result"]);
}

#[test]
fn sessions_and_resumption_are_ignored_and_get_delete_are_405() {
    let srv = servers(ResponseMode::Sse, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let list = req(1, "tools/list", "");
    let r = modern(
        a,
        "tools/list",
        &[
            ("Mcp-Session-Id", "0123456789abcdef0123456789abcdef"),
            ("Last-Event-ID", "7-3"),
        ],
        &list,
    );
    assert_eq!(r.status, 200, "an unknown session id is ignored, not 404");
    assert!(r.header("mcp-session-id").is_none());
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert!(!text.contains("id:"), "no event ids, no priming: {text:?}");
    assert_eq!(r.message()["result"]["resultType"], "complete");

    let get = http(
        a,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        b"",
    );
    assert_eq!(get.status, 405);
    let del = http(
        a,
        "DELETE",
        "/mcp",
        &[("MCP-Protocol-Version", "2026-07-28")],
        b"",
    );
    assert_eq!(del.status, 405);
    assert!(del.header("allow").unwrap().contains("POST"));
    // The same endpoint still speaks the handshake era.
    let (sid, init) = crate::support::initialize(a, "2025-11-25");
    assert_eq!(init.message()["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        http(a, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"").status,
        200
    );
}

/// Sends a request and returns the open connection without reading the response.
fn send_only(a: SocketAddr, headers: &[(&str, &str)], body: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(a).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    s
}

#[test]
fn progress_streams_and_closing_the_stream_cancels() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let progress = |steps: u64, interval: u64| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": steps, "interval_ms": interval},
            "_meta": {"progressToken": "p", "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string()
    };
    let h = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "progress"),
    ];
    let mut s = Streamed::post(a, &h, &progress(3, 1));
    assert!(
        s.header("content-type")
            .unwrap()
            .starts_with("text/event-stream"),
        "JSON mode, yet a stream"
    );
    let mut msgs = Vec::new();
    while let Some(e) = s.next_event() {
        assert!(e.id.is_none(), "no event ids in 2026-07-28");
        if e.data.is_some() {
            msgs.push(e.json());
        }
    }
    assert_eq!(msgs.len(), 4);
    for (i, m) in msgs[..3].iter().enumerate() {
        assert_eq!(m["params"]["progress"], i as u64 + 1);
    }
    is_complete(&msgs[3]["result"]);

    // Closing the response stream is the cancel.
    let mut s = Streamed::post(a, &h, &progress(1000, 20));
    assert_eq!(s.next_message().unwrap()["params"]["progress"], 1);
    assert_eq!(srv.state().active_calls(), 1);
    drop(s);
    wait_until("the abandoned progress call to stop", || {
        srv.state().active_calls() == 0
    });

    // Also for a plain JSON response whose client goes away.
    let sleepy = call_body(2, "sleep", json!({"ms": 60000}));
    let s = send_only(
        a,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "sleep"),
        ],
        &sleepy,
    );
    wait_until("the sleep call to start", || {
        srv.state().active_calls() == 1
    });
    drop(s);
    wait_until("the abandoned sleep call to stop", || {
        srv.state().active_calls() == 0
    });
}
