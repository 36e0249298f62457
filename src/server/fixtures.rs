//! The official MCP conformance suite's fixtures (`@modelcontextprotocol/conformance`, server
//! scenarios): `test_*` tools returning every content type, logging, progress, sampling and
//! elicitation, a JSON Schema 2020-12 tool, an SSE-polling tool (SEP-1699); four prompts; three
//! resources and a resource template; completions; `logging/setLevel`; resource subscriptions.
//!
//! Served only with [`Config::conformance`](super::Config::conformance): the benchmark catalog,
//! its `tools/list` pages and the declared capabilities stay exactly as they are otherwise. None
//! of this is on a benchmark's hot path, so it is written for clarity (JSON trees, rendered per
//! request) rather than speed.
//!
//! Era rules: the handshake era gets server→client requests on the call's stream and a
//! session log level; 2026-07-28 gets multi-round-trip results (`resultType:
//! "input_required"` with `inputRequests`, answered by a retry carrying `inputResponses`), logs
//! only when the request's `_meta` names a level, `ttlMs`/`cacheScope` on list and read results,
//! and `-32602` where the handshake era answers `-32002` (resource not found).

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::body::PARK;
use super::context::{Io, Peer};
use super::peer::{ClientCaps, LogLevel};
use super::tools::{Tool, ToolKind};
use super::wire::{Params, Refusal, result_json, write_error, write_result};
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

/// A 1×1 red PNG, base64.
pub(crate) const IMAGE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A minimal WAV file (one silent sample), base64.
pub(crate) const AUDIO_WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// Handshake era: resource not found (2026-07-28 retired it for `-32602`).
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;

/// `logger` of the log notifications the fixtures send.
const LOGGER: &str = "mcpbench-reference";

/// How long a fixture waits for the client to answer a server request.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause between the steps of the logging and progress fixtures (the suite asks for ~50 ms).
const STEP: Duration = Duration::from_millis(50);

/// Methods beyond the benchmark set that the fixtures answer in 2026-07-28.
pub(crate) const MODERN_METHODS: &[&str] = &[
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
];

/// A conformance fixture tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fixture {
    SimpleText,
    Image,
    Audio,
    EmbeddedResource,
    MixedContent,
    Logging,
    Progress,
    Error,
    Sampling,
    Elicitation,
    ElicitationDefaults,
    ElicitationEnums,
    JsonSchema,
    Reconnection,
}

/// A server request a fixture needs answered, and the capability that allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Sampling,
    Elicitation,
}

impl Need {
    fn cap(self) -> ClientCaps {
        match self {
            Need::Sampling => ClientCaps::SAMPLING,
            Need::Elicitation => ClientCaps::ELICITATION,
        }
    }

    fn cap_name(self) -> &'static str {
        match self {
            Need::Sampling => "sampling",
            Need::Elicitation => "elicitation",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Need::Sampling => "sampling/createMessage",
            Need::Elicitation => "elicitation/create",
        }
    }
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

