//! The conformance fixtures beyond tools (see `fixtures` for the suite and the era rules): four
//! prompts, three resources and a resource template, completions, and in the handshake era
//! `logging/setLevel` and resource subscriptions. Served only with
//! [`Config::conformance`](super::Config::conformance); not on a benchmark's hot path.

use serde_json::{Value, json};

use super::context::Peer;
use super::fixtures::{IMAGE_PNG, RESOURCE_NOT_FOUND, image_block, request_json, text_block};
use super::peer::LogLevel;
use super::wire::{result_json, write_error, write_result};
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

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

/// A fixture method's error: its JSON-RPC code, message and data.
struct Failure {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl Failure {
    /// `-32602` with `message`.
    fn params(message: impl Into<String>) -> Self {
        Failure {
            code: code::INVALID_PARAMS,
            message: message.into(),
            data: None,
        }
    }

    /// Resource not found, with the era's `code` and the URI as data.
    fn no_resource(code: i64, uri: &str) -> Self {
        Failure {
            code,
            message: "Resource not found".into(),
            data: Some(json!({"uri": uri})),
        }
    }
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
    let result = match method {
        "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" if !modern => {
            session_method(method, &params, peer?)
        }
        "prompts/list" | "resources/list" | "resources/templates/list"
            if params.get("cursor").is_some() =>
        {
            Err(Failure::params("Invalid params: unknown cursor"))
        }
        "prompts/list" => Ok(prompts_list(rev)),
        "prompts/get" => {
            let name = string("name").unwrap_or_default();
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            prompt(name, &args).map_err(Failure::params)
        }
        "resources/list" => Ok(resources_list(rev)),
        "resources/templates/list" => Ok(templates_list(rev)),
        "resources/read" => match string("uri") {
            Some(uri) => read(uri)
                .map(|contents| json!({"contents": [contents]}))
                // 2026-07-28 retired -32002 in favour of -32602.
                .ok_or_else(|| {
                    let code = if modern {
                        code::INVALID_PARAMS
                    } else {
                        RESOURCE_NOT_FOUND
                    };
                    Failure::no_resource(code, uri)
                }),
            None => Err(Failure::params("Invalid params: uri is required")),
        },
        "completion/complete" => complete(&params)
            .map(|values| {
                let total = values.len();
                json!({"completion": {"values": values, "total": total, "hasMore": false}})
            })
            .map_err(Failure::params),
        _ => return None,
    };
    let mut out = Vec::with_capacity(256);
    match result {
        Ok(v) => {
            let cacheable = matches!(
                method,
                "prompts/list" | "resources/list" | "resources/templates/list" | "resources/read"
            );
            write_result(&mut out, id, &result_json(v, rev, cacheable));
        }
        Err(f) => {
            let data = f.data.map(|d| serde_json::to_vec(&d).unwrap_or_default());
            write_error(&mut out, Some(id), f.code, &f.message, data.as_deref());
        }
    }
    Some(out)
}

/// Handshake era: `logging/setLevel`, `resources/subscribe` and `resources/unsubscribe`, kept
/// by the session's client.
fn session_method(method: &str, params: &Value, peer: &Peer<'_>) -> Result<Value, Failure> {
    let string = |k: &str| params.get(k).and_then(Value::as_str);
    if method == "logging/setLevel" {
        let level = string("level")
            .and_then(LogLevel::parse)
            .ok_or_else(|| Failure::params("Invalid params: unknown log level"))?;
        peer.client.set_log_level(level);
        return Ok(json!({}));
    }
    let uri = string("uri").ok_or_else(|| Failure::params("Invalid params: uri is required"))?;
    if !resource_known(uri) {
        return Err(Failure::no_resource(RESOURCE_NOT_FOUND, uri));
    }
    if method == "resources/subscribe" {
        peer.client.subscribe(uri);
    } else {
        peer.client.unsubscribe(uri);
    }
    Ok(json!({}))
}

/// The `prompts/list` result.
fn prompts_list(rev: Revision) -> Value {
    json!({"prompts": PROMPTS.iter().map(|p| {
        let mut v = json!({
            "name": p.name,
            "description": p.description,
            "arguments": p.args.iter().map(|(n, d)| json!({"name": n, "description": d, "required": true})).collect::<Vec<_>>(),
        });
        if rev.has_tool_title() {
            v["title"] = json!(p.title);
        }
        v
    }).collect::<Vec<_>>()})
}

/// The `resources/list` result.
fn resources_list(rev: Revision) -> Value {
    json!({"resources": RESOURCES.iter().map(|r| {
        let mut v = json!({"uri": r.uri, "name": r.name, "description": r.description, "mimeType": r.mime});
        if rev.has_tool_title() {
            v["title"] = json!(r.title);
        }
        v
    }).collect::<Vec<_>>()})
}

/// The `resources/templates/list` result: the one template.
fn templates_list(rev: Revision) -> Value {
    let mut t = json!({
        "uriTemplate": TEMPLATE,
        "name": "template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json",
    });
    if rev.has_tool_title() {
        t["title"] = json!("Resource Template");
    }
    json!({"resourceTemplates": [t]})
}

/// Whether `uri` is one of the resources or matches the template.
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
    use crate::server::fixtures::discover_capabilities;
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
