//! The reference server under hostile clients (issue 13): too many connections, slow request
//! heads and bodies, too many requests in flight, deeply nested and oversized JSON, clients
//! that stop reading their streams, and sessions never closed. Each test pins what the server
//! does instead of hanging, growing or crashing, and that it keeps serving everyone else.
//! Limits are set small (and timeouts short) through `Config`; the defaults are documented
//! there.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpbench::server::{Config, State, serve_stdio_with};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{ClientRequestBuilder, Message, WebSocket};

use crate::support::{HANG, MCP_HEADERS, Resp, initialize, launch, post, wait_until};

/// A limit or timeout the tests set short.
const SHORT: Duration = Duration::from_millis(300);

/// The message size cap of the nesting tests: the nested messages fit, the oversized ones
/// are twice as large.
const MAX_BODY: usize = 1024 * 1024;

fn init_body(version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"hostile","version":"0"}}}}}}"#
    )
}

fn call(id: u64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
    .to_string()
}

/// The server still answers a new client: a fresh session's `ping`.
fn still_serves(a: SocketAddr) {
    let (sid, r) = initialize(a, "2025-06-18");
    assert_eq!(
        r.status,
        200,
        "initialize: {}",
        String::from_utf8_lossy(&r.body)
    );
    let h = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let pong = post(a, &h, r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    assert_eq!(
        pong.json(),
        json!({"jsonrpc": "2.0", "id": 9, "result": {}})
    );
}

/// A `POST /mcp` request head with MCP's headers, `extra` (header lines, each ending in CRLF)
/// after the Host.
fn post_head(a: SocketAddr, extra: &str) -> String {
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {a}\r\n{extra}");
    for (n, v) in MCP_HEADERS {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

fn connect(a: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(a).expect("connect");
    s.set_read_timeout(Some(HANG)).unwrap();
    s
}

/// A socket with a 4 KiB receive buffer: a client that stops reading fills it (and the
/// server's send buffer) quickly.
fn tiny_window(a: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(a).await.expect("connect")
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    s
}

/// How long until the server closes `s` (EOF or reset); panics after [`HANG`].
fn closed_after(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return start.elapsed(),
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

/// Everything the server sends until it closes `s`, parsed as one HTTP/1.1 response.
fn response(s: &mut TcpStream) -> Resp {
    let mut raw = Vec::new();
    // A reset after the response (unread input on the server) ends it too.
    let _ = s.read_to_end(&mut raw);
    crate::support::parse_response(&raw)
}

/// The JSON-RPC error code of a message, or of the first message of a batch response.
fn error_code(v: &Value) -> Option<i64> {
    let m = if v.is_array() { &v[0] } else { v };
    m["error"]["code"].as_i64()
}

type Ws = WebSocket<TcpStream>;

fn ws_over(stream: TcpStream, a: SocketAddr) -> Ws {
    let uri = format!("ws://{a}/ws").parse().unwrap();
    let req = ClientRequestBuilder::new(uri).with_sub_protocol("mcp");
    let (ws, resp) =
        tokio_tungstenite::tungstenite::client(req, stream).expect("WebSocket handshake");
    assert_eq!(resp.status(), 101);
    ws
}

fn ws_recv(ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("a frame") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON text frame"),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

fn ws_send(ws: &mut Ws, msg: &str) {
    ws.send(Message::text(msg)).unwrap();
}

fn ws_init(ws: &mut Ws, version: &str) {
    ws_send(ws, &init_body(version));
    assert_eq!(ws_recv(ws)["result"]["protocolVersion"], version);
    ws_send(
        ws,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
}

// 1. Connection cap.

#[test]
fn connections_over_the_cap_get_503_and_are_closed() {
    let srv = launch(Config {
        max_connections: 3,
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    // Three connections take every place: a WebSocket (it leaves hyper by its upgrade, and
    // still counts) and two that have sent nothing yet.
    let mut ws = ws_over(connect(a), a);
    ws_init(&mut ws, "2025-06-18");
    let idle: Vec<TcpStream> = (0..2).map(|_| connect(a)).collect();
    wait_until("3 open connections", || state.open_connections() == 3);

    let start = Instant::now();
    let r = crate::support::http(a, "GET", "/mcp", &[], b"");
    assert!(start.elapsed() < Duration::from_secs(5), "refused at once");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("connection"), Some("close"));
    let e = r.json();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many connections (this server takes 3)"),
        "{e}"
    );
    assert_eq!(state.open_connections(), 3, "a refusal takes no place");

    // Places free as connections end, the WebSocket's included.
    drop(idle);
    ws.close(None).unwrap();
    while ws.read().is_ok() {}
    drop(ws);
    wait_until("connections closed", || state.open_connections() == 0);
    still_serves(a);
}

// 2. Slow request heads (slowloris) and bodies.

#[test]
fn slow_request_heads_are_cut_off_at_the_header_timeout() {
    let srv = launch(Config {
        header_read_timeout: SHORT,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let partial: [&[u8]; 3] = [
        b"",                                                  // nothing at all
        b"PRI * HTTP/2",                                      // half an HTTP/2 preface
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-", // half an HTTP/1 head
    ];
    for p in partial {
        let mut s = connect(a);
        s.write_all(p).unwrap();
        let took = closed_after(&mut s);
        assert!(
            took >= SHORT - Duration::from_millis(50) && took < Duration::from_secs(10),
            "{:?}: closed after {took:?}",
            String::from_utf8_lossy(p)
        );
    }
    // Dripping a byte every 50 ms keeps no connection alive: the head as a whole is timed.
    let mut s = connect(a);
    let mut w = s.try_clone().unwrap();
    let drip = std::thread::spawn(move || {
        for b in b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
            .iter()
            .cycle()
        {
            if w.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let took = closed_after(&mut s);
    assert!(
        took < Duration::from_secs(5),
        "dripping head closed after {took:?}"
    );
    drop(s);
    drip.join().unwrap();
    still_serves(a);
}

#[test]
fn a_body_that_stops_arriving_gets_408() {
    let srv = launch(Config {
        body_read_timeout: SHORT,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let mut s = connect(a);
    let head = post_head(a, "Content-Length: 100\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(br#"{"jsonrpc""#).unwrap();
    let start = Instant::now();
    let r = response(&mut s);
    assert_eq!(r.status, 408, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(error_code(&r.json()), Some(-32600));
    let took = start.elapsed();
    assert!(
        took >= SHORT - Duration::from_millis(50),
        "408 after {took:?}"
    );
    still_serves(a);
}

/// A body that arrives in pieces (chunked, one write per chunk, the server reading between
/// them) is read whole: the pieces are joined in order, and one too many bytes is refused.
#[test]
fn a_body_that_arrives_in_pieces_is_read_whole() {
    let srv = launch(Config {
        max_body: 4096,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let send = |body: &str| {
        let mut s = connect(a);
        let head = post_head(a, "Transfer-Encoding: chunked\r\nConnection: close\r\n");
        s.write_all(head.as_bytes()).unwrap();
        // Write errors are ignored: a refused body's connection may close before its end.
        for piece in body.as_bytes().chunks(body.len().div_ceil(3)) {
            std::thread::sleep(Duration::from_millis(20));
            let _ = s.write_all(format!("{:x}\r\n", piece.len()).as_bytes());
            let _ = s.write_all(piece);
            let _ = s.write_all(b"\r\n");
        }
        let _ = s.write_all(b"0\r\n\r\n");
        response(&mut s)
    };
    let r = send(&init_body("2025-06-18"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    let padded = |n: usize| {
        let pad = "x".repeat(n);
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{pad}"}}}}"#)
    };
    let fits = padded(4096 - padded(0).len());
    assert_eq!(fits.len(), 4096);
    // Accepted as a body (no session, so refused as a request, not for its size).
    assert_eq!(send(&fits).status, 400);
    assert_eq!(send(&padded(4097 - padded(0).len())).status, 413);
}

// 3. Requests in flight per session, and HTTP/2 streams per connection.

#[test]
fn a_streamable_http_session_gets_429_beyond_its_in_flight_cap() {
    let srv = launch(Config {
        max_in_flight: 2,
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let (sid, _) = initialize(a, "2025-06-18");
    let headers = move || {
        vec![
            ("Mcp-Session-Id", sid.clone()),
            ("MCP-Protocol-Version", "2025-06-18".to_string()),
        ]
    };
    let h = headers();
    let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let slow: Vec<_> = (1..=2)
        .map(|id| {
            let h = headers();
            std::thread::spawn(move || {
                let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
                post(a, &h, &call(id, "sleep", json!({"ms": 1500})))
            })
        })
        .collect();
    wait_until("2 calls running", || state.active_calls() == 2);
    let r = post(a, &h, &call(3, "echo", json!({"message": "one too many"})));
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    let e = r.json();
    assert_eq!(
        (e["id"].clone(), error_code(&e)),
        (json!(3), Some(-32029)),
        "{e}"
    );
    // Another session is not affected.
    still_serves(a);
    for t in slow {
        let r = t.join().unwrap();
        assert_eq!(r.json()["result"]["content"][0]["text"], "slept 1500 ms");
    }
    let r = post(a, &h, &call(4, "echo", json!({"message": "room again"})));
    assert_eq!(r.json()["result"]["content"][0]["text"], "room again");
}

#[test]
fn a_websocket_connection_gets_an_error_beyond_its_in_flight_cap() {
    let srv = launch(Config {
        max_in_flight: 2,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let mut ws = ws_over(connect(a), a);
    ws_init(&mut ws, "2025-06-18");
    ws_send(&mut ws, &call(1, "sleep", json!({"ms": 800})));
    ws_send(&mut ws, &call(2, "sleep", json!({"ms": 800})));
    ws_send(
        &mut ws,
        &call(3, "echo", json!({"message": "one too many"})),
    );
    let first = ws_recv(&mut ws);
    assert_eq!(
        (first["id"].clone(), error_code(&first)),
        (json!(3), Some(-32029)),
        "{first}"
    );
    let mut done: Vec<u64> = (0..2)
        .map(|_| ws_recv(&mut ws)["id"].as_u64().unwrap())
        .collect();
    done.sort();
    assert_eq!(done, [1, 2]);
    ws_send(&mut ws, &call(4, "echo", json!({"message": "room again"})));
    assert_eq!(
        ws_recv(&mut ws)["result"]["content"][0]["text"],
        "room again"
    );
}

/// A stdio session served on a task, over in-memory pipes.
struct Stdio {
    to_server: tokio::io::DuplexStream,
    from_server: tokio::io::Lines<tokio::io::BufReader<tokio::io::DuplexStream>>,
}

impl Stdio {
    fn start(config: Config) -> Stdio {
        let (to_server, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, from_server) = tokio::io::duplex(64 * 1024);
        let state = Arc::new(State::new(config));
        tokio::spawn(serve_stdio_with(
            state,
            server_in,
            server_out,
            std::future::pending(),
        ));
        Stdio {
            to_server,
            from_server: tokio::io::BufReader::new(from_server).lines(),
        }
    }

    async fn send(&mut self, line: &str) {
        self.to_server.write_all(line.as_bytes()).await.unwrap();
        self.to_server.write_all(b"\n").await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(HANG, self.from_server.next_line())
            .await
            .expect("a line before the hang guard")
            .unwrap()
            .expect("output still open");
        serde_json::from_str(&line).expect("one JSON message per line")
    }

    async fn ping(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
            .await;
        assert_eq!(
            self.recv().await,
            json!({"jsonrpc": "2.0", "id": "p", "result": {}})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_session_gets_an_error_beyond_its_in_flight_cap() {
    let mut c = Stdio::start(Config {
        max_in_flight: 2,
        ..Config::default()
    });
    c.send(&init_body("2025-03-26")).await;
    c.recv().await;
    c.send(&call(1, "sleep", json!({"ms": 800}))).await;
    c.send(&call(2, "sleep", json!({"ms": 800}))).await;
    c.send(&call(3, "echo", json!({"message": "one too many"})))
        .await;
    let first = c.recv().await;
    assert_eq!(
        (first["id"].clone(), error_code(&first)),
        (json!(3), Some(-32029)),
        "{first}"
    );
    // In a batch, each call beyond the cap is refused in its place.
    let batch = format!(
        "[{},{}]",
        call(4, "echo", json!({"message": "a"})),
        call(5, "echo", json!({"message": "b"}))
    );
    c.send(&batch).await;
    let refused = c.recv().await;
    let codes: Vec<Option<i64>> = refused
        .as_array()
        .expect("a batch response")
        .iter()
        .map(|m| m["error"]["code"].as_i64())
        .collect();
    assert_eq!(codes, [Some(-32029), Some(-32029)], "{refused}");
    for _ in 0..2 {
        assert_eq!(
            c.recv().await["result"]["content"][0]["text"],
            "slept 800 ms"
        );
    }
    c.send(&call(6, "echo", json!({"message": "room again"})))
        .await;
    assert_eq!(c.recv().await["result"]["content"][0]["text"], "room again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_per_connection_are_capped() {
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let srv = launch(Config {
        max_streams: 2,
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    // HTTP/2 with prior knowledge over plain TCP.
    let tcp = tokio::net::TcpStream::connect(a).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = |body: String| {
        let mut send = send.clone();
        async move {
            let req = hyper::Request::post(format!("http://{a}/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "sleep")
                .body(Full::new(bytes::Bytes::from(body)))
                .unwrap();
            send.ready().await.unwrap();
            let r = send
                .send_request(req)
                .await
                .expect("a response, not a refused stream");
            let b = r.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&b).unwrap()
        }
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let sleep = |id: u64, ms: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "sleep", "arguments": {"ms": ms}, "_meta": meta}})
        .to_string()
    };
    // One exchange first, so the client has the server's SETTINGS: a stream opened before
    // them, beyond the limit, is refused (REFUSED_STREAM, safe to retry) rather than queued.
    assert_eq!(
        request(sleep(0, 0)).await["result"]["content"][0]["text"],
        "slept 0 ms"
    );
    let calls: Vec<_> = (1..=5)
        .map(|id| tokio::spawn(request(sleep(id, 300))))
        .collect();
    let mut peak = 0;
    let start = Instant::now();
    while calls.iter().any(|c| !c.is_finished()) {
        peak = peak.max(state.active_calls());
        assert!(start.elapsed() < HANG, "calls never finished");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for c in calls {
        let r = c.await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "slept 300 ms", "{r}");
    }
    assert_eq!(
        peak, 2,
        "two streams at once, the rest queued by the client"
    );
}

// 4. Deeply nested and oversized JSON.

/// Messages nested 100 000 deep (unbalanced, balanced, objects, and inside a call's
/// arguments), each with the JSON-RPC error code it gets: parsing stops at serde_json's
/// recursion limit or skips what it does not need, without recursing on the stack.
fn nested() -> Vec<(&'static str, String, i64)> {
    const DEPTH: usize = 100_000;
    let balanced = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    vec![
        ("unbalanced arrays", "[".repeat(DEPTH), -32700),
        // A batch whose one item is not a request.
        ("balanced arrays", balanced.clone(), -32600),
        (
            "nested objects",
            format!("{}1{}", r#"{"a":"#.repeat(DEPTH), "}".repeat(DEPTH)),
            -32600,
        ),
        (
            "nested arguments",
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"message":{balanced}}}}}}}"#
            ),
            -32602,
        ),
    ]
}

/// The answer to a nested message: the expected JSON-RPC error.
fn refused_cleanly(what: &str, v: &Value, code: i64) {
    assert_eq!(error_code(v), Some(code), "{what}: {v}");
}

#[test]
fn deeply_nested_and_oversized_json_over_http() {
    let srv = launch(Config {
        max_body: MAX_BODY,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    // 2025-03-26 takes batches, so a leading `[` reaches the parser.
    let (sid, _) = initialize(a, "2025-03-26");
    let h = [("Mcp-Session-Id", sid.as_str())];
    for (what, body, code) in nested() {
        let r = post(a, &h, &body);
        assert!(matches!(r.status, 200 | 400), "{what}: {}", r.status);
        refused_cleanly(what, &r.json(), code);
        let pong = post(a, &h, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(
            pong.json()["result"],
            json!({}),
            "{what}: the session goes on"
        );
    }
    // A chunked body has no length to refuse up front: it is cut off where it passes the cap.
    let mut s = connect(a);
    let head = post_head(
        a,
        &format!("Mcp-Session-Id: {sid}\r\nTransfer-Encoding: chunked\r\n"),
    );
    s.write_all(head.as_bytes()).unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, " ".repeat(64 * 1024));
    for _ in 0..2 * MAX_BODY / (64 * 1024) {
        if s.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    let r = response(&mut s);
    assert_eq!(r.status, 413);
    still_serves(a);
}

#[test]
fn deeply_nested_and_oversized_json_over_websocket() {
    let srv = launch(Config {
        max_body: MAX_BODY,
        ..Config::default()
    });
    let a = srv.mcp_addr;
    let mut ws = ws_over(connect(a), a);
    ws_init(&mut ws, "2025-03-26");
    for (what, msg, code) in nested() {
        ws_send(&mut ws, &msg);
        refused_cleanly(what, &ws_recv(&mut ws), code);
        ws_send(&mut ws, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(
            ws_recv(&mut ws)["result"],
            json!({}),
            "{what}: the session goes on"
        );
    }
    // The server refuses the frame from its header: it may close before the 2 MiB are written,
    // and then the write fails (broken pipe) and the close frame may be lost with the reset.
    match ws.send(Message::text(" ".repeat(2 * MAX_BODY))) {
        Ok(()) => match ws.read() {
            Ok(Message::Close(Some(f))) => assert_eq!(f.code, CloseCode::Size, "{f:?}"),
            Err(tokio_tungstenite::tungstenite::Error::Io(e))
                if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("expected a 1009 close, got {other:?}"),
        },
        Err(tokio_tungstenite::tungstenite::Error::Io(e)) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "{e}"
        ),
        Err(e) => panic!("sending the oversized frame: {e}"),
    }
    still_serves(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_and_oversized_json_over_stdio() {
    let mut c = Stdio::start(Config {
        max_body: MAX_BODY,
        ..Config::default()
    });
    c.send(&init_body("2025-03-26")).await;
    c.recv().await;
    for (what, msg, code) in nested() {
        c.send(&msg).await;
        refused_cleanly(what, &c.recv().await, code);
        c.ping().await;
    }
    c.send(&" ".repeat(2 * MAX_BODY)).await;
    let e = c.recv().await;
    assert_eq!(
        (e["id"].clone(), error_code(&e)),
        (Value::Null, Some(-32600)),
        "{e}"
    );
    c.ping().await;
}

// 5. Clients that stop reading their streams.

/// Sends one raw HTTP/1.1 request on `s` and reads nothing.
fn send_only(
    s: &mut TcpStream,
    a: SocketAddr,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    body: &str,
) {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {a}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
}

#[test]
fn an_sse_response_nobody_reads_is_cut_off_at_the_write_stall_limit() {
    let srv = launch(Config {
        write_stall_timeout: Duration::from_millis(500),
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let (sid, _) = initialize(a, "2025-06-18");
    // 1000 progress notifications, each carrying a 32 KiB token: a 32 MiB stream.
    let token = "t".repeat(32 * 1024);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "progress", "arguments": {"steps": 1000, "interval_ms": 0},
                                 "_meta": {"progressToken": token}}})
    .to_string();
    let mut s = tiny_window(a);
    let mut h: Vec<(&str, &str)> = MCP_HEADERS.to_vec();
    h.extend([
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ]);
    send_only(&mut s, a, "POST", "/mcp", &h, &body);
    wait_until("the call runs", || state.active_calls() == 1);
    // The stalled stream holds up nobody else.
    still_serves(a);
    // Its call is dropped with it once no byte could be written for the limit; the client
    // finds the stream cut short, without the response, and only what the buffers held.
    wait_until("the call dropped", || state.active_calls() == 0);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..text.len().min(200)]
    );
    assert!(!text.contains("done after"), "the response was not sent");
    assert!(
        got.len() < 16 << 20,
        "{} bytes: the stream ran ahead of its reader",
        got.len()
    );
}

#[test]
fn a_legacy_sse_stream_nobody_reads_ends_its_session() {
    use std::io::BufRead;
    let srv = launch(Config {
        write_stall_timeout: Duration::from_millis(500),
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let mut s = tiny_window(a);
    send_only(
        &mut s,
        a,
        "GET",
        "/sse",
        &[("Accept", "text/event-stream")],
        "",
    );
    let mut r = std::io::BufReader::new(s);
    let mut line = String::new();
    let endpoint = loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if let Some(e) = line.trim().strip_prefix("data: ") {
            break e.to_string();
        }
    };
    assert_eq!(state.legacy_sessions(), 1);
    let json_h = [("Content-Type", "application/json")];
    let send = |body: &str| crate::support::http(a, "POST", &endpoint, &json_h, body.as_bytes());
    assert_eq!(send(&init_body("2024-11-05")).status, 202);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    // 1 MiB responses for a stream nobody reads, until the server gives up on it: the
    // session ends with its stream, and the next message to it finds none.
    let mut sent = 0;
    while send(&call(sent + 1, "payload", json!({"bytes": 1 << 20}))).status == 202 {
        sent += 1;
        assert!(sent < 1000, "the stalled stream was never closed");
    }
    assert!(
        sent > 4,
        "ended after {sent} calls: before its buffers could fill"
    );
    wait_until("the session ended with its stream", || {
        state.legacy_sessions() == 0
    });
    assert_eq!(
        send(r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#).status,
        404
    );
    wait_until("the calls let go", || state.active_calls() == 0);
    still_serves(a);
    drop(r);
}

#[test]
fn a_websocket_nobody_reads_is_closed_at_the_write_stall_limit() {
    let srv = launch(Config {
        write_stall_timeout: Duration::from_millis(500),
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let mut ws = ws_over(tiny_window(a), a);
    ws_init(&mut ws, "2025-06-18");
    for id in 1..=40 {
        ws_send(&mut ws, &call(id, "payload", json!({"bytes": 1 << 20})));
    }
    wait_until("the server closed the WebSocket", || {
        state.open_connections() == 0
    });
    wait_until("the calls let go", || state.active_calls() == 0);
    still_serves(a);
    drop(ws);
}

// 6. Sessions never closed.

#[test]
fn a_flood_of_sessions_is_capped_and_reaped() {
    let srv = launch(Config {
        max_sessions: 50,
        session_idle: Duration::from_secs(2),
        ..Config::default()
    });
    let (a, state) = (srv.mcp_addr, srv.state().clone());
    let mut first = String::new();
    for i in 0..50 {
        let (sid, r) = initialize(a, "2025-06-18");
        assert_eq!(r.status, 200, "session {i}");
        if i == 0 {
            first = sid;
        }
    }
    let (_, r) = initialize(a, "2025-06-18");
    assert_eq!(r.status, 503, "the 51st session");
    assert_eq!(r.header("retry-after"), Some("1"), "after the next reaping");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many sessions (this server keeps 50"),
        "{}",
        r.json()
    );
    assert_eq!(state.open_sessions(), 50);
    // Never deleted, the sessions are ended once idle for the limit.
    wait_until("idle sessions reaped", || state.open_sessions() == 0);
    let h = [
        ("Mcp-Session-Id", first.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    assert_eq!(
        post(a, &h, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status,
        404,
        "a reaped session is gone: the client initializes again"
    );
    still_serves(a);
}
