//! The conformance fixtures over real transports, for what the official suite does not reach:
//! 2026-07-28 (headers, caching fields, multi-round-trip inputs, `-32021`), server requests
//! over an ordered connection (stdio, WebSocket, legacy SSE), SEP-1699 resumption errors, and
//! that the benchmark server without `conformance` is unchanged.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::conn::{Conn, Received};
use super::{Config, State, serve_state};

struct Resp {
    status: u16,
    head: String,
    body: String,
}

impl Resp {
    /// The JSON-RPC messages of the body: one JSON object, or the `data:` of each SSE event.
    fn messages(&self) -> Vec<Value> {
        if self.head.contains("text/event-stream") {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).expect("SSE data is JSON"))
                .collect()
        } else {
            vec![serde_json::from_str(&self.body).expect("a JSON body")]
        }
    }

    fn last(&self) -> Value {
        self.messages().pop().expect("a message")
    }
}

async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    // Undo chunked framing (hyper streams SSE bodies chunked).
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    Resp {
        status,
        head: head.to_string(),
        body,
    }
}

async fn server(conformance: bool) -> (std::net::SocketAddr, Arc<State>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let state = Arc::new(State::new(Config {
        conformance,
        ..Config::default()
    }));
    tokio::spawn(serve_state(l, state.clone(), std::future::pending()));
    (addr, state)
}

fn modern_body(id: u64, method: &str, params: Value, caps: Value) -> String {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

async fn modern(
    addr: std::net::SocketAddr,
    method: &str,
    name: Option<&str>,
    params: Value,
    caps: Value,
) -> Resp {
    let mut h = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    http(addr, "POST", &h, &modern_body(1, method, params, caps)).await
}

#[tokio::test]
async fn modern_era_prompts_resources_and_input_rounds() {
    let (a, _state) = server(true).await;
    let d = modern(a, "server/discover", None, json!({}), json!({})).await;
    let caps = &d.last()["result"]["capabilities"];
    assert!(
        caps["prompts"].is_object() && caps["resources"].is_object(),
        "{caps}"
    );

    let list = modern(a, "prompts/list", None, json!({}), json!({})).await;
    let r = &list.last()["result"];
    assert_eq!(
        (r["resultType"].as_str(), r["cacheScope"].as_str()),
        (Some("complete"), Some("public"))
    );
    assert!(r["ttlMs"].is_u64() && r["prompts"].as_array().unwrap().len() == 4);

    let args =
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": "y"}});
    let got = modern(
        a,
        "prompts/get",
        Some("test_prompt_with_arguments"),
        args.clone(),
        json!({}),
    )
    .await;
    assert_eq!(got.status, 200);
    assert!(got.body.contains("arg1='x', arg2='y'"), "{}", got.body);
    let no_name = modern(a, "prompts/get", None, args, json!({})).await;
    assert_eq!(no_name.status, 400, "Mcp-Name is required for prompts/get");

    let read = modern(
        a,
        "resources/read",
        Some("test://static-text"),
        json!({"uri": "test://static-text"}),
        json!({}),
    )
    .await;
    let r = &read.last()["result"];
    assert_eq!(r["contents"][0]["mimeType"], "text/plain");
    assert!(r["ttlMs"].is_u64());

    // Sampling without the capability is refused before it runs; with it, the first round
    // asks for the input and the retry with `inputResponses` completes.
    let call = json!({"name": "test_sampling", "arguments": {"prompt": "hi"}});
    let refused = modern(
        a,
        "tools/call",
        Some("test_sampling"),
        call.clone(),
        json!({}),
    )
    .await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.last()["error"]["code"], -32021);
    let first = modern(
        a,
        "tools/call",
        Some("test_sampling"),
        call.clone(),
        json!({"sampling": {}}),
    )
    .await;
    let r = &first.last()["result"];
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert_eq!(
        r["inputRequests"]["sampling"]["method"],
        "sampling/createMessage"
    );
    let mut retry = call;
    retry["inputResponses"] = json!({"sampling": {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "m"}});
    let done = modern(
        a,
        "tools/call",
        Some("test_sampling"),
        retry,
        json!({"sampling": {}}),
    )
    .await;
    let r = &done.last()["result"];
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["content"][0]["text"], "LLM response: 42");

    // Log notifications only when the request names a level; then the call streams.
    let quiet = modern(
        a,
        "tools/call",
        Some("test_tool_with_logging"),
        json!({"name": "test_tool_with_logging"}),
        json!({}),
    )
    .await;
    assert_eq!(quiet.messages().len(), 1);
    let mut params = json!({"name": "test_tool_with_logging"});
    let body = {
        let mut b: Value =
            serde_json::from_str(&modern_body(1, "tools/call", params.take(), json!({}))).unwrap();
        b["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
        b.to_string()
    };
    let loud = http(
        a,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_tool_with_logging"),
        ],
        &body,
    )
    .await;
    let msgs = loud.messages();
    assert_eq!(msgs.len(), 4, "{}", loud.body);
    assert!(
        msgs[..3]
            .iter()
            .all(|m| m["method"] == "notifications/message")
    );
    // 2026-07-28 has no logging/setLevel, no test_reconnection.
    assert_eq!(
        modern(
            a,
            "logging/setLevel",
            None,
            json!({"level": "info"}),
            json!({})
        )
        .await
        .status,
        404
    );
    let r = modern(
        a,
        "tools/call",
        Some("test_reconnection"),
        json!({"name": "test_reconnection"}),
        json!({}),
    )
    .await;
    assert_eq!(r.last()["error"]["code"], -32602);
}

