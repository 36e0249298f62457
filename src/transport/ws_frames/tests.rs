//! The WebSocket client against tungstenite's server, hand-made handshakes and frame streams cut
//! at every point.

use super::*;

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Bytes, Message};

type Peer = tungstenite::WebSocket<std::net::TcpStream>;

/// How the peer answers the upgrade request.
#[derive(Clone, Copy)]
enum Answer {
    /// Accept, selecting this subprotocol.
    Select(&'static str),
    /// Accept without selecting a subprotocol.
    Omit,
    /// Refuse with this status.
    Reject(u16),
}

/// A real peer: tungstenite's server accepting one connection on port 0, on a thread. (Its
/// synchronous API: driving tokio-tungstenite's stream needs the `futures` traits, which
/// this crate does not depend on; the protocol engine is the same.) `behaviour` gets the
/// socket and the request's `Authorization` header.
fn spawn_peer<F>(answer: Answer, behaviour: F) -> (SocketAddr, JoinHandle<()>)
where
    F: FnOnce(&mut Peer, Option<String>) + Send + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut auth = None;
        // The signature is tungstenite's.
        #[allow(clippy::result_large_err)]
        let callback = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
            let offered = req
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            assert!(
                offered.split(',').any(|p| p.trim() == "mcp"),
                "client offered {offered:?}"
            );
            auth = req
                .headers()
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned());
            match answer {
                Answer::Select(p) => {
                    resp.headers_mut()
                        .insert("sec-websocket-protocol", http::HeaderValue::from_static(p));
                    Ok(resp)
                }
                Answer::Omit => Ok(resp),
                Answer::Reject(status) => {
                    Err(http::Response::builder().status(status).body(None).unwrap())
                }
            }
        };
        if let Ok(mut ws) = tungstenite::accept_hdr(tcp, callback) {
            behaviour(&mut ws, auth);
        }
    });
    (addr, handle)
}

