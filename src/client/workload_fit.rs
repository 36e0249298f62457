//! A workload held to what a server lists: every tool it calls listed, its generated
//! arguments fitting the tool's input schema ([`check_workload`]); and each entry sent once with
//! the bytes a run sends ([`trial`], for `mcpbench init`).

use std::sync::Arc;

use rand::SeedableRng;
use serde_json::Value;

use super::failure::{PreflightError, failure_text};
use super::handshake::{Preflight, open};
use super::request::{RequestTemplate, call_spec};
use super::sessions::{OnSession, on_session};
use crate::metrics::outcome::Outcome;
use crate::protocol::schema;
use crate::scenario::{Diagnostic, Method, Plan, WorkItem, closest};
use crate::transport::{Endpoint, Session};

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
/// [`connect`](super::connect).
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
                        "rejected rendering: {args}; {}\n  fix the generators in `arguments` (see scenarios/README.md)",
                        takes(tool, &definition["inputSchema"])
                    )),
                )));
            }
        }
    }
    Ok(())
}

/// What a tool's input schema takes, in a line: "tool `echo` takes `message` (string,
/// required)".
fn takes(tool: &str, schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object().filter(|p| !p.is_empty()) else {
        return format!("tool `{tool}` takes no named arguments");
    };
    let list: Vec<String> = props
        .iter()
        .map(|(name, p)| {
            let kind = p["type"].as_str().unwrap_or("any");
            let req = if required.contains(&name.as_str()) {
                ", required"
            } else {
                ""
            };
            format!("`{name}` ({kind}{req})")
        })
        .collect();
    format!("tool `{tool}` takes {}", list.join(", "))
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
