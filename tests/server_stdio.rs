//! stdio (mcp-protocol.md §3.1, §7.2): `serve_stdio` over in-memory pipes, and the real
//! `mcpbench serve --stdio` binary: one message per line, only MCP on stdout, parse errors
//! with id null, batches for 2025-03-26, progress, cancellation, exit 0 on EOF.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use mcpbench::server::{Config, State, serve_stdio, serve_stdio_with};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, DuplexStream};

use crate::support::{HANG, MODERN_META};

/// The client's ends of a session served by `serve_stdio_with` on a task.
struct Client {
    to_server: Option<DuplexStream>,
    from_server: tokio::io::Lines<tokio::io::BufReader<DuplexStream>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Client {
    fn start(state: Arc<State>) -> Client {
        let (to_server, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, from_server) = tokio::io::duplex(64 * 1024);
        let served = tokio::spawn(serve_stdio_with(
            state,
            server_in,
            server_out,
            std::future::pending(),
        ));
        Client {
            to_server: Some(to_server),
            from_server: tokio::io::BufReader::new(from_server).lines(),
            served,
        }
    }

    async fn send(&mut self, line: &str) {
        let w = self.to_server.as_mut().expect("input open");
        w.write_all(line.as_bytes()).await.unwrap();
        w.write_all(b"\n").await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(HANG, self.from_server.next_line())
            .await
            .expect("a line before the hang guard")
            .unwrap()
            .expect("output still open");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON message per line ({e}): {line:?}"))
    }

    /// Closes the input and returns every remaining output line.
    async fn finish(mut self) -> Vec<Value> {
        drop(self.to_server.take());
        let mut rest = Vec::new();
        while let Some(line) = tokio::time::timeout(HANG, self.from_server.next_line())
            .await
            .unwrap()
            .unwrap()
        {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        tokio::time::timeout(HANG, self.served)
            .await
            .unwrap()
            .unwrap()
            .expect("served without error");
        rest
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

async fn wait_active(state: &State, n: usize) {
    let start = std::time::Instant::now();
    while state.active_calls() != n {
        assert!(start.elapsed() < HANG, "waiting for {n} active calls");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_pipes() {
    let state = Arc::new(State::new(Config::default()));
    let mut c = Client::start(state.clone());
    c.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        c.recv().await,
        json!({"jsonrpc": "2.0", "id": "p", "result": {}}),
        "ping before initialize"
    );
    c.send(INIT).await;
    assert_eq!(c.recv().await["result"]["protocolVersion"], "2025-03-26");
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    c.send("\r").await; // a blank line (after stripping \r) is skipped
    c.send("{not json").await;
    let e = c.recv().await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    c.send(&format!("{}\r", r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"crlf"}}}"#)).await;
    assert_eq!(c.recv().await["result"]["content"][0]["text"], "crlf");
    c.send(INIT).await;
    assert_eq!(c.recv().await["error"]["code"], -32600, "initialize twice");

    // A batch (2025-03-26) is answered with one array line; progress in it goes first.
    c.send(r#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"interval_ms":1},"_meta":{"progressToken":9}}}]"#).await;
    for i in 1..=2 {
        assert_eq!(
            c.recv().await["params"],
            json!({"progressToken": 9, "progress": i, "total": 2})
        );
    }
    let arr = c.recv().await;
    assert_eq!(arr.as_array().map(Vec::len), Some(2), "{arr}");
    assert_eq!(
        (arr[0]["id"].clone(), arr[1]["id"].clone()),
        (json!(2), json!(3))
    );

    // 2026-07-28 messages are handled statelessly.
    c.send(&format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{{{MODERN_META}}}}}"#
    ))
    .await;
    let d = c.recv().await;
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    c.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#).await;
    let e = c.recv().await;
    assert_eq!(e["error"]["code"], -32022);
    assert_eq!(e["error"]["data"]["supported"], json!(["2026-07-28"]));

    // Many calls in flight; cancellation stops one without a response.
    for id in [10, 11] {
        c.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":5000}}}}}}"#)).await;
    }
    wait_active(&state, 2).await;
    c.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"unknown"}}"#,
    )
    .await;
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}"#)
        .await;
    wait_active(&state, 1).await;
    c.send(r#"{"jsonrpc":"2.0","id":12,"method":"ping"}"#).await;
    assert_eq!(c.recv().await["id"], 12, "nothing for the cancelled call");
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}"#)
        .await;
    wait_active(&state, 0).await;

    // EOF: serve_stdio returns once in flight work is done; nothing else was written.
    c.send(r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":20}}}"#).await;
    let rest = c.finish().await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        rest[0]["id"], 13,
        "a call in flight at EOF is still answered"
    );
}

