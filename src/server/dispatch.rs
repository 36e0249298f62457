//! Transport-independent handling of JSON-RPC messages by the reference server.
//!
//! Every transport (Streamable HTTP, legacy HTTP+SSE, WebSocket, stdio) reads a frame, calls
//! [`parse`] (envelope only: id, method and params stay raw) and [`Params::parse`], then:
//!
//! - [`State::begin`] answers every request that completes at once (ping, tools/list,
//!   server/discover, errors) or returns the [`ToolCall`] to run;
//! - [`State::run`] runs a tool call; a `progress` call with a `progressToken` sends its
//!   `notifications/progress` to the transport's [`Sink`] before it returns the response bytes,
//!   so the transport writes them in order and nothing follows the response;
//! - [`State::prepare`] / [`State::finish`] wrap the two for sessions that honour
//!   `notifications/cancelled` (the call is registered in the session's [`InFlight`] map);
//! - [`State::prepare_batch`] / [`State::finish_batch`] do the same for a 2025-03-26 batch.
//!
//! Results are written straight to bytes (no JSON tree for the envelope); 2026-07-28 results get
//! `resultType` and `_meta` serverInfo appended, and the 2026-07-28 `_meta` checks live in
//! [`check_modern`].
//!
//! With `Config::conformance`, methods outside the benchmark set (prompts, resources,
//! completions, `logging/setLevel`) and the fixture tools are answered by `fixtures`; the
//! benchmark methods are matched first, so they pay nothing for it.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::State;
use super::cancel::{InFlight, Ticket};
use super::fixtures::{self, CallContext};
use super::peer::{ClientCaps, ClientState};
use super::tools::{self, Progress, ToolKind};
use crate::protocol::jsonrpc::{code, write_json_str};
use crate::protocol::version::Revision;

/// Where a request's notifications go: the transport frames and writes each message (compact
/// JSON, no newline) before the response it later receives on the same path.
pub type Sink = mpsc::Sender<Bytes>;

/// The only revision of the stateless era this server speaks.
pub const MODERN: Revision = Revision::V2026_07_28;

/// `serverInfo` of this server.
pub const SERVER_INFO: &str = concat!(
    r#"{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// Appended to every 2026-07-28 result object (before its closing brace).
pub const MODERN_RESULT_TAIL: &str = concat!(
    r#","resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}}"#
);

/// How long 2026-07-28 clients may cache `server/discover` and `tools/list` results.
pub const TTL_MS: u64 = 300_000;

pub(super) const INSTRUCTIONS: &str = "Reference MCP server of mcpbench: tools echo, sleep, payload, fail, cpu, progress, REST-backed search-contacts, get-invoice, create-ticket.";

/// The `server/discover` result (2026-07-28).
const DISCOVER: &str = concat!(
    r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":false}},"serverInfo":{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""},"instructions":"Reference MCP server of mcpbench: tools echo, sleep, payload, fail, cpu, progress, REST-backed search-contacts, get-invoice, create-ticket.","ttlMs":300000,"cacheScope":"public","resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}}}"#
);

/// One received message, envelope only.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    #[serde(default)]
    pub jsonrpc: Option<Cow<'a, str>>,
    /// `Some` when the key is present (even as `null`).
    #[serde(borrow, default, deserialize_with = "present")]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// What kind of message arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// A request; `id` is its raw JSON id text.
    Request {
        id: &'a str,
    },
    Notification,
    /// A response from the client (to a server request).
    Response,
}

/// A message that cannot be handled, with the JSON-RPC error to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Raw id if it could be read.
    pub id: Option<String>,
    pub code: i64,
    pub message: &'static str,
}

/// Parses one message (not a batch): `-32700` if it is not JSON, `-32600` if it is JSON but
/// not an object of the envelope's shape.
pub fn parse(body: &[u8]) -> Result<Message<'_>, Rejection> {
    serde_json::from_slice::<Message<'_>>(body).map_err(|_| {
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
            Rejection {
                id: None,
                code: code::INVALID_REQUEST,
                message: "Invalid Request",
            }
        } else {
            Rejection {
                id: None,
                code: code::PARSE_ERROR,
                message: "Parse error",
            }
        }
    })
}