/// Echoes text messages until the connection ends.
fn echo(ws: &mut Peer) {
    loop {
        match ws.read() {
            Ok(Message::Text(t)) => ws.send(Message::Text(t)).unwrap(),
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Waits for the peer thread without blocking the runtime, re-raising its panics.
async fn join(peer: JoinHandle<()>) {
    if let Err(panic) = tokio::task::spawn_blocking(move || peer.join())
        .await
        .unwrap()
    {
        std::panic::resume_unwind(panic);
    }
}

type Client = (WsReader<OwnedReadHalf>, WsWriter<OwnedWriteHalf>);

async fn connect(addr: SocketAddr) -> Result<Client, WsError> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (r, w) = tcp.into_split();
    let host = addr.to_string();
    handshake(r, w, &host, "/mcp", b"Authorization: Bearer t\r\n", "mcp").await
}

fn text(ev: WsEvent<'_>) -> Vec<u8> {
    match ev {
        WsEvent::Text(t) => t.to_vec(),
        other => panic!("expected text, got {other:?}"),
    }
}

/// One round of `n` messages: a task writes (singly and in batches) while this one reads.
async fn echo_round(
    reader: &mut WsReader<OwnedReadHalf>,
    mut writer: WsWriter<OwnedWriteHalf>,
    n: usize,
) -> WsWriter<OwnedWriteHalf> {
    let msg = |i: usize| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call"}}"#);
    let sender = tokio::spawn(async move {
        let mut batch = Vec::new();
        for i in 0..n {
            if i % 3 == 0 {
                writer.send_text(msg(i).as_bytes()).await.unwrap();
            } else {
                writer.encode_text(msg(i).as_bytes(), &mut batch);
                if i % 3 == 2 {
                    writer.write_raw(&batch).await.unwrap();
                    batch.clear();
                }
            }
        }
        writer.write_raw(&batch).await.unwrap();
        writer
    });
    for i in 0..n {
        assert_eq!(text(reader.next().await.unwrap()), msg(i).as_bytes());
    }
    sender.await.unwrap()
}

#[tokio::test]
async fn echoes_many_messages_through_a_real_server_without_reallocating() {
    let (addr, peer) = spawn_peer(Answer::Select("mcp"), |ws, auth| {
        assert_eq!(auth.as_deref(), Some("Bearer t"));
        echo(ws);
    });
    let (mut reader, writer) = connect(addr).await.unwrap();
    let mut writer = echo_round(&mut reader, writer, 300).await;

    // After warm-up the buffers stay where they are.
    let read_buf = (reader.buf.as_ptr(), reader.buf.len());
    let write_cap = writer.buf.capacity();
    writer = echo_round(&mut reader, writer, 300).await;
    assert_eq!((reader.buf.as_ptr(), reader.buf.len()), read_buf);
    assert_eq!(writer.buf.capacity(), write_cap);

    writer.send_close(1000, "done").await.unwrap();
    assert_eq!(
        reader.next().await.unwrap(),
        WsEvent::Close { code: Some(1000) }
    );
    assert!(matches!(reader.next().await, Err(WsError::Closed)));
    drop((reader, writer));
    join(peer).await;
}

#[tokio::test]
async fn large_and_empty_payloads_round_trip() {
    let (addr, peer) = spawn_peer(Answer::Select("mcp"), |ws, _| echo(ws));
    let (mut reader, mut writer) = connect(addr).await.unwrap();
    // Each length encoding on both sides of its boundary.
    for len in [0, 1, 125, 126, 65_535, 65_536, 300_000] {
        let payload: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        writer.send_text(&payload).await.unwrap();
        let echoed = text(reader.next().await.unwrap());
        assert_eq!(echoed.len(), len);
        assert!(echoed == payload, "payload of {len} bytes differs");
    }
    assert!(reader.buf.len() >= 300_000);
    drop((reader, writer));
    join(peer).await;
}

#[tokio::test]
async fn server_ping_gets_a_pong_the_server_sees() {
    let (addr, peer) = spawn_peer(Answer::Select("mcp"), |ws, _| {
        ws.send(Message::Ping(Bytes::from_static(b"hb"))).unwrap();
        match ws.read().unwrap() {
            Message::Pong(p) => assert_eq!(&p[..], b"hb"),
            other => panic!("expected a pong, got {other:?}"),
        }
        ws.send(Message::text("pong seen")).unwrap();
        echo(ws);
    });
    let (mut reader, mut writer) = connect(addr).await.unwrap();
    match reader.next().await.unwrap() {
        WsEvent::Ping(p) => {
            assert_eq!(p, b"hb");
            writer.send_pong(p).await.unwrap();
        }
        other => panic!("expected a ping, got {other:?}"),
    }
    assert_eq!(text(reader.next().await.unwrap()), b"pong seen");
    drop((reader, writer));
    join(peer).await;
}

#[tokio::test]
async fn server_initiated_close_reports_its_code() {
    let (addr, peer) = spawn_peer(Answer::Select("mcp"), |ws, _| {
        ws.close(Some(CloseFrame {
            code: CloseCode::from(4001),
            reason: "bye".into(),
        }))
        .unwrap();
        match ws.read().unwrap() {
            Message::Close(Some(frame)) => assert_eq!(u16::from(frame.code), 4001),
            other => panic!("expected the close reply, got {other:?}"),
        }
    });
    let (mut reader, mut writer) = connect(addr).await.unwrap();
    assert_eq!(
        reader.next().await.unwrap(),
        WsEvent::Close { code: Some(4001) }
    );
    writer.send_close(4001, "").await.unwrap();
    assert!(matches!(reader.next().await, Err(WsError::Closed)));
    join(peer).await;
}

#[tokio::test]
async fn refused_or_wrong_subprotocol_fails_the_handshake() {
    for (answer, want) in [
        (Answer::Omit, "server did not select the subprotocol"),
        (
            Answer::Select("other"),
            "server selected another subprotocol",
        ),
    ] {
        let (addr, peer) = spawn_peer(answer, |_, _| {});
        match connect(addr).await {
            Err(WsError::Handshake(msg)) => assert_eq!(msg, want),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("handshake accepted"),
        }
        join(peer).await;
    }
}

#[tokio::test]
async fn refused_upgrade_reports_the_status() {
    let (addr, peer) = spawn_peer(Answer::Reject(401), |_, _| {});
    assert!(matches!(connect(addr).await, Err(WsError::Status(401))));
    join(peer).await;
}

/// A raw fake server: reads the request head and answers with `respond(key)`.
async fn fake_server(respond: fn(&[u8]) -> Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut chunk = [0u8; 1024];
        while !head.ends_with(b"\r\n\r\n") {
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "client closed during its request");
            head.extend_from_slice(&chunk[..n]);
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(&head).unwrap().is_complete());
        let key = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-key"))
            .map(|h| h.value.to_vec())
            .unwrap();
        tcp.write_all(&respond(&key)).await.unwrap();
        // Hold the connection until the client is done.
        while tcp.read(&mut chunk).await.is_ok_and(|n| n > 0) {}
    });
    addr
}