#[tokio::test]
async fn serve_stdio_returns_at_eof() {
    let (mut to_server, server_in) = tokio::io::duplex(1024);
    let (server_out, from_server) = tokio::io::duplex(1024);
    let served = tokio::spawn(serve_stdio(
        server_in,
        server_out,
        Config::default(),
        std::future::pending(),
    ));
    to_server
        .write_all(format!("{INIT}\n").as_bytes())
        .await
        .unwrap();
    drop(to_server);
    let mut lines = tokio::io::BufReader::new(from_server).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    assert!(first.contains("\"protocolVersion\":\"2025-03-26\""));
    assert_eq!(
        lines.next_line().await.unwrap(),
        None,
        "output closed after the last response"
    );
    served.await.unwrap().unwrap();
}

/// The real binary: pipe a session through `mcpbench serve --stdio`; it exits 0 at EOF.
#[test]
fn the_binary_serves_a_session_and_exits_at_eof() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args(["serve", "--stdio"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search-contacts","arguments":{"query":"Leanne"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"interval_ms":1},"_meta":{"progressToken":"bin"}}}"#,
        "oops",
    ];
    for line in input {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let msgs: Vec<Value> = stdout
        .lines()
        .map(|l| {
            let l = l.unwrap();
            serde_json::from_str(&l)
                .unwrap_or_else(|e| panic!("stdout carries only MCP messages ({e}): {l:?}"))
        })
        .collect();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("stdio"), "logs go to stderr: {stderr:?}");
    let by_id = |id: i64| {
        msgs.iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no response {id}: {msgs:?}"))
    };
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-11-25");
    assert!(
        by_id(2)["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Leanne Graham"),
        "the embedded mock backend answered"
    );
    assert_eq!(
        by_id(3)["result"]["content"][0]["text"],
        "done after 3 steps"
    );
    let notes: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(notes.len(), 3);
    let pos = |m: &Value| msgs.iter().position(|x| x == m).unwrap();
    assert!(
        notes.iter().all(|n| pos(n) < pos(by_id(3))),
        "progress before the result"
    );
    assert!(
        msgs.iter()
            .any(|m| m["id"].is_null() && m["error"]["code"] == -32700)
    );
}

/// `serve --conformance` adds the conformance suite's fixtures to the catalog (and without the
/// flag they are absent).
#[test]
fn the_conformance_flag_serves_the_suites_fixtures() {
    let list = |flags: &[&str]| -> Value {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpbench"))
            .args(["serve", "--stdio"])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}"#,
        ] {
            writeln!(stdin, "{line}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let msgs: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        Value::Array(msgs)
    };
    let names = |msgs: &Value| -> Vec<String> {
        let list = msgs
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == 2)
            .unwrap();
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let call = |msgs: &Value| -> Value {
        msgs.as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == 3)
            .unwrap()
            .clone()
    };
    let plain = list(&[]);
    assert!(!names(&plain).iter().any(|n| n.starts_with("test_")));
    assert!(
        call(&plain)
            .get("result")
            .is_none_or(|r| r["isError"] == true)
    );
    let with = list(&["--conformance"]);
    assert!(
        names(&with).iter().any(|n| n == "test_simple_text"),
        "{:?}",
        names(&with)
    );
    assert!(
        names(&with).iter().any(|n| n == "echo"),
        "the benchmark tools stay"
    );
    assert_eq!(
        call(&with)["result"]["content"][0]["type"],
        "text",
        "{}",
        call(&with)
    );
}