/// True when the first non-blank byte opens an array (a JSON-RPC batch).
pub fn is_batch(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// A string or integer id (the only kinds JSON-RPC allows; also progress tokens).
pub fn valid_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => !b.iter().any(|c| matches!(c, b'.' | b'e' | b'E')),
        _ => false,
    }
}

impl<'a> Message<'a> {
    /// Classifies the message, or says why it is not valid JSON-RPC.
    pub fn kind(&self) -> Result<Kind<'a>, Rejection> {
        let id = self.id.map(RawValue::get);
        let invalid = |message| Rejection {
            id: id.filter(|i| valid_id(i)).map(str::to_string),
            code: code::INVALID_REQUEST,
            message,
        };
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Err(invalid("Invalid Request: jsonrpc must be \"2.0\""));
        }
        match (&self.method, id) {
            (Some(_), Some(id)) if valid_id(id) => Ok(Kind::Request { id }),
            (Some(_), Some(_)) => Err(invalid(
                "Invalid Request: id must be a string or an integer",
            )),
            (Some(_), None) => Ok(Kind::Notification),
            (None, Some(_)) if self.result.is_some() != self.error.is_some() => Ok(Kind::Response),
            _ => Err(invalid("Invalid Request")),
        }
    }
}

/// The `params` fields any method of this server reads, parsed once per message.
#[derive(Debug, Default, Deserialize)]
pub struct Params<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub cursor: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub uri: Option<Cow<'a, str>>,
    /// `notifications/cancelled`.
    #[serde(rename = "requestId", borrow, default)]
    pub request_id: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    pub meta: Option<Meta<'a>>,
}

/// `params._meta`.
#[derive(Debug, Default, Deserialize)]
pub struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    pub progress_token: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    pub protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    pub client_capabilities: Option<&'a RawValue>,
}

impl<'a> Params<'a> {
    /// Absent params parse as empty; `None` means they were not an object of the right shape.
    pub fn parse(raw: Option<&'a RawValue>) -> Option<Params<'a>> {
        match raw {
            None => Some(Params::default()),
            Some(r) => serde_json::from_str(r.get()).ok(),
        }
    }

    /// `_meta["io.modelcontextprotocol/protocolVersion"]`: the mark of a 2026-07-28 request.
    pub fn modern_version(&self) -> Option<&str> {
        self.meta.as_ref()?.protocol_version.as_deref()
    }

    fn progress_token(&self) -> Option<&'a RawValue> {
        self.meta.as_ref()?.progress_token
    }
}

/// Writes a result response.
pub fn write_result(out: &mut Vec<u8>, id: &str, result: &[u8]) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
}

/// Writes an error response (`id: null` when the id is unknown); `data` is raw JSON.
pub fn write_error(
    out: &mut Vec<u8>,
    id: Option<&str>,
    code: i64,
    message: &str,
    data: Option<&[u8]>,
) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    out.extend_from_slice(br#","message":"#);
    write_json_str(out, message);
    if let Some(d) = data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(d);
    }
    out.extend_from_slice(b"}}");
}

/// An error response as bytes.
pub fn error_body(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + message.len());
    write_error(&mut out, id, code, message, None);
    out
}

/// A rejection as response bytes.
pub fn rejection_body(r: &Rejection) -> Vec<u8> {
    error_body(r.id.as_deref(), r.code, r.message)
}

/// Responses of a batch as one JSON array.
pub fn write_array(responses: &[Vec<u8>]) -> Vec<u8> {
    let len = responses.iter().map(|r| r.len() + 1).sum::<usize>() + 2;
    let mut out = Vec::with_capacity(len);
    out.push(b'[');
    for (i, r) in responses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(r);
    }
    out.push(b']');
    out
}

/// `s` (which points into `frame`) as a zero-copy slice of `frame`; copied if it does not.
pub fn sub(frame: &Bytes, s: &str) -> Bytes {
    let start = (s.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
    if start <= frame.len() && s.len() <= frame.len() - start {
        frame.slice(start..start + s.len())
    } else {
        Bytes::copy_from_slice(s.as_bytes())
    }
}

#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
    #[serde(borrow, default)]
    capabilities: Option<&'a RawValue>,
}

