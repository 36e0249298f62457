//! `mcpbench mcp` (mcpbench as an MCP server for agents) driven end to end over stdio: by
//! hand, one JSON message per line (no peer needed: default profile), by the Python SDK's
//! client and by the MCP Inspector CLI (the pinned peers of interop/setup.sh: `full` profile,
//! tests named `interop_*`). Each target is the reference server on 127.0.0.1:0; the refused
//! target, 192.0.2.1 (TEST-NET-1), is never contacted — the refusal comes before any socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use mcpbench::server::{BUILTIN_TOOLS, Config};
use serde_json::{Value, json};

use crate::interop::harness::{json_output, node, node_module, python};
use crate::support::{HANG, launch, repo, scratch};

const TOOLS: [&str; 3] = ["probe", "run", "compare"];

/// `mcpbench mcp` as a child process: stdin for requests, stdout read line by line (each line
/// must be one JSON message), stderr kept for failure messages.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl Mcp {
    fn spawn(args: &[&str]) -> Mcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpbench"))
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpbench mcp starts");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            kept.lock().unwrap().push_str(&s);
        });
        Mcp {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            next_id: 1,
        }
    }

    fn send(&mut self, msg: &Value) {
        let w = self.stdin.as_mut().expect("stdin open");
        writeln!(w, "{msg}").expect("write a line");
        w.flush().unwrap();
    }

    /// The next message on stdout; every line must be one JSON message.
    fn recv(&mut self) -> Value {
        let line = self.lines.recv_timeout(HANG).unwrap_or_else(|e| {
            panic!(
                "no line from mcpbench mcp ({e}); stderr:\n{}",
                self.stderr.lock().unwrap()
            )
        });
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC lines ({e}): {line:?}"))
    }

    /// Sends a request and returns its response (nothing else may come first).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.recv();
        assert_eq!(r["id"], id, "the response to {method}: {r}");
        r
    }

    fn notify(&mut self, method: &str) {
        self.send(&json!({"jsonrpc": "2.0", "method": method}));
    }

    /// `tools/call`: the result (a JSON-RPC error fails the test).
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r.get("error").is_none(), "{tool}: {r}");
        r["result"].clone()
    }

    /// Closes stdin: the server must exit by itself, with nothing more on stdout.
    fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Ok(extra) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    panic!("output after the last response: {extra}");
                }
                return status;
            }
            assert!(start.elapsed() < HANG, "mcpbench mcp did not exit on EOF");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// `result` is an error result whose text says all of `says`.
fn refused(result: &Value, says: &[&str]) {
    assert_eq!(result["isError"], true, "{result}");
    for s in says {
        assert!(text(result).contains(s), "`{s}` not in: {}", text(result));
    }
}