impl Fixture {
    pub(crate) const ALL: [Fixture; 14] = [
        Fixture::SimpleText,
        Fixture::Image,
        Fixture::Audio,
        Fixture::EmbeddedResource,
        Fixture::MixedContent,
        Fixture::Logging,
        Fixture::Progress,
        Fixture::Error,
        Fixture::Sampling,
        Fixture::Elicitation,
        Fixture::ElicitationDefaults,
        Fixture::ElicitationEnums,
        Fixture::JsonSchema,
        Fixture::Reconnection,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fixture::SimpleText => "test_simple_text",
            Fixture::Image => "test_image_content",
            Fixture::Audio => "test_audio_content",
            Fixture::EmbeddedResource => "test_embedded_resource",
            Fixture::MixedContent => "test_multiple_content_types",
            Fixture::Logging => "test_tool_with_logging",
            Fixture::Progress => "test_tool_with_progress",
            Fixture::Error => "test_error_handling",
            Fixture::Sampling => "test_sampling",
            Fixture::Elicitation => "test_elicitation",
            Fixture::ElicitationDefaults => "test_elicitation_sep1034_defaults",
            Fixture::ElicitationEnums => "test_elicitation_sep1330_enums",
            Fixture::JsonSchema => "json_schema_2020_12_tool",
            Fixture::Reconnection => "test_reconnection",
        }
    }

    fn title_and_description(self) -> (&'static str, &'static str) {
        match self {
            Fixture::SimpleText => ("Simple text", "Returns one text content block."),
            Fixture::Image => ("Image content", "Returns a PNG image content block."),
            Fixture::Audio => ("Audio content", "Returns a WAV audio content block."),
            Fixture::EmbeddedResource => (
                "Embedded resource",
                "Returns an embedded text resource content block.",
            ),
            Fixture::MixedContent => (
                "Multiple content types",
                "Returns text, image and embedded resource content blocks.",
            ),
            Fixture::Logging => (
                "Tool with logging",
                "Sends three info log notifications, ~50 ms apart, then answers.",
            ),
            Fixture::Progress => (
                "Tool with progress",
                "Reports progress 0, 50 and 100 of 100, ~50 ms apart, when the request carries _meta.progressToken.",
            ),
            Fixture::Error => ("Error handling", "Always fails with a tool error."),
            Fixture::Sampling => (
                "Sampling",
                "Asks the client for an LLM completion of `prompt` (sampling/createMessage) and returns it.",
            ),
            Fixture::Elicitation => (
                "Elicitation",
                "Asks the user, through the client, for a username and an email (elicitation/create).",
            ),
            Fixture::ElicitationDefaults => (
                "Elicitation with defaults",
                "Elicits a form whose fields all carry default values (SEP-1034).",
            ),
            Fixture::ElicitationEnums => (
                "Elicitation with enums",
                "Elicits a form with the five enum schema variants (SEP-1330).",
            ),
            Fixture::JsonSchema => (
                "JSON Schema 2020-12",
                "Tool with JSON Schema 2020-12 features ($schema, $defs, $ref, additionalProperties).",
            ),
            Fixture::Reconnection => (
                "Reconnection",
                "Closes its SSE response mid-call after a priming event and `retry`, and answers once the client resumes with GET and Last-Event-ID (SEP-1699).",
            ),
        }
    }

    fn input_schema(self) -> Value {
        let string = |d: &str| json!({"type": "string", "description": d});
        match self {
            Fixture::Sampling => json!({
                "type": "object",
                "properties": {"prompt": string("The prompt to send to the LLM")},
                "required": ["prompt"],
                "additionalProperties": false,
            }),
            Fixture::Elicitation => json!({
                "type": "object",
                "properties": {"message": string("The message to show the user")},
                "required": ["message"],
                "additionalProperties": false,
            }),
            Fixture::JsonSchema => json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                },
                "additionalProperties": false,
            }),
            _ => no_args(),
        }
    }

    /// The fixture a catalog entry of kind `ToolKind::Fixture(index)` runs.
    pub(crate) fn from_index(index: usize) -> Option<Fixture> {
        Fixture::ALL.get(index).copied()
    }

    /// The tool definition. Audio content exists from 2025-03-26, elicitation from 2025-06-18,
    /// SEP-1034/1330 forms from 2025-11-25, and SSE polling (SEP-1699) only in 2025-11-25:
    /// sessions of other revisions neither list nor call those.
    pub(crate) fn tool(self) -> Tool {
        let (title, description) = self.title_and_description();
        let index = Fixture::ALL.iter().position(|f| *f == self).unwrap_or(0);
        let revisions = match self {
            Fixture::Audio => Revision::V2025_03_26..=Revision::V2026_07_28,
            Fixture::Elicitation => Revision::V2025_06_18..=Revision::V2026_07_28,
            Fixture::ElicitationDefaults | Fixture::ElicitationEnums => {
                Revision::V2025_11_25..=Revision::V2026_07_28
            }
            Fixture::Reconnection => Revision::V2025_11_25..=Revision::V2025_11_25,
            _ => Revision::V2024_11_05..=Revision::V2026_07_28,
        };
        let mut tool = Tool::new(
            self.name(),
            title,
            description,
            self.input_schema(),
            ToolKind::Fixture(index),
        );
        tool.open_world = self.need().is_some();
        tool.revisions = revisions;
        tool
    }

    fn need(self) -> Option<Need> {
        match self {
            Fixture::Sampling => Some(Need::Sampling),
            Fixture::Elicitation | Fixture::ElicitationDefaults | Fixture::ElicitationEnums => {
                Some(Need::Elicitation)
            }
            _ => None,
        }
    }

    /// Whether the call sends messages before its response, so an HTTP transport must answer
    /// with a stream.
    pub(crate) fn streams(self, rev: Revision, ctx: &CallContext, progress: bool) -> bool {
        match self {
            Fixture::Logging => ctx.log_level.is_some(),
            Fixture::Progress => progress,
            // Only when it will ask (2026-07-28 asks in the result instead).
            Fixture::Sampling
            | Fixture::Elicitation
            | Fixture::ElicitationDefaults
            | Fixture::ElicitationEnums => {
                rev.has_handshake() && self.need().is_some_and(|n| ctx.caps.contains(n.cap()))
            }
            Fixture::Reconnection => true,
            _ => false,
        }
    }

    /// 2026-07-28: a call the client cannot complete because it lacks a capability is refused
    /// up front (`-32021`, HTTP 400).
    pub(crate) fn refusal(self, ctx: &CallContext) -> Option<Refusal> {
        let need = self.need()?;
        if ctx.caps.contains(need.cap()) {
            return None;
        }
        let mut r = Refusal::new(
            code::MISSING_CAPABILITY,
            "Missing required client capability",
        );
        r.data = Some(
            serde_json::to_vec(&json!({"requiredCapabilities": {need.cap_name(): {}}}))
                .unwrap_or_default(),
        );
        Some(r)
    }
}

