//! The reference gateway as a hostile tenant sees it (like `hostile.rs` for clients): another
//! tenant's sessions can be neither used, listened on nor ended on any transport, and such a
//! request is answered exactly like an unknown session and audited; session ids cannot be
//! guessed; a token in the query string is refused; a tenant flooding sessions is capped
//! without starving another, and its rate limit is one bucket however many sessions it opens;
//! no client credential reaches an upstream — under concurrent load from both tenants, with the
//! backend's counters proving that no denied call reached it. Then `probe --tenants`, which
//! makes the same checks against any gateway, passes the reference gateway and names what
//! fails where isolation is missing.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpbench::server::audit::Audit;
use mcpbench::server::policy::Policy;
use mcpbench::server::{Config, EmbeddedServers, ResponseMode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::ClientRequestBuilder;

use crate::support::{
    self, MCP_HEADERS, Resp, Streamed, backend_stats, http, run_in, scratch, servers,
    upstream_specs,
};

const ALPHA: &str = "alpha-7f3c-token";
const BETA: &str = "beta-91d2-token";
const OPERATOR: &str = "operator-upstream-secret";

/// Alpha may call echo and get-invoice; beta only echo. `extra` adds lines to alpha's table.
fn policy(alpha_extra: &str) -> String {
    format!(
        "[[tenant]]\nname = \"alpha\"\ntokens = [\"{ALPHA}\"]\ntools = [\"ref__echo\", \"ref__get-invoice\"]\n{alpha_extra}\n[[tenant]]\nname = \"beta\"\ntokens = [\"{BETA}\"]\ntools = [\"ref__echo\"]\n"
    )
}

/// The gateway in front of the reference server `up`, with the operator's credentials for it.
fn gateway(up: &EmbeddedServers, policy: &str, audit: &Path, config: Config) -> EmbeddedServers {
    let mut specs = upstream_specs(&[format!("ref=http://{}/mcp", up.mcp_addr)]);
    specs[0]
        .add_header(&format!("Authorization: Bearer {OPERATOR}"), &|_| None)
        .expect("operator header");
    support::gateway(
        specs,
        Config {
            policy: Some(Arc::new(Policy::parse(policy).expect("policy"))),
            audit: Some(Arc::new(Audit::create(audit, false).expect("audit file"))),
            ..config
        },
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A request of `token`'s tenant to /mcp (session `sid`, if any).
fn mcp(
    a: SocketAddr,
    method: &str,
    token: &str,
    sid: Option<&str>,
    extra: &[(&str, &str)],
    body: &str,
) -> Resp {
    let auth = bearer(token);
    let mut h: Vec<(&str, &str)> = MCP_HEADERS.to_vec();
    h.push(("Authorization", &auth));
    h.push(("MCP-Protocol-Version", "2025-11-25"));
    if let Some(s) = sid {
        h.push(("Mcp-Session-Id", s));
    }
    h.extend_from_slice(extra);
    http(a, method, "/mcp", &h, body.as_bytes())
}

fn open(a: SocketAddr, token: &str) -> String {
    let r = mcp(
        a,
        "POST",
        token,
        None,
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"0"}}}"#,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let sid = r
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let n = mcp(
        a,
        "POST",
        token,
        Some(&sid),
        &[],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(n.status, 202);
    sid
}

fn call(tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
}

/// A made-up session id of the reference server's shape.
fn made_up() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The same status and body as for an id that was never issued: nothing tells them apart.
fn same_as_unknown(got: &Resp, unknown: &Resp, what: &str) {
    assert_eq!(
        got.status,
        404,
        "{what}: {}",
        String::from_utf8_lossy(&got.body)
    );
    assert_eq!(
        (got.status, &got.body),
        (unknown.status, &unknown.body),
        "{what}"
    );
}

fn audit_lines(path: &Path) -> (String, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    (text, lines)
}

/// Beta with alpha's session id: POST (a call alpha may make and beta may not), GET resumption,
/// DELETE, and a legacy HTTP+SSE POST — each answered byte for byte as an unknown session,
/// alpha's session unharmed, nothing run, every attempt audited with both tenants and the
/// session's number and neither the id nor a token.
#[test]
fn beta_can_neither_use_listen_on_nor_end_alphas_sessions() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let audit = dir.path().join("audit.jsonl");
    let gw = gateway(&up, &policy(""), &audit, Config::default());
    let a = gw.mcp_addr;
    let sid = open(a, ALPHA);
    let invoice = call("ref__get-invoice", json!({"id": 7}));

    let got = mcp(a, "POST", BETA, Some(&sid), &[], &invoice);
    let unknown = mcp(a, "POST", BETA, Some(&made_up()), &[], &invoice);
    same_as_unknown(&got, &unknown, "POST");
    let resume = [("Last-Event-ID", "1-0"), ("Accept", "text/event-stream")];
    let got = mcp(a, "GET", BETA, Some(&sid), &resume, "");
    let unknown = mcp(a, "GET", BETA, Some(&made_up()), &resume, "");
    same_as_unknown(&got, &unknown, "GET with Last-Event-ID");
    let got = mcp(a, "DELETE", BETA, Some(&sid), &[], "");
    let unknown = mcp(a, "DELETE", BETA, Some(&made_up()), &[], "");
    same_as_unknown(&got, &unknown, "DELETE");

    // Alpha's session lives on, and its own calls run in it.
    let r = mcp(a, "POST", ALPHA, Some(&sid), &[], &invoice);
    assert_eq!(r.status, 200);
    assert!(
        r.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\"id\":7")
    );
    let invoices =
        |n| backend_stats(up.backend_addr.unwrap())["routes"]["invoices"]["requests"] == json!(n);
    assert!(invoices(1), "only alpha's own call reached the backend");

    // HTTP+SSE: the session lives as long as alpha's stream.
    let auth = bearer(ALPHA);
    let mut stream = Streamed::open(a, "GET", "/sse", &[("Authorization", &auth)], b"");
    let endpoint = stream
        .next_event()
        .expect("the endpoint event")
        .data
        .unwrap();
    let foreign = |path: &str| {
        let auth = bearer(BETA);
        let h = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        http(a, "POST", path, &h, invoice.as_bytes())
    };
    let got = foreign(&endpoint);
    let unknown = foreign(&format!("/messages?sessionId={}", made_up()));
    same_as_unknown(&got, &unknown, "HTTP+SSE POST");
    drop(stream);

    // A WebSocket is its session: beta's connection is beta's own, and sees only beta's tools.
    let (stream, _) = ws_connect(a, BETA);
    let mut ws = stream.expect("beta's WebSocket opens");
    ws.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"0"}}}"#.into()).unwrap();
    ws.read().unwrap();
    ws.send(invoice.clone().into()).unwrap();
    let answer: Value = serde_json::from_str(ws.read().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(
        answer["error"]["code"], -32602,
        "refused as an unknown tool: {answer}"
    );
    assert!(invoices(1), "no denied call reached the backend");
    drop(ws);

    assert_eq!(
        mcp(a, "DELETE", ALPHA, Some(&sid), &[], "").status,
        200,
        "alpha ends its own"
    );
    drop(gw);
    let (text, lines) = audit_lines(&audit);
    let foreign: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "foreign_session")
        .collect();
    let requests: Vec<&str> = foreign
        .iter()
        .map(|l| l["request"].as_str().unwrap())
        .collect();
    assert_eq!(requests, ["POST", "GET", "DELETE", "POST"], "{text}");
    for l in &foreign {
        assert_eq!(
            (&l["event"], &l["tenant"], &l["owner"]),
            (&json!("error"), &json!("beta"), &json!("alpha"))
        );
        assert!(l["session"].is_u64());
    }
    assert_eq!(
        foreign[0]["session"], foreign[2]["session"],
        "the same session, by number"
    );
    for secret in [
        sid.as_str(),
        ALPHA,
        BETA,
        OPERATOR,
        &endpoint[endpoint.len() - 32..],
    ] {
        assert!(
            !text.contains(secret),
            "the audit log holds a session id or a token"
        );
    }
}

