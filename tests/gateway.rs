//! The reference gateway (`serve --upstream`): upstreams over every transport, tenants kept
//! apart under load, denied calls that never reach the upstream, rate limits that admit what
//! they promise, complete audit lines, and an A/B comparison that finds an injected delay.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpbench::gateway::{Gateway, GatewayOptions, UpstreamSpec, UpstreamTls};
use mcpbench::report::summary::{Operation, Summary};
use mcpbench::server::{Config, EmbeddedServers, ResponseMode, audit::Audit, policy::Policy};

use crate::support::{self, backend_stats, launch, run_in, scratch, servers, upstream_specs};

/// The gateway in front of `upstreams` (`NAME=TARGET`), with an optional policy and audit log.
fn gateway(upstreams: &[String], policy: Option<&str>, audit: Option<&Path>) -> EmbeddedServers {
    gateway_with(upstreams, policy, audit, Duration::ZERO)
}

fn gateway_with(
    upstreams: &[String],
    policy: Option<&str>,
    audit: Option<&Path>,
    delay: Duration,
) -> EmbeddedServers {
    support::gateway(
        upstream_specs(upstreams),
        Config {
            policy: policy.map(|p| Arc::new(Policy::parse(p).expect("policy"))),
            audit: audit.map(|a| Arc::new(Audit::create(a, false).expect("audit file"))),
            call_delay: delay,
            ..Config::default()
        },
    )
}

fn op<'a>(s: &'a Summary, name: &str) -> &'a Operation {
    s.operations
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no operation {name}"))
}

fn tenant<'a>(s: &'a Summary, name: &str) -> &'a Operation {
    s.tenants
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no tenant {name}"))
}

fn rpc_errors(o: &Operation) -> u64 {
    o.outcomes.rpc_error.values().sum()
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_mcpbench")
}

/// The reference server behind `up` as four upstreams, one per transport: `h` (Streamable
/// HTTP), `sse` (legacy HTTP+SSE), `ws` (WebSocket) and `io` (a stdio child on the same backend).
fn every_transport(up: &EmbeddedServers) -> [String; 4] {
    let a = up.mcp_addr;
    [
        format!("h=http://{a}/mcp"),
        format!("sse=sse+http://{a}/sse"),
        format!("ws=ws://{a}/ws"),
        format!(
            "io=stdio:{} serve --stdio --backend {}",
            exe(),
            up.backend_url
        ),
    ]
}

/// One gateway fronts the same reference server four ways — Streamable HTTP (2026-07-28, found
/// by probing), legacy HTTP+SSE, WebSocket — and a stdio child; clients of both eras call a tool
/// of each, and a REST-backed one, through it: every call succeeds.
#[test]
fn fronts_upstreams_over_every_transport_for_clients_of_both_eras() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let gw = gateway(&every_transport(&up), None, None);
    for protocol in ["2025-11-25", "2026-07-28", "2025-03-26"] {
        let dir = scratch();
        let mut text = format!(
            "name = \"gw\"\n[target]\nurl = \"http://{}/mcp\"\nprotocol = \"{protocol}\"\n[load]\nconcurrency = 4\nrequests = 400\ntimeout = \"10s\"\n",
            gw.mcp_addr
        );
        for up in ["h", "sse", "ws", "io"] {
            text.push_str(&format!(
                "[[workload]]\nmethod = \"tools/call\"\ntool = \"{up}__echo\"\narguments = {{ message = \"via {up}\" }}\n"
            ));
        }
        text.push_str("[[workload]]\nmethod = \"tools/call\"\ntool = \"h__get-invoice\"\narguments = { id = 7 }\n[[workload]]\nmethod = \"tools/list\"\n");
        let out = run_in(&text, dir.path()).expect("the run finishes");
        let s = &out.summary;
        assert_eq!(s.totals.started, 400, "{protocol}");
        assert_eq!(s.totals.ok, 400, "{protocol}: {:?}", s.operations);
        for up in ["h", "sse", "ws", "io"] {
            assert!(
                op(s, &format!("tools/call:{up}__echo")).outcomes.ok > 20,
                "{protocol} {up}"
            );
        }
    }
}

const ALPHA: &str = "alpha-t0ken-9f2c";
const BETA: &str = "beta-t0ken-41aa";

