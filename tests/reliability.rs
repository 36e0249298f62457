//! Targets that are hard to use: servers that close keep-alive connections after every
//! response, that refuse before load in unusual ways, machines short of file descriptors.

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::raw_http::{self, read_request};
use crate::support::{mcpbench, run_in, scenario, scratch};

/// How the closing server ends each connection.
#[derive(Clone, Copy)]
enum Close {
    /// Closes after every response without saying so (many proxies and small servers).
    Silently,
    /// Says `Connection: close` on every response, then closes.
    Announced,
}

/// A minimal Streamable HTTP server (2025-11-25, JSON responses) that answers one request per
/// connection and closes it; the version it answers `initialize` with is `version`.
async fn closing_conn(mut s: TcpStream, close: Close, version: &'static str) {
    let mut buf = Vec::new();
    let Some((head, body)) = read_request(&mut s, &mut buf).await else {
        return;
    };
    let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = msg["id"].clone();
    let extra = match close {
        Close::Silently => "",
        Close::Announced => "Connection: close\r\n",
    };
    let result = match msg["method"].as_str() {
        _ if head.starts_with("delete ") => None,
        Some("initialize") => Some(serde_json::json!({
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "closer", "version": "1"}
        })),
        Some("tools/list") => Some(serde_json::json!({"tools": [{
            "name": "echo",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
        }]})),
        Some("tools/call") => Some(serde_json::json!({
            "content": [{"type": "text", "text": "hi"}]
        })),
        _ => None,
    };
    let response = match result {
        Some(r) => {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        None => format!("HTTP/1.1 202 Accepted\r\n{extra}Content-Length: 0\r\n\r\n"),
    };
    let _ = s.write_all(response.as_bytes()).await;
    let _ = s.shutdown().await;
}

fn closing_scenario(url: &str, requests: u64) -> String {
    format!(
        r#"name = "closing"
[target]
url = "{url}"
protocol = "2025-11-25"
[load]
concurrency = 4
requests = {requests}
timeout = "5s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = {{ message = "hi" }}
"#
    )
}

/// A server that closes the connection after every response, with or without saying
/// `Connection: close`: the request written to a connection it had already closed is sent again
/// on a fresh one, in the handshake as under load — zero failures, every connection counted.
#[test]
fn a_server_closing_after_every_response_costs_connections_not_failures() {
    for close in [Close::Silently, Close::Announced] {
        let srv = raw_http::start(2, move |s| closing_conn(s, close, "2025-11-25"));
        let dir = scratch();
        let requests = 600;
        let out = run_in(
            &closing_scenario(&format!("http://{}/mcp", srv.addr), requests),
            dir.path(),
        )
        .unwrap();
        let s = &out.summary;
        assert_eq!(s.totals.failed, 0, "{:?}", s.operations);
        assert_eq!(s.totals.ok, requests);
        assert_eq!(s.totals.unaccounted, 0);
        // Each request (and each handshake step) needed a connection of its own.
        assert!(
            s.sessions.connections >= requests,
            "{} connections for {requests} requests",
            s.sessions.connections
        );
    }
}

