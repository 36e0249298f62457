//! Client transports, behind one [`Session`] trait.
//!
//! | module              | what                                                            |
//! |---------------------|-----------------------------------------------------------------|
//! | `net`               | TCP + TLS (rustls) connecting, one `Stream` type                |
//! | `sources`           | the source addresses connections come from (a list, a CIDR)     |
//! | `exchange`          | one HTTP/1.1 request on a fresh connection, off the hot path    |
//! | `http1_client`      | hot-path HTTP/1.1 client connection                             |
//! | `spare`             | a worker thread's spare buffers, lent to busy sessions          |
//! | `sse_decoder`       | the one SSE decoder                                             |
//! | `ws_frames`         | WebSocket client framing (handshake, reader, writer)            |
//! | `streamable_http`   | MCP over Streamable HTTP (both eras; HTTP/1.1 or HTTP/2)        |
//! | `mux`               | id-matched in-flight requests on one connection (one thread)    |
//! | `stdio_client`      | MCP over a child process's stdin/stdout                         |
//! | `legacy_sse_client` | MCP over the 2024-11-05 HTTP+SSE transport                      |
//! | `ws_client`         | MCP over WebSocket (subprotocol `mcp`)                          |
//!
//! The runner is generic over [`Session`] and monomorphised per transport by one `match`.

pub mod exchange;
pub mod http1_client;
pub mod legacy_sse_client;
pub mod mux;
pub mod net;
pub mod sources;
pub(crate) mod spare;
pub mod sse_decoder;
pub mod stdio_client;
pub mod streamable_http;
pub mod url;
pub mod ws_client;
pub mod ws_frames;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::jsonrpc::{self, Codec, DecodeError, Incoming};
use crate::protocol::version::Revision;

/// Which transport a target speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport (GET stream + POSTed messages).
    LegacySse,
    WebSocket,
    Stdio,
}

impl TransportKind {
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::StreamableHttp => "streamable-http",
            TransportKind::LegacySse => "sse",
            TransportKind::WebSocket => "websocket",
            TransportKind::Stdio => "stdio",
        }
    }
}

/// A child process to launch (stdio targets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Everything about a target that is the same for every session.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub kind: TransportKind,
    /// Network targets: address and TLS.
    pub net: Option<net::NetTarget>,
    /// `Host` header value.
    pub host: String,
    /// Path and query of the MCP endpoint (Streamable HTTP), the SSE stream (legacy) or the
    /// WebSocket.
    pub path: String,
    /// Extra HTTP headers, pre-rendered (`Name: value\r\n`); may hold secrets.
    pub extra_headers: Vec<u8>,
    /// The same headers as pairs (HTTP/2).
    pub headers: Vec<(String, String)>,
    /// HTTP/2 (prior knowledge on plain TCP, ALPN over TLS) instead of HTTP/1.1.
    pub http2: bool,
    /// HTTP/2: the sessions of a worker share connections, this many each (1: their own).
    pub sessions_per_connection: usize,
    /// Stdio targets: the command.
    pub command: Option<CommandSpec>,
    /// The revision offered (handshake era) or used (2026-07-28).
    pub protocol: Revision,
    pub codec: Codec,
    /// Largest response or event accepted.
    pub max_body: usize,
    /// Bound on connecting and on each handshake step.
    pub timeout: Duration,
    /// A response header carrying the server's (a gateway's) own timing, recorded per request.
    pub timing: Option<TimingHeader>,
    /// Streamable HTTP replicas behind no affinity (`target.url` as a list): every call goes
    /// to the next one in turn, each over its own connection (a session opens where the last
    /// call went); empty: `net` alone.
    pub replicas: Vec<net::NetTarget>,
    /// Request ids start above it: shard I of a split run uses ids from I·2^40, so that a
    /// gateway's logs tell the shards apart.
    pub id_base: u64,
    /// Stdio targets: the pids of the servers spawned, for the collector's resource sampling.
    pub children: crate::metrics::target_procs::Children,
}

/// A response header that reports time spent upstream (or in the server), in milliseconds:
/// a plain number (`x-envoy-upstream-service-time: 12`) or a `server-timing` entry
/// (`server-timing: upstream;dur=12.3, gw;dur=0.4`), picked by name or the first with a `dur`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingHeader {
    /// Header name, lower case.
    pub name: String,
    /// `server-timing` entry name; `None` takes the first entry with a duration.
    pub metric: Option<String>,
}