/// The revision to answer an `initialize` with: the client's if supported, else our latest.
pub fn negotiate(requested: &str) -> Revision {
    match requested.parse::<Revision>() {
        Ok(r) if r.has_handshake() => r,
        _ => Revision::LATEST_HANDSHAKE,
    }
}

/// Methods of the 2026-07-28 era the benchmark server implements; others are 404 + `-32601`
/// on HTTP (see [`State::is_modern_method`] for the conformance fixtures' additions).
pub fn is_modern_method(method: &str) -> bool {
    matches!(method, "server/discover" | "tools/list" | "tools/call")
}

/// A 2026-07-28 request refused before dispatch (mcp-protocol.md §2.6, §3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i64,
    pub message: &'static str,
    /// Raw JSON `data`.
    pub data: Option<Vec<u8>>,
}

impl Refusal {
    pub fn new(code: i64, message: &'static str) -> Self {
        Refusal {
            code,
            message,
            data: None,
        }
    }

    /// The error response to request `id`.
    pub fn body(&self, id: Option<&str>) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        write_error(&mut out, id, self.code, self.message, self.data.as_deref());
        out
    }

    /// The HTTP status the Streamable HTTP transport answers with.
    pub fn http_status(&self) -> u16 {
        if self.code == code::METHOD_NOT_FOUND {
            404
        } else {
            400
        }
    }
}

/// Checks the `_meta` every 2026-07-28 request must carry: protocol version (supported) and
/// client capabilities (an object).
pub fn check_modern(params: Option<&Params<'_>>) -> Result<(), Refusal> {
    let meta = params.and_then(|p| p.meta.as_ref());
    let version = meta.and_then(|m| m.protocol_version.as_deref());
    let caps = meta.and_then(|m| m.client_capabilities);
    let (Some(version), Some(caps)) = (version, caps) else {
        return Err(Refusal::new(
            code::INVALID_PARAMS,
            "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
        ));
    };
    if !caps.get().starts_with('{') {
        return Err(Refusal::new(
            code::INVALID_PARAMS,
            "Invalid params: _meta io.modelcontextprotocol/clientCapabilities must be an object",
        ));
    }
    if version != MODERN.as_str() {
        let mut data = Vec::with_capacity(64 + version.len());
        data.extend_from_slice(br#"{"supported":[""#);
        data.extend_from_slice(MODERN.as_str().as_bytes());
        data.extend_from_slice(br#""],"requested":"#);
        write_json_str(&mut data, version);
        data.push(b'}');
        return Err(Refusal {
            code: code::UNSUPPORTED_VERSION,
            message: "Unsupported protocol version",
            data: Some(data),
        });
    }
    Ok(())
}

/// A `tools/call` ready to run: every part is a slice of the received frame.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Index in the registry.
    pub tool: usize,
    /// Raw JSON `arguments`.
    pub arguments: Option<Bytes>,
    /// Raw JSON `_meta.progressToken` (a string or an integer).
    pub progress: Option<Bytes>,
    /// It will send progress notifications (a `progress` call with a token), so an HTTP
    /// transport must answer with a stream.
    pub streams: bool,
    /// Conformance fixtures only: what the fixture needs to know about its request and client.
    pub fixture: Option<CallContext>,
}

/// Where a running call's output goes besides its response.
#[derive(Debug, Clone, Copy, Default)]
pub struct Io<'a> {
    /// Notifications (and server requests) before the response.
    pub sink: Option<&'a Sink>,
    /// The session's in-flight table, through which server requests get their answers.
    pub session: Option<&'a Arc<InFlight>>,
    /// The sink is an SSE stream that can be parked and resumed (SEP-1699).
    pub resumable: bool,
}

impl<'a> Io<'a> {
    /// Output to `sink` only.
    pub fn sink(sink: &'a Sink) -> Self {
        Io {
            sink: Some(sink),
            ..Io::default()
        }
    }
}

/// What [`State::begin`] decided.
#[derive(Debug)]
pub enum Step {
    /// The complete response.
    Done(Vec<u8>),
    /// A tool call to [`State::run`].
    Call(ToolCall),
    /// Refused before it ran (2026-07-28 `-32021`: HTTP maps it to 400, like the `_meta`
    /// checks); other transports send the error body.
    Refused(Refusal),
}