/// Two tenants under concurrent load, one allowed every upstream tool, the other only `echo`:
/// beta's calls of `get-invoice` are refused as unknown and never reach the REST backend (its
/// counter equals alpha's successful calls exactly); one audit line per call, each with the
/// right tenant and outcome; no token in any output file or in the audit log.
#[test]
fn tenants_are_kept_apart_and_denied_calls_never_reach_the_upstream() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let dir = scratch();
    let audit = dir.path().join("audit.jsonl");
    let gw = gateway(
        &[format!("ref=http://{}/mcp", up.mcp_addr)],
        Some(&policy(false)),
        Some(&audit),
    );
    let text = tenants_scenario(gw.mcp_addr, "");
    let out = run_in(&text, &dir.path().join("runs")).expect("the run finishes");
    let s = &out.summary;
    let invoice = op(s, "tools/call:get-invoice");
    let (alpha, beta) = (tenant(s, "alpha"), tenant(s, "beta"));
    assert_eq!(s.totals.started, 3000);
    let list = op(s, "tools/list");
    assert!(list.outcomes.ok > 100, "{:?}", list.outcomes);
    assert_eq!(
        list.outcomes.assertion, 0,
        "each tenant is shown its own tools"
    );
    assert_eq!(rpc_errors(alpha), 0, "alpha may call everything");
    assert_eq!(alpha.outcomes.ok, alpha.started);
    assert!(beta.outcomes.ok > 100, "beta's echo calls pass");
    assert!(rpc_errors(beta) > 100, "beta's invoice calls are refused");
    assert_eq!(
        beta.outcomes.rpc_error.get("-32602").copied().unwrap_or(0),
        rpc_errors(beta),
        "refused as an unknown tool: {:?}",
        beta.outcomes
    );
    assert_eq!(rpc_errors(invoice), rpc_errors(beta));
    let backend = backend_stats(up.backend_addr.unwrap());
    assert_eq!(
        backend["routes"]["invoices"]["requests"].as_u64(),
        Some(invoice.outcomes.ok),
        "the backend saw exactly the allowed invoice calls"
    );
    drop(gw);
    let log = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("every audit line is JSON"))
        .collect();
    let calls: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["event"] == "invocation")
        .collect();
    assert_eq!(
        calls.len() as u64,
        3000 - list.started,
        "one audit line per call, none lost"
    );
    let count = |tenant: &str, tool: &str, outcome: &str| {
        calls
            .iter()
            .filter(|c| c["tenant"] == tenant && c["tool"] == tool && c["outcome"] == outcome)
            .count() as u64
    };
    assert_eq!(
        count("beta", "ref__get-invoice", "denied"),
        rpc_errors(beta)
    );
    assert_eq!(count("beta", "ref__get-invoice", "ok"), 0);
    let ok_lines = calls.iter().filter(|c| c["outcome"] == "ok").count() as u64;
    assert_eq!(
        ok_lines,
        op(s, "tools/call:echo").outcomes.ok + invoice.outcomes.ok
    );
    assert!(
        !calls
            .iter()
            .any(|c| c["tenant"] == "alpha" && c["outcome"] == "denied")
    );
    assert!(calls.iter().all(|c| c["arguments"] == "[redacted]"
        && c["latency_us"].is_u64()
        && c["ts"].is_string()));
    // Discovery: the preflight listed as alpha, and saw only alpha's tools.
    let seen = lines
        .iter()
        .find(|l| l["event"] == "discovery")
        .expect("a discovery line");
    assert_eq!(seen["tenant"], "alpha");
    let names: Vec<&str> = seen["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(names.iter().all(|n| n.starts_with("ref__")) && names.contains(&"ref__get-invoice"));
    assert!(
        lines
            .iter()
            .filter(|l| l["event"] == "discovery" && l["tenant"] == "beta")
            .all(|l| l["names"] == serde_json::json!(["ref__echo"])),
        "beta is shown only echo"
    );
    for secret in [ALPHA, BETA] {
        assert!(!log.contains(secret), "a token in the audit log");
        for entry in walk(&dir.path().join("runs")) {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "a token in {}",
                entry.display()
            );
        }
    }
}

/// Alpha may call echo, get-invoice and fail, beta only echo; `broken` gives beta everything (the
/// kind of glob mistake a policy review misses).
fn policy(broken: bool) -> String {
    let beta = if broken { "ref__*" } else { "ref__echo" };
    format!(
        "[[tenant]]\nname = \"alpha\"\ntokens = [\"{ALPHA}\"]\ntools = [\"ref__echo\", \"ref__get-invoice\", \"ref__fail\"]\n[[tenant]]\nname = \"beta\"\ntokens = [\"{BETA}\"]\ntools = [\"{beta}\"]\n"
    )
}