type Ws = tokio_tungstenite::tungstenite::WebSocket<TcpStream>;

/// A WebSocket to /ws with `token`: the socket, or the refusal's status.
fn ws_connect(a: SocketAddr, token: &str) -> (Option<Ws>, u16) {
    let uri = format!("ws://{a}/ws").parse().unwrap();
    let req = ClientRequestBuilder::new(uri)
        .with_sub_protocol("mcp")
        .with_header("Authorization", bearer(token));
    let stream = TcpStream::connect(a).unwrap();
    match tokio_tungstenite::tungstenite::client(req, stream) {
        Ok((ws, r)) => (Some(ws), r.status().as_u16()),
        Err(tokio_tungstenite::tungstenite::HandshakeError::Failure(
            tokio_tungstenite::tungstenite::Error::Http(r),
        )) => (None, r.status().as_u16()),
        Err(e) => panic!("WebSocket handshake: {e}"),
    }
}

/// Session ids are 128 random bits (a thousand guesses find nothing); a token in the query
/// string is refused on every endpoint, even beside a valid header, and audited.
#[test]
fn ids_cannot_be_guessed_and_query_tokens_are_refused() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let audit = dir.path().join("audit.jsonl");
    let gw = gateway(&up, &policy(""), &audit, Config::default());
    let a = gw.mcp_addr;
    let ids: Vec<u128> = (0..64)
        .map(|_| u128::from_str_radix(&open(a, ALPHA), 16).expect("32 hex digits"))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 64);
    // Every bit position varies across the ids: no counter, no timestamp, no fixed prefix.
    let (ones, zeros) = ids
        .iter()
        .fold((0u128, 0u128), |(o, z), id| (o | id, z | !id));
    assert_eq!((ones, zeros), (u128::MAX, u128::MAX));
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for _ in 0..1000 {
        assert_eq!(
            mcp(a, "POST", ALPHA, Some(&made_up()), &[], ping).status,
            404
        );
    }

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"q","version":"0"}}}"#;
    let auth = bearer(ALPHA);
    let mut h: Vec<(&str, &str)> = MCP_HEADERS.to_vec();
    for (path, with_header) in [
        (format!("/mcp?access_token={ALPHA}"), false),
        (format!("/mcp?access_token={ALPHA}"), true),
        (format!("/mcp?x=1&token={ALPHA}"), false),
        (format!("/sse?access_token={ALPHA}"), false),
        (format!("/ws?api_key={ALPHA}"), true),
    ] {
        if with_header {
            h.push(("Authorization", &auth));
        }
        let r = http(a, "POST", &path, &h, init.as_bytes());
        assert_eq!(
            r.status,
            400,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert!(String::from_utf8_lossy(&r.body).contains("query string"));
        h.truncate(MCP_HEADERS.len());
    }
    drop(gw);
    let (text, lines) = audit_lines(&audit);
    let refused = lines
        .iter()
        .filter(|l| l["type"] == "auth" && l["context"].as_str().unwrap().contains("query string"))
        .count();
    assert_eq!(refused, 5);
    assert!(!text.contains(ALPHA));
}