/// A request of a session, answered or registered for running.
#[derive(Debug)]
pub enum Pending {
    Ready(Vec<u8>),
    Call {
        /// Raw JSON id.
        id: Bytes,
        rev: Revision,
        call: ToolCall,
        ticket: Ticket,
    },
}

impl Pending {
    pub fn streams(&self) -> bool {
        matches!(self, Pending::Call { call, .. } if call.streams)
    }

    /// The call may park its SSE stream (a conformance fixture, SEP-1699).
    pub fn parks(&self) -> bool {
        matches!(self, Pending::Call { call, .. } if call.fixture.as_ref().is_some_and(|f| f.parks))
    }
}

/// The per-session state that notifications and batches touch.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    pub rev: Revision,
    pub initialized: &'a AtomicBool,
    pub inflight: &'a Arc<InFlight>,
    pub client: &'a ClientState,
}

/// Acts on a client notification: `initialized` and `cancelled`; others are ignored.
pub fn on_notification(peer: &Peer<'_>, method: &str, params: Option<&Params<'_>>) {
    match method {
        "notifications/initialized" => peer.initialized.store(true, Ordering::Relaxed),
        "notifications/cancelled" => {
            // Unknown, finished or malformed ids are ignored silently.
            if let Some(id) = params.and_then(|p| p.request_id) {
                peer.inflight.cancel(id.get());
            }
        }
        _ => {}
    }
}

/// Hands a client's response (to a server request: sampling, elicitation) to the call waiting
/// for it; `frame` is the response message. Responses nobody waits for are dropped.
pub fn on_response(peer: &Peer<'_>, msg: &Message<'_>, frame: &Bytes) {
    if let Some(id) = msg.id {
        peer.inflight.answer(id.get(), frame.clone());
    }
}

