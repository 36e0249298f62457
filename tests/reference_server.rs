//! The reference server's answer to each MUST of mcp-protocol.md §3.3 and §7.2 (Streamable
//! HTTP, handshake era), and its tools.

use mcpbench::server::ResponseMode;
use serde_json::{Value, json};

use crate::support::{MCP_HEADERS, http, initialize, post, servers};

fn call(tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
}

#[test]
fn handshake_sessions_and_status_codes() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let (sid, r) = initialize(a, "2025-11-25");
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(sid.len(), 32, "session id: {sid:?}");
    assert!(sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let init = r.json();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpbench-reference");
    // Version negotiation: a supported version is echoed, an unknown one answered with ours.
    assert_eq!(
        initialize(a, "2025-06-18").1.json()["result"]["protocolVersion"],
        "2025-06-18"
    );
    assert_eq!(
        initialize(a, "2024-11-05").1.json()["result"]["protocolVersion"],
        "2024-11-05"
    );
    assert_eq!(
        initialize(a, "1999-01-01").1.json()["result"]["protocolVersion"],
        "2025-11-25"
    );

    let s = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let note = post(
        a,
        &s,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!((note.status, note.body.len()), (202, 0));
    let resp = post(a, &s, r#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
    assert_eq!(
        resp.status, 202,
        "a JSON-RPC response from the client is accepted with 202"
    );
    assert_eq!(
        post(a, &s, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#).json(),
        json!({"jsonrpc":"2.0","id":3,"result":{}})
    );
    assert_eq!(
        post(a, &s, r#"{"jsonrpc":"2.0","id":"s","method":"ping"}"#).json()["id"],
        "s"
    );

    // Session errors.
    let list = r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#;
    assert_eq!(post(a, &[], list).status, 400, "no session id");
    assert_eq!(
        post(
            a,
            &[("Mcp-Session-Id", "0123456789abcdef0123456789abcdef")],
            list
        )
        .status,
        404,
        "unknown session"
    );
    assert_eq!(
        post(
            a,
            &[
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", "2031-01-01")
            ],
            list
        )
        .status,
        400,
        "bad version header"
    );
    assert_eq!(
        post(
            a,
            &[
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", "2025-06-18")
            ],
            list
        )
        .status,
        400,
        "mismatched version header"
    );
    assert_eq!(
        post(a, &[("Mcp-Session-Id", &sid)], list).status,
        200,
        "no version header: assume 2025-03-26 semantics"
    );
    let again = post(
        a,
        &s,
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    assert_eq!(
        again.json()["error"]["code"],
        -32600,
        "second initialize on a session"
    );

    // HTTP-level rules.
    let get = http(a, "GET", "/mcp", &[("Accept", "text/event-stream")], b"");
    assert_eq!(get.status, 405);
    assert!(get.header("allow").unwrap().contains("POST"));
    assert_eq!(http(a, "PUT", "/mcp", &MCP_HEADERS, b"{}").status, 405);
    assert_eq!(
        http(a, "POST", "/other", &MCP_HEADERS, list.as_bytes()).status,
        404
    );
    assert_eq!(
        http(
            a,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json")
            ],
            list.as_bytes()
        )
        .status,
        406
    );
    assert_eq!(
        http(
            a,
            "POST",
            "/mcp",
            &[("Content-Type", "text/plain"), ("Accept", "*/*")],
            list.as_bytes()
        )
        .status,
        415
    );
    assert_eq!(
        post(a, &[("Origin", "http://evil.example")], list).status,
        403,
        "bad Origin"
    );
    assert_eq!(
        post(
            a,
            &[
                ("Origin", "http://localhost:3000"),
                ("Mcp-Session-Id", &sid)
            ],
            list
        )
        .status,
        200,
        "good Origin"
    );
    assert_eq!(
        post(a, &[("Host", "evil.example")], list).status,
        403,
        "DNS rebinding: foreign Host"
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    assert_eq!(post(a, &s, &big).status, 413);
    let bad = post(a, &s, "{not json");
    assert_eq!(
        (bad.status, bad.json()["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    assert_eq!(
        post(a, &s, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).status,
        400,
        "no batches after 2025-03-26"
    );
    assert_eq!(
        post(a, &s, r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).json()["error"]["code"],
        -32600
    );
    assert_eq!(
        post(a, &s, r#"{"jsonrpc":"2.0","id":6,"method":"nope/nope"}"#).json()["error"]["code"],
        -32601
    );

    // DELETE ends the session.
    assert_eq!(
        http(a, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"").status,
        200
    );
    assert_eq!(post(a, &s, list).status, 404, "deleted session");
    assert_eq!(
        http(a, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"").status,
        404
    );
    assert_eq!(http(a, "DELETE", "/mcp", &[], b"").status, 400);
}

#[test]
fn tools_list_paginates_with_stable_opaque_cursors() {
    let srv = servers(ResponseMode::Json, 250, 100, Default::default());
    let (sid, _) = initialize(srv.mcp_addr, "2025-11-25");
    let s = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let r = post(
            srv.mcp_addr,
            &s,
            &json!({"jsonrpc":"2.0","id":pages + 10,"method":"tools/list","params":params})
                .to_string(),
        )
        .json();
        let result = &r["result"];
        for t in result["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
            assert!(
                t["inputSchema"]["type"] == "object"
                    && t["title"].is_string()
                    && t["annotations"].is_object()
            );
        }
        pages += 1;
        match result["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        names.len(),
        259,
        "9 built-in (progress included) + 250 synthetic tools"
    );
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
    let bad = post(
        srv.mcp_addr,
        &s,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"bogus"}}"#,
    )
    .json();
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn tools_validate_arguments_and_call_the_backend() {
    for mode in [ResponseMode::Json, ResponseMode::Sse] {
        let srv = servers(mode, 0, 100, Default::default());
        let (sid, r) = initialize(srv.mcp_addr, "2025-11-25");
        if mode == ResponseMode::Sse {
            assert!(
                r.header("content-type")
                    .unwrap()
                    .starts_with("text/event-stream")
            );
        }
        let s = [
            ("Mcp-Session-Id", sid.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        let m = |body: String| post(srv.mcp_addr, &s, &body).message();

        let echo = m(call("echo", json!({"message": "hi \"there\""})));
        assert_eq!(
            echo["result"],
            json!({"content": [{"type": "text", "text": "hi \"there\""}], "isError": false})
        );
        let invalid = m(call("echo", json!({"message": 5})));
        assert_eq!(
            invalid["result"]["isError"], true,
            "invalid arguments are a tool error (2025-11-25)"
        );
        assert!(
            invalid["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("arguments.message: 5 is not of type \"string\"")
        );
        assert_eq!(m(call("no-such-tool", json!({})))["error"]["code"], -32602);
        assert_eq!(m(call("fail", json!({})))["result"]["isError"], true);
        assert_eq!(
            m(call("payload", json!({"bytes": 4096})))["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .len(),
            4096
        );
        assert!(
            m(call("sleep", json!({"ms": 5})))["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("slept 5 ms")
        );
        assert!(
            m(call("cpu", json!({"iterations": 1000})))["result"]["content"][0]["text"].is_string()
        );

        let found = m(call("search-contacts", json!({"query": "Leanne"})));
        assert_eq!(found["result"]["isError"], false);
        assert!(
            found["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("Leanne Graham")
        );
        assert_eq!(
            found["result"]["structuredContent"]["results"][0]["name"],
            "Leanne Graham"
        );
        let invoice = m(call("get-invoice", json!({"id": 42})));
        assert_eq!(invoice["result"]["structuredContent"]["id"], 42);
        assert_eq!(
            m(call("get-invoice", json!({"id": 99_999_999})))["result"]["isError"],
            true,
            "backend 404 becomes a tool error"
        );
        let ticket = m(call(
            "create-ticket",
            json!({"title": "printer on fire", "priority": "high"}),
        ));
        assert_eq!(ticket["result"]["structuredContent"]["status"], "open");
        assert_eq!(
            m(call(
                "create-ticket",
                json!({"title": "x", "priority": "urgent"})
            ))["result"]["isError"],
            true
        );
        let stats = crate::support::backend_stats(srv.backend_addr.unwrap());
        assert_eq!(stats["routes"]["contacts"]["ok"], 1);
        assert_eq!(
            stats["routes"]["tickets"]["ok"], 1,
            "the invalid ticket never reached the backend"
        );

        // 2025-03-26 has no structuredContent.
        let (old, _) = initialize(srv.mcp_addr, "2025-03-26");
        let r = post(
            srv.mcp_addr,
            &[("Mcp-Session-Id", old.as_str())],
            &call("search-contacts", json!({"query": "Ervin"})),
        )
        .message();
        assert!(r["result"].get("structuredContent").is_none());
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("Ervin Howell")
        );
    }
}

#[test]
fn backend_failures_become_sanitized_tool_errors() {
    let knobs = mock_backend::Knobs {
        error_rate: Some(1.0),
        ..Default::default()
    };
    let srv = servers(ResponseMode::Json, 0, 100, knobs);
    let (sid, _) = initialize(srv.mcp_addr, "2025-11-25");
    let r = post(
        srv.mcp_addr,
        &[("Mcp-Session-Id", sid.as_str())],
        &call("search-contacts", json!({"query": "Leanne"})),
    )
    .json();
    assert_eq!(r["result"]["isError"], true);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, "the backend failed (HTTP 500)");
    assert!(!text.contains("127.0.0.1") && !text.contains("injected"));
}