/// What a fixture call knows about its request and its client, captured when it begins.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    /// The request message (re-read for `_meta` and 2026-07-28 `inputResponses`).
    pub request: Bytes,
    pub caps: ClientCaps,
    /// Log notifications at this level or above are sent; `None`: none are.
    pub log_level: Option<LogLevel>,
    /// The call may park its SSE stream (SEP-1699).
    pub parks: bool,
}

impl CallContext {
    /// `request` is the message frame; `peer` the session (handshake era).
    pub(crate) fn new(
        f: Fixture,
        rev: Revision,
        request: &Bytes,
        peer: Option<&Peer<'_>>,
        params: Option<&Params<'_>>,
    ) -> Self {
        let (caps, log_level) = if rev.has_handshake() {
            match peer {
                Some(p) => (p.client.caps(), Some(p.client.log_level())),
                None => (ClientCaps::default(), Some(LogLevel::Debug)),
            }
        } else {
            let caps = params
                .and_then(|p| p.meta.as_ref()?.client_capabilities)
                .map_or(ClientCaps::default(), |c| ClientCaps::parse(c.get()));
            let level = request_json(request)
                .pointer("/params/_meta/io.modelcontextprotocol~1logLevel")
                .and_then(Value::as_str)
                .and_then(LogLevel::parse);
            (caps, level)
        };
        CallContext {
            request: request.clone(),
            caps,
            log_level,
            parks: f == Fixture::Reconnection && rev == Revision::V2025_11_25,
        }
    }
}

fn request_json(frame: &[u8]) -> Value {
    serde_json::from_slice(frame).unwrap_or(Value::Null)
}

fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

fn image_block() -> Value {
    json!({"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"})
}

fn tool_result(content: Vec<Value>, is_error: bool, rev: Revision) -> Vec<u8> {
    result_json(json!({"content": content, "isError": is_error}), rev, false)
}

fn tool_error(text: impl Into<String>, rev: Revision) -> Vec<u8> {
    tool_result(vec![text_block(text)], true, rev)
}

/// Sends one message on the call's stream; a closed stream is the transport's business.
async fn send(io: Io<'_>, msg: &Value) {
    if let Some(sink) = io.sink {
        let _ = sink
            .send(Bytes::from(serde_json::to_vec(msg).unwrap_or_default()))
            .await;
    }
}

async fn log(io: Io<'_>, ctx: &CallContext, level: LogLevel, text: &str) {
    if ctx.log_level.is_some_and(|min| level >= min) {
        let params = json!({"level": level.as_str(), "logger": LOGGER, "data": text});
        send(
            io,
            &json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}),
        )
        .await;
    }
}

/// The request a fixture sends to the client (the 2026-07-28 `inputRequests` entry too).
fn server_request(f: Fixture, args: &Value) -> (Need, Value) {
    let string = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default();
    let elicit = |message: &str, schema: Value| {
        (
            Need::Elicitation,
            json!({"message": message, "requestedSchema": schema}),
        )
    };
    match f {
        Fixture::Sampling => (
            Need::Sampling,
            json!({
                "messages": [{"role": "user", "content": text_block(string("prompt"))}],
                "maxTokens": 100,
            }),
        ),
        Fixture::Elicitation => elicit(
            string("message"),
            json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            }),
        ),
        Fixture::ElicitationDefaults => elicit(
            "Please review and update the form fields with defaults",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {"type": "boolean", "description": "Verification status", "default": true},
                },
                "required": [],
            }),
        ),
        _ => elicit(
            "Please select options from the enum fields",
            json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Select one option",
                        "enum": ["option1", "option2", "option3"],
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Select one option with titles",
                        "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"},
                        ],
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Select one option (legacy)",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Select multiple options",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Select multiple options with titles",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]},
                    },
                },
                "required": [],
            }),
        ),
    }
}