/// Alpha may hold 12 sessions; it opens them over all three session transports, and one more
/// on any of them is refused with 429 (audited) while beta, flooding nothing, still opens its
/// own. Ending or losing a session gives its place back.
#[test]
fn a_tenant_flooding_sessions_does_not_starve_another() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let audit = dir.path().join("audit.jsonl");
    let config = Config {
        max_sessions: 40,
        ..Config::default()
    };
    let gw = gateway(&up, &policy("sessions = 12"), &audit, config);
    let a = gw.mcp_addr;
    let state = gw.state().clone();
    let policy = state.config.policy.clone().unwrap();
    let mut alpha: Vec<String> = (0..10).map(|_| open(a, ALPHA)).collect();
    let auth = bearer(ALPHA);
    let sse = Streamed::open(a, "GET", "/sse", &[("Authorization", &auth)], b"");
    assert_eq!(sse.status, 200);
    let (ws, status) = ws_connect(a, ALPHA);
    assert_eq!(status, 101);
    wait_until_open(&policy, 0, 12);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"0"}}}"#;
    let r = mcp(a, "POST", ALPHA, None, &[], init);
    assert_eq!(r.status, 429, "the 13th session");
    assert!(r.header("retry-after").is_some());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("12 sessions open, its cap")
    );
    assert_eq!(
        Streamed::open(a, "GET", "/sse", &[("Authorization", &auth)], b"").status,
        429
    );
    assert_eq!(ws_connect(a, ALPHA).1, 429);
    // Beta's share: 40 / 2 tenants.
    let beta: Vec<String> = (0..20).map(|_| open(a, BETA)).collect();
    assert_eq!(
        mcp(a, "POST", BETA, None, &[], init).status,
        429,
        "beta's own cap"
    );
    assert_eq!(policy.open_sessions(1), 20);
    // Places come back: a DELETE, a closed stream, a closed WebSocket.
    assert_eq!(
        mcp(a, "DELETE", ALPHA, Some(&alpha.pop().unwrap()), &[], "").status,
        200
    );
    drop(sse);
    drop(ws);
    wait_until_open(&policy, 0, 9);
    alpha.extend((0..3).map(|_| open(a, ALPHA)));
    assert_eq!(mcp(a, "POST", ALPHA, None, &[], init).status, 429);
    drop(beta);
    drop(gw);
    let (_, lines) = audit_lines(&audit);
    let caps: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "session_cap")
        .collect();
    assert_eq!(caps.len(), 5, "every refusal audited");
    assert_eq!(caps.iter().filter(|l| l["tenant"] == "alpha").count(), 4);
}

