//! The WebSocket client's framing against tungstenite: its frame parser (`FrameSocket`) under
//! the message rules of RFC 6455 §5.4–5.5 written out here, with the client's documented
//! policy (text only, a bound on messages, close codes §7.4); and tungstenite's own client,
//! which must deliver everything this client delivers.

use std::io::{self, Cursor};

use tokio_tungstenite::tungstenite::protocol::frame::{FrameHeader, FrameSocket};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};

use crate::transport::ws_frames::{WsError, WsEvent, WsReader, handshake};

/// The reader's read chunk and head bound (`ws::READ_CHUNK`, `ws::MAX_HEAD`).
const READ_CHUNK: usize = 16 * 1024;
const MAX_HEAD: usize = 64 * 1024;
/// Largest frame header.
const MAX_HEADER: usize = 14;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Text(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    Close(Option<u16>),
}

/// How the stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// After a close frame (nothing more is read).
    Close,
    /// The input ended between frames.
    Eof,
    /// The input ended inside a frame.
    Truncated,
    /// A protocol violation or a message over the bound.
    Reject,
}

/// `ws_client_with` with the bound picked by the first byte and cut points derived from the
/// data.
pub fn ws_client(data: &[u8]) {
    let Some((&knob, stream)) = data.split_first() else {
        return;
    };
    let max = [16, 125, 1000, 1 << 16][usize::from(knob % 4)];
    ws_client_with(stream, max, &super::cuts_from(stream));
}

/// Reads server frames from `stream` with `WsReader` bounded at `max`: whole, cut at `cuts`
/// and byte by byte (short inputs), the same events and end every time, exactly the
/// reference's; buffers within the bound; and every event one tungstenite's client delivers
/// too.
pub fn ws_client_with(stream: &[u8], max: usize, cuts: &[usize]) {
    let want = reference(stream, max);
    let mut chunkings = vec![Vec::new(), cuts.to_vec()];
    if stream.len() <= 2048 {
        chunkings.push(super::bytewise(stream));
    }
    for c in chunkings {
        let got = read_events(stream, max, &c);
        assert_eq!(
            got, want,
            "WebSocket reader (max {max}, cut at {c:?}) differs from the reference on {stream:02x?}"
        );
    }
    delivered_by_tungstenite(stream, &want.0);
}

fn read_events(stream: &[u8], max: usize, cuts: &[usize]) -> (Vec<Ev>, End) {
    super::block_on(async {
        let mut reader = WsReader::new(super::Script::new(stream, cuts));
        reader.set_max_message(max);
        let buf_bound = READ_CHUNK.max((max + MAX_HEADER).next_multiple_of(READ_CHUNK));
        let mut events = Vec::new();
        loop {
            let next = reader.next().await;
            let ev = match next {
                Ok(WsEvent::Text(t)) => Ev::Text(t.to_vec()),
                Ok(WsEvent::Ping(p)) => Ev::Ping(p.to_vec()),
                Ok(WsEvent::Pong) => Ev::Pong,
                Ok(WsEvent::Close { code }) => Ev::Close(code),
                Err(e) => {
                    let end = match e {
                        WsError::Closed => End::Eof,
                        WsError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                            End::Truncated
                        }
                        WsError::Protocol(_) | WsError::TooLarge(_) => End::Reject,
                        other => panic!("unexpected reader error {other:?}"),
                    };
                    return (events, end);
                }
            };
            let (buf, frag) = reader.buffered();
            assert!(
                buf <= buf_bound && frag <= max,
                "reader buffers {buf} + {frag} bytes under a bound of {max}"
            );
            let close = matches!(ev, Ev::Close(_));
            events.push(ev);
            if close {
                assert!(matches!(reader.next().await, Err(WsError::Closed)));
                return (events, End::Close);
            }
        }
    })
}

