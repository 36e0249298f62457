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
//!
//! Here the tools (and what they share with the rest: content blocks, capabilities); prompts,
//! resources, completions, the log level and subscriptions are answered in `fixture_methods`.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::body::PARK;
use super::context::{Io, Peer};
use super::peer::{ClientCaps, LogLevel};
use super::tools::{Tool, ToolKind};
use super::wire::{Params, Refusal, result_json};
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

/// A frame as JSON (`null` if it is not JSON).
pub(super) fn request_json(frame: &[u8]) -> Value {
    serde_json::from_slice(frame).unwrap_or(Value::Null)
}

/// A text content block.
pub(super) fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

/// An image content block: the 1×1 PNG.
pub(super) fn image_block() -> Value {
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
            progress_steps(io, progress, rev).await;
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
        | Fixture::ElicitationEnums => round_trip(f, args, ctx, rev, io).await,
    }
}

/// The progress fixture's three steps (0, 50, 100 of 100), each a `notifications/progress`
/// when the request gave a progress token.
async fn progress_steps(io: Io<'_>, progress: Option<&[u8]>, rev: Revision) {
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
}

/// A sampling or elicitation fixture: the server request asked of the client (on the call's
/// stream; in 2026-07-28 as an input round), and the tool's text made of its answer.
async fn round_trip(
    f: Fixture,
    args: &Value,
    ctx: &CallContext,
    rev: Revision,
    io: Io<'_>,
) -> Vec<u8> {
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
        Ok(answer) => tool_result(vec![text_block(answered_text(f, &answer))], false, rev),
        Err(why) => tool_error(why, rev),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