fn wait_until_open(policy: &Policy, tenant: u16, n: usize) {
    support::wait_until(&format!("{n} sessions open"), || {
        policy.open_sessions(tenant) == n
    });
}

/// Alpha's rate limit is one bucket: eight sessions calling at once get what one would.
#[test]
fn one_bucket_per_tenant_however_many_sessions() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let gw = gateway(
        &up,
        &policy("rate = 40\nburst = 5"),
        &dir.path().join("a.jsonl"),
        Config::default(),
    );
    let a = gw.mcp_addr;
    let sessions: Vec<String> = (0..8).map(|_| open(a, ALPHA)).collect();
    let (ok, limited) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let echo = call("ref__echo", json!({"message": "m"}));
    let start = Instant::now();
    std::thread::scope(|s| {
        for sid in &sessions {
            s.spawn(|| {
                while start.elapsed() < Duration::from_millis(1500) {
                    match mcp(a, "POST", ALPHA, Some(sid), &[], &echo).status {
                        200 => ok.fetch_add(1, Ordering::Relaxed),
                        429 => limited.fetch_add(1, Ordering::Relaxed),
                        s => panic!("status {s}"),
                    };
                }
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let ok = ok.into_inner() as f64;
    assert!(limited.into_inner() > 0);
    assert!(
        ok <= 5.0 + 40.0 * elapsed + 1.0,
        "{ok} admitted in {elapsed:.2} s: more than one bucket gives"
    );
}

/// Clients send every kind of credential; the upstreams — over Streamable HTTP, HTTP+SSE and
/// WebSocket — receive only the operator's (the reference server fingerprints what reaches it).
#[test]
fn no_client_credential_reaches_an_upstream() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let u = up.mcp_addr;
    let mut specs = upstream_specs(&[
        format!("ref=http://{u}/mcp"),
        format!("leg=sse+http://{u}/sse"),
        format!("wsu=ws://{u}/ws"),
    ]);
    for s in &mut specs {
        let header = format!("Authorization: Bearer ${{OP_{}}}", s.name.to_uppercase());
        s.add_header(&header, &|v| Some(format!("{OPERATOR}-{v}")))
            .unwrap();
    }
    let dir = scratch();
    let p = "[[tenant]]\nname = \"alpha\"\ntokens = [\"alpha-7f3c-token\"]\n[[tenant]]\nname = \"beta\"\ntokens = [\"beta-91d2-token\"]\n";
    let gw = support::gateway(
        specs,
        Config {
            policy: Some(Arc::new(Policy::parse(p).unwrap())),
            audit: Some(Arc::new(
                Audit::create(&dir.path().join("a.jsonl"), false).unwrap(),
            )),
            ..Config::default()
        },
    );
    let a = gw.mcp_addr;
    let client_secrets = |t: &str| {
        [
            ("Cookie", format!("sid={t}-cookie")),
            ("X-Api-Key", format!("{t}-key")),
            ("Proxy-Authorization", format!("Basic {t}-proxy")),
        ]
    };
    for token in [ALPHA, BETA] {
        let extra = client_secrets(token);
        let extra: Vec<(&str, &str)> = extra.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let sid = open(a, token);
        for tool in ["ref__echo", "leg__echo", "wsu__echo"] {
            let r = mcp(
                a,
                "POST",
                token,
                Some(&sid),
                &extra,
                &call(tool, json!({"message": "x"})),
            );
            assert_eq!(r.json()["result"]["content"][0]["text"], "x", "{tool}");
        }
    }
    let seen: Value = http(u, "GET", "/seen-credentials", &[], b"").json();
    let salt: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&seen["salt"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let prints: Vec<&str> = seen["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["fingerprint"].as_str().unwrap())
        .collect();
    let fp = |v: &str| mcpbench::server::credentials::fingerprint(&salt, v.as_bytes());
    let mut operator: Vec<String> = ["REF", "LEG", "WSU"]
        .iter()
        .map(|n| fp(&format!("Bearer {OPERATOR}-OP_{n}")))
        .collect();
    operator.sort();
    let mut got: Vec<String> = prints.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(
        got, operator,
        "exactly the operator's three credentials reached the upstream"
    );
    for token in [ALPHA, BETA] {
        assert!(!prints.contains(&fp(&bearer(token)).as_str()));
        for (_, v) in client_secrets(token) {
            assert!(!prints.contains(&fp(&v).as_str()));
        }
    }
    assert_eq!(seen["complete"], true);
}

/// Both tenants under load through the gateway (three users each, 3000 requests) while beta,
/// on the side, keeps trying alpha's sessions (POST a call beta may not make, GET resumption,
/// DELETE), guessing ids and putting its token in the query string: alpha loses nothing, beta's
/// denied calls and every hostile attempt stop at the gateway — the backend counts exactly the
/// allowed invoice calls — and every attempt has its audit line.
#[test]
fn hostile_tenant_attempts_under_load_from_both_tenants() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let audit = dir.path().join("audit.jsonl");
    let gw = gateway(&up, &policy(""), &audit, Config::default());
    let a = gw.mcp_addr;
    let scenario = format!(
        "name = \"tenants-under-attack\"\n[target]\nurl = \"http://{a}/mcp\"\ntool_prefix = \"ref__\"\n[[target.credentials]]\ntenant = \"alpha\"\ntoken = \"{ALPHA}\"\n[[target.credentials]]\ntenant = \"beta\"\ntoken = \"{BETA}\"\n[load]\nconcurrency = 6\nrequests = 3000\ntimeout = \"10s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\nweight = 2\n[[workload]]\nmethod = \"tools/call\"\ntool = \"get-invoice\"\narguments = {{ id = 7 }}\nweight = 2\n"
    );
    let done = AtomicBool::new(false);
    let (attempts, queries) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            let invoice = call("ref__get-invoice", json!({"id": 7}));
            let resume = [("Last-Event-ID", "1-0")];
            while !done.load(Ordering::Relaxed) {
                let sid = open(a, ALPHA);
                assert_eq!(mcp(a, "POST", BETA, Some(&sid), &[], &invoice).status, 404);
                assert_eq!(mcp(a, "GET", BETA, Some(&sid), &resume, "").status, 404);
                assert_eq!(mcp(a, "DELETE", BETA, Some(&sid), &[], "").status, 404);
                attempts.fetch_add(1, Ordering::Relaxed);
                assert_eq!(
                    mcp(a, "POST", BETA, Some(&made_up()), &[], &invoice).status,
                    404
                );
                let path = format!("/mcp?access_token={BETA}");
                assert_eq!(
                    http(a, "POST", &path, &MCP_HEADERS, invoice.as_bytes()).status,
                    400
                );
                queries.fetch_add(1, Ordering::Relaxed);
                let r = mcp(
                    a,
                    "POST",
                    ALPHA,
                    Some(&sid),
                    &[],
                    &call("ref__echo", json!({"message": "still"})),
                );
                assert_eq!(
                    r.json()["result"]["content"][0]["text"],
                    "still",
                    "alpha's session lives"
                );
            }
        });
        let out = run_in(&scenario, &dir.path().join("runs"));
        done.store(true, Ordering::Relaxed);
        out
    });
    let out = out.expect("the run finishes");
    let s = &out.summary;
    let tenant = |n: &str| s.tenants.iter().find(|t| t.name == n).unwrap();
    let (alpha, beta) = (tenant("alpha"), tenant("beta"));
    assert_eq!(s.totals.started, 3000);
    assert_eq!(
        alpha.outcomes.ok, alpha.started,
        "alpha loses nothing: {:?}",
        alpha.outcomes
    );
    let refused: u64 = beta.outcomes.rpc_error.values().sum();
    assert!(
        refused > 100 && beta.outcomes.ok + refused == beta.started,
        "{:?}",
        beta.outcomes
    );
    let invoice = s
        .operations
        .iter()
        .find(|o| o.name == "tools/call:get-invoice")
        .unwrap();
    let backend = backend_stats(up.backend_addr.unwrap());
    assert_eq!(
        backend["routes"]["invoices"]["requests"].as_u64(),
        Some(invoice.outcomes.ok),
        "the backend saw exactly the allowed invoice calls: no denied or cross-tenant call"
    );
    drop(gw);
    let (attempts, queries) = (attempts.into_inner(), queries.into_inner());
    assert!(attempts > 0);
    let (text, lines) = audit_lines(&audit);
    let count = |f: &dyn Fn(&Value) -> bool| lines.iter().filter(|l| f(l)).count();
    for request in ["POST", "GET", "DELETE"] {
        let n = count(&|l| {
            l["type"] == "foreign_session"
                && l["request"] == request
                && l["tenant"] == "beta"
                && l["owner"] == "alpha"
        });
        assert_eq!(n, attempts, "{request} attempts audited");
    }
    assert_eq!(
        count(&|l| l["type"] == "auth"),
        queries,
        "query tokens audited"
    );
    let denied = count(&|l| l["event"] == "invocation" && l["outcome"] == "denied");
    assert_eq!(denied as u64, refused, "one audit line per denied call");
    for secret in [ALPHA, BETA, OPERATOR] {
        assert!(!text.contains(secret));
    }
}

