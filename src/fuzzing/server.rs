//! The reference server's request handling: raw bytes over a real TCP connection (HTTP, and
//! frames after a WebSocket upgrade) to one server on 127.0.0.1:0 started on first use, and
//! lines to `serve_stdio` over an in-memory duplex. No panic on any server thread, answers that
//! are well-formed, a JSON-RPC parse error for every message that is not JSON, and a server
//! that still answers a valid request afterwards.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket, WebSocketConfig};

use crate::protocol::jsonrpc::code;
use crate::server::{Config, serve, serve_stdio};
use crate::transport::ws_frames::{WsError, WsEvent, WsReader};

/// Every thread the server runs on is named so (its panics are counted).
const THREAD: &str = "mcpbench-fuzz-server";
/// Only a guard against a hang: an answer normally takes milliseconds.
const HANG: Duration = Duration::from_secs(20);
/// The server's bound on a request body, a WebSocket message and (stdio) a line.
const MAX_BODY: usize = 64 * 1024;
const STDIO_MAX_LINE: usize = 512;
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A 2026-07-28 request any state of the server answers (no session needed).
pub const MODERN_PING: &str = r#"{"jsonrpc":"2.0","id":"alive","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics on the server's threads (a panicking connection task is caught by tokio, so
/// it would go unnoticed), then lets the previous hook report it (a fuzzer's aborts).
fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(THREAD))
            {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

fn config() -> Config {
    Config {
        max_body: MAX_BODY,
        drain: Duration::from_millis(100),
        ..Config::default()
    }
}

/// The server every HTTP and WebSocket check talks to: started on first use, on its own
/// runtime threads, for the life of the process.
pub fn server_addr() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        watch_panics();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        std::thread::Builder::new()
            .name(THREAD.into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name(THREAD)
                    .enable_all()
                    .build()
                    .expect("server runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    serve(listener, config(), std::future::pending()).await;
                });
            })
            .expect("server thread");
        addr
    })
}

/// Runs `check` and fails if any server thread panicked meanwhile.
fn no_panic<T>(check: impl FnOnce() -> T) -> T {
    watch_panics();
    let before = PANICS.load(Ordering::SeqCst);
    let out = check();
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        before,
        "the server panicked (its message is above)"
    );
    out
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the server");
    s.set_nodelay(true).expect("TCP_NODELAY");
    s.set_read_timeout(Some(HANG)).expect("read timeout");
    s
}

/// Reads until EOF: the bytes, and whether the connection was reset (the tail may be lost:
/// a server that stops reading closes with unread input, which resets the connection).
fn read_all(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                // Only an open event stream may stay open.
                let streaming = head(&out).is_some_and(|(status, h)| {
                    status == 200 && h.to_ascii_lowercase().contains("text/event-stream")
                });
                assert!(
                    streaming,
                    "the server neither answered nor closed within {HANG:?}: {}",
                    super::show(&out)
                );
                return (out, true);
            }
            Err(_) => return (out, true),
        }
    }
}

/// The status and header text of a complete HTTP/1.x response head at the start of `b`.
fn head(b: &[u8]) -> Option<(u16, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(b) {
        Ok(httparse::Status::Complete(n)) => {
            Some((resp.code?, String::from_utf8_lossy(&b[..n]).into_owned()))
        }
        _ => None,
    }
}