/// Frames by tungstenite's `FrameSocket`, messages by RFC 6455 and the client's policy.
fn reference(stream: &[u8], max: usize) -> (Vec<Ev>, End) {
    let mut socket = FrameSocket::new(Cursor::new(stream));
    let mut msg = Assembly::default();
    let mut events = Vec::new();
    // Where the next frame starts: tungstenite reports payloads, not header lengths.
    let mut at = 0;
    loop {
        let frame = match socket.read(Some(max.max(125))) {
            Ok(Some(f)) => f,
            Err(_) => return (events, End::Reject),
            Ok(None) if at == stream.len() => return (events, End::Eof),
            Ok(None) => {
                // A frame cut short: refused from its header alone if that is complete.
                let mut rest = Cursor::new(&stream[at..]);
                return match FrameHeader::parse(&mut rest) {
                    Err(_) => (events, End::Reject),
                    Ok(Some((h, len))) if msg.refuses(&h, len, max) => (events, End::Reject),
                    Ok(_) => (events, End::Truncated),
                };
            }
        };
        at += header_len(&stream[at..]) + frame.payload().len();
        let h = frame.header();
        if msg.refuses(h, frame.payload().len() as u64, max) {
            return (events, End::Reject);
        }
        let payload = frame.payload();
        let event = match u8::from(h.opcode) {
            0x1 | 0x0 => {
                msg.text.extend_from_slice(payload);
                msg.open = !h.is_final;
                if msg.open {
                    continue;
                }
                let text = std::mem::take(&mut msg.text);
                if std::str::from_utf8(&text).is_err() {
                    return (events, End::Reject);
                }
                Ev::Text(text)
            }
            0x9 => Ev::Ping(payload.to_vec()),
            0xA => Ev::Pong,
            0x8 => {
                let code = match payload {
                    [] => None,
                    [_] => return (events, End::Reject),
                    [hi, lo, reason @ ..] => {
                        // RFC 6455 §7.4 and the IANA registry: 1004-1006 and 1015 are never
                        // sent, 1016-2999 reserved. (tungstenite's `is_allowed` misses the
                        // registered 1014.)
                        let code = u16::from_be_bytes([*hi, *lo]);
                        let allowed = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
                        if !allowed || std::str::from_utf8(reason).is_err() {
                            return (events, End::Reject);
                        }
                        Some(code)
                    }
                };
                events.push(Ev::Close(code));
                return (events, End::Close);
            }
            _ => unreachable!("refused above"),
        };
        events.push(event);
    }
}

/// The header length of the frame starting `b` (it is complete: tungstenite read it).
fn header_len(b: &[u8]) -> usize {
    let ext = match b[1] & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if b[1] & 0x80 != 0 { 4 } else { 0 }
}

/// A text message being reassembled.
#[derive(Default)]
struct Assembly {
    open: bool,
    text: Vec<u8>,
}

impl Assembly {
    /// Whether a frame with this header breaks the rules before its payload is looked at.
    fn refuses(&self, h: &FrameHeader, len: u64, max: usize) -> bool {
        if h.mask.is_some() || h.rsv1 || h.rsv2 || h.rsv3 {
            return true; // RFC 6455 §5.1, §5.2
        }
        let so_far = self.text.len() as u64;
        match u8::from(h.opcode) {
            0x0 => !self.open || so_far.saturating_add(len) > max as u64,
            0x1 => self.open || len > max as u64,
            // Binary messages: MCP is text only. Control frames: §5.5.
            0x8..=0xA => !h.is_final || len > 125,
            _ => true,
        }
    }
}