fn upgrade_head(accept: &[u8]) -> Vec<u8> {
    let mut head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: mcp\r\nSec-WebSocket-Accept: ".to_vec();
    head.extend_from_slice(accept);
    head.extend_from_slice(b"\r\n\r\n");
    head
}

#[tokio::test]
async fn wrong_accept_key_fails_the_handshake() {
    let addr = fake_server(|_| upgrade_head(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")).await;
    assert!(matches!(
        connect(addr).await,
        Err(WsError::Handshake("wrong Sec-WebSocket-Accept"))
    ));
}

#[tokio::test]
async fn non_101_status_is_reported() {
    let addr =
        fake_server(|_| b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!".to_vec()).await;
    assert!(matches!(connect(addr).await, Err(WsError::Status(404))));
}

#[tokio::test]
async fn frames_sent_with_the_101_head_are_kept() {
    let addr = fake_server(|key| {
        let mut out = upgrade_head(derive_accept_key(key).as_bytes());
        out.extend_from_slice(&frame(0x81, b"early"));
        out.extend_from_slice(&frame(0x89, b"p"));
        out
    })
    .await;
    let (mut reader, _writer) = connect(addr).await.unwrap();
    assert_eq!(text(reader.next().await.unwrap()), b"early");
    assert_eq!(reader.next().await.unwrap(), WsEvent::Ping(b"p"));
}

/// An unmasked frame as a server sends it, with the shortest length encoding.
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![b0];
    match payload.len() {
        n @ 0..=125 => out.push(n as u8),
        n @ 126..=0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// Hands out its bytes `step` at a time, then EOF.
struct Trickle {
    data: Vec<u8>,
    pos: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self
            .step
            .min(self.data.len() - self.pos)
            .min(buf.remaining());
        let start = self.pos;
        buf.put_slice(&self.data[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Text(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    Close(Option<u16>),
}

/// Every event from `data` read `step` bytes at a time, and the error that ended them.
async fn events_max(data: &[u8], step: usize, max: usize) -> (Vec<Ev>, WsError) {
    let mut reader = WsReader::new(Trickle {
        data: data.to_vec(),
        pos: 0,
        step,
    });
    reader.set_max_message(max);
    let mut out = Vec::new();
    loop {
        match reader.next().await {
            Ok(WsEvent::Text(t)) => out.push(Ev::Text(t.to_vec())),
            Ok(WsEvent::Ping(p)) => out.push(Ev::Ping(p.to_vec())),
            Ok(WsEvent::Pong) => out.push(Ev::Pong),
            Ok(WsEvent::Close { code }) => out.push(Ev::Close(code)),
            Err(e) => {
                // Poisoned after an error or a close.
                assert!(matches!(reader.next().await, Err(WsError::Closed)));
                return (out, e);
            }
        }
    }
}

async fn events(data: &[u8], step: usize) -> (Vec<Ev>, WsError) {
    events_max(data, step, DEFAULT_MAX_MESSAGE).await
}

/// The protocol error `data` ends in, after any events before it.
async fn protocol_error(data: &[u8]) -> &'static str {
    match events(data, 64).await.1 {
        WsError::Protocol(msg) => msg,
        e => panic!("expected a protocol error, got {e:?}"),
    }
}

fn concat(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.concat()
}

#[tokio::test]
async fn every_split_of_a_frame_stream_gives_the_same_events() {
    let long: Vec<u8> = (0..300).map(|i| b'0' + (i % 10) as u8).collect();
    let stream = concat(&[
        frame(0x01, b"hel"),
        frame(0x89, b"p1"),
        frame(0x00, b"lo "),
        frame(0x8A, b""),
        frame(0x80, "w\u{f6}rld".as_bytes()),
        frame(0x81, b""),
        frame(0x81, &long),
        // A multi-byte character split across fragments is valid: UTF-8 is checked per
        // message.
        frame(0x01, &[0xC3]),
        frame(0x80, &[0xA9]),
        frame(0x88, &[0x03, 0xE8, b'o', b'k']),
        frame(0x81, b"after close: never read"),
    ]);
    let want = vec![
        Ev::Ping(b"p1".to_vec()),
        Ev::Pong,
        Ev::Text("hello w\u{f6}rld".as_bytes().to_vec()),
        Ev::Text(Vec::new()),
        Ev::Text(long.clone()),
        Ev::Text("\u{e9}".as_bytes().to_vec()),
        Ev::Close(Some(1000)),
    ];
    for step in 1..=stream.len() {
        let (got, end) = events(&stream, step).await;
        assert_eq!(got, want, "step {step}");
        assert!(matches!(end, WsError::Closed), "step {step}: {end:?}");
    }
}

#[tokio::test]
async fn large_frames_and_many_small_ones_survive_buffer_growth_and_compaction() {
    let big: Vec<u8> = (0..200_000).map(|i| b'a' + (i % 26) as u8).collect();
    let mut frames = vec![frame(0x81, &big)];
    let small: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!(r#"{{"id":{i}}}"#).into_bytes())
        .collect();
    frames.extend(small.iter().map(|m| frame(0x81, m)));
    // A fragmented message bigger than the read buffer.
    frames.push(frame(0x01, &big[..100_000]));
    frames.push(frame(0x80, &big[100_000..]));
    let stream = concat(&frames);
    let mut want = vec![Ev::Text(big.clone())];
    want.extend(small.into_iter().map(Ev::Text));
    want.push(Ev::Text(big));
    for step in [1, 7, 1000, 4096, 100_000] {
        let (got, end) = events(&stream, step).await;
        assert!(got == want, "step {step}");
        assert!(matches!(end, WsError::Closed), "step {step}: {end:?}");
    }
}

#[tokio::test]
async fn protocol_violations_are_errors() {
    let cases: [(Vec<u8>, &str); 12] = [
        (
            {
                let mut f = vec![0x81, 0x80 | 2, 1, 2, 3, 4];
                f.extend_from_slice(&[b'h' ^ 1, b'i' ^ 2]);
                f
            },
            "masked frame from the server",
        ),
        (
            frame(0xC1, b"rsv1"),
            "reserved bits set without an extension",
        ),
        (
            frame(0xA1, b"rsv2"),
            "reserved bits set without an extension",
        ),
        (
            frame(0x89, &[0; 126]),
            "control frame payload over 125 bytes",
        ),
        (frame(0x09, b"no fin"), "fragmented control frame"),
        (
            frame(0x80, b"orphan"),
            "continuation frame without a started message",
        ),
        (
            concat(&[frame(0x01, b"a"), frame(0x81, b"b")]),
            "new message inside a fragmented message",
        ),
        (frame(0x82, b"bin"), "binary message"),
        (
            concat(&[frame(0x01, b"a"), frame(0x02, b"b")]),
            "binary message",
        ),
        (frame(0x83, b""), "reserved opcode"),
        (frame(0x8B, b""), "reserved opcode"),
        (
            vec![0x81, 127, 0x80, 0, 0, 0, 0, 0, 0, 1],
            "64-bit payload length with the high bit set",
        ),
    ];
    for (data, want) in cases {
        assert_eq!(protocol_error(&data).await, want, "{data:02x?}");
    }
}

#[tokio::test]
async fn invalid_text_and_close_payloads_are_errors() {
    let invalid = "text message is not valid UTF-8";
    assert_eq!(protocol_error(&frame(0x81, &[b'a', 0xFF])).await, invalid);
    // A truncated character at the end of a fragmented message.
    let split = concat(&[frame(0x01, b"ok"), frame(0x80, &[0xC3])]);
    assert_eq!(protocol_error(&split).await, invalid);

    assert_eq!(
        protocol_error(&frame(0x88, &[3])).await,
        "close frame with a 1-byte payload"
    );
    assert_eq!(
        protocol_error(&frame(0x88, &1005u16.to_be_bytes())).await,
        "invalid close code"
    );
    assert_eq!(
        protocol_error(&frame(0x88, &[0x03, 0xE8, 0xFF])).await,
        "close reason is not valid UTF-8"
    );
    let (got, _) = events(&frame(0x88, b""), 64).await;
    assert_eq!(got, [Ev::Close(None)]);
}

#[tokio::test]
async fn messages_over_the_limit_are_too_large() {
    let (got, end) = events_max(&frame(0x81, &[b'x'; 10]), 64, 10).await;
    assert_eq!(got, [Ev::Text(vec![b'x'; 10])]);
    assert!(matches!(end, WsError::Closed));

    let (_, end) = events_max(&frame(0x81, &[b'x'; 11]), 64, 10).await;
    assert!(matches!(end, WsError::TooLarge(11)), "{end:?}");

    let fragments = concat(&[frame(0x01, &[b'x'; 6]), frame(0x80, &[b'x'; 6])]);
    let (_, end) = events_max(&fragments, 64, 10).await;
    assert!(matches!(end, WsError::TooLarge(12)), "{end:?}");

    // Rejected from the header alone, before any of the payload arrives.
    let (_, end) = events(&[0x81, 127, 0, 0, 0, 1, 0, 0, 0, 0], 64).await;
    assert!(matches!(end, WsError::TooLarge(0x1_0000_0000)), "{end:?}");
}

#[tokio::test]
async fn eof_mid_frame_is_unexpected_and_between_frames_is_closed() {
    let mut data = frame(0x81, b"whole");
    let (got, end) = events(&data, 3).await;
    assert_eq!(got, [Ev::Text(b"whole".to_vec())]);
    assert!(matches!(end, WsError::Closed));

    data.extend_from_slice(&frame(0x81, b"truncated")[..6]);
    let (got, end) = events(&data, 3).await;
    assert_eq!(got, [Ev::Text(b"whole".to_vec())]);
    assert!(
        matches!(&end, WsError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof),
        "{end:?}"
    );
}

/// Decodes one client frame from the start of `b`: (opcode, mask key, unmasked payload,
/// frame length).
fn decode_client_frame(b: &[u8]) -> (u8, [u8; 4], Vec<u8>, usize) {
    assert_eq!(b[0] & 0xF0, 0x80, "FIN set, RSV clear");
    assert_eq!(b[1] & 0x80, 0x80, "client frames are masked");
    let (len, mut at) = match b[1] & 0x7F {
        126 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 => (
            u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    // Shortest length encoding, as RFC 6455 §5.2 requires.
    match len {
        0..=125 => assert_eq!(at, 2),
        126..=0xFFFF => assert_eq!(at, 4),
        _ => assert_eq!(at, 10),
    }
    let key: [u8; 4] = b[at..at + 4].try_into().unwrap();
    at += 4;
    let payload = b[at..at + len]
        .iter()
        .enumerate()
        .map(|(i, x)| x ^ key[i % 4])
        .collect();
    (b[0] & 0x0F, key, payload, at + len)
}

#[tokio::test]
async fn encoded_frames_unmask_to_the_payload_with_fresh_keys() {
    let mut writer = WsWriter::new(tokio::io::sink());
    let payloads: Vec<Vec<u8>> = (0..=20)
        .chain([125, 126, 127, 65_535, 65_536, 100_003])
        .map(|n| (0..n).map(|i| (i * 7 % 251) as u8).collect())
        .collect();
    let mut out = Vec::new();
    for p in &payloads {
        writer.encode_text(p, &mut out);
    }
    let mut keys = Vec::new();
    let mut at = 0;
    for p in &payloads {
        let (opcode, key, payload, used) = decode_client_frame(&out[at..]);
        assert_eq!(opcode, OP_TEXT);
        assert!(&payload == p, "payload of {} bytes", p.len());
        keys.push(key);
        at += used;
    }
    assert_eq!(at, out.len());
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), payloads.len(), "mask keys repeat");
}

#[tokio::test]
async fn control_frames_are_encoded_and_bounded() {
    let (client, mut server) = tokio::io::duplex(4096);
    let mut writer = WsWriter::new(client);
    writer.send_pong(b"hb").await.unwrap();
    writer.send_close(4001, "bye").await.unwrap();
    assert!(matches!(
        writer.send_pong(&[0; 126]).await,
        Err(WsError::Protocol(_))
    ));
    assert!(matches!(
        writer.send_close(1000, &"x".repeat(124)).await,
        Err(WsError::Protocol(_))
    ));
    let (_, mut framer) = writer.into_parts();
    let mut wire = Vec::new();
    server.read_to_end(&mut wire).await.unwrap();
    let (opcode, _, payload, used) = decode_client_frame(&wire);
    assert_eq!((opcode, &payload[..]), (OP_PONG, &b"hb"[..]));
    let (opcode, _, payload, rest) = decode_client_frame(&wire[used..]);
    assert_eq!((opcode, &payload[..]), (OP_CLOSE, &b"\x0f\xa1bye"[..]));
    assert_eq!(used + rest, wire.len());

    // The buffer-less framer, as `mux`'s combining writer uses it.
    let mut out = Vec::new();
    framer.pong(&[7; 200], &mut out);
    framer.close(1001, &mut out);
    super::super::mux::Framer::frame(&mut framer, b"{}", &mut out);
    let (opcode, _, payload, a) = decode_client_frame(&out);
    assert_eq!((opcode, payload), (OP_PONG, vec![7; 125]));
    let (opcode, _, payload, b) = decode_client_frame(&out[a..]);
    assert_eq!(
        (opcode, payload),
        (OP_CLOSE, 1001u16.to_be_bytes().to_vec())
    );
    let (opcode, _, payload, c) = decode_client_frame(&out[a + b..]);
    assert_eq!((opcode, &payload[..]), (OP_TEXT, &b"{}"[..]));
    assert_eq!(a + b + c, out.len());
}