/// Both tenants' users (three each) call echo and get-invoice and list their tools, each
/// tenant's expected tool set checked on every listing.
fn tenants_scenario(gateway: std::net::SocketAddr, extra: &str) -> String {
    format!(
        "name = \"tenants\"\n[target]\nurl = \"http://{gateway}/mcp\"\ntool_prefix = \"ref__\"\n[[target.credentials]]\ntenant = \"alpha\"\ntoken = \"{ALPHA}\"\n[[target.credentials]]\ntenant = \"beta\"\ntoken = \"{BETA}\"\n[load]\nconcurrency = 6\nrequests = 3000\ntimeout = \"10s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\nweight = 2\n[[workload]]\nmethod = \"tools/call\"\ntool = \"get-invoice\"\narguments = {{ id = 7 }}\nweight = 2\n[[workload]]\nmethod = \"tools/list\"\nexpect.tenant_tools = {{ alpha = [\"echo\", \"get-invoice\", \"fail\"], beta = [\"echo\"] }}\n{extra}"
    )
}

/// The same load through a policy that gives beta every tool: the expected tool sets catch it
/// on beta's listings (and only there), with an example in the notes; an `is_error = false`
/// rule on the always-failing `fail` tool makes every one of its answers an assertion too.
#[test]
fn assertions_catch_a_broken_policy() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let gw = gateway(
        &[format!("ref=http://{}/mcp", up.mcp_addr)],
        Some(&policy(true)),
        None,
    );
    let dir = scratch();
    let text = tenants_scenario(
        gw.mcp_addr,
        "[[workload]]\nmethod = \"tools/call\"\ntool = \"fail\"\nexpect = { is_error = false }\n",
    );
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    let list = op(s, "tools/list");
    let beta = tenant(s, "beta");
    assert!(list.outcomes.assertion > 20, "{:?}", list.outcomes);
    assert!(
        list.outcomes.ok > 20,
        "alpha's listings are still right: {:?}",
        list.outcomes
    );
    assert!(beta.outcomes.assertion >= list.outcomes.assertion);
    let fail = op(s, "tools/call:fail");
    assert_eq!(fail.outcomes.assertion, fail.started, "{:?}", fail.outcomes);
    let notes = s.notes.join("\n");
    assert!(
        notes.contains(
            "answers of tools/list broke its expect rules (assertion), e.g. tools/list shows `ref__"
        ),
        "{notes}"
    );
    assert!(
        notes.contains("answers of tools/call:fail broke its expect rules (assertion), e.g. isError is true, expected false"),
        "{notes}"
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A tenant limited to 200 calls a second (burst 20), driven far past it for 3 s: the gateway
/// admits 200/s + the burst within 5 %, and answers the rest 429 with `Retry-After`, which the
/// run reports as rate-limited.
#[test]
fn rate_limits_admit_the_configured_rate() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let policy =
        format!("[[tenant]]\nname = \"metered\"\ntokens = [\"{ALPHA}\"]\nrate = 200\nburst = 20\n");
    let gw = gateway(
        &[format!("ref=http://{}/mcp", up.mcp_addr)],
        Some(&policy),
        None,
    );
    let dir = scratch();
    let text = format!(
        "name = \"limited\"\n[target]\nurl = \"http://{}/mcp\"\ntool_prefix = \"ref__\"\n[[target.credentials]]\ntenant = \"metered\"\ntoken = \"{ALPHA}\"\n[load]\nconcurrency = 2\nduration = \"3s\"\nwarmup = \"0s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n",
        gw.mcp_addr
    );
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    let call = op(s, "tools/call:echo");
    let ok = call.outcomes.ok as f64;
    let expected = 200.0 * s.measured_seconds + 20.0;
    assert!(
        (ok - expected).abs() <= 0.05 * expected,
        "admitted {ok} in {:.2} s, expected {expected:.0} ± 5 %",
        s.measured_seconds
    );
    let limited = call.outcomes.http.get("429").copied().unwrap_or(0);
    assert!(limited > 100, "{:?}", call.outcomes);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("429") || n.contains("rate")),
        "{:?}",
        s.notes
    );
}