/// Checks `structured` against the tool's listed output schema.
fn fits(tools: &Value, tool: &str, structured: &Value) {
    let schema = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .map(|t| t["outputSchema"].clone())
        .unwrap();
    let v = jsonschema::validator_for(&schema).expect("the output schema compiles");
    let errors: Vec<String> = v.iter_errors(structured).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{tool}: {errors:?}\n{structured:#}");
}

/// Run directories under `root`.
fn runs(root: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(root) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A run's essentials as an agent reads them: every request accounted for and answered ok,
/// its directory written.
fn run_ok(label: &str, s: &Value) -> std::path::PathBuf {
    let t = &s["totals"];
    let started = t["started"].as_u64().unwrap_or(0);
    assert!(started > 0, "{label}: nothing sent: {s:#}");
    assert_eq!(t["ok"], t["started"], "{label}: {s:#}");
    assert_eq!(t["failed"], 0, "{label}");
    let echo = s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "tools/call:echo")
        .unwrap_or_else(|| panic!("{label}: no echo row: {s:#}"));
    assert!(echo["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{label}");
    assert_eq!(echo["outcomes"]["ok"], echo["started"], "{label}");
    let dir = std::path::PathBuf::from(s["results_dir"].as_str().unwrap());
    assert!(dir.is_absolute(), "{label}: {}", dir.display());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["totals"]["started"], started,
        "{label}: summary.json agrees"
    );
    assert_eq!(
        s["summary_json"],
        dir.join("summary.json").display().to_string()
    );
    dir
}

/// The whole exchange by hand over the binary's stdin/stdout: handshake, tools/list, a probe
/// of the reference server, refusals that send nothing, a 2026-07-28 request on the same
/// session, a short run and a comparison; exit 0 on EOF. Header values never come back.
#[test]
fn stdio_session_by_hand() {
    let srv = launch(Config::default());
    let root = scratch();
    let results = root.path().join("results");
    let mut m = Mcp::spawn(&["--results-root", results.to_str().unwrap()]);

    let init = m.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(r["serverInfo"]["name"], "mcpbench");
    assert!(r["capabilities"]["tools"].is_object(), "{init}");
    assert!(r["instructions"].as_str().unwrap().contains("probe"));
    m.notify("notifications/initialized");

    let list = m.request("tools/list", json!({}));
    let tools = list["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names, TOOLS,
        "these three and nothing of the benchmark catalog"
    );
    for t in tools.as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 100, "{t}");
    }

    let secret = "x-sekrit-header-value";
    let probe = m.call(
        "probe",
        json!({"url": srv.mcp_url(), "headers": {"X-Api-Key": secret}}),
    );
    assert_eq!(probe["isError"], false, "{probe}");
    let s = &probe["structuredContent"];
    assert_eq!(s["protocol"], "2025-11-25", "{s}");
    assert_eq!(s["server"]["name"], "mcpbench-reference");
    let listed: Vec<&str> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed, BUILTIN_TOOLS);
    assert!(s["latency_ms"]["open"].as_f64().unwrap() > 0.0, "{s}");
    fits(&tools, "probe", s);
    assert!(text(&probe).starts_with("probe ok"), "{probe}");
    assert!(
        !probe.to_string().contains(secret),
        "a header value came back: {probe}"
    );
    // Handshake era: the 2026-07-28 fields are not in the result.
    assert!(probe.get("resultType").is_none() && probe.get("_meta").is_none());

    let echo = json!([{"method": "tools/call", "tool": "echo", "arguments": {"message": "hi"}}]);
    let r = m.call(
        "run",
        json!({"target": "http://192.0.2.1:9/mcp", "workload": echo, "duration": 1}),
    );
    refused(&r, &["192.0.2.1:9", "allow-list", "--allow 192.0.2.1:9"]);
    let r = m.call("probe", json!({"url": "http://192.0.2.1/mcp"}));
    refused(&r, &["allow-list"]);
    let r = m.call(
        "run",
        json!({"target": "embedded", "workload": echo, "duration": "5m"}),
    );
    refused(&r, &["duration 300s", "60s", "--max-duration"]);
    let r = m.call(
        "run",
        json!({"target": "embedded", "workload": echo, "concurrency": 1000, "duration": 1}),
    );
    refused(&r, &["1000", "256", "--max-concurrency"]);
    let r = m.call(
        "run",
        json!({"command": ["python3", "server.py"], "workload": echo}),
    );
    refused(&r, &["--allow-stdio"]);
    assert!(runs(&results).is_empty(), "a refused run wrote nothing");

    // A 2026-07-28 request on the same connection is answered statelessly, named as this server.
    let modern = m.request(
        "tools/call",
        json!({"name": "probe", "arguments": {"url": srv.mcp_url()}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    let r = &modern["result"];
    assert_eq!(r["resultType"], "complete", "{modern}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpbench"
    );
    assert_eq!(r["isError"], false);

    let run = json!({"target": srv.mcp_url(), "workload": echo, "concurrency": 1, "duration": 1});
    let first = m.call("run", run.clone());
    assert_eq!(first["isError"], false, "{first}");
    fits(&tools, "run", &first["structuredContent"]);
    let a = run_ok("first run", &first["structuredContent"]);
    let second = m.call("run", run);
    let b = run_ok("second run", &second["structuredContent"]);
    assert_ne!(a, b, "each run has its own directory");
    assert_eq!(runs(&results).len(), 2);
    let cmp = m.call(
        "compare",
        json!({"base": a.display().to_string(), "current": b.file_name().unwrap().to_str().unwrap()}),
    );
    assert_eq!(cmp["isError"], false, "{cmp}");
    fits(&tools, "compare", &cmp["structuredContent"]);
    let ops = cmp["structuredContent"]["operations"].as_array().unwrap();
    assert!(ops.iter().any(|o| o["name"] == "tools/call:echo"), "{cmp}");

    let status = m.finish();
    assert!(status.success(), "exit {status:?}");
}

/// Runs `script` with the interop venv's Python and returns what it printed (one JSON value).
fn python_script(script: &Path, spec: &Value) -> Value {
    let out = Command::new(python())
        .arg(script)
        .arg(spec.to_string())
        .output()
        .expect("python runs");
    json_output("python sdk client of mcpbench mcp", &out)
}

/// One call of the Python client: it raised nothing (so its structuredContent passed the SDK's
/// check against the tool's outputSchema) and was, or was not, a tool error.
fn called<'a>(v: &'a Value, label: &str, error: bool) -> &'a Value {
    let c = &v["calls"][label];
    assert!(c.get("exception").is_none(), "{label}: {c}");
    assert_eq!(c["is_error"], error, "{label}: {c}");
    c
}

