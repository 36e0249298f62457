//! A deliberately broken MCP server: it speaks enough Streamable HTTP to open a session and
//! list its tools, then misbehaves in a different way per tool name.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::raw_http::{self, ThreadServer, read_request};

/// Tools and what each does.
pub const TOOLS: &[&str] = &[
    "ok",
    "http500",
    "auth401",
    "forbidden403",
    "limited429",
    "badjson",
    "wrongid",
    "reset",
    "stall",
    "truncated",
    "ssenoresp",
    "rpcerror",
    "toolerror",
    "inputrequired",
    "badresulttype",
    "badtype",
];

/// Tools that behave correctly in unusual ways the client must handle: a stream closed after a
/// priming event and resumed by GET with Last-Event-ID, and a server `ping` that must be
/// answered before the response comes.
pub const UNUSUAL: &[&str] = &["resume", "pingfirst"];

static PING_ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static PING_NOTIFY: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// The server runs until dropped.
pub fn start() -> ThreadServer {
    raw_http::start(2, conn)
}

fn json_response(body: &str, extra: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

async fn conn(mut s: TcpStream) {
    let mut buf = Vec::new();
    while let Some((head, body)) = read_request(&mut s, &mut buf).await {
        if head.starts_with("get ") {
            // Resumption of a `resume` stream: the event id names the request.
            let Some(id) = head
                .lines()
                .find_map(|l| l.strip_prefix("last-event-id:"))
                .and_then(|v| v.trim().strip_prefix("ev-"))
                .map(str::to_string)
            else {
                let _ = s
                    .write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    .await;
                continue;
            };
            let ev = format!(
                "id: ev-{id}-2\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\n"
            );
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{ev}",
                ev.len()
            );
            let _ = s.write_all(reply.as_bytes()).await;
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if v.get("result").is_some() && v["id"] == "srv-ping" {
            PING_ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PING_NOTIFY.notify_waiters();
            let _ = s
                .write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                .await;
            continue;
        }
        let id = v["id"].clone();
        let method = v["method"].as_str().unwrap_or_default();
        let reply: Vec<u8> = match method {
            "initialize" => json_response(
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"broken","version":"0"}}}}}}"#),
                "Mcp-Session-Id: broken-session\r\n",
            ),
            m if m.starts_with("notifications/") => b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "tools/list" => {
                let tools: Vec<String> = TOOLS.iter().chain(UNUSUAL).map(|t| format!(r#"{{"name":"{t}","inputSchema":{{"type":"object"}}}}"#)).collect();
                json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{}]}}}}"#, tools.join(",")), "")
            }
            "tools/call" => match v["params"]["name"].as_str().unwrap_or_default() {
                "ok" => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"fine"}}]}}}}"#), ""),
                "inputrequired" => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"e":{{"method":"elicitation/create","params":{{}}}}}}}}}}"#), ""),
                "badresulttype" => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"later","content":[]}}}}"#), ""),
                "toolerror" => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"isError":true}}}}"#), ""),
                "rpcerror" => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"boom"}}}}"#), ""),
                "http500" => b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\noops!".to_vec(),
                "auth401" => b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n".to_vec(),
                "badtype" => b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nfine!".to_vec(),
                "forbidden403" => b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".to_vec(),
                "limited429" => b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 0\r\n\r\n".to_vec(),
                "badjson" => json_response("{this is not json", ""),
                "wrongid" => {
                    let wrong = id.as_i64().unwrap_or(0) + 1000;
                    json_response(&format!(r#"{{"jsonrpc":"2.0","id":{wrong},"result":{{"content":[]}}}}"#), "")
                }
                "reset" => {
                    let _ = s.set_zero_linger();
                    return;
                }
                "stall" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                "truncated" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":").await;
                    return;
                }
                "resume" => {
                    // Priming event with an id and a retry, then the connection closes.
                    let ev = format!("id: ev-{id}\nretry: 5\ndata:\n\n");
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{ev}", ev.len());
                    let _ = s.write_all(reply.as_bytes()).await;
                    return;
                }
                "pingfirst" => {
                    // A server request first; the response only once the client answered it.
                    // (Read the counter before sending the ping: the answer can be quick.)
                    let before = PING_ANSWERS.load(std::sync::atomic::Ordering::Relaxed);
                    let ping = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-ping\",\"method\":\"ping\"}\n\n";
                    let _ = s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{ping}\r\n", ping.len()).as_bytes()).await;
                                        let answered = async {
                        while PING_ANSWERS.load(std::sync::atomic::Ordering::Relaxed) == before {
                            let n = PING_NOTIFY.notified();
                            if PING_ANSWERS.load(std::sync::atomic::Ordering::Relaxed) != before {
                                break;
                            }
                            n.await;
                        }
                    };
                    if tokio::time::timeout(Duration::from_secs(2), answered).await.is_err() {
                        return;
                    }
                    let ev = format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\n");
                    format!("{:x}\r\n{ev}\r\n0\r\n\r\n", ev.len()).into_bytes()
                }
                "ssenoresp" => {
                    let ev = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n";
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{ev}", ev.len()).into_bytes()
                }
                _ => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"unknown tool"}}}}"#), ""),
            },
            _ => json_response(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#), ""),
        };
        if s.write_all(&reply).await.is_err() {
            return;
        }
    }
}
