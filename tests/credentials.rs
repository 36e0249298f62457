//! Per-user credentials and tenants: every virtual user sends its own credential, results
//! break down by tenant, a gateway's refusals are named, and no secret reaches any output.

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::raw_http::{self, ThreadServer, read_request};
use crate::support::{run_in, scratch};

const ACME: &str = "acme-s3cr3t-0001";
const GLOBEX: &str = "globex-s3cr3t-0002";
const EXPIRED: &str = "expired-s3cr3t-0003";

/// A gateway in miniature: `initialize` and `tools/list` for any known token; `tools/call`
/// allowed for acme, forbidden (403) for globex; an unknown or expired token gets 401.
fn gateway() -> ThreadServer {
    raw_http::start(1, |mut s: TcpStream| async move {
        let mut buf = Vec::new();
        while let Some((head, body)) = read_request(&mut s, &mut buf).await {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let id = v["id"].clone();
            let token = head
                .lines()
                .find_map(|l| l.strip_prefix("authorization: bearer "))
                .unwrap_or_default()
                .trim()
                .to_string();
            let method = v["method"].as_str().unwrap_or_default();
            let status = match (token.as_str(), method) {
                (t, _) if t != ACME && t != GLOBEX => "401 Unauthorized",
                (GLOBEX, "tools/call") => "403 Forbidden",
                (_, m) if m.starts_with("notifications/") => "202 Accepted",
                _ => "200 OK",
            };
            let json = match method {
                _ if !status.starts_with("200") => String::new(),
                "initialize" => format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"gw","version":"0"}}}}}}"#
                ),
                "tools/list" => format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"work","inputSchema":{{"type":"object"}}}}]}}}}"#
                ),
                _ => format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
                ),
            };
            let kind = if json.is_empty() {
                ""
            } else {
                "Content-Type: application/json\r\n"
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\n{kind}Content-Length: {}\r\n\r\n{json}",
                json.len()
            );
            if s.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    })
}

/// Six users over three credentials (two each, round-robin): acme's calls succeed, globex's
/// are forbidden, the expired token cannot open a session. The summary, terminal table and
/// report break results down by tenant; no output file holds any token.
#[test]
fn tenants_break_down_and_secrets_stay_out() {
    let server = gateway();
    let dir = scratch();
    let text = format!(
        "name = \"tenants\"\n[target]\nurl = \"http://{}/mcp\"\n[[target.credentials]]\ntenant = \"acme\"\ntoken = \"{ACME}\"\n[[target.credentials]]\ntenant = \"globex\"\ntoken = \"{GLOBEX}\"\n[[target.credentials]]\ntenant = \"lapsed\"\nheaders = {{ Authorization = \"Bearer {EXPIRED}\" }}\n[load]\nconcurrency = 6\nduration = \"1500ms\"\nwarmup = \"0s\"\ntimeout = \"2s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    );
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    let names: Vec<&str> = s.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["acme", "globex", "lapsed"]);
    let line = |i: usize| mcpbench::report::text::outcomes_line(&s.tenants[i].outcomes);
    assert!(
        s.tenants[0].outcomes.ok > 10 && line(0).starts_with("ok "),
        "{}",
        line(0)
    );
    assert!(
        line(0).split(", ").count() == 1,
        "acme: only ok: {}",
        line(0)
    );
    assert_eq!(
        line(1),
        format!("http(403 forbidden) {}", s.tenants[1].started)
    );
    assert!(s.tenants[1].started > 10);
    // The lapsed users never open a session: no workload request, and the openings fail 401.
    assert_eq!(s.tenants[2].started, 0);
    let opening = s
        .operations
        .iter()
        .find(|o| o.name == "initialize")
        .unwrap();
    assert!(opening.outcomes.http.get("401").copied().unwrap_or(0) > 0);
    // Every workload request is one tenant's.
    let work = s
        .operations
        .iter()
        .find(|o| o.name == "tools/call:work")
        .unwrap();
    let by_tenant: u64 = s.tenants.iter().map(|t| t.started).sum();
    assert_eq!(by_tenant, work.started - work.cancelled, "{:?}", s.tenants);
    assert!(
        s.notes.iter().any(|n| n.contains("403 (forbidden)")),
        "{:?}",
        s.notes
    );

    let md = std::fs::read_to_string(out.dir.join("report.md")).unwrap();
    assert!(
        md.contains("## By tenant") && md.contains("| globex |"),
        "{md}"
    );
    let table = mcpbench::report::text::render(s);
    assert!(table.contains("by tenant"), "{table}");
    for entry in std::fs::read_dir(&out.dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in [ACME, GLOBEX, EXPIRED] {
            assert!(!text.contains(secret), "{} holds a token", path.display());
        }
    }
}

/// Credentials from a JSON Lines file; a bad line is named by number, never quoted.
#[test]
fn credentials_from_a_file() {
    let dir = scratch();
    let file = dir.path().join("tokens.jsonl");
    std::fs::write(
        &file,
        format!("{{\"tenant\": \"acme\", \"token\": \"{ACME}\"}}\n{{\"tenant\": \"globex\", \"headers\": {{\"X-Api-Key\": \"{GLOBEX}\"}}}}\n"),
    )
    .unwrap();
    let scenario = dir.path().join("s.toml");
    let text = "[target]\nurl = \"http://127.0.0.1:9/mcp\"\ncredentials_file = \"tokens.jsonl\"\n[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
    std::fs::write(&scenario, text).unwrap();
    let plan = mcpbench::scenario::load(&scenario).unwrap();
    let mcpbench::scenario::Target::Remote(r) = &plan.target else {
        panic!("remote")
    };
    assert_eq!(r.tenants(), ["acme", "globex"]);
    assert_eq!(
        r.credentials[1].headers,
        [("X-Api-Key".to_string(), GLOBEX.to_string())]
    );
    std::fs::write(
        &file,
        format!("{{\"tenant\": \"acme\", \"token\": \"{ACME}\"\n"),
    )
    .unwrap();
    let err = mcpbench::scenario::load(&scenario).unwrap_err().to_string();
    assert!(err.contains("tokens.jsonl line 1: not JSON"), "{err}");
    assert!(!err.contains(ACME), "{err}");
    // Shared sessions cannot carry per-user credentials.
    std::fs::write(
        &file,
        format!("{{\"tenant\": \"acme\", \"token\": \"{ACME}\"}}\n"),
    )
    .unwrap();
    std::fs::write(
        &scenario,
        text.replace(
            "duration = \"1s\"",
            "duration = \"1s\"\nsessions = \"shared\"",
        ),
    )
    .unwrap();
    let err = mcpbench::scenario::load(&scenario).unwrap_err().to_string();
    assert!(
        err.contains("per-user credentials need a session per user"),
        "{err}"
    );
}