/// Refusals before load say what the server did: the protocol version it answered (and the
/// ones mcpbench speaks), the status and first bytes of an unexpected response.
#[test]
fn refusals_before_load_say_what_the_server_did() {
    let dir = scratch();
    // An initialize answered with a version nobody speaks.
    let old = raw_http::start(1, |s| closing_conn(s, Close::Announced, "1999-01-01"));
    let file = scenario(
        dir.path(),
        "old.toml",
        &closing_scenario(&format!("http://{}/mcp", old.addr), 10),
    );
    let (code, _, err) = mcpbench(&["run", file.to_str().unwrap(), "--quiet"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("\"1999-01-01\"") && err.contains("2025-11-25") && err.contains("2026-07-28"),
        "{err}"
    );
    // A proxy in front that answers 502 with its own page.
    let proxy = raw_http::start(1, |mut s: TcpStream| async move {
        let mut buf = Vec::new();
        if read_request(&mut s, &mut buf).await.is_some() {
            let body = "<html>upstream connect error: no healthy upstream</html>";
            let _ = s
                .write_all(
                    format!(
                        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
    });
    let file = scenario(
        dir.path(),
        "proxy.toml",
        &closing_scenario(&format!("http://{}/mcp", proxy.addr), 10),
    );
    let (code, _, err) = mcpbench(&["run", file.to_str().unwrap(), "--quiet"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("HTTP 502") && err.contains("no healthy upstream"),
        "{err}"
    );
}

/// A machine with a low open-file limit (`ulimit -n` sets the hard limit too, so mcpbench
/// cannot raise it): the run is refused up front with what to change, exit 2 — not started to
/// fail connect after connect.
#[test]
fn a_low_open_file_limit_is_a_clear_error_before_load() {
    let dir = scratch();
    let file = scenario(
        dir.path(),
        "many.toml",
        r#"name = "many"
[load]
concurrency = 400
duration = "2s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hi" }
"#,
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec '{}' run '{}' --quiet --output '{}'",
            env!("CARGO_BIN_EXE_mcpbench"),
            file.display(),
            dir.path().join("run").display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("file descriptors")
            && err.contains("hard limit 256")
            && err.contains("mcpbench serve")
            && err.contains("lower load.concurrency to about"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one clear error: {err}");
    assert!(!dir.path().join("run").join("summary.json").exists());
}

/// A server that answers each call on an SSE stream with a sampling request first (which a
/// load generator does not support), then the response twice: both anomalies are counted, the
/// calls themselves succeed.
async fn doubling_conn(mut s: TcpStream) {
    let mut buf = Vec::new();
    while let Some((_, body)) = read_request(&mut s, &mut buf).await {
        let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let id = msg["id"].clone();
        let reply = |r: serde_json::Value| {
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string()
        };
        let response = match msg["method"].as_str() {
            Some("initialize") => {
                let body = reply(serde_json::json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "doubler", "version": "1"}
                }));
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            Some("tools/list") => {
                let body = reply(
                    serde_json::json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
                );
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            Some("tools/call") => {
                let ask = r#"{"jsonrpc":"2.0","id":"ask-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}"#;
                let answer =
                    reply(serde_json::json!({"content": [{"type": "text", "text": "hi"}]}));
                let body = format!(
                    "event: message\ndata: {ask}\n\nevent: message\ndata: {answer}\n\nevent: message\ndata: {answer}\n\n"
                );
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            // Notifications, the answer to the sampling request, DELETE.
            _ => "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string(),
        };
        if s.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Protocol anomalies are counted, never ignored: a second response to one request
/// (duplicate) and a server request mcpbench does not support, each in summary.json with a
/// note; the calls themselves are ok.
#[test]
fn duplicate_responses_and_unsupported_server_requests_are_counted() {
    let srv = raw_http::start(2, doubling_conn);
    let dir = scratch();
    let out = run_in(
        &closing_scenario(&format!("http://{}/mcp", srv.addr), 50),
        dir.path(),
    )
    .unwrap();
    let s = &out.summary;
    assert_eq!(s.totals.ok, 50, "{:?}", s.operations);
    assert_eq!(s.sessions.duplicate_responses, 50, "{:?}", s.sessions);
    assert_eq!(s.sessions.server_requests, 50);
    assert_eq!(s.sessions.unsupported_server_requests, 50);
    let notes = s.notes.join("\n");
    assert!(
        notes.contains("50 responses answered a request a second time")
            && notes.contains("50 of 50 requests from the server"),
        "{notes}"
    );
    let json = std::fs::read_to_string(out.dir.join("summary.json")).unwrap();
    assert!(json.contains("\"duplicate_responses\": 50"), "{json}");
}