/// The reference gateway with 20 ms injected before every call (a precise wait), compared with
/// the same gateway without it and with its upstream called directly, at one user. The added
/// p50 of the delayed gateway over the plain one is the injected 20 ms, within −0.2/+5 ms:
/// both pay the same hop, but a pause lets this VM's idle vCPUs halt, and waking them costs
/// each later hop (measured: +0.5 ms on a built-in tool, +1 ms through the gateway's four
/// hops), and the other tests running beside this one on two cores delay the end of the wait
/// (+3.4 ms seen with a valgrind run beside the suite). The plain gateway's own hop over
/// direct is reported too.
#[test]
fn ab_finds_the_delay_injected_in_the_reference_gateway() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let upstream = [format!("ref=http://{}/mcp", up.mcp_addr)];
    let plain = gateway(&upstream, None, None);
    let delayed = gateway_with(&upstream, None, None, Duration::from_millis(20));
    let dir = scratch();
    let text = format!(
        "name = \"ab\"\n[[targets]]\nname = \"gateway\"\nurl = \"http://{}/mcp\"\ntool_prefix = \"ref__\"\n[[targets]]\nname = \"delayed\"\nurl = \"http://{}/mcp\"\ntool_prefix = \"ref__\"\n[[targets]]\nname = \"direct\"\nurl = \"http://{}/mcp\"\n[ab]\nslice = \"1s\"\n[load]\nconcurrency = 1\nduration = \"5s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n",
        plain.mcp_addr, delayed.mcp_addr, up.mcp_addr
    );
    let plan = Arc::new(mcpbench::scenario::parse("ab.toml", &text, &|_| None).unwrap());
    let opts = mcpbench::driver::RunOptions {
        output: Some(dir.path().join("ab")),
        ..Default::default()
    };
    let (report, _) =
        mcpbench::driver::ab_slices::ab(plan, &opts, mcpbench::driver::Interrupt::default())
            .unwrap();
    let added = |target: &str| {
        report.levels[0]
            .comparisons
            .iter()
            .find(|c| c.target == target && c.operation == "tools/call:echo")
            .and_then(|c| c.deltas.iter().find(|d| d.metric == "p50"))
            .unwrap_or_else(|| panic!("no p50 comparison for {target}"))
            .added_ms
    };
    let injected = added("delayed");
    assert!(
        (19.8..=25.0).contains(&injected.mean) && injected.n >= 5,
        "delayed over plain: {injected:?}"
    );
    let hop = added("direct");
    assert!(
        hop.mean < 0.0,
        "direct is faster than through the gateway: {hop:?}"
    );
}

const CLIENT_SECRET: &str = "cl1ent-s3cret-77";

/// The gateway splits each proxied call's time in `Server-Timing`: `upstream` (the exchange with
/// the upstream) and `gateway` (the rest). With a 10 ms tool upstream and a 20 ms delay injected
/// in the gateway, the header puts each where it belongs, and a run reading the header
/// (`timing_header = "server-timing:upstream"`) reports the upstream share per operation.
#[test]
fn server_timing_splits_upstream_from_gateway_time() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let upstream = [format!("ref=http://{}/mcp", up.mcp_addr)];
    let gw = gateway_with(&upstream, None, None, Duration::from_millis(20));
    let (sid, opened) = support::initialize(gw.mcp_addr, "2025-11-25");
    assert_eq!(
        opened.header("server-timing"),
        None,
        "no upstream call, no header"
    );
    let session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = support::post(
        gw.mcp_addr,
        &session,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ref__sleep","arguments":{"ms":10}}}"#,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let timing = r
        .header("server-timing")
        .expect("Server-Timing on a proxied call");
    let dur = |name: &str| -> f64 {
        timing
            .split(", ")
            .find_map(|e| e.strip_prefix(&format!("{name};dur=")))
            .unwrap_or_else(|| panic!("no {name} entry in {timing:?}"))
            .parse()
            .unwrap()
    };
    assert!(dur("upstream") >= 10.0, "{timing}");
    assert!(
        dur("gateway") >= 20.0,
        "the injected delay is the gateway's: {timing}"
    );

    let dir = scratch();
    let text = format!(
        "name = \"timing\"\n[target]\nurl = \"http://{}/mcp\"\ntiming_header = \"server-timing:upstream\"\n[load]\nconcurrency = 2\nrequests = 40\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"ref__sleep\"\narguments = {{ ms = 10 }}\n",
        gw.mcp_addr
    );
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let o = op(&out.summary, "tools/call:ref__sleep");
    assert_eq!(o.outcomes.ok, 40);
    let upstream = o.upstream.as_ref().expect("the upstream share is reported");
    assert_eq!(upstream.count, 40, "every response carried the header");
    assert!(upstream.p50_ms >= 10.0, "{upstream:?}");
    let latency = o.latency.as_ref().expect("latency");
    assert!(
        latency.p50_ms - upstream.p50_ms >= 19.0,
        "the gateway's 20 ms are not upstream: latency {latency:?}, upstream {upstream:?}"
    );
}

