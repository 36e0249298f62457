//! Other people's MCP clients against mcpbench's reference server: the Python SDK's `Client`,
//! the TypeScript SDK's `Client` (1.x) and the MCP Inspector CLI (TypeScript SDK v2), over every
//! transport each has, in each protocol era each speaks. The client scripts in
//! `interop/clients/` print what they saw as JSON; the tests judge it.

use std::process::{Command, Output};

use serde_json::{Value, json};

use super::harness::{json_output, node, node_module, python, script};
use crate::support::{scratch, servers};

/// The reference server's built-in tools, as `tools/list` names them.
const BUILTIN: &[&str] = mcpbench::server::BUILTIN_TOOLS;

fn mcpbench_stdio() -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_mcpbench").to_string(),
        "serve".into(),
        "--stdio".into(),
    ]
}

/// One verdict of a client script: it connected with `revision`, listed every built-in tool and
/// called each with the right outcome (`fail` is a tool error, the rest succeed; results carry
/// what the tool promises).
fn verdict_ok(label: &str, v: &Value, revision: &str) {
    assert!(v.get("error").is_none(), "{label}: {v:#}");
    assert_eq!(v["protocol_version"], revision, "{label}");
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: no tools: {v:#}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in BUILTIN {
        assert!(tools.contains(t), "{label}: {t} not listed: {tools:?}");
    }
    let calls = &v["calls"];
    for t in BUILTIN {
        let c = &calls[t];
        assert!(c.get("exception").is_none(), "{label} {t}: {c}");
        assert_eq!(c["is_error"], *t == "fail", "{label} {t}: {c}");
    }
    assert_eq!(calls["echo"]["text"], "interop-echo", "{label}");
    assert_eq!(calls["fail"]["text"], "on purpose", "{label}");
    assert_eq!(calls["sleep"]["text"], "slept 5 ms", "{label}");
    assert_eq!(
        calls["payload"]["text"].as_str().map(str::len),
        Some(64),
        "{label}"
    );
    assert_eq!(calls["progress"]["text"], "done after 3 steps", "{label}");
    let contacts: Value = serde_json::from_str(calls["search-contacts"]["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{label}: search-contacts result is JSON: {e}"));
    assert_eq!(contacts["results"][0]["name"], "Leanne Graham", "{label}");
    let invoice: Value = serde_json::from_str(calls["get-invoice"]["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{label}: get-invoice result is JSON: {e}"));
    assert_eq!(invoice["id"], 7, "{label}");
    let ticket: Value = serde_json::from_str(calls["create-ticket"]["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{label}: create-ticket result is JSON: {e}"));
    assert_eq!(ticket["title"], "interop ticket", "{label}");
}