impl TimingHeader {
    /// `NAME` or `NAME:METRIC` (e.g. `server-timing:upstream`).
    pub fn parse(spec: &str) -> Result<TimingHeader, String> {
        let (name, metric) = match spec.split_once(':') {
            Some((n, m)) => (n.trim(), Some(m.trim())),
            None => (spec.trim(), None),
        };
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        if !token(name) || metric.is_some_and(|m| !token(m)) {
            return Err(format!(
                "`{spec}` is not a header name (or NAME:METRIC for a server-timing entry)"
            ));
        }
        Ok(TimingHeader {
            name: name.to_ascii_lowercase(),
            metric: metric.map(str::to_string),
        })
    }

    /// The milliseconds a header value reports, if it reports any.
    pub fn value_ms(&self, v: &[u8]) -> Option<f64> {
        let v = std::str::from_utf8(v).ok()?.trim();
        if self.metric.is_none()
            && let Ok(ms) = v.parse::<f64>()
        {
            return (ms.is_finite() && ms >= 0.0).then_some(ms);
        }
        v.split(',').find_map(|entry| {
            let mut parts = entry.split(';').map(str::trim);
            let name = parts.next()?;
            if self
                .metric
                .as_deref()
                .is_some_and(|m| !m.eq_ignore_ascii_case(name))
            {
                return None;
            }
            parts.find_map(|p| {
                let (k, val) = p.split_once('=')?;
                if !k.trim().eq_ignore_ascii_case("dur") {
                    return None;
                }
                let ms: f64 = val.trim().trim_matches('"').parse().ok()?;
                (ms.is_finite() && ms >= 0.0).then_some(ms)
            })
        })
    }
}

/// Headers mcpbench sets itself, as the protocol requires: a scenario (or a gateway's
/// operator) may not override them.
pub const RESERVED_HEADERS: &[&str] = &[
    "content-length",
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "transfer-encoding",
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
];

/// Whether `name` is an HTTP header name (an RFC 9110 token): nothing else may go on the wire.
pub fn header_name_ok(name: &str) -> bool {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(token)
}

/// Whether `value` may be an HTTP header value: no control character but tab (CR and LF would
/// start a header of the sender's choosing; NUL, ESC and DEL are refused by servers or mangle
/// logs).
pub fn header_value_ok(value: &str) -> bool {
    !value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

impl Endpoint {
    /// Adds an extra HTTP header (`Host` replaces the default one). Values may be secrets: they
    /// go on the wire and nowhere else.
    pub fn add_header(&mut self, name: &str, value: &str) {
        if name.eq_ignore_ascii_case("host") {
            self.host = value.to_string();
            return;
        }
        self.extra_headers
            .extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        self.headers.push((name.to_string(), value.to_string()));
    }
}

/// Per-request data that depends only on the workload entry.
#[derive(Debug, Clone, Default)]
pub struct CallSpec {
    pub method: String,
    /// `params.name` of `tools/call`.
    pub name: Option<String>,
    /// 2026-07-28 over HTTP/1.1: pre-rendered `Mcp-Method` / `Mcp-Name` header lines.
    pub h1_headers: Vec<u8>,
}

impl CallSpec {
    /// The spec of `method` (with `params.name`, for `tools/call`) under revision `rev`.
    pub fn new(method: &str, name: Option<&str>, rev: Revision) -> Self {
        CallSpec {
            method: method.into(),
            name: name.map(str::to_string),
            h1_headers: if rev.has_handshake() {
                Vec::new()
            } else {
                crate::protocol::mcp::modern_headers(method, name)
            },
        }
    }
}

/// The end of one exchange.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub outcome: Outcome,
    /// When the response was complete (the latency end point).
    pub done: Instant,
    /// First event of a streamed response (SSE event, progress notification).
    pub first_event: Option<Instant>,
    /// Events received for this request before and including its response.
    pub events: u32,
    /// The response arrived as a stream of events (SSE, or notifications before it).
    pub streamed: bool,
    /// The server forgot the session (HTTP 404): the caller should open a new one.
    pub session_expired: bool,
    /// A connection (or process) was opened for this exchange.
    pub connected: bool,
    /// How long opening it took (TCP/TLS connect, or spawning the process), when it was.
    pub connect: Option<Duration>,
    /// The server kept the SSE stream open after the response; the connection was dropped.
    pub lingered: bool,
    /// The time the response's timing header reported ([`Endpoint::timing`]).
    pub upstream: Option<Duration>,
    /// The response's `Retry-After` (delta-seconds), e.g. on a 429.
    pub retry_after: Option<Duration>,
}