/// Counts one tool call in progress (see [`State::busy`]).
#[derive(Debug)]
pub struct Busy<'a>(&'a AtomicUsize);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl State {
    /// Answers `initialize`: the negotiated revision with the client's declared capabilities,
    /// and the response bytes.
    pub fn initialize(
        &self,
        id: &str,
        params: Option<&RawValue>,
    ) -> (Option<(Revision, ClientCaps)>, Vec<u8>) {
        let mut out = Vec::with_capacity(384);
        let Some(p) =
            params.and_then(|p| serde_json::from_str::<InitializeParams<'_>>(p.get()).ok())
        else {
            write_error(
                &mut out,
                Some(id),
                code::INVALID_PARAMS,
                "Invalid params: initialize needs protocolVersion",
                None,
            );
            return (None, out);
        };
        let rev = negotiate(&p.protocol_version);
        // Only the conformance fixtures ever ask the client for anything.
        let caps = match p.capabilities {
            Some(c) if self.config.conformance => ClientCaps::parse(c.get()),
            _ => ClientCaps::default(),
        };
        let mut result = Vec::with_capacity(320);
        result.extend_from_slice(br#"{"protocolVersion":""#);
        result.extend_from_slice(rev.as_str().as_bytes());
        result.extend_from_slice(br#"","capabilities":"#);
        result.extend_from_slice(if self.config.conformance {
            fixtures::capabilities(rev).as_bytes()
        } else {
            br#"{"tools":{"listChanged":false}}"#
        });
        result.extend_from_slice(br#","serverInfo":{"name":"mcpbench-reference","#);
        if rev.has_tool_title() {
            result.extend_from_slice(br#""title":"mcpbench reference server","#);
        }
        result.extend_from_slice(br#""version":""#);
        result.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        result.extend_from_slice(br#""},"instructions":"#);
        write_json_str(&mut result, INSTRUCTIONS);
        result.push(b'}');
        write_result(&mut out, id, &result);
        (Some((rev, caps)), out)
    }

    /// Methods of 2026-07-28 this server answers (the conformance fixtures add prompts,
    /// resources and completions).
    pub fn is_modern_method(&self, method: &str) -> bool {
        is_modern_method(method)
            || (self.config.conformance && fixtures::MODERN_METHODS.contains(&method))
    }

    /// Handles a request other than `initialize` under revision `rev` (2026-07-28: already
    /// past [`check_modern`]). `frame` is the message (the buffer it was parsed from); `peer`
    /// its session, if it has one.
    pub fn begin(
        &self,
        rev: Revision,
        id: &str,
        method: &str,
        params: Option<&Params<'_>>,
        frame: &Bytes,
        peer: Option<&Peer<'_>>,
    ) -> Step {
        let modern = !rev.has_handshake();
        let mut out = Vec::with_capacity(256);
        let mut invalid = |message: &str| {
            write_error(&mut out, Some(id), code::INVALID_PARAMS, message, None);
        };
        match method {
            "ping" if !modern => write_result(&mut out, id, b"{}"),
            "server/discover" if modern => write_result(
                &mut out,
                id,
                self.discover.as_deref().unwrap_or(DISCOVER.as_bytes()),
            ),
            "tools/list" => match params {
                None => invalid("Invalid params"),
                Some(p) => match self.registry.page(rev, p.cursor.as_deref()) {
                    Some(page) => write_result(&mut out, id, page),
                    None => invalid("Invalid params: unknown cursor"),
                },
            },
            "tools/call" => {
                let Some((p, name)) = params.and_then(|p| Some((p, p.name.as_deref()?))) else {
                    invalid("Invalid params: tools/call needs a name");
                    return Step::Done(out);
                };
                let found = self.registry.find(name).filter(|(_, t)| match t.kind {
                    ToolKind::Fixture(f) => f.available(rev),
                    _ => true,
                });
                let Some((index, tool)) = found else {
                    invalid(&format!("Unknown tool: {name}"));
                    return Step::Done(out);
                };
                let progress = match p.progress_token() {
                    None => None,
                    Some(t) if valid_id(t.get()) => Some(sub(frame, t.get())),
                    Some(_) => {
                        invalid(
                            "Invalid params: _meta.progressToken must be a string or an integer",
                        );
                        return Step::Done(out);
                    }
                };
                let (streams, fixture) = match tool.kind {
                    ToolKind::Progress => (progress.is_some(), None),
                    ToolKind::Fixture(f) => {
                        let ctx = CallContext::new(f, rev, frame, peer, params);
                        if modern && let Some(r) = f.refusal(&ctx) {
                            return Step::Refused(r);
                        }
                        (f.streams(rev, &ctx, progress.is_some()), Some(ctx))
                    }
                    _ => (false, None),
                };
                return Step::Call(ToolCall {
                    tool: index,
                    arguments: p.arguments.map(|a| sub(frame, a.get())),
                    streams,
                    progress,
                    fixture,
                });
            }
            "initialize" if !modern => write_error(
                &mut out,
                Some(id),
                code::INVALID_REQUEST,
                "Invalid Request: the session is already initialized",
                None,
            ),
            _ => match self
                .config
                .conformance
                .then(|| fixtures::answer(rev, id, method, frame, peer))
                .flatten()
            {
                Some(answer) => return Step::Done(answer),
                None => write_error(
                    &mut out,
                    Some(id),
                    code::METHOD_NOT_FOUND,
                    "Method not found",
                    None,
                ),
            },
        }
        Step::Done(out)
    }

    /// Runs a tool call: progress notifications (if any) go to `io.sink`, the response is
    /// returned.
    pub async fn run(&self, rev: Revision, id: &str, call: &ToolCall, io: Io<'_>) -> Vec<u8> {
        let Some(tool) = self.registry.tool(call.tool) else {
            return error_body(Some(id), code::INTERNAL_ERROR, "Internal error");
        };
        let args = match &call.arguments {
            // A slice of a parsed message, so valid JSON; `null` fails schema validation.
            Some(a) => serde_json::from_slice(a).unwrap_or(Value::Null),
            None => Value::Object(Default::default()),
        };
        if let (ToolKind::Fixture(f), Some(ctx)) = (tool.kind, &call.fixture) {
            let progress = call.progress.as_deref();
            let result = fixtures::call(f, rev, &args, ctx, progress, io).await;
            let mut out = Vec::with_capacity(result.len() + 48);
            write_result(&mut out, id, &result);
            return out;
        }
        let progress = match (io.sink, &call.progress) {
            (Some(sink), Some(token)) => Some(Progress { token, sink }),
            _ => None,
        };
        let output = tools::call(tool, &args, self.backend.as_ref(), progress).await;
        let mut out = Vec::with_capacity(output.text.len() + 96);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(br#","result":"#);
        output.write(&mut out, rev);
        out.push(b'}');
        out
    }

    /// [`begin`](Self::begin) and [`run`](Self::run) in one, for callers that neither cancel
    /// nor stream and have no session.
    pub async fn handle(
        &self,
        rev: Revision,
        id: &str,
        method: &str,
        params: Option<&Params<'_>>,
        frame: &Bytes,
        sink: Option<&Sink>,
    ) -> Vec<u8> {
        match self.begin(rev, id, method, params, frame, None) {
            Step::Done(out) => out,
            Step::Refused(r) => r.body(Some(id)),
            Step::Call(call) => {
                let io = Io {
                    sink,
                    ..Io::default()
                };
                self.run(rev, id, &call, io).await
            }
        }
    }

    /// Begins a request of a session; a tool call is registered so it can be cancelled.
    pub fn prepare(
        &self,
        peer: &Peer<'_>,
        rev: Revision,
        frame: &Bytes,
        id: &str,
        method: &str,
        params: Option<&Params<'_>>,
    ) -> Pending {
        match self.begin(rev, id, method, params, frame, Some(peer)) {
            Step::Done(out) => Pending::Ready(out),
            Step::Refused(r) => Pending::Ready(r.body(Some(id))),
            Step::Call(call) => Pending::Call {
                id: sub(frame, id),
                rev,
                call,
                ticket: peer.inflight.register(id),
            },
        }
    }

    /// Completes a prepared request: its response, or `None` if it was cancelled. `io.session`
    /// is filled in from the request's registration.
    pub async fn finish(&self, pending: Pending, io: Io<'_>) -> Option<Vec<u8>> {
        match pending {
            Pending::Ready(out) => Some(out),
            Pending::Call {
                id,
                rev,
                call,
                ticket,
            } => {
                let id = std::str::from_utf8(&id).unwrap_or("null");
                let io = Io {
                    session: Some(ticket.session()),
                    ..io
                };
                tokio::select! {
                    biased;
                    () = ticket.cancelled() => None,
                    out = self.run(rev, id, &call, io) => Some(out),
                }
            }
        }
    }

    /// Reads a JSON-RPC batch of a session: notifications take effect, requests are answered or
    /// registered. Only 2025-03-26 sessions accept batches, and `initialize` is never batched.
    pub fn prepare_batch(&self, peer: &Peer<'_>, frame: &Bytes) -> Result<Vec<Pending>, Rejection> {
        if peer.rev != Revision::V2025_03_26 {
            return Err(Rejection {
                id: None,
                code: code::INVALID_REQUEST,
                message: "Invalid Request: JSON-RPC batches are only accepted in 2025-03-26 sessions",
            });
        }
        let items: Vec<&RawValue> = serde_json::from_slice(frame).map_err(|_| Rejection {
            id: None,
            code: code::PARSE_ERROR,
            message: "Parse error",
        })?;
        if items.is_empty() {
            return Err(Rejection {
                id: None,
                code: code::INVALID_REQUEST,
                message: "Invalid Request: empty batch",
            });
        }
        let mut pending = Vec::with_capacity(items.len());
        for item in items {
            // The item's own bytes, so what reads "the message" later reads this one.
            let frame = sub(frame, item.get());
            let parsed = parse(item.get().as_bytes()).and_then(|m| m.kind().map(|k| (m, k)));
            let (msg, kind) = match parsed {
                Ok(x) => x,
                Err(r) => {
                    pending.push(Pending::Ready(rejection_body(&r)));
                    continue;
                }
            };
            let method = msg.method.as_deref().unwrap_or_default();
            let params = Params::parse(msg.params);
            match kind {
                Kind::Response => on_response(peer, &msg, &frame),
                Kind::Notification => on_notification(peer, method, params.as_ref()),
                Kind::Request { id } if method == "initialize" => {
                    pending.push(Pending::Ready(error_body(
                        Some(id),
                        code::INVALID_REQUEST,
                        "Invalid Request: initialize must not be sent in a JSON-RPC batch",
                    )));
                }
                Kind::Request { id } => {
                    pending.push(self.prepare(peer, peer.rev, &frame, id, method, params.as_ref()));
                }
            }
        }
        Ok(pending)
    }

    /// Runs a prepared batch concurrently; responses in request order, cancelled ones left out.
    pub async fn finish_batch(&self, items: Vec<Pending>, io: Io<'_>) -> Vec<Vec<u8>> {
        join_all(items.into_iter().map(|p| self.finish(p, io)).collect())
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Marks a tool call in progress until the guard is dropped. Transports hold it from the
    /// start of the call until its response is handed to their writer (or the call is
    /// cancelled), so [`active_calls`](Self::active_calls) reaching zero means no call is
    /// running and every finished call's response is already queued.
    pub fn busy(&self) -> Busy<'_> {
        self.active.fetch_add(1, Ordering::Relaxed);
        Busy(&self.active)
    }

    /// Tool calls in progress, on every transport (see [`busy`](Self::busy)).
    pub fn active_calls(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

/// Polls every future until all are done; outputs in input order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futures.iter_mut().zip(outputs.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        fn k(s: &str) -> Result<Kind<'_>, Rejection> {
            parse(s.as_bytes()).and_then(|m| m.kind())
        }
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Kind::Request { id: "1" })
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Ok(Kind::Request { id: "\"a\"" })
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Kind::Response)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#)
                .unwrap_err()
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#)
                .unwrap_err()
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            k(r#"{"id":1,"method":"x"}"#).unwrap_err().id.as_deref(),
            Some("1")
        );
        assert_eq!(k("{oops").unwrap_err().code, code::PARSE_ERROR);
        assert_eq!(k("[1]").unwrap_err().code, code::INVALID_REQUEST);
        assert_eq!(k("1").unwrap_err().code, code::INVALID_REQUEST);
        assert_eq!(negotiate("2025-06-18"), Revision::V2025_06_18);
        assert_eq!(negotiate("2099-01-01"), Revision::V2025_11_25);
        assert_eq!(negotiate("2026-07-28"), Revision::V2025_11_25);
    }

    #[test]
    fn constants_are_json_and_agree() {
        let info: Value = serde_json::from_str(SERVER_INFO).unwrap();
        let discover: Value = serde_json::from_str(DISCOVER).unwrap();
        assert_eq!(discover["serverInfo"], info);
        assert_eq!(
            discover["_meta"]["io.modelcontextprotocol/serverInfo"],
            info
        );
        assert_eq!(discover["ttlMs"], TTL_MS);
        assert_eq!(discover["instructions"], INSTRUCTIONS);
        let tail: Value =
            serde_json::from_str(&format!("{{\"a\":1{MODERN_RESULT_TAIL}}}")).unwrap();
        assert_eq!(tail["_meta"]["io.modelcontextprotocol/serverInfo"], info);
        assert_eq!(tail["resultType"], "complete");
    }

    #[test]
    fn params_and_modern_checks() {
        fn raw(s: &str) -> &RawValue {
            serde_json::from_str(s).unwrap()
        }
        let p = raw(
            r#"{"name":"echo","_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        let p = Params::parse(Some(p)).unwrap();
        assert_eq!(p.modern_version(), Some("2026-07-28"));
        assert_eq!(p.progress_token().unwrap().get(), "\"t\"");
        assert!(check_modern(Some(&p)).is_ok());
        let missing = Params::parse(Some(raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        )))
        .unwrap();
        assert_eq!(
            check_modern(Some(&missing)).unwrap_err().code,
            code::INVALID_PARAMS
        );
        let old = Params::parse(Some(raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        )))
        .unwrap();
        let r = check_modern(Some(&old)).unwrap_err();
        assert_eq!(r.code, code::UNSUPPORTED_VERSION);
        let data: Value = serde_json::from_slice(r.data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            serde_json::json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
        );
        assert!(Params::parse(Some(raw("[1]"))).is_none());
    }

    #[test]
    fn sub_slices_without_copying() {
        let frame = Bytes::from_static(b"{\"id\":42}");
        let text = std::str::from_utf8(&frame).unwrap();
        let s = sub(&frame, &text[6..8]);
        assert_eq!(&s[..], b"42");
        assert_eq!(s.as_ptr(), frame[6..].as_ptr());
        assert_eq!(&sub(&frame, "elsewhere")[..], b"elsewhere");
    }
}