async fn handshake(a: std::net::SocketAddr, caps: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}});
    let r = http(a, "POST", &[], &init.to_string()).await;
    let sid = r
        .head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(str::to_string)
        })
        .expect("a session id");
    let caps = &r.last()["result"]["capabilities"];
    assert!(
        caps["completions"].is_object() && caps["logging"].is_object(),
        "{caps}"
    );
    sid
}

#[tokio::test]
async fn handshake_http_version_header_and_resumption_errors() {
    let (a, _state) = server(true).await;
    let sid = handshake(a, json!({})).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#;
    let with = |v: &'static str| {
        [
            ("Mcp-Session-Id", sid.clone()),
            ("MCP-Protocol-Version", v.to_string()),
        ]
    };
    let h = with("2025-03-26");
    let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
    assert_eq!(
        http(a, "POST", &h, list).await.status,
        200,
        "2025-03-26 says no more than no header"
    );
    let h = with("2025-06-18");
    let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
    assert_eq!(
        http(a, "POST", &h, list).await.status,
        400,
        "another revision is a mismatch"
    );
    let s = [("Mcp-Session-Id", sid.as_str())];
    assert_eq!(
        http(a, "GET", &s, "").await.status,
        405,
        "no standalone GET stream"
    );
    let bad = [("Mcp-Session-Id", sid.as_str()), ("Last-Event-ID", "9-0")];
    assert_eq!(http(a, "GET", &bad, "").await.status, 400, "nothing parked");
    let gone = [
        ("Mcp-Session-Id", "0123456789abcdef0123456789abcdef"),
        ("Last-Event-ID", "0-0"),
    ];
    assert_eq!(http(a, "GET", &gone, "").await.status, 404);
    // Without the sampling capability the fixture answers with a tool error, no request (and
    // no stream).
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}"#;
    let r = http(a, "POST", &s, call).await;
    assert!(r.head.contains("application/json"), "{}", r.head);
    let msgs = r.messages();
    assert_eq!(msgs.len(), 1, "{}", r.body);
    assert_eq!(msgs[0]["result"]["isError"], true);
    assert!(
        msgs[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sampling capability")
    );
}

#[tokio::test]
async fn benchmark_server_is_unchanged_without_conformance() {
    let (a, _state) = server(false).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let r = http(a, "POST", &[], &init.to_string()).await;
    assert_eq!(
        r.last()["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    let sid = r
        .head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(str::to_string)
        })
        .unwrap();
    let s = [("Mcp-Session-Id", sid.as_str())];
    let tools = http(
        a,
        "POST",
        &s,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    let names: Vec<String> = tools.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, super::tools::BUILTIN);
    for method in [
        "prompts/list",
        "resources/list",
        "completion/complete",
        "logging/setLevel",
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {}}).to_string();
        assert_eq!(
            http(a, "POST", &s, &body).await.last()["error"]["code"],
            -32601,
            "{method}"
        );
    }
    let d = modern(a, "server/discover", None, json!({}), json!({})).await;
    assert_eq!(
        d.last()["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    assert_eq!(
        modern(a, "prompts/list", None, json!({}), json!({}))
            .await
            .status,
        404
    );
}

/// Sampling over an ordered connection (what stdio, WebSocket and legacy SSE share): the
/// request goes out on the connection, the client's response comes back as a frame of its own.
#[tokio::test]
async fn server_requests_over_a_connection() {
    let state = Arc::new(State::new(Config {
        conformance: true,
        ..Config::default()
    }));
    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
    let conn = Conn::new(state, tx, None);
    let frame = |v: Value| Bytes::from(v.to_string());
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}, "elicitation": {}}, "clientInfo": {"name": "t", "version": "0"}}});
    assert!(matches!(conn.receive(frame(init)), Received::Reply(_)));
    let level = json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}});
    let Received::Reply(r) = conn.receive(frame(level)) else {
        panic!("setLevel answers at once")
    };
    assert_eq!(
        serde_json::from_slice::<Value>(&r).unwrap()["result"],
        json!({})
    );
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_sampling", "arguments": {"prompt": "2+2?"}}});
    assert!(matches!(conn.receive(frame(call)), Received::Nothing));
    let ask: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(ask["method"], "sampling/createMessage");
    assert_eq!(ask["params"]["messages"][0]["content"]["text"], "2+2?");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}});
    assert!(matches!(conn.receive(frame(answer)), Received::Nothing));
    let done: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(done["id"], 2);
    assert_eq!(done["result"]["content"][0]["text"], "LLM response: 4");
    // The log level set above (error) silences the fixture's info messages.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "test_tool_with_logging"}});
    assert!(matches!(conn.receive(frame(call)), Received::Nothing));
    let done: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(
        done["id"], 3,
        "no notifications/message before the response: {done}"
    );
    // A client error answer becomes a tool error.
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "m"}}});
    assert!(matches!(conn.receive(frame(call)), Received::Nothing));
    let ask: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(ask["method"], "elicitation/create");
    let refuse = json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "user said no"}});
    conn.receive(frame(refuse));
    let done: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(done["result"]["isError"], true);
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("user said no")
    );
    conn.close();
}