/// The tool's text once the client has answered.
fn answered_text(f: Fixture, answer: &Value) -> String {
    if f == Fixture::Sampling {
        // `content` is one block (2025-06-18) or an array of blocks (2025-11-25).
        let content = answer.get("content");
        let block = content
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .or(content);
        let text = block
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("(no text)");
        return format!("LLM response: {text}");
    }
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or(json!({}));
    if f == Fixture::Elicitation {
        format!("User response: action={action}, content={content}")
    } else {
        format!("Elicitation completed: action={action}, content={content}")
    }
}

/// Sends a server request on the call's stream and waits for the client's result.
async fn ask(io: Io<'_>, method: &str, params: Value) -> Result<Value, String> {
    let (Some(sink), Some(session)) = (io.sink, io.session) else {
        return Err(format!(
            "{method} needs a session whose transport carries server requests"
        ));
    };
    let mut q = session.ask().ok_or("the session has ended")?;
    let mut msg = Vec::with_capacity(256);
    msg.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    msg.extend_from_slice(q.id().as_bytes());
    msg.extend_from_slice(br#","method":"#);
    msg.extend_from_slice(&serde_json::to_vec(method).unwrap_or_default());
    msg.extend_from_slice(br#","params":"#);
    msg.extend_from_slice(&serde_json::to_vec(&params).unwrap_or_default());
    msg.push(b'}');
    sink.send(Bytes::from(msg))
        .await
        .map_err(|_| "the client went away".to_string())?;
    let answer = match tokio::time::timeout(ASK_TIMEOUT, q.answer()).await {
        Err(_) => {
            return Err(format!(
                "the client did not answer {method} within {} s",
                ASK_TIMEOUT.as_secs()
            ));
        }
        Ok(None) => return Err("the session ended before the client answered".into()),
        Ok(Some(a)) => a,
    };
    let mut v = request_json(&answer);
    if let Some(r) = v.get_mut("result") {
        return Ok(r.take());
    }
    let e = v.get("error").cloned().unwrap_or(Value::Null);
    Err(format!(
        "the client answered {method} with error {}: {}",
        e.get("code").unwrap_or(&Value::Null),
        e.get("message").and_then(Value::as_str).unwrap_or("")
    ))
}

/// Runs a fixture tool; returns the `result` object (a `CallToolResult`, or in 2026-07-28
/// possibly an `InputRequiredResult`).
pub(crate) async fn call(
    tool: &Tool,
    f: Fixture,
    rev: Revision,
    args: &Value,
    ctx: &CallContext,
    progress: Option<&[u8]>,
    io: Io<'_>,
) -> Vec<u8> {
    if let Err(msg) = tool.check_arguments(args) {
        return tool_error(
            format!("invalid arguments for tool `{}`: {msg}", tool.name),
            rev,
        );
    }
    let ok = |content: Vec<Value>| tool_result(content, false, rev);
    match f {
        Fixture::SimpleText => ok(vec![text_block(
            "This is a simple text response for testing.",
        )]),
        Fixture::Image => ok(vec![image_block()]),
        Fixture::Audio => ok(vec![
            json!({"type": "audio", "data": AUDIO_WAV, "mimeType": "audio/wav"}),
        ]),
        Fixture::EmbeddedResource => ok(vec![json!({
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        })]),
        Fixture::MixedContent => ok(vec![
            text_block("Multiple content types test:"),
            image_block(),
            json!({
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": r#"{"test":"data","value":123}"#,
                },
            }),
        ]),
        Fixture::Error => tool_error("This tool intentionally returns an error for testing", rev),
        Fixture::JsonSchema => ok(vec![text_block(format!(
            "JSON Schema 2020-12 tool called with: {args}"
        ))]),
        Fixture::Logging => {
            log(io, ctx, LogLevel::Info, "Tool execution started").await;
            tokio::time::sleep(STEP).await;
            log(io, ctx, LogLevel::Info, "Tool processing data").await;
            tokio::time::sleep(STEP).await;
            log(io, ctx, LogLevel::Info, "Tool execution completed").await;
            ok(vec![text_block("Tool with logging executed successfully")])
        }
        Fixture::Progress => {
            for (i, step) in [0u32, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                if let Some(token) = progress {
                    let mut params = json!({
                        "progressToken": serde_json::from_slice::<Value>(token).unwrap_or(Value::Null),
                        "progress": step,
                        "total": 100,
                    });
                    if rev >= Revision::V2025_03_26 {
                        params["message"] = json!(format!("Completed step {step} of 100"));
                    }
                    send(
                        io,
                        &json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}),
                    )
                    .await;
                }
            }
            ok(vec![text_block("Tool with progress executed successfully")])
        }
        Fixture::Reconnection => {
            if ctx.parks
                && io.resumable
                && let Some(sink) = io.sink
            {
                // Ends the HTTP response here; the rest of this call is paused until the client
                // resumes the stream with GET + Last-Event-ID.
                let _ = sink.send(PARK).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            ok(vec![text_block(
                "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
            )])
        }
        Fixture::Sampling
        | Fixture::Elicitation
        | Fixture::ElicitationDefaults
        | Fixture::ElicitationEnums => {
            let (need, params) = server_request(f, args);
            if !rev.has_handshake() {
                return input_round(f, need, params, ctx, rev);
            }
            if !ctx.caps.contains(need.cap()) {
                return tool_error(
                    format!(
                        "the client did not declare the {} capability",
                        need.cap_name()
                    ),
                    rev,
                );
            }
            match ask(io, need.method(), params).await {
                Ok(answer) => ok(vec![text_block(answered_text(f, &answer))]),
                Err(why) => tool_error(why, rev),
            }
        }
    }
}