/// `probe --tenants` against the reference gateway: every check passes (exit 0), the upstream
/// saw only the operator's credential. Against the same server without a policy (no isolation
/// at all) and a plain TCP relay in front of it (credentials pass through), it names each
/// failure and exits 1.
#[test]
fn probe_tenants_passes_the_reference_gateway_and_names_failures_elsewhere() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let gw = gateway(
        &up,
        &policy(""),
        &dir.path().join("audit.jsonl"),
        Config::default(),
    );
    let file = dir.path().join("tenants.toml");
    std::fs::write(
        &file,
        "[[tenant]]\nname = \"alpha\"\ntoken = \"${ALPHA_T}\"\n[[tenant]]\nname = \"beta\"\nheaders = { Authorization = \"Bearer beta-91d2-token\", X-Api-Key = \"beta-key\" }\n",
    )
    .unwrap();
    let upstream = format!("http://{}/mcp", up.mcp_addr);
    let probe = |url: String, format: &str| {
        let f = file.to_str().unwrap().to_string();
        let args = [
            "probe",
            "--tenants",
            &f,
            &url,
            "--upstream",
            &upstream,
            "--format",
            format,
        ];
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"))
            .args(args)
            .env("ALPHA_T", ALPHA)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        (
            out.status.code(),
            stdout,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, table, err) = probe(gw.mcp_url(), "text");
    assert_eq!(code, Some(0), "{table}{err}");
    for check in [
        "no credentials",
        "token in query string",
        "cross-tenant POST",
        "cross-tenant GET",
        "cross-tenant DELETE",
        "session id guessing",
        "no token passthrough",
    ] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(check) && l.contains(" pass ")),
            "{check}:\n{table}"
        );
    }
    assert!(
        !table.contains(ALPHA) && !table.contains(BETA),
        "no token printed"
    );

    // No policy: the upstream itself, every tenant is nobody.
    let (code, json, err) = probe(upstream.clone(), "json");
    assert_eq!(code, Some(1), "{json}{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let verdict = |check: &str| crate::support::probe_verdicts(&v, check);
    assert_eq!(verdict("no credentials"), ["fail"]);
    assert_eq!(verdict("cross-tenant POST"), ["fail", "fail"]);
    assert_eq!(verdict("cross-tenant DELETE"), ["fail", "fail"]);
    assert_eq!(verdict("session id guessing"), ["pass"]);

    // A relay that forwards everything: the tenants' credentials reach the upstream.
    let relay = support::relay(up.mcp_addr);
    let (code, json, _) = probe(format!("http://{relay}/mcp"), "json");
    assert_eq!(code, Some(1));
    let v: Value = serde_json::from_str(&json).unwrap();
    let pass = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "no token passthrough")
        .unwrap();
    assert_eq!(pass["verdict"], "fail", "{pass}");
    let detail = pass["detail"].as_str().unwrap();
    assert!(
        detail.contains("alpha's Authorization") && detail.contains("beta's X-Api-Key"),
        "{detail}"
    );
}

/// An upstream listing tools whose names hold CR, LF, a space or ESC: the gateway leaves them
/// out (they would reach headers and log lines), keeps the rest, and says which it refused.
#[test]
fn upstream_tool_names_with_control_characters_are_left_out() {
    let fixture = support::repo().join("tests/fixtures/names_stdio.py");
    let specs = upstream_specs(&[format!("bad=stdio:python3 {}", fixture.display())]);
    let gw = mcpbench::gateway::Gateway::start(
        specs,
        &mcpbench::gateway::GatewayOptions {
            threads: 1,
            pool: 1,
            timeout: Duration::from_secs(10),
        },
    )
    .expect("the upstream answers");
    use mcpbench::server::proxy::Proxy;
    let names: Vec<String> = gw.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["bad__fine_tool", "bad__dotted.name-2"]);
    let mut refused = gw.started[0].refused.clone();
    refused.sort();
    assert_eq!(
        refused,
        ["crlf\r\nX-Injected: 1", "esc\u{1b}[31m", "with space"]
    );
}
