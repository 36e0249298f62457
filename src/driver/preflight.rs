//! Before load: is the target reachable, which revision does it speak, does it list the tools
//! the workload calls, and do the generated arguments fit their input schemas? One clear error
//! here beats a million identical failures later. Every target goes through here — the
//! embedded reference server answers `tools/list` like any other.

use std::sync::Arc;

use rand::SeedableRng;
use serde_json::Value;

use crate::metrics::outcome::Outcome;
use crate::protocol::version::Revision;
use crate::protocol::{mcp, schema};
use crate::scenario::{Diagnostic, Method, Plan, ProtocolChoice, WorkItem, closest};
use crate::transport::legacy_sse_client::SseConnector;
use crate::transport::mux::MuxSession;
use crate::transport::stdio_client::StdioConnector;
use crate::transport::streamable_http::HttpSession;
use crate::transport::ws_client::WsConnector;
use crate::transport::{CallSpec, Endpoint, Session, TransportKind};

use super::templates::{RequestTemplate, call_spec};

/// What the preflight learned.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub revision: Revision,
    /// Tools the target lists (all pages): name and definition (`inputSchema`, `outputSchema`,
    /// annotations… as the target wrote them).
    pub tools: Vec<(String, Value)>,
}

/// Why the target cannot be load-tested.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PreflightError {
    #[error("cannot open an MCP session: {0}")]
    Open(String),
    #[error("tools/list failed: {0}")]
    List(String),
}

/// Describes an outcome for a person.
pub fn describe(o: Outcome) -> String {
    match o {
        Outcome::Connect => {
            "cannot connect (refused, unreachable, TLS failure, or the command could not start)"
                .into()
        }
        Outcome::Timeout => "no answer within the timeout".into(),
        Outcome::Io => "the connection broke before a complete response".into(),
        Outcome::Http(s) => format!("HTTP {s}"),
        Outcome::RpcError(c) => format!("JSON-RPC error {c}"),
        Outcome::InputRequired => {
            "the server asked for client input (resultType input_required), which a load generator does not give".into()
        }
        Outcome::Protocol(k) => format!("protocol violation ({})", k.name()),
        other => other.to_string(),
    }
}

/// The most `tools/list` pages walked.
const MAX_PAGES: usize = 1000;

/// Opens a session as the plan says (`protocol = "auto"`: probe `server/discover`, then fall
/// back to `initialize` with the newest handshake revision), lists the tools, closes. The
/// endpoint is updated to the revision found.
pub fn connect(
    rt: &tokio::runtime::Runtime,
    choice: ProtocolChoice,
    endpoint: &mut Endpoint,
) -> Result<Preflight, PreflightError> {
    let on = |ep: Endpoint| tokio::task::LocalSet::new().block_on(rt, run(Arc::new(ep)));
    let pre = match (choice, on(endpoint.clone())) {
        (_, Ok(p)) => p,
        (ProtocolChoice::Auto, Err(modern)) => {
            endpoint.protocol = Revision::LATEST_HANDSHAKE;
            on(endpoint.clone()).map_err(|legacy| {
                PreflightError::Open(format!("2026-07-28 probe: {modern}; initialize: {legacy}"))
            })?
        }
        (_, Err(e)) => return Err(e),
    };
    if !pre.revision.has_handshake() {
        endpoint.protocol = pre.revision;
    }
    Ok(pre)
}

/// Work done on one session of whatever transport the endpoint uses.
trait OnSession {
    type Output;
    async fn on<S: Session>(self, s: S, ep: &Endpoint) -> Self::Output;
}

/// Runs `task` on a new session of the endpoint's transport (responses kept, so the task can
/// read them).
async fn on_session<T: OnSession>(ep: Arc<Endpoint>, task: T) -> T::Output {
    match ep.kind {
        TransportKind::StreamableHttp => task.on(HttpSession::new(ep.clone()), &ep).await,
        TransportKind::Stdio => {
            task.on(keeping(MuxSession::<StdioConnector>::new(ep.clone())), &ep)
                .await
        }
        TransportKind::WebSocket => {
            task.on(keeping(MuxSession::<WsConnector>::new(ep.clone())), &ep)
                .await
        }
        TransportKind::LegacySse => {
            task.on(keeping(MuxSession::<SseConnector>::new(ep.clone())), &ep)
                .await
        }
    }
}