/// tungstenite's client over the same bytes: every event the reader delivered, tungstenite
/// delivers in the same order, except that tungstenite fails a fragmented message on invalid
/// UTF-8 at once, where the reader (which checks the whole message) may first deliver
/// control frames interleaved with its fragments; and that tungstenite reports close code
/// 1014 (registered, but not in its list) as 1002.
fn delivered_by_tungstenite(stream: &[u8], ours: &[Ev]) {
    let ours: Vec<Ev> = ours
        .iter()
        .map(|e| match e {
            Ev::Close(Some(1014)) => Ev::Close(Some(1002)),
            e => e.clone(),
        })
        .collect();
    let config = WebSocketConfig::default()
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20));
    let mut ws = WebSocket::from_raw_socket(super::Bytes::new(stream), Role::Client, Some(config));
    let mut theirs = Vec::new();
    let utf8_failure = loop {
        match ws.read() {
            Ok(Message::Text(t)) => theirs.push(Ev::Text(t.as_bytes().to_vec())),
            Ok(Message::Ping(p)) => theirs.push(Ev::Ping(p.to_vec())),
            Ok(Message::Pong(_)) => theirs.push(Ev::Pong),
            Ok(Message::Close(c)) => {
                theirs.push(Ev::Close(c.map(|c| u16::from(c.code))));
                break false;
            }
            Ok(Message::Binary(_) | Message::Frame(_)) => break false,
            Err(e) => break matches!(e, tungstenite::Error::Utf8(_)),
        }
    };
    let n = ours.len().min(theirs.len());
    let extra_controls = ours[n..].iter().all(|e| !matches!(e, Ev::Text(_)));
    assert!(
        ours[..n] == theirs[..n] && (ours.len() == n || utf8_failure && extra_controls),
        "the reader delivered {ours:?}, tungstenite's client {theirs:?} on {stream:02x?}"
    );
}

/// `ws_handshake_with` with cut points derived from the data.
pub fn ws_handshake(data: &[u8]) {
    ws_handshake_with(data, &super::cuts_from(data));
}

/// Runs the client's opening handshake with `data` as the server's answer: the same outcome
/// whole, cut at `cuts` and byte by byte (short inputs); httparse's verdict on the head
/// (malformed, incomplete, or the status); an endless head stops the read near its bound.
pub fn ws_handshake_with(data: &[u8], cuts: &[usize]) {
    let (want, _) = upgrade(data, &[]);
    let mut chunkings = vec![cuts.to_vec()];
    if data.len() <= 2048 {
        chunkings.push(super::bytewise(data));
    }
    for c in chunkings {
        let (got, delivered) = upgrade(data, &c);
        assert_eq!(
            got,
            want,
            "handshake (cut at {c:?}) differs from reading the answer whole: {}",
            super::show(data)
        );
        assert!(
            delivered <= MAX_HEAD + 2 * READ_CHUNK,
            "read {delivered} bytes of a head"
        );
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let ok = match resp.parse(data) {
        Err(_) => want == "Handshake(\"malformed HTTP response\")",
        Ok(httparse::Status::Partial) if data.len() > MAX_HEAD => {
            want == "Handshake(\"response head too large\")"
        }
        Ok(httparse::Status::Partial) => want == "Closed",
        Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => {
            want == "Handshake(\"response head too large\")"
        }
        Ok(httparse::Status::Complete(_)) => match resp.code {
            Some(101) => want.starts_with("Handshake") && !want.contains("malformed"),
            code => want == format!("Status({})", code.unwrap_or_default()),
        },
    };
    assert!(
        ok,
        "httparse and the handshake disagree ({want}) on {}",
        super::show(data)
    );
}

/// The handshake's outcome, and the bytes it read.
fn upgrade(data: &[u8], cuts: &[usize]) -> (String, usize) {
    super::block_on(async {
        let mut script = super::Script::new(data, cuts);
        let outcome = match handshake(
            &mut script,
            tokio::io::sink(),
            "localhost",
            "/mcp",
            b"",
            "mcp",
        )
        .await
        {
            Ok(_) => "Ok".to_string(),
            Err(WsError::Io(e)) => format!("Io({:?})", e.kind()),
            Err(e) => format!("{e:?}"),
        };
        (outcome, script.delivered)
    })
}