impl Reply {
    pub fn new(outcome: Outcome) -> Self {
        Reply::at(outcome, Instant::now())
    }

    /// A reply complete at `done`.
    pub fn at(outcome: Outcome, done: Instant) -> Self {
        Reply {
            outcome,
            done,
            first_event: None,
            events: 0,
            streamed: false,
            session_expired: false,
            connected: false,
            connect: None,
            lingered: false,
            upstream: None,
            retry_after: None,
        }
    }
}

/// Receives the raw bytes of each notification that arrives on a request's stream before its
/// response ([`Session::set_notification_hook`]).
pub type NotificationHook = Box<dyn FnMut(&[u8])>;

/// One MCP session on some transport.
///
/// A session is opened (`initialize` + `notifications/initialized`, or `server/discover` for
/// 2026-07-28), then carries requests one at a time from its virtual user. Sessions that share
/// a connection (stdio and WebSocket in shared mode) multiplex internally.
pub trait Session {
    /// Connects if needed and performs the handshake; the reply times the handshake exchange.
    fn open(&mut self) -> impl Future<Output = Reply>;
    fn is_open(&self) -> bool;
    /// The negotiated revision, once open.
    fn revision(&self) -> Option<Revision>;
    /// For sessions shared by several virtual users: true if this caller should open the
    /// session now (nobody else is); false means another caller is opening it — wait with
    /// [`Session::wait_open`] instead of opening (and recording) a second time.
    fn claim_open(&mut self) -> bool {
        true
    }
    /// Waits until a shared session's opening by another caller has finished (either way).
    fn wait_open(&mut self) -> impl Future<Output = ()> {
        async {}
    }
    /// Sends one request whose body `write` renders for the given id, and waits for the answer.
    fn call<W: FnOnce(&mut Vec<u8>, u64)>(
        &mut self,
        spec: &CallSpec,
        write: W,
    ) -> impl Future<Output = Reply>;
    /// After the caller gave up on the last request (timeout): tell the server to stop it —
    /// `notifications/cancelled` in the handshake era and on stdio, closing the stream for
    /// 2026-07-28 HTTP. Returns whether a cancellation was sent.
    fn cancel_last(&mut self) -> impl Future<Output = bool>;
    /// Ends the session politely (DELETE, closing stdin…), within the endpoint timeout.
    fn close(&mut self) -> impl Future<Output = ()>;
    /// Forgets the session (after the server expired it); the next request reopens.
    fn reset(&mut self);
    /// The caller is about to wait (think time, an idle open-loop user): buffers the session
    /// needs only during an exchange go back to the thread's spares (see `spare`), so that an
    /// idle session costs little. [`Session::last_message`] is empty from then on.
    fn rest(&mut self) {}
    /// The bytes of the last response message, when the session keeps them.
    fn last_message(&self) -> &[u8];
    /// The server's session id (`Mcp-Session-Id`), where the transport has one.
    fn session_id(&self) -> Option<String> {
        None
    }
    /// What the server said outside the protocol, for a message once it broke off: a child
    /// process's exit status and the end of its standard error (waited for briefly).
    fn aside(&self) -> impl Future<Output = Option<String>> {
        async { None }
    }
    /// The `Content-Type` of the last HTTP response, for messages (`None`: it had none, or
    /// the transport has no such header).
    fn content_type(&self) -> Option<String> {
        None
    }
    /// Sends `Authorization: Bearer <token>` on every request from now on (a token of this
    /// user's own, e.g. from OAuth); `None` stops. Only Streamable HTTP sessions carry one.
    fn set_bearer(&mut self, _token: Option<&str>) {}
    /// Hands the notifications of this session's requests to `hook` from now on (`None`
    /// stops): what a gateway relays to its own client. Streamable HTTP: every notification on
    /// a request's response stream; the multiplexed transports (stdio, WebSocket, legacy SSE):
    /// the progress notifications whose token is the request's id.
    fn set_notification_hook(&mut self, _hook: Option<NotificationHook>) {}
    /// Traffic the session's connections could not attribute (responses to no request in
    /// flight, late responses) and server requests answered, since the last take.
    fn take_stats(&mut self) -> TransportCounts {
        TransportCounts::default()
    }
}