/// A request the server must answer 200 with a result, on a connection of its own.
fn assert_alive(addr: SocketAddr) {
    let mut s = connect(addr);
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n\
         Content-Length: {}\r\n\r\n{MODERN_PING}",
        MODERN_PING.len()
    );
    s.write_all(req.as_bytes())
        .expect("send the liveness request");
    let (answer, _) = read_all(&mut s);
    let text = String::from_utf8_lossy(&answer);
    assert!(
        head(&answer).is_some_and(|(status, _)| status == 200)
            && text.contains(r#""id":"alive""#)
            && text.contains(r#""result""#),
        "the server no longer answers a valid request: {text}"
    );
}

/// `server_http_with` with cut points derived from the data.
pub fn server_http(data: &[u8]) {
    server_http_with(data, &super::cuts_from(data));
}

/// Sends `data` as it is (written in pieces cut at `cuts`) on one connection, then closes the
/// sending side: the server answers with well-formed HTTP/1.1 (or nothing), never a 500,
/// without panicking, and still answers a valid request afterwards.
pub fn server_http_with(data: &[u8], cuts: &[usize]) {
    let addr = server_addr();
    no_panic(|| {
        let mut s = connect(addr);
        for piece in super::split(data, cuts) {
            if s.write_all(piece).is_err() {
                break; // the server closed already
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        let (answer, reset) = read_all(&mut s);
        if !answer.is_empty() && !data.starts_with(H2_PREFACE) {
            match head(&answer) {
                Some((status, _)) => assert!(
                    (100..600).contains(&status) && status != 500,
                    "status {status} for {}",
                    super::show(data)
                ),
                None => assert!(
                    reset,
                    "not an HTTP/1.1 response: {} for {}",
                    super::show(&answer),
                    super::show(data)
                ),
            }
        }
        assert_alive(addr);
    });
}

/// `server_ws_with` with cut points derived from the data.
pub fn server_ws(data: &[u8]) {
    server_ws_with(data, &super::cuts_from(data));
}

/// Upgrades a connection at `/ws`, sends `frames` as they are (in pieces cut at `cuts`), then
/// closes the sending side. The server's frames must read cleanly (text frames of JSON-RPC,
/// pongs, a close), every text message tungstenite (the server's own frame coder) delivers
/// before the stream breaks that is not JSON must get a `-32700` error, no server thread may
/// panic, and the server must still answer afterwards.
pub fn server_ws_with(frames: &[u8], cuts: &[usize]) {
    let addr = server_addr();
    no_panic(|| {
        let mut s = connect(addr);
        s.write_all(
            b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\
              Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n",
        )
        .expect("send the upgrade request");
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut byte).expect("the upgrade answer");
            assert!(n == 1, "the server closed during the upgrade");
            answer.push(byte[0]);
        }
        assert!(
            head(&answer).is_some_and(|(status, _)| status == 101),
            "upgrade refused: {}",
            super::show(&answer)
        );
        for piece in super::split(frames, cuts) {
            if s.write_all(piece).is_err() {
                break;
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        let (answer, reset) = read_all(&mut s);

        let (texts, end) = server_frames(&answer);
        assert!(
            end == "closed" || reset && end == "truncated",
            "the server's frames end in {end}: {answer:02x?} for {frames:02x?}"
        );
        let parse_errors = texts.iter().filter(|m| is_parse_error(m)).count();
        let (min, max) = expected_parse_errors(&delivered_texts(frames));
        assert!(
            parse_errors <= max && (reset || parse_errors >= min),
            "{parse_errors} parse errors for between {min} and {max} messages that are not JSON: \
             {frames:02x?}"
        );
        assert_alive(addr);
    });
}

/// The server's frames as the client reads them: its text messages (each JSON-RPC) and how the
/// stream ended.
fn server_frames(answer: &[u8]) -> (Vec<Value>, &'static str) {
    super::block_on(async {
        let mut reader = WsReader::new(super::Script::new(answer, &[]));
        let mut texts = Vec::new();
        loop {
            match reader.next().await {
                Ok(WsEvent::Text(t)) => {
                    let v: Value = serde_json::from_slice(t).unwrap_or_else(|e| {
                        panic!("a server text frame is not JSON ({e}): {}", super::show(t))
                    });
                    assert!(v.is_object() || v.is_array(), "not a JSON-RPC message: {v}");
                    texts.push(v);
                }
                Ok(WsEvent::Pong | WsEvent::Close { .. }) => {}
                Ok(WsEvent::Ping(_)) => panic!("the server pings"),
                Err(WsError::Closed) => return (texts, "closed"),
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return (texts, "truncated");
                }
                Err(e) => panic!("the server's frames break the protocol: {e}"),
            }
        }
    })
}

/// The text messages tungstenite in the server's role (with the server's bounds) delivers from
/// `frames` before the stream breaks, is closed, or carries a binary message (which the
/// server answers by closing).
fn delivered_texts(frames: &[u8]) -> Vec<Vec<u8>> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_BODY))
        .max_frame_size(Some(MAX_BODY));
    let mut ws = WebSocket::from_raw_socket(super::Bytes::new(frames), Role::Server, Some(config));
    let mut texts = Vec::new();
    loop {
        match ws.read() {
            Ok(Message::Text(t)) => texts.push(t.as_bytes().to_vec()),
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            Ok(Message::Binary(_) | Message::Close(_) | Message::Frame(_)) | Err(_) => {
                return texts;
            }
        }
    }
}

/// JSON text: UTF-8 (serde skips unread members without checking them) that parses.
fn is_json(m: &[u8]) -> bool {
    std::str::from_utf8(m).is_ok() && serde_json::from_slice::<IgnoredAny>(m).is_ok()
}

/// How many of these messages must, and may, be answered with a parse error: those that are
/// not JSON must (unless they look like a batch, which is answered as a whole), batches may.
fn expected_parse_errors(messages: &[Vec<u8>]) -> (usize, usize) {
    let (mut must, mut may) = (0, 0);
    for m in messages {
        if m.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            may += 1;
        } else if !is_json(m) {
            must += 1;
        }
    }
    (must, must + may)
}

fn error_code(v: &Value) -> Option<i64> {
    v.get("error")?.get("code")?.as_i64()
}

fn is_parse_error(v: &Value) -> bool {
    error_code(v) == Some(code::PARSE_ERROR) && v.get("id") == Some(&Value::Null)
}