/// An upstream call that outlives the gateway's upstream timeout is answered as an error in
/// time, and the session's timer is armed afresh for each call after it: a quick call then
/// succeeds on the same pooled session, and a second slow one times out again.
#[test]
fn an_upstream_call_past_the_timeout_is_an_error_and_the_next_calls_are_timed_afresh() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let spec = format!("ref=http://{}/mcp", up.mcp_addr);
    let timeout = Duration::from_millis(300);
    let options = GatewayOptions {
        threads: 1,
        pool: 1,
        timeout,
    };
    let gw = Gateway::start(
        vec![UpstreamSpec::parse(&spec, timeout, &UpstreamTls::default()).unwrap()],
        &options,
    )
    .expect("the upstream answers");
    let gw = launch(Config {
        proxy: Some(gw),
        ..Config::default()
    });
    let (sid, _) = support::initialize(gw.mcp_addr, "2025-11-25");
    let session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let sleep = |id: u32, ms: u32| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ref__sleep","arguments":{{"ms":{ms}}}}}}}"#
        );
        let r = support::post(gw.mcp_addr, &session, &body);
        assert_eq!(r.status, 200);
        String::from_utf8_lossy(&r.body).into_owned()
    };
    for round in 0..2 {
        let slow = sleep(10 + round, 5_000);
        assert!(
            slow.contains("did not answer in time"),
            "round {round}: {slow}"
        );
        // Past the first call's deadline by now: a timer left as it fired would end this at once.
        for id in 0..3 {
            let quick = sleep(20 + 3 * round + id, 100);
            assert!(
                quick.contains(r#""result""#) && !quick.contains(r#""isError":true"#),
                "round {round}: {quick}"
            );
        }
    }
}

/// A client that asks for progress gets the upstream's progress through the gateway, as it
/// comes, under its own token: 3 notifications and the response per call, for clients of both
/// eras, from upstreams over every transport.
#[test]
fn upstream_progress_reaches_the_client() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let gw = gateway(&every_transport(&up), None, None);
    for protocol in ["2025-11-25", "2026-07-28"] {
        for upstream in ["h", "sse", "ws", "io"] {
            let dir = scratch();
            let text = format!(
                "name = \"progress\"\n[target]\nurl = \"http://{}/mcp\"\nprotocol = \"{protocol}\"\n[load]\nconcurrency = 2\nrequests = 12\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"{upstream}__progress\"\nprogress = true\narguments = {{ steps = 3, interval_ms = 5 }}\n",
                gw.mcp_addr
            );
            let out = run_in(&text, dir.path()).expect("the run finishes");
            let o = op(&out.summary, &format!("tools/call:{upstream}__progress"));
            let at = format!("{protocol}, upstream {upstream}");
            assert_eq!(o.outcomes.ok, 12, "{at}: {:?}", o.outcomes);
            assert_eq!(o.streamed, 12, "{at}: every call streamed");
            assert_eq!(
                o.events,
                12 * 4,
                "{at}: the upstream's 3 progress notifications and the response per call"
            );
            let first = o.first_event.as_ref().expect("time to first event");
            let latency = o.latency.as_ref().expect("latency");
            assert!(
                first.p50_ms < latency.p50_ms,
                "{at}: progress arrives before the result, not with it"
            );
        }
    }
}