/// Opens a session on the endpoint's transport, lists the tools, closes.
pub async fn run(ep: Arc<Endpoint>) -> Result<Preflight, PreflightError> {
    on_session(ep, ListTools).await
}

fn keeping<C: crate::transport::mux::Connector>(mut s: MuxSession<C>) -> MuxSession<C> {
    s.keep_responses();
    s
}

/// Opens the session within the endpoint's timeout; the revision it speaks.
async fn open<S: Session>(s: &mut S, ep: &Endpoint) -> Result<Revision, PreflightError> {
    match tokio::time::timeout(ep.timeout, s.open()).await {
        Err(_) => Err(PreflightError::Open(describe(Outcome::Timeout))),
        Ok(r) if r.outcome != Outcome::Ok || !s.is_open() => Err(PreflightError::Open(refusal(
            r.outcome,
            s.last_message(),
            ep.protocol,
        ))),
        Ok(_) => Ok(s.revision().unwrap_or(ep.protocol)),
    }
}

/// Why a session could not be opened, with what the server did: the revision it answered
/// and those mcpbench speaks, or the first bytes of what it sent.
pub fn refusal(outcome: Outcome, said: &[u8], offered: Revision) -> String {
    let mut why = describe(outcome);
    let json: Option<Value> = serde_json::from_slice(said).ok();
    let result = json.as_ref().and_then(|v| v.get("result"));
    if outcome == Outcome::Protocol(crate::metrics::outcome::ProtocolKind::Handshake) {
        let speaks = Revision::ALL.map(|r| r.to_string()).join(", ");
        let answered = result
            .and_then(|r| {
                r.get("protocolVersion")
                    .or_else(|| r.get("supportedVersions"))
            })
            .map(Value::to_string);
        why.push_str(&match answered {
            Some(v) => format!(
                ": offered {offered}, the server answered protocol version {v}; mcpbench speaks {speaks}"
            ),
            None => format!(
                ": offered {offered}, the answer names no protocol version mcpbench speaks ({speaks})"
            ),
        });
    }
    if !said.is_empty() && result.is_none() {
        let text = String::from_utf8_lossy(&said[..said.len().min(200)]);
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        why.push_str(&format!("; the server said: {}", text.trim()));
        if said.len() > 200 {
            why.push('…');
        }
    }
    why
}

struct ListTools;

impl OnSession for ListTools {
    type Output = Result<Preflight, PreflightError>;
    async fn on<S: Session>(self, mut s: S, ep: &Endpoint) -> Self::Output {
        let revision = open(&mut s, ep).await?;
        let tools = list_tools(&mut s, revision, ep.timeout).await;
        s.close().await;
        Ok(Preflight {
            revision,
            tools: tools?,
        })
    }
}

/// How one workload entry fared when sent once.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub outcome: Outcome,
    /// The server's words when it failed: the JSON-RPC error message or the tool's error
    /// text (shortened).
    pub message: Option<String>,
}

/// Sends each workload entry of `plan` once, on one session, with the bytes a load run would
/// send (`mcpbench init` keeps the tools that answer). The endpoint must have passed
/// [`connect`].
pub async fn trial(ep: Arc<Endpoint>, plan: Arc<Plan>) -> Result<Vec<Trial>, PreflightError> {
    on_session(ep, Trials(plan)).await
}

struct Trials(Arc<Plan>);

impl OnSession for Trials {
    type Output = Result<Vec<Trial>, PreflightError>;
    async fn on<S: Session>(self, mut s: S, ep: &Endpoint) -> Self::Output {
        let revision = open(&mut s, ep).await?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut out = Vec::with_capacity(self.0.workload.len());
        for item in &self.0.workload {
            let template = RequestTemplate::new(item, revision);
            let spec = call_spec(item, revision);
            let call = s.call(&spec, |buf, id| {
                template.write(item, buf, id, &mut rng);
            });
            let outcome = match tokio::time::timeout(ep.timeout, call).await {
                Ok(r) => r.outcome,
                Err(_) => Outcome::Timeout,
            };
            // The server's words, when it answered at all.
            let answered = matches!(
                outcome,
                Outcome::ToolError | Outcome::RpcError(_) | Outcome::InputRequired
            );
            let message = answered.then(|| failure_text(s.last_message())).flatten();
            out.push(Trial { outcome, message });
            if !s.is_open() && open(&mut s, ep).await.is_err() {
                break;
            }
        }
        s.close().await;
        Ok(out)
    }
}