/// What a decoded message means for the request `id`: `None` if it is not a response (a
/// notification or a server request).
pub(crate) fn classify(m: Result<Incoming<'_>, DecodeError>, id: u64) -> Option<Outcome> {
    match m {
        Err(DecodeError::Json) => Some(Outcome::Protocol(ProtocolKind::BadJson)),
        Err(DecodeError::Batch | DecodeError::Shape) => {
            Some(Outcome::Protocol(ProtocolKind::NotJsonRpc))
        }
        Ok(Incoming::Result {
            id: rid,
            is_error,
            result_type,
        }) => Some(if !rid.is(id) {
            Outcome::Protocol(ProtocolKind::WrongId)
        } else {
            result_outcome(is_error, result_type.as_deref())
        }),
        Ok(Incoming::Error { id: rid, code }) => Some(match rid {
            jsonrpc::IdRef::Null => Outcome::RpcError(code),
            r if r.is(id) => Outcome::RpcError(code),
            _ => Outcome::Protocol(ProtocolKind::WrongId),
        }),
        Ok(Incoming::Request { .. } | Incoming::Notification { .. }) => None,
    }
}

/// The outcome of a result matched to its request: `resultType` (2026-07-28; absent means
/// complete) and, when complete, a tool's `isError`.
pub(crate) fn result_outcome(is_error: bool, result_type: Option<&str>) -> Outcome {
    match result_type {
        None | Some("complete") if is_error => Outcome::ToolError,
        None | Some("complete") => Outcome::Ok,
        Some("input_required") => Outcome::InputRequired,
        Some(_) => Outcome::Protocol(ProtocolKind::BadResultType),
    }
}

/// Reads the negotiated revision from an `initialize` result.
pub(crate) fn negotiated_revision(result_message: &[u8]) -> Option<Revision> {
    serde_json::from_slice::<serde_json::Value>(result_message)
        .ok()
        .and_then(|v| {
            v.pointer("/result/protocolVersion")?
                .as_str()?
                .parse::<Revision>()
                .ok()
        })
        .filter(|r| r.has_handshake())
}

/// Checks a `server/discover` result: does the server speak `rev`?
pub(crate) fn discover_supports(result_message: &[u8], rev: Revision) -> bool {
    serde_json::from_slice::<serde_json::Value>(result_message)
        .ok()
        .and_then(|v| v.pointer("/result/supportedVersions").cloned())
        .and_then(|s| s.as_array().cloned())
        .is_some_and(|list| list.iter().any(|x| x.as_str() == Some(rev.as_str())))
}

#[cfg(test)]
mod timing_tests {
    use super::TimingHeader;

    /// Envoy's plain milliseconds, `server-timing` entries by name or the first with a `dur`;
    /// anything else reports nothing.
    #[test]
    fn timing_headers_read_milliseconds() {
        let envoy = TimingHeader::parse("X-Envoy-Upstream-Service-Time").unwrap();
        assert_eq!(envoy.name, "x-envoy-upstream-service-time");
        assert_eq!(envoy.value_ms(b" 12 "), Some(12.0));
        assert_eq!(envoy.value_ms(b"soon"), None);
        let st = TimingHeader::parse("server-timing").unwrap();
        assert_eq!(
            st.value_ms(b"cache;desc=hit, upstream;dur=12.5, gw;dur=0.4"),
            Some(12.5)
        );
        let named = TimingHeader::parse("server-timing:gw").unwrap();
        assert_eq!(named.metric.as_deref(), Some("gw"));
        assert_eq!(
            named.value_ms(b"upstream;dur=12.5, gw;dur=\"0.4\""),
            Some(0.4)
        );
        assert_eq!(named.value_ms(b"upstream;dur=12.5"), None);
        assert_eq!(st.value_ms(b"upstream;dur=-3"), None);
        assert!(TimingHeader::parse("bad header").is_err());
        assert!(TimingHeader::parse("server-timing:").is_err());
    }
}