/// A token endpoint: checks the client credentials grant, then issues `t-0`, `t-1`, … (valid
/// for one second), except that its third token (the second user's first) is one the server
/// does not know.
fn token_server(
    issued: Arc<std::sync::atomic::AtomicUsize>,
) -> crate::support::raw_http::ThreadServer {
    use tokio::io::AsyncWriteExt;
    crate::support::raw_http::start(1, move |mut s: tokio::net::TcpStream| {
        let issued = issued.clone();
        async move {
            let mut buf = Vec::new();
            while let Some((head, body)) =
                crate::support::raw_http::read_request(&mut s, &mut buf).await
            {
                let form = String::from_utf8_lossy(&body).into_owned();
                let good = head.starts_with("post /token ")
                    && form.contains("grant_type=client_credentials")
                    && form.contains("client_id=bench")
                    && form.contains(&format!("client_secret={CLIENT_SECRET}"));
                let reply = if good {
                    let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let token = if n == 2 {
                        "unknown-token".to_string()
                    } else {
                        format!("t-{}", n % 10)
                    };
                    let json = format!(
                        r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":1}}"#
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                        json.len()
                    )
                } else {
                    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_string()
                };
                if s.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// OAuth client credentials against a server whose policy knows the endpoint's tokens: each
/// user gets its own token (timed as `oauth/token`), refreshes it before its one-second expiry,
/// and after the 401 its first (unknown) token earns; the calls succeed, results count for the
/// client's tenant, and neither the secret nor any token reaches an output file.
#[test]
fn oauth_client_credentials_tokens_per_user() {
    let issued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tokens = token_server(issued.clone());
    let known: Vec<String> = (0..10).map(|i| format!("\"t-{i}\"")).collect();
    let server = launch(Config {
        policy: Some(Arc::new(
            Policy::parse(&format!(
                "[[tenant]]\nname = \"acme\"\ntokens = [{}]\n",
                known.join(", ")
            ))
            .unwrap(),
        )),
        ..Config::default()
    });
    let dir = scratch();
    let text = format!(
        "name = \"oauth\"\n[target]\nurl = \"http://{}/mcp\"\n[target.oauth]\ntoken_url = \"http://{}/token\"\nclient_id = \"bench\"\nclient_secret = \"${{SECRET}}\"\ntenant = \"acme\"\n[load]\nconcurrency = 2\nduration = \"3s\"\nwarmup = \"0s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n",
        server.mcp_addr, tokens.addr
    );
    let file = dir.path().join("oauth.toml").display().to_string();
    let plan = mcpbench::scenario::parse(&file, &text, &|v| {
        (v == "SECRET").then(|| CLIENT_SECRET.to_string())
    })
    .unwrap();
    let opts = mcpbench::driver::RunOptions {
        output: Some(dir.path().join("run")),
        ..Default::default()
    };
    let out = mcpbench::driver::run(
        Arc::new(plan),
        &opts,
        mcpbench::driver::Interrupt::default(),
    )
    .expect("the run finishes");
    let s = &out.summary;
    let token = op(s, "oauth/token");
    let echo = op(s, "tools/call:echo");
    // Two users, tokens good for 1 s, refreshed at half-life over 3 s: about 12 fetches.
    assert!(
        (8..=30).contains(&token.outcomes.ok),
        "{:?}",
        token.outcomes
    );
    let opening = op(s, "initialize");
    let unauthorized = [echo, opening]
        .iter()
        .map(|o| o.outcomes.http.get("401").copied().unwrap_or(0))
        .sum::<u64>();
    assert!(
        (1..=2).contains(&unauthorized),
        "only the unknown token is refused, once: {:?} {:?}",
        opening.outcomes,
        echo.outcomes
    );
    assert!(echo.outcomes.ok > 100);
    assert_eq!(
        s.totals.started, echo.started,
        "token requests are not workload"
    );
    assert_eq!(tenant(s, "acme").outcomes.ok, echo.outcomes.ok);
    for entry in walk(&dir.path().join("run")) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        assert!(
            !text.contains(CLIENT_SECRET),
            "the secret in {}",
            entry.display()
        );
        assert!(
            !text.contains("\"t-1\"") && !text.contains("Bearer t-"),
            "a token in {}",
            entry.display()
        );
    }
}

/// Mutual TLS both ways. A server that asks for client certificates maps the one named
/// `alpha-client` to tenant alpha (shown only `echo`, checked on every listing) and refuses a
/// client with neither certificate nor token (401); a gateway presents its certificate to an
/// upstream that requires one, and cannot start without it.
#[test]
fn mutual_tls_client_certificates_name_tenants_and_reach_upstreams() {
    use mcpbench::server::tls::{ClientAuth, load_pem_with};
    let dir = scratch();
    let pki = crate::support::pki(dir.path(), "alpha-client");
    let tls = |optional: bool| {
        Some(
            load_pem_with(
                &pki.server_cert,
                &pki.server_key,
                Some(&ClientAuth {
                    ca: pki.ca.clone(),
                    optional,
                }),
            )
            .expect("server TLS"),
        )
    };
    let server = launch(Config {
        tls: tls(true),
        policy: Some(Arc::new(
            Policy::parse(&format!(
                "[[tenant]]\nname = \"alpha\"\ncerts = [\"alpha-client\"]\ntools = [\"echo\"]\n[[tenant]]\nname = \"beta\"\ntokens = [\"{BETA}\"]\ntools = [\"sleep\"]\n"
            ))
            .unwrap(),
        )),
        ..Config::default()
    });
    let scenario = |identity: bool| {
        let cert = if identity {
            format!(
                "cert = \"{}\"\nkey = \"{}\"\n",
                pki.client_cert.display(),
                pki.client_key.display()
            )
        } else {
            String::new()
        };
        format!(
            "name = \"mtls\"\n[target]\nurl = \"https://127.0.0.1:{}/mcp\"\n[target.tls]\nca = \"{}\"\n{cert}[load]\nconcurrency = 2\nrequests = 300\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n[[workload]]\nmethod = \"tools/list\"\nexpect.tools = [\"echo\"]\n",
            server.mcp_addr.port(),
            pki.ca.display()
        )
    };
    let out = run_in(&scenario(true), &dir.path().join("with")).expect("the run finishes");
    assert_eq!(out.summary.totals.ok, 300, "{:?}", out.summary.operations);
    let refused = run_in(&scenario(false), &dir.path().join("without")).unwrap_err();
    assert!(refused.to_string().contains("HTTP 401"), "{refused}");

    // The gateway side: an upstream that requires a client certificate.
    let upstream = launch(Config {
        tls: tls(false),
        ..Config::default()
    });
    let spec = format!("ref=https://127.0.0.1:{}/mcp", upstream.mcp_addr.port());
    let options = GatewayOptions {
        threads: 1,
        pool: 4,
        timeout: Duration::from_secs(5),
    };
    let with = UpstreamTls {
        trust: mcpbench::transport::net::Trust::CaFile(pki.ca.clone()),
        identity: Some(mcpbench::transport::net::IdentityFiles {
            cert: pki.client_cert.clone(),
            key: pki.client_key.clone(),
        }),
    };
    let without = UpstreamTls {
        identity: None,
        ..with.clone()
    };
    let gw = Gateway::start(
        vec![UpstreamSpec::parse(&spec, Duration::from_secs(5), &with).unwrap()],
        &options,
    )
    .expect("the gateway reaches its upstream with its certificate");
    assert!(gw.started[0].tools > 5);
    let gateway = launch(Config {
        proxy: Some(gw),
        ..Config::default()
    });
    let text = format!(
        "name = \"via\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 2\nrequests = 200\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"ref__echo\"\narguments = {{ message = \"hi\" }}\n",
        gateway.mcp_addr
    );
    let out = run_in(&text, &dir.path().join("via")).expect("the run finishes");
    assert_eq!(out.summary.totals.ok, 200);
    let err = Gateway::start(
        vec![UpstreamSpec::parse(&spec, Duration::from_secs(5), &without).unwrap()],
        &options,
    )
    .unwrap_err();
    assert!(err.to_string().contains("upstream `ref`"), "{err}");
}

/// Two replicas behind no affinity (`target.url` as a list, each call to the next): a
/// handshake-era session opened on one is unknown to the other, so every call meets 404 and
/// the session reopens; 2026-07-28 clients have no session, and every call succeeds on either
/// replica.
#[test]
fn replicas_without_affinity_churn_sessions_but_not_stateless_clients() {
    let a = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let b = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let run = |protocol: &str| {
        let dir = scratch();
        let text = format!(
            "name = \"replicas\"\n[target]\nurl = [\"http://{}/mcp\", \"http://{}/mcp\"]\nprotocol = \"{protocol}\"\n[load]\nconcurrency = 2\nrequests = 400\nduration = \"20s\"\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n",
            a.mcp_addr, b.mcp_addr
        );
        run_in(&text, dir.path()).expect("the run finishes").summary
    };
    let stateless = run("2026-07-28");
    assert_eq!(stateless.totals.ok, 400, "{:?}", stateless.operations);
    assert_eq!(stateless.sessions.expired, 0);
    assert!(
        stateless.target.url.contains(" + "),
        "{}",
        stateless.target.url
    );
    let sessions = run("2025-11-25");
    let echo = op(&sessions, "tools/call:echo");
    assert!(
        sessions.sessions.expired > 50,
        "404 → reopen churn: {:?}",
        sessions.sessions
    );
    assert!(
        echo.outcomes.http.get("404").copied().unwrap_or(0) > 50,
        "{:?}",
        echo.outcomes
    );
    assert!(op(&sessions, "initialize").started > 50);
}

/// A gateway in front of 100 upstreams (one server under 100 names): it starts, lists all 900
/// tools over pages, and routes calls to any of them.
#[test]
fn a_hundred_upstreams() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let specs: Vec<String> = (0..100)
        .map(|i| format!("u{i:03}=http://{}/mcp", up.mcp_addr))
        .collect();
    let gw = gateway(&specs, None, None);
    let dir = scratch();
    let mut text = format!(
        "name = \"many\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = 4\nrequests = 600\ntimeout = \"10s\"\n[[workload]]\nmethod = \"tools/list\"\n",
        gw.mcp_addr
    );
    for i in [0, 42, 99] {
        text.push_str(&format!(
            "[[workload]]\nmethod = \"tools/call\"\ntool = \"u{i:03}__echo\"\narguments = {{ message = \"hi\" }}\n"
        ));
    }
    let out = run_in(&text, dir.path()).expect("the run finishes");
    assert_eq!(out.summary.totals.ok, 600, "{:?}", out.summary.operations);
    // The preflight walked every page: 100 upstreams × 9 tools (a gateway lists no tools of
    // its own unless --local-tools).
    let pages = mcpbench::probe::run(&mcpbench::probe::ProbeOptions {
        url: format!("http://{}/mcp", gw.mcp_addr),
        protocol: mcpbench::protocol::version::Revision::V2025_11_25,
        calls: Vec::new(),
        headers: Vec::new(),
        timeout: Duration::from_secs(10),
        insecure: false,
    })
    .expect("probe");
    assert!(pages.contains(&format!("{} tools", 100 * 9)), "{pages}");
}

/// A gateway lists its upstreams' tools only; with `local_tools` (`--local-tools`) its own
/// too. So a workload that forgot `tool_prefix` fails its preflight instead of measuring the
/// gateway's local `echo`.
#[test]
fn a_gateway_lists_its_own_tools_only_when_asked() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let list = |local_tools| {
        let gw = support::gateway(
            upstream_specs(&[format!("up=http://{}/mcp", up.mcp_addr)]),
            Config {
                local_tools,
                ..Config::default()
            },
        );
        gw.state().tool_names()
    };
    let upstream_only = list(false);
    assert_eq!(upstream_only.len(), 9, "{upstream_only:?}");
    assert!(upstream_only.iter().all(|n| n.starts_with("up__")));
    let both = list(true);
    assert_eq!(both.len(), 18);
    assert!(both.contains(&"echo".to_string()) && both.contains(&"up__echo".to_string()));
    // The workload that forgot tool_prefix: refused before any load.
    let gw = support::gateway(
        upstream_specs(&[format!("up=http://{}/mcp", up.mcp_addr)]),
        Config::default(),
    );
    let text = format!(
        "[target]\nurl = \"{}\"\n[load]\nconcurrency = 1\nrequests = 10\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"x\" }}\n",
        gw.mcp_url()
    );
    let dir = scratch();
    let e = run_in(&text, dir.path()).expect_err("echo is not the gateway's");
    assert!(e.to_string().contains("echo"), "{e}");
}

/// Clients of both eras at once against one gateway (`target.protocol` as a list): users
/// alternate between 2025-11-25 sessions and 2026-07-28 stateless requests, everything
/// succeeds, and the results break down by revision.
#[test]
fn mixed_revisions_in_one_run() {
    let up = servers(ResponseMode::Json, 0, 100, mock_backend::Knobs::default());
    let gw = gateway(&[format!("ref=http://{}/mcp", up.mcp_addr)], None, None);
    let dir = scratch();
    let text = format!(
        "name = \"mixed\"\n[target]\nurl = \"http://{}/mcp\"\nprotocol = [\"2025-11-25\", \"2026-07-28\"]\ntool_prefix = \"ref__\"\n[load]\nconcurrency = 4\nrequests = 800\ntimeout = \"5s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n[[workload]]\nmethod = \"tools/list\"\n",
        gw.mcp_addr
    );
    let out = run_in(&text, dir.path()).expect("the run finishes");
    let s = &out.summary;
    assert_eq!(s.totals.ok, 800, "{:?}", s.operations);
    let (old, new) = (tenant(s, "2025-11-25"), tenant(s, "2026-07-28"));
    assert!(
        old.outcomes.ok > 200 && new.outcomes.ok > 200,
        "{old:?} {new:?}"
    );
    assert_eq!(old.outcomes.ok + new.outcomes.ok, 800);
    // Only the handshake-era users opened sessions (initialize); the others are stateless.
    assert!(s.sessions.opened >= 2, "{:?}", s.sessions);
}