/// Progress values a client reported for the `progress` call.
fn progress(v: &Value) -> Vec<f64> {
    v["progress"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn output(label: &str, cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{label}: cannot run {cmd:?}: {e}"))
}

/// The Python SDK client (`mcp` 2.x): stdio (`mcpbench serve --stdio`), legacy SSE, Streamable
/// HTTP in the handshake era (`legacy`), with `auto` (server/discover → 2026-07-28) and pinned
/// to 2026-07-28. Every progress notification arrives, in order, on every transport.
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn python_sdk_client() {
    let srv = servers(Default::default(), 0, 100, Default::default());
    let a = srv.mcp_addr;
    let stdio = mcpbench_stdio();
    let cases = json!([
        {"label": "http legacy", "mode": "legacy", "transport": "http", "target": [format!("http://{a}/mcp")]},
        {"label": "http auto", "mode": "auto", "transport": "http", "target": [format!("http://{a}/mcp")]},
        {"label": "http 2026-07-28", "mode": "2026-07-28", "transport": "http", "target": [format!("http://{a}/mcp")]},
        {"label": "sse legacy", "mode": "legacy", "transport": "sse", "target": [format!("http://{a}/sse")]},
        {"label": "stdio legacy", "mode": "legacy", "transport": "stdio", "target": stdio},
        {"label": "stdio auto", "mode": "auto", "transport": "stdio", "target": stdio},
    ]);
    let out = output(
        "python sdk client",
        Command::new(python())
            .arg(script("clients/py_client.py"))
            .arg(cases.to_string()),
    );
    let all = json_output("python sdk client", &out);
    for (label, revision, named) in [
        ("http legacy", "2025-11-25", true),
        ("http auto", "2026-07-28", true),
        // Pinned without a probe, the client never sees server/discover's serverInfo.
        ("http 2026-07-28", "2026-07-28", false),
        ("sse legacy", "2025-11-25", true),
        ("stdio legacy", "2025-11-25", true),
        ("stdio auto", "2026-07-28", true),
    ] {
        let v = &all[label];
        let label = format!("python sdk client {label}");
        verdict_ok(&label, v, revision);
        if named {
            assert_eq!(v["server_name"], "mcpbench-reference", "{label}");
        }
        assert_eq!(progress(v), [1.0, 2.0, 3.0], "{label}");
    }
}

/// The TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x, handshake era only) over
/// Streamable HTTP, legacy SSE, WebSocket and stdio, on Node 22.
///
/// Its progress notifications are dispatched a microtask later than responses, so notifications
/// that arrive in the same read as the response are dropped (docs/interop.md): over Streamable
/// HTTP, where each SSE event is a separate read, all three arrive; elsewhere some may be
/// missing, but those that arrive are in order.
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn typescript_sdk_client() {
    let srv = servers(Default::default(), 0, 100, Default::default());
    let a = srv.mcp_addr;
    let cases = json!([
        {"label": "http", "transport": "http", "url": format!("http://{a}/mcp")},
        {"label": "sse", "transport": "sse", "url": format!("http://{a}/sse")},
        {"label": "ws", "transport": "ws", "url": format!("ws://{a}/ws")},
        {"label": "stdio", "transport": "stdio", "command": mcpbench_stdio()},
    ]);
    let out = output(
        "typescript sdk client",
        Command::new(node())
            .arg(script("clients/ts_client.mjs"))
            .arg(cases.to_string()),
    );
    let all = json_output("typescript sdk client", &out);
    for label in ["http", "sse", "ws", "stdio"] {
        let v = &all[label];
        let label = format!("typescript sdk client {label}");
        verdict_ok(&label, v, "2025-11-25");
        assert_eq!(v["server_name"], "mcpbench-reference", "{label}");
        let p = progress(v);
        if label.ends_with("http") {
            assert_eq!(p, [1.0, 2.0, 3.0], "{label}");
        } else {
            assert!(
                p.windows(2).all(|w| w[0] < w[1]) && p.iter().all(|x| [1.0, 2.0, 3.0].contains(x)),
                "{label}: {p:?}"
            );
        }
    }
}

/// The MCP Inspector CLI (`@modelcontextprotocol/inspector`, TypeScript SDK v2) on Node 22:
/// `tools/list` and `tools/call echo` over Streamable HTTP and stdio in both eras
/// (`--protocol-era legacy` and `modern`) and over legacy SSE. A 2026-07-28 result is told
/// apart by the `_meta` serverInfo the reference server adds only in that era.
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn inspector_cli() {
    let srv = servers(Default::default(), 0, 100, Default::default());
    let a = srv.mcp_addr;
    let home = scratch();
    let inspector = node_module("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let http_url = format!("http://{a}/mcp");
    let sse_url = format!("http://{a}/sse");
    let stdio = mcpbench_stdio();
    let mut cases: Vec<(String, &str, Vec<String>)> = Vec::new();
    for (transport, target) in [
        ("http", vec![http_url.clone()]),
        ("sse", vec![sse_url.clone()]),
        ("stdio", stdio.clone()),
    ] {
        for era in ["legacy", "modern"] {
            cases.push((format!("{transport} {era}"), era, target.clone()));
        }
    }
    let run = |label: &str, era: &str, target: &[String], method: &[&str]| -> Value {
        let out = output(
            label,
            Command::new(node())
                .arg(&inspector)
                .arg("--cli")
                .args(["--protocol-era", era, "--format", "json"])
                .args(method)
                .arg("--")
                .args(target)
                .env("HOME", home.path())
                .env("MCP_CATALOG_PATH", home.path().join("catalog.json"))
                .env("MCP_CLIENT_CONFIG_PATH", home.path().join("client.json")),
        );
        json_output(label, &out)
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(label, era, target)| {
                scope.spawn(move || {
                    let list = run(
                        &format!("inspector {label} tools/list"),
                        era,
                        target,
                        &["--method", "tools/list"],
                    );
                    let call = run(
                        &format!("inspector {label} tools/call echo"),
                        era,
                        target,
                        &[
                            "--method",
                            "tools/call",
                            "--tool-name",
                            "echo",
                            "--tool-arg",
                            "message=from-inspector",
                        ],
                    );
                    (label, *era, list, call)
                })
            })
            .collect();
        for h in handles {
            let (label, era, list, call) = h.join().expect("inspector run");
            let label = format!("inspector {label}");
            let names: Vec<&str> = list["result"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{label}: {list:#}"))
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
            for t in BUILTIN {
                assert!(names.contains(t), "{label}: {t} not listed: {names:?}");
            }
            let r = &call["result"];
            assert_eq!(r["isError"], false, "{label}: {call:#}");
            assert_eq!(r["content"][0]["text"], "from-inspector", "{label}");
            let server_info = &r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"];
            if era == "modern" {
                assert_eq!(server_info, "mcpbench-reference", "{label}: {call:#}");
            } else {
                assert!(server_info.is_null(), "{label}: {call:#}");
            }
        }
    });
}