/// 2026-07-28 (MRTR): the first call returns the input request; the retry carrying
/// `inputResponses` gets the tool's result.
fn input_round(f: Fixture, need: Need, params: Value, ctx: &CallContext, rev: Revision) -> Vec<u8> {
    let key = need.cap_name();
    let request = request_json(&ctx.request);
    match request.pointer(&format!("/params/inputResponses/{key}")) {
        Some(answer) => tool_result(vec![text_block(answered_text(f, answer))], false, rev),
        None => result_json(
            json!({
                "resultType": "input_required",
                "inputRequests": {key: {"method": need.method(), "params": params}},
            }),
            rev,
            false,
        ),
    }
}

/// The `capabilities` of `initialize` when the fixtures are served.
pub(crate) fn capabilities(rev: Revision) -> &'static str {
    if rev >= Revision::V2025_03_26 {
        r#"{"tools":{"listChanged":false},"prompts":{"listChanged":false},"resources":{"subscribe":true,"listChanged":false},"logging":{},"completions":{}}"#
    } else {
        r#"{"tools":{"listChanged":false},"prompts":{"listChanged":false},"resources":{"subscribe":true,"listChanged":false},"logging":{}}"#
    }
}

/// The conformance fixtures' tools, in suite order.
pub(crate) fn tools() -> impl Iterator<Item = Tool> {
    Fixture::ALL.into_iter().map(Fixture::tool)
}

/// The `server/discover` capabilities when the fixtures are served (2026-07-28 has no
/// resource subscriptions outside `subscriptions/listen`, which this server does not offer).
pub(crate) fn discover_capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "prompts": {"listChanged": false},
        "resources": {"listChanged": false},
        "logging": {},
        "completions": {},
    })
}

struct PromptDef {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// Required string arguments and their descriptions.
    args: &'static [(&'static str, &'static str)],
}

const PROMPTS: &[PromptDef] = &[
    PromptDef {
        name: "test_simple_prompt",
        title: "Simple Test Prompt",
        description: "A simple prompt without arguments",
        args: &[],
    },
    PromptDef {
        name: "test_prompt_with_arguments",
        title: "Prompt With Arguments",
        description: "A prompt with required arguments",
        args: &[
            ("arg1", "First test argument"),
            ("arg2", "Second test argument"),
        ],
    },
    PromptDef {
        name: "test_prompt_with_embedded_resource",
        title: "Prompt With Embedded Resource",
        description: "A prompt that includes an embedded resource",
        args: &[("resourceUri", "URI of the resource to embed")],
    },
    PromptDef {
        name: "test_prompt_with_image",
        title: "Prompt With Image",
        description: "A prompt that includes image content",
        args: &[],
    },
];