/// `server_stdio_with` with cut points derived from the data.
pub fn server_stdio(data: &[u8]) {
    server_stdio_with(data, &super::cuts_from(data));
}

/// Serves one stdio session (lines of at most 512 bytes) over an in-memory duplex fed `input`
/// in pieces cut at `cuts`, then a line end and a `ping`, then EOF. Every output line is one
/// JSON-RPC message; every line that is not JSON gets a `-32700` error with id null and every
/// line over the bound or JSON but not an object a `-32600` (blank lines are skipped); the
/// `ping` is answered; the session ends cleanly at EOF; no panic.
pub fn server_stdio_with(input: &[u8], cuts: &[usize]) {
    let pieces: Vec<Vec<u8>> = super::split(input, cuts)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect();
    let out = no_panic(|| {
        let session = std::thread::Builder::new()
            .name(format!("{THREAD}-stdio"))
            .spawn(move || stdio_session(pieces))
            .expect("stdio thread");
        session
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });

    let mut input_lines = input.to_vec();
    input_lines.push(b'\n');
    let want = classify_lines(&input_lines);
    let text = String::from_utf8(out).expect("the server writes UTF-8");
    let mut parse_errors = 0;
    let mut invalid = 0;
    let mut pinged = false;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("an output line is not JSON ({e}): {line:?}"));
        assert!(v.is_object() || v.is_array(), "not JSON-RPC: {line}");
        if v.is_object() {
            assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC 2.0: {line}");
        }
        parse_errors += usize::from(is_parse_error(&v));
        invalid += usize::from(
            error_code(&v) == Some(code::INVALID_REQUEST) && v.get("id") == Some(&Value::Null),
        );
        pinged |= v["id"] == "fuzz-final" && v["result"].is_object();
    }
    assert!(
        (want.parse_errors..=want.parse_errors + want.batches).contains(&parse_errors),
        "{parse_errors} parse errors for {} lines that are not JSON (and {} batches): {}",
        want.parse_errors,
        want.batches,
        super::show(input)
    );
    assert!(
        invalid >= want.invalid,
        "{invalid} invalid-request errors with id null for {} lines over the bound or not \
         objects: {}",
        want.invalid,
        super::show(input)
    );
    assert!(pinged, "the final ping was not answered: {text}");
}

/// The session itself, on a runtime of its own: what the server wrote.
fn stdio_session(pieces: Vec<Vec<u8>>) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("stdio runtime");
    rt.block_on(async move {
        let (mut to_server, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, mut from_server) = tokio::io::duplex(64 * 1024);
        let stdio_config = Config {
            max_body: STDIO_MAX_LINE,
            ..config()
        };
        let served = tokio::spawn(serve_stdio(
            server_in,
            server_out,
            stdio_config,
            std::future::pending(),
        ));
        let write = async move {
            for piece in pieces {
                to_server.write_all(&piece).await?;
            }
            to_server
                .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":\"fuzz-final\",\"method\":\"ping\"}\n")
                .await
        };
        let read = async move {
            let mut out = Vec::new();
            from_server.read_to_end(&mut out).await.map(|_| out)
        };
        let (written, out) = tokio::time::timeout(HANG, async { tokio::join!(write, read) })
            .await
            .expect("the stdio session hung");
        written.expect("the server reads all its input");
        let served = tokio::time::timeout(HANG, served)
            .await
            .expect("the session ends at EOF");
        served
            .expect("the session task")
            .expect("the session ends without error");
        out.expect("the server's output")
    })
}

/// What the server must answer to some lines of an input.
#[derive(Debug, Default)]
struct Expected {
    /// Lines that are not JSON (and not batches): one `-32700` each.
    parse_errors: usize,
    /// Lines that start like a batch: answered as a whole, a parse error among the answers.
    batches: usize,
    /// Lines over the bound, and JSON that is not an object: one `-32600` with id null each.
    invalid: usize,
}

/// The server's line rules (mcp-protocol.md §3.1 and `server::stdio`): lines end at LF, a line
/// over the bound (its LF counted, and a CR before it) is refused whole, trailing CRs and LFs
/// are dropped, blank lines skipped.
fn classify_lines(input: &[u8]) -> Expected {
    let mut want = Expected::default();
    for raw in input.split_inclusive(|&b| b == b'\n') {
        if raw.len() > STDIO_MAX_LINE + 2 {
            want.invalid += 1;
            continue;
        }
        let end = raw
            .iter()
            .rposition(|&b| b != b'\n' && b != b'\r')
            .map_or(0, |i| i + 1);
        let line = &raw[..end];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            want.batches += 1;
        } else if !is_json(line) {
            want.parse_errors += 1;
        } else if !serde_json::from_slice::<Value>(line).is_ok_and(|v| v.is_object()) {
            want.invalid += 1;
        }
    }
    want
}