/// The Python SDK's client (`mcp` 2.3.0) over stdio, as an agent would: in the handshake era it
/// lists the three tools, probes the reference server, runs it twice for 2 s at concurrency 2,
/// compares the runs, and is refused a target off the allow-list and a duration over the bound;
/// with `auto` it speaks 2026-07-28 and probes.
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn interop_python_sdk_client() {
    let srv = launch(Config::default());
    let root = scratch();
    let results = root.path().join("results");
    let spec = json!({
        "command": [env!("CARGO_BIN_EXE_mcpbench"), "mcp", "--results-root", results],
        "url": srv.mcp_url(),
    });
    let all = python_script(&repo().join("tests/fixtures/py_agent_client.py"), &spec);
    for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let v = &all[mode];
        assert!(v.get("error").is_none(), "{mode}: {v:#}");
        assert_eq!(v["protocol_version"], revision, "{mode}");
        assert_eq!(v["server_name"], "mcpbench", "{mode}");
        let names: Vec<&str> = v["tools"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(names.len(), 3, "{mode}: {names:?}");
        for t in TOOLS {
            assert_eq!(v["tools"][t]["input_type"], "object", "{mode} {t}");
            assert_eq!(v["tools"][t]["output_type"], "object", "{mode} {t}");
        }
        let probe = &called(v, "probe", false)["structured"];
        assert_eq!(
            probe["server"]["name"], "mcpbench-reference",
            "{mode}: {probe}"
        );
        assert_eq!(probe["protocol"], "2025-11-25", "{mode}");
        assert!(probe["tools"].as_array().unwrap().contains(&json!("echo")));
    }
    let v = &all["legacy"];
    let dirs: Vec<std::path::PathBuf> = ["run 1", "run 2"]
        .iter()
        .map(|r| {
            let s = &called(v, r, false)["structured"];
            assert_eq!(s["load"]["concurrency"], 2, "{r}");
            assert_eq!(s["target"]["url"], srv.mcp_url(), "{r}");
            run_ok(r, s)
        })
        .collect();
    assert!(dirs.iter().all(|d| d.starts_with(&results)), "{dirs:?}");
    let cmp = &called(v, "compare", false)["structured"];
    assert_eq!(cmp["base"], dirs[0].display().to_string());
    let echo = cmp["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "tools/call:echo")
        .unwrap_or_else(|| panic!("{cmp:#}"));
    let metrics: Vec<&str> = echo["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["metric"].as_str())
        .collect();
    assert!(
        metrics.contains(&"p50") && metrics.contains(&"throughput"),
        "{metrics:?}"
    );
    let off = called(v, "off the list", true);
    let t = off["text"].as_str().unwrap();
    assert!(
        t.contains("allow-list") && t.contains("--allow 192.0.2.1:8080"),
        "{t}"
    );
    let long = called(v, "too long", true);
    let t = long["text"].as_str().unwrap();
    assert!(
        t.contains("--max-duration") && t.contains("duration 120s"),
        "{t}"
    );
    assert_eq!(
        runs(&results).len(),
        2,
        "the refused runs wrote nothing: {:?}",
        runs(&results)
    );
}

/// The MCP Inspector CLI (`@modelcontextprotocol/inspector` 2.12.0, TypeScript SDK v2, on Node
/// 22) with `mcpbench mcp` as its stdio server: `tools/list`, and `tools/call probe` in both
/// eras (its client checks structuredContent against the outputSchema too).
#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn interop_inspector_cli() {
    let srv = launch(Config::default());
    let home = scratch();
    let inspector = node_module("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let results = home.path().join("results");
    let inspect = |args: &[&str]| {
        Command::new(node())
            .arg(&inspector)
            .args(["--cli", "--format", "json"])
            .args(args)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_mcpbench"))
            .args(["mcp", "--results-root", results.to_str().unwrap()])
            .env("HOME", home.path())
            .env("MCP_CATALOG_PATH", home.path().join("catalog.json"))
            .env("MCP_CLIENT_CONFIG_PATH", home.path().join("client.json"))
            .output()
            .expect("the inspector runs")
    };
    let run = |label: &str, args: &[&str]| json_output(label, &inspect(args));
    let list = run("inspector tools/list", &["--method", "tools/list"]);
    let tools = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list:#}"));
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, TOOLS, "{list:#}");
    assert!(tools.iter().all(|t| t["outputSchema"]["type"] == "object"));
    let url = format!("url={}", srv.mcp_url());
    for era in ["legacy", "modern"] {
        let label = format!("inspector {era} tools/call probe");
        let call = run(
            &label,
            &[
                "--protocol-era",
                era,
                "--method",
                "tools/call",
                "--tool-name",
                "probe",
                "--tool-arg",
                &url,
            ],
        );
        let r = &call["result"];
        assert_eq!(r["isError"], false, "{label}: {call:#}");
        assert_eq!(
            r["structuredContent"]["server"]["name"], "mcpbench-reference",
            "{label}"
        );
        assert!(text(r).starts_with("probe ok"), "{label}: {call:#}");
        let named = &r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"];
        if era == "modern" {
            assert_eq!(named, "mcpbench", "{label}: {call:#}");
        } else {
            assert!(named.is_null(), "{label}: {call:#}");
        }
    }
    // A tool error is the Inspector's exit 5, the result still printed.
    let out = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "run",
        "--tool-arg",
        "target=http://192.0.2.1/mcp",
        "--tool-arg",
        r#"workload=[{"method":"tools/list"}]"#,
    ]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refused_call: Value = serde_json::from_str(stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    refused(&refused_call["result"], &["allow-list"]);
    assert!(runs(&results).is_empty());
}