struct ResourceDef {
    uri: &'static str,
    name: &'static str,
    title: &'static str,
    description: &'static str,
    mime: &'static str,
    /// Text, or base64 for a blob.
    body: Body,
}

enum Body {
    Text(&'static str),
    Blob(&'static str),
}

const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        uri: "test://static-text",
        name: "static-text",
        title: "Static Text Resource",
        description: "A static text resource for testing",
        mime: "text/plain",
        body: Body::Text("This is the content of the static text resource."),
    },
    ResourceDef {
        uri: "test://static-binary",
        name: "static-binary",
        title: "Static Binary Resource",
        description: "A static binary resource (image) for testing",
        mime: "image/png",
        body: Body::Blob(IMAGE_PNG),
    },
    ResourceDef {
        uri: "test://watched-resource",
        name: "watched-resource",
        title: "Watched Resource",
        description: "A resource clients can subscribe to (its content never changes)",
        mime: "text/plain",
        body: Body::Text("Watched resource content"),
    },
];

const TEMPLATE: &str = "test://template/{id}/data";

/// The `{id}` of a URI that matches [`TEMPLATE`].
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The answer to one non-benchmark method, or `None` if the fixtures do not serve it (in this
/// era).
pub(crate) fn answer(
    rev: Revision,
    id: &str,
    method: &str,
    frame: &[u8],
    peer: Option<&Peer<'_>>,
) -> Option<Vec<u8>> {
    let modern = !rev.has_handshake();
    let request = request_json(frame);
    let params = request.get("params").cloned().unwrap_or(json!({}));
    let string = |k: &str| params.get(k).and_then(Value::as_str);
    let mut out = Vec::with_capacity(256);
    let mut error = |code: i64, message: &str, data: Option<Value>| {
        let data = data.map(|d| serde_json::to_vec(&d).unwrap_or_default());
        write_error(&mut out, Some(id), code, message, data.as_deref());
    };
    let result = match method {
        "logging/setLevel" if !modern => {
            let peer = peer?;
            match string("level").and_then(LogLevel::parse) {
                Some(level) => {
                    peer.client.set_log_level(level);
                    Ok(json!({}))
                }
                None => Err((code::INVALID_PARAMS, "Invalid params: unknown log level")),
            }
        }
        "resources/subscribe" | "resources/unsubscribe" if !modern => {
            let peer = peer?;
            match string("uri") {
                Some(uri) if resource_known(uri) => {
                    if method == "resources/subscribe" {
                        peer.client.subscribe(uri);
                    } else {
                        peer.client.unsubscribe(uri);
                    }
                    Ok(json!({}))
                }
                Some(uri) => {
                    error(
                        RESOURCE_NOT_FOUND,
                        "Resource not found",
                        Some(json!({"uri": uri})),
                    );
                    return Some(out);
                }
                None => Err((code::INVALID_PARAMS, "Invalid params: uri is required")),
            }
        }
        "prompts/list" | "resources/list" | "resources/templates/list"
            if params.get("cursor").is_some() =>
        {
            Err((code::INVALID_PARAMS, "Invalid params: unknown cursor"))
        }
        "prompts/list" => Ok(json!({"prompts": PROMPTS.iter().map(|p| {
            let mut v = json!({
                "name": p.name,
                "description": p.description,
                "arguments": p.args.iter().map(|(n, d)| json!({"name": n, "description": d, "required": true})).collect::<Vec<_>>(),
            });
            if rev.has_tool_title() {
                v["title"] = json!(p.title);
            }
            v
        }).collect::<Vec<_>>()})),
        "prompts/get" => {
            let name = string("name").unwrap_or_default();
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            match prompt(name, &args) {
                Ok(v) => Ok(v),
                Err(msg) => {
                    error(code::INVALID_PARAMS, &msg, None);
                    return Some(out);
                }
            }
        }
        "resources/list" => Ok(json!({"resources": RESOURCES.iter().map(|r| {
            let mut v = json!({"uri": r.uri, "name": r.name, "description": r.description, "mimeType": r.mime});
            if rev.has_tool_title() {
                v["title"] = json!(r.title);
            }
            v
        }).collect::<Vec<_>>()})),
        "resources/templates/list" => {
            let mut t = json!({
                "uriTemplate": TEMPLATE,
                "name": "template",
                "description": "A resource template with parameter substitution",
                "mimeType": "application/json",
            });
            if rev.has_tool_title() {
                t["title"] = json!("Resource Template");
            }
            Ok(json!({"resourceTemplates": [t]}))
        }
        "resources/read" => match string("uri").map(read) {
            Some(Some(contents)) => Ok(json!({"contents": [contents]})),
            Some(None) => {
                let uri = string("uri").unwrap_or_default();
                // 2026-07-28 retired -32002 in favour of -32602.
                let code = if modern {
                    code::INVALID_PARAMS
                } else {
                    RESOURCE_NOT_FOUND
                };
                error(code, "Resource not found", Some(json!({"uri": uri})));
                return Some(out);
            }
            None => Err((code::INVALID_PARAMS, "Invalid params: uri is required")),
        },
        "completion/complete" => match complete(&params) {
            Ok(values) => {
                let total = values.len();
                Ok(json!({"completion": {"values": values, "total": total, "hasMore": false}}))
            }
            Err(msg) => {
                error(code::INVALID_PARAMS, &msg, None);
                return Some(out);
            }
        },
        _ => return None,
    };
    match result {
        Ok(v) => {
            let cacheable = matches!(
                method,
                "prompts/list" | "resources/list" | "resources/templates/list" | "resources/read"
            );
            write_result(&mut out, id, &result_json(v, rev, cacheable));
        }
        Err((code, message)) => error(code, message, None),
    }
    Some(out)
}

fn resource_known(uri: &str) -> bool {
    RESOURCES.iter().any(|r| r.uri == uri) || template_id(uri).is_some()
}

/// The `contents` entry of a resource, or `None` for an unknown URI.
fn read(uri: &str) -> Option<Value> {
    if let Some(r) = RESOURCES.iter().find(|r| r.uri == uri) {
        return Some(match r.body {
            Body::Text(t) => json!({"uri": r.uri, "mimeType": r.mime, "text": t}),
            Body::Blob(b) => json!({"uri": r.uri, "mimeType": r.mime, "blob": b}),
        });
    }
    let id = template_id(uri)?;
    let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
    Some(json!({"uri": uri, "mimeType": "application/json", "text": text.to_string()}))
}

/// The `prompts/get` result, or the `-32602` message.
fn prompt(name: &str, args: &Value) -> Result<Value, String> {
    let def = PROMPTS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("Invalid params: unknown prompt `{name}`"))?;
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    for (k, _) in def.args {
        if arg(k).is_none() {
            return Err(format!("Invalid params: missing required argument `{k}`"));
        }
    }
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match name {
        "test_simple_prompt" => vec![user(text_block("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text_block(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1").unwrap_or_default(),
            arg("arg2").unwrap_or_default()
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(json!({
                "type": "resource",
                "resource": {
                    "uri": arg("resourceUri").unwrap_or_default(),
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing.",
                },
            })),
            user(text_block("Please process the embedded resource above.")),
        ],
        _ => vec![
            user(image_block()),
            user(text_block("Please analyze the image above.")),
        ],
    };
    Ok(json!({"description": def.description, "messages": messages}))
}

/// Completion values for a prompt argument or a template variable, filtered by prefix.
fn complete(params: &Value) -> Result<Vec<&'static str>, String> {
    let r = params.get("ref").unwrap_or(&Value::Null);
    let arg_name = params
        .pointer("/argument/name")
        .and_then(Value::as_str)
        .ok_or("Invalid params: argument.name is required")?;
    let prefix = params
        .pointer("/argument/value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let candidates: &[&'static str] = match r.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
            let def = PROMPTS
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| format!("Invalid params: unknown prompt `{name}`"))?;
            match (def.name, arg_name) {
                ("test_prompt_with_arguments", "arg1" | "arg2") => {
                    &["paris", "park", "party", "test", "testValue"]
                }
                ("test_prompt_with_embedded_resource", "resourceUri") => &[
                    "test://static-text",
                    "test://static-binary",
                    "test://watched-resource",
                ],
                _ => &[],
            }
        }
        Some("ref/resource") => {
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
            if uri != TEMPLATE {
                return Err(format!("Invalid params: unknown resource template `{uri}`"));
            }
            if arg_name == "id" {
                &["1", "2", "3", "123"]
            } else {
                &[]
            }
        }
        _ => return Err("Invalid params: ref must be ref/prompt or ref/resource".into()),
    };
    Ok(candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(prefix))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::wire::TTL_MS;

    fn answer_json(rev: Revision, method: &str, params: Value) -> Value {
        let frame = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .unwrap();
        let out = answer(rev, "1", method, &frame, None).expect("answered");
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn fixtures_by_revision() {
        let available = |f: Fixture, rev| f.tool().available(rev);
        assert!(!available(Fixture::Audio, Revision::V2024_11_05));
        assert!(available(Fixture::Audio, Revision::V2025_03_26));
        assert!(!available(Fixture::ElicitationEnums, Revision::V2025_06_18));
        assert!(available(Fixture::Reconnection, Revision::V2025_11_25));
        assert!(!available(Fixture::Reconnection, Revision::V2026_07_28));
        for (i, f) in Fixture::ALL.iter().enumerate() {
            assert_eq!(f.tool().kind, ToolKind::Fixture(i));
            assert_eq!(Fixture::from_index(i), Some(*f));
        }
        let names: std::collections::HashSet<_> = Fixture::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), Fixture::ALL.len());
        let schema = Fixture::JsonSchema.tool().input_schema;
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert!(schema["$defs"]["address"].is_object());
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn prompts_resources_and_completions() {
        let rev = Revision::V2025_11_25;
        let list = answer_json(rev, "prompts/list", json!({}));
        let prompts = list["result"]["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), 4);
        assert!(prompts.iter().all(|p| p["description"].is_string()));
        let got = answer_json(
            rev,
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a1", "arg2": "b2"}}),
        );
        assert_eq!(
            got["result"]["messages"][0]["content"]["text"],
            "Prompt with arguments: arg1='a1', arg2='b2'"
        );
        let missing = answer_json(
            rev,
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a1"}}),
        );
        assert_eq!(missing["error"]["code"], code::INVALID_PARAMS);
        let read = answer_json(
            rev,
            "resources/read",
            json!({"uri": "test://template/42/data"}),
        );
        let text = read["result"]["contents"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap()["data"],
            "Data for ID: 42"
        );
        let blob = answer_json(
            rev,
            "resources/read",
            json!({"uri": "test://static-binary"}),
        );
        assert_eq!(blob["result"]["contents"][0]["blob"], IMAGE_PNG);
        let nope = answer_json(rev, "resources/read", json!({"uri": "test://nope"}));
        assert_eq!(nope["error"]["code"], RESOURCE_NOT_FOUND);
        let nope = answer_json(
            Revision::V2026_07_28,
            "resources/read",
            json!({"uri": "test://nope", "_meta": {}}),
        );
        assert_eq!(nope["error"]["code"], code::INVALID_PARAMS);
        let c = answer_json(
            rev,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
        );
        assert_eq!(
            c["result"]["completion"],
            json!({"values": ["paris", "park", "party"], "total": 3, "hasMore": false})
        );
        let c = answer_json(
            rev,
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": TEMPLATE}, "argument": {"name": "id", "value": "1"}}),
        );
        assert_eq!(c["result"]["completion"]["values"], json!(["1", "123"]));
        assert!(
            answer(rev, "1", "prompts/nope", b"{}", None).is_none(),
            "unknown methods are left to the caller"
        );
        assert!(
            answer(Revision::V2026_07_28, "1", "logging/setLevel", b"{}", None).is_none(),
            "2026-07-28 has no logging/setLevel"
        );
    }

    #[test]
    fn modern_results_carry_caching_fields() {
        let rev = Revision::V2026_07_28;
        for method in ["prompts/list", "resources/list", "resources/templates/list"] {
            let r = answer_json(rev, method, json!({}));
            assert_eq!(r["result"]["resultType"], "complete", "{method}");
            assert_eq!(r["result"]["ttlMs"], TTL_MS, "{method}");
            assert_eq!(r["result"]["cacheScope"], "public", "{method}");
        }
        let r = answer_json(rev, "resources/read", json!({"uri": "test://static-text"}));
        assert_eq!(r["result"]["ttlMs"], TTL_MS);
        let r = answer_json(rev, "prompts/get", json!({"name": "test_simple_prompt"}));
        assert_eq!(r["result"]["resultType"], "complete");
        assert!(
            r["result"].get("ttlMs").is_none(),
            "prompts/get is not cached"
        );
        let legacy = answer_json(Revision::V2025_06_18, "prompts/list", json!({}));
        assert!(legacy["result"].get("resultType").is_none());
        let d: Value = serde_json::from_slice(&crate::server::wire::discover(
            discover_capabilities(),
            "x",
            &crate::server::wire::server_info(),
        ))
        .unwrap();
        assert!(d["capabilities"]["prompts"].is_object() && d["ttlMs"] == TTL_MS);
    }
}