/// What a failed response says: `error.message`, or the text of an `isError` result.
pub fn failure_text(message: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(message).ok()?;
    let text = v["error"]["message"]
        .as_str()
        .or_else(|| v["result"]["content"][0]["text"].as_str())?;
    let mut t: String = text.chars().filter(|c| !c.is_control()).take(160).collect();
    if text.chars().count() > 160 {
        t.push('…');
    }
    Some(t)
}

/// Walks every `tools/list` page of an open session: each tool's name and definition.
pub async fn list_tools<S: Session>(
    s: &mut S,
    revision: Revision,
    timeout: std::time::Duration,
) -> Result<Vec<(String, Value)>, PreflightError> {
    let spec = CallSpec::new("tools/list", None, revision);
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let c = cursor.take();
        let call = s.call(&spec, |out, id| {
            mcp::write_tools_list(out, id, revision, c.as_deref())
        });
        let reply = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| PreflightError::List(describe(Outcome::Timeout)))?;
        if reply.outcome != Outcome::Ok {
            return Err(PreflightError::List(describe(reply.outcome)));
        }
        let v: Value = serde_json::from_slice(s.last_message())
            .map_err(|_| PreflightError::List("the result is not JSON".into()))?;
        let result = &v["result"];
        let Some(page) = result["tools"].as_array() else {
            return Err(PreflightError::List("the result has no tools array".into()));
        };
        for t in page {
            if let Some(n) = t["name"].as_str() {
                tools.push((n.to_string(), t.clone()));
            }
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
    }
    Ok(tools)
}

/// Renderings of each workload entry's arguments checked against the tool's schema.
const ARGUMENT_SAMPLES: usize = 32;

/// Every tool the workload calls is listed by the target, and its generated arguments fit the
/// tool's input schema (a sample of renderings, checked with a complete JSON Schema validator:
/// `anyOf`, `$ref`, `pattern`, `format`… — a server that checks them would fail every call
/// under load). Errors point at the scenario, with a "did you mean".
pub fn check_workload(plan: &Plan, pre: &Preflight) -> Result<(), Box<Diagnostic>> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    for item in &plan.workload {
        let Method::ToolsCall { tool } = &item.method else {
            continue;
        };
        let Some((_, definition)) = pre.tools.iter().find(|(n, _)| n == tool) else {
            return Err(Box::new(unknown_tool(item, tool, &pre.tools)));
        };
        let validator = match schema::compile(&definition["inputSchema"]) {
            Ok(v) => v,
            Err(reason) => {
                let at = item.arguments_place.as_ref().unwrap_or(&item.place);
                return Err(Box::new(at.diagnostic(
                    format!("the target's input schema of tool `{tool}` is not a usable JSON Schema: {reason}"),
                    Some("the target must fix its tools/list; mcpbench checks arguments against it before load".into()),
                )));
            }
        };
        for _ in 0..ARGUMENT_SAMPLES {
            let args = item.arguments.sample(&mut rng);
            if let Err(e) = schema::check(&validator, &args) {
                // At the argument the schema rejects (`workload[1].arguments.ms`), on the line
                // of the arguments table.
                let mut at = item.arguments_place.clone().unwrap_or(item.place.clone());
                for segment in &e.path {
                    at.key.push('.');
                    at.key.push_str(segment);
                }
                return Err(Box::new(at.diagnostic(
                    format!("the arguments generated for tool `{tool}` do not fit its input schema: {}", e.message),
                    Some(format!(
                        "example: {args}\n  fix the generators in `arguments` (see scenarios/README.md)"
                    )),
                )));
            }
        }
    }
    Ok(())
}

fn unknown_tool(item: &WorkItem, tool: &str, listed: &[(String, Value)]) -> Diagnostic {
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    let suggestion = closest(tool, &names)
        .map(|s| format!("did you mean `{s}`? "))
        .unwrap_or_default();
    let shown = names
        .iter()
        .take(20)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let listing = match names.len() {
        0 => "it lists no tools".to_string(),
        n if n > 20 => format!("it lists {shown} and {} more", n - 20),
        _ => format!("it lists {shown}"),
    };
    item.place.diagnostic(
        format!("unknown tool `{tool}`: the target does not list it"),
        Some(format!("{suggestion}{listing}")),
    )
}
