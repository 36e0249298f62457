//! `mcpbench probe URL`: one MCP session over Streamable HTTP with mcpbench's own client
//! transport ([`HttpSession`] behind the [`Session`] trait — the code every load run uses):
//! open (`initialize` + `notifications/initialized`, or `server/discover` for 2026-07-28),
//! walk `tools/list`, call the tools asked for, close, and print one line.
//!
//! It is also the client the official conformance suite drives (`conformance client --command
//! "mcpbench probe" --scenario NAME`): the suite appends the URL of its test server and names
//! the scenario in `MCP_CONFORMANCE_SCENARIO`; [`scenario_calls`] says what each scenario the
//! probe takes part in needs called. Interactive and OAuth scenarios are not among them: a load
//! generator declares no client capabilities and takes static credentials (headers).
//!
//! With `--tenants FILE` it checks a gateway's tenant isolation instead ([`tenants`]).

pub mod tenants;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::endpoint::{blank, host_header};
use crate::client::{describe, list_tools};
use crate::metrics::outcome::Outcome;
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::transport::net::{NetTarget, TlsClient, Trust};
use crate::transport::streamable_http::HttpSession;
use crate::transport::url::{Scheme, parse_url};
use crate::transport::{CallSpec, Endpoint, Session, TransportKind};

/// The environment variable the conformance suite names its scenario in.
pub const SCENARIO_ENV: &str = "MCP_CONFORMANCE_SCENARIO";

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// An `http://` or `https://` Streamable HTTP endpoint.
    pub url: String,
    /// The revision offered (handshake era) or used (2026-07-28).
    pub protocol: Revision,
    /// Tools to call, with their arguments (a JSON object).
    pub calls: Vec<(String, Value)>,
    /// Extra HTTP headers (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Bound on connecting and on each exchange.
    pub timeout: Duration,
    /// https: accept any certificate.
    pub insecure: bool,
}

/// Why a probe did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The options cannot work (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The server or the exchange failed (exit 1).
    #[error("{0}")]
    Failed(String),
}

/// The tools a conformance client scenario needs called (`None`: the probe does not take part
/// in that scenario). `initialize` needs only the session and `tools/list`; `tools_call` calls
/// the suite's `add_numbers`; `sse-retry` calls `test_reconnection`, whose stream the suite's
/// server closes after a priming event and `retry`, so the transport must wait and resume with
/// GET + `Last-Event-ID`.
pub fn scenario_calls(scenario: &str) -> Option<Vec<(String, Value)>> {
    match scenario {
        "initialize" => Some(Vec::new()),
        "tools_call" => Some(vec![("add_numbers".into(), json!({"a": 5, "b": 3}))]),
        "sse-retry" => Some(vec![("test_reconnection".into(), json!({}))]),
        _ => None,
    }
}

/// Parses `--call TOOL` or `--call 'TOOL={"arg":1}'` (tool names have no `=`).
pub fn parse_call(s: &str) -> Result<(String, Value), String> {
    let (name, args) = match s.split_once('=') {
        Some((n, a)) => {
            let v: Value = serde_json::from_str(a)
                .map_err(|e| format!("arguments of `{n}` are not JSON: {e}"))?;
            if !v.is_object() {
                return Err(format!("arguments of `{n}` must be a JSON object"));
            }
            (n, v)
        }
        None => (s, json!({})),
    };
    if name.is_empty() {
        return Err("--call needs a tool name".into());
    }
    Ok((name.to_string(), args))
}

/// Parses `--header 'Name: value'`.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("`{s}` is not a `Name: value` header")),
    }
}

/// Resolves `host:port` to the first address that accepts a connection: `localhost` may name
/// `::1` and `127.0.0.1`, and a server often listens on only one of them.
fn reachable(host: &str, port: u16, timeout: Duration) -> Result<SocketAddr, ProbeError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|e| ProbeError::Failed(format!("cannot resolve {host}: {e}")))?
        .collect();
    let first = *addrs
        .first()
        .ok_or_else(|| ProbeError::Failed(format!("{host} has no address")))?;
    if addrs.len() == 1 {
        return Ok(first);
    }
    Ok(addrs
        .iter()
        .copied()
        .find(|a| std::net::TcpStream::connect_timeout(a, timeout).is_ok())
        .unwrap_or(first))
}

/// The endpoint for the options.
pub(crate) fn endpoint(o: &ProbeOptions) -> Result<Endpoint, ProbeError> {
    let u = parse_url(&o.url).map_err(ProbeError::Usage)?;
    if !matches!(u.scheme, Scheme::Http | Scheme::Https) {
        return Err(ProbeError::Usage(format!(
            "`{}`: mcpbench probe speaks Streamable HTTP (http:// or https://)",
            o.url
        )));
    }
    let addr = reachable(&u.host, u.port, o.timeout)?;
    let tls = if u.scheme.is_tls() {
        let trust = if o.insecure {
            Trust::Insecure
        } else {
            Trust::System
        };
        Some(
            TlsClient::new(&u.host, &trust, None, &[b"http/1.1"])
                .map_err(|e| ProbeError::Usage(e.to_string()))?,
        )
    } else {
        None
    };
    let mut ep = blank(TransportKind::StreamableHttp, o.protocol, o.timeout);
    ep.net = Some(NetTarget {
        addr,
        tls,
        connect_timeout: o.timeout,
        source: None,
    });
    ep.host = host_header(&u);
    ep.path = u.path.clone();
    for (name, value) in &o.headers {
        ep.add_header(name, value);
    }
    Ok(ep)
}

/// A `tools/call` request body.
pub(crate) fn write_call(out: &mut Vec<u8>, id: u64, rev: Revision, name: &str, args: &Value) {
    let args = serde_json::to_vec(args).unwrap_or_else(|_| b"{}".to_vec());
    mcp::write_tools_call(out, id, rev, name, Some(&args), false);
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// What a probe found.
#[derive(Debug, Clone)]
pub struct Probed {
    /// The revision negotiated (handshake era) or used (2026-07-28).
    pub revision: Revision,
    /// `serverInfo` as the server sent it (`null` if it sent none).
    pub server_info: Value,
    /// Opening the session: `initialize` + `notifications/initialized`, or `server/discover`.
    pub open: Duration,
    /// Every tool `tools/list` named, all pages.
    pub tools: Vec<String>,
    /// Walking `tools/list`, every page.
    pub list: Duration,
    /// Each tool called, and how long it took.
    pub calls: Vec<(String, Duration)>,
}

impl Probed {
    /// The report's parts: the session, the tool count, each call.
    fn lines(&self) -> Vec<String> {
        let s = &self.server_info;
        let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("?");
        let server = if s.is_null() {
            "unnamed".to_string()
        } else {
            format!("{} {}", text("name"), text("version"))
        };
        let mut out = vec![
            format!("{} with {server} in {}", self.revision, ms(self.open)),
            format!(
                "tools/list: {} tool{}",
                self.tools.len(),
                if self.tools.len() == 1 { "" } else { "s" }
            ),
        ];
        for (name, took) in &self.calls {
            out.push(format!("tools/call {name}: ok in {}", ms(*took)));
        }
        out
    }
}

/// Runs a session with `session` (any transport) against an already described endpoint.
async fn probe_session<S: Session>(
    session: &mut S,
    o: &ProbeOptions,
) -> Result<Probed, ProbeError> {
    let t = Instant::now();
    let opened = tokio::time::timeout(o.timeout, session.open())
        .await
        .map_or(Outcome::Timeout, |r| r.outcome);
    if opened != Outcome::Ok {
        let what = if o.protocol.has_handshake() {
            "initialize"
        } else {
            "server/discover"
        };
        return Err(ProbeError::Failed(format!("{what}: {}", describe(opened))));
    }
    let open = t.elapsed();
    let rev = session.revision().unwrap_or(o.protocol);
    let info: Value = serde_json::from_slice(session.last_message()).unwrap_or(Value::Null);
    let server_info = info
        .pointer("/result/serverInfo")
        .cloned()
        .unwrap_or(Value::Null);

    let t = Instant::now();
    let tools: Vec<String> = list_tools(session, rev, o.timeout)
        .await
        .map_err(|e| ProbeError::Failed(e.to_string()))?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let list = t.elapsed();

    let mut calls = Vec::new();
    for (name, args) in &o.calls {
        if !tools.iter().any(|t| t == name) {
            return Err(ProbeError::Failed(format!(
                "tools/call {name}: the server lists no such tool"
            )));
        }
        let call_spec = CallSpec::new("tools/call", Some(name), rev);
        let t = Instant::now();
        let outcome = tokio::time::timeout(
            o.timeout,
            session.call(&call_spec, |out, id| write_call(out, id, rev, name, args)),
        )
        .await
        .map_or(Outcome::Timeout, |r| r.outcome);
        match outcome {
            Outcome::Ok => calls.push((name.clone(), t.elapsed())),
            Outcome::ToolError => {
                let msg: Value =
                    serde_json::from_slice(session.last_message()).unwrap_or(Value::Null);
                let text = msg
                    .pointer("/result/content/0/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(ProbeError::Failed(format!(
                    "tools/call {name}: tool error: {text}"
                )));
            }
            o => {
                return Err(ProbeError::Failed(format!(
                    "tools/call {name}: {}",
                    describe(o)
                )));
            }
        }
    }
    Ok(Probed {
        revision: rev,
        server_info,
        open,
        tools,
        list,
        calls,
    })
}

/// Probes the endpoint: what it found.
pub fn session(o: &ProbeOptions) -> Result<Probed, ProbeError> {
    let ep = Arc::new(endpoint(o)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ProbeError::Failed(format!("cannot start a runtime: {e}")))?;
    rt.block_on(async {
        let mut session = HttpSession::new(ep);
        let result = probe_session(&mut session, o).await;
        session.close().await;
        result
    })
}

/// Probes the endpoint: the one-line report on success.
pub fn run(o: &ProbeOptions) -> Result<String, ProbeError> {
    let probed = session(o)?;
    Ok(format!(
        "probe ok: {}: {}",
        o.url,
        probed.lines().join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_headers_and_scenarios_parse() {
        assert_eq!(parse_call("echo").unwrap(), ("echo".into(), json!({})));
        assert_eq!(
            parse_call(r#"add={"a":1}"#).unwrap(),
            ("add".into(), json!({"a": 1}))
        );
        assert!(parse_call("add=[1]").is_err() && parse_call("add={").is_err());
        assert!(parse_call("").is_err());
        assert_eq!(
            parse_header("Authorization: Bearer x:y").unwrap(),
            ("Authorization".into(), "Bearer x:y".into())
        );
        assert!(parse_header("nocolon").is_err());
        assert_eq!(scenario_calls("initialize").unwrap().len(), 0);
        assert_eq!(scenario_calls("tools_call").unwrap()[0].0, "add_numbers");
        assert!(scenario_calls("auth/basic-cimd").is_none());
    }

    /// Both sides of SEP-1699 polling are mcpbench's: the reference server parks the
    /// `test_reconnection` stream, the client transport waits `retry` and resumes it.
    #[test]
    fn probes_the_reference_server_in_both_eras() {
        use crate::server::{Config, EmbeddedServers, Launch};
        let srv = EmbeddedServers::launch(Launch {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            config: Config {
                conformance: true,
                ..Config::default()
            },
            backend: mock_backend::Config::default(),
            threads: 1,
        })
        .unwrap();
        let opts = |protocol, calls: Vec<(&str, Value)>| ProbeOptions {
            url: srv.mcp_url(),
            protocol,
            calls: calls.into_iter().map(|(n, a)| (n.to_string(), a)).collect(),
            headers: vec![("X-Probe".into(), "1".into())],
            timeout: Duration::from_secs(10),
            insecure: false,
        };
        let line = run(&opts(
            Revision::V2025_11_25,
            vec![
                ("echo", json!({"message": "hi"})),
                ("test_reconnection", json!({})),
            ],
        ))
        .unwrap();
        assert!(
            line.contains("2025-11-25 with mcpbench-reference")
                && line.contains("tools/call test_reconnection: ok"),
            "{line}"
        );
        let line = run(&opts(
            Revision::V2026_07_28,
            vec![("test_simple_text", json!({}))],
        ))
        .unwrap();
        assert!(
            line.contains("2026-07-28") && line.contains("ok in"),
            "{line}"
        );
        for (calls, why) in [
            (vec![("nope", json!({}))], "no such tool"),
            (vec![("fail", json!({}))], "tool error"),
        ] {
            match run(&opts(Revision::V2025_11_25, calls)) {
                Err(ProbeError::Failed(e)) => assert!(e.contains(why), "{e}"),
                other => panic!("{other:?}"),
            }
        }
        let mut bad = opts(Revision::V2025_11_25, vec![]);
        bad.url = "ws://127.0.0.1:1/ws".into();
        assert!(matches!(run(&bad), Err(ProbeError::Usage(_))));
        assert_eq!(srv.state().active_calls(), 0);
    }

    #[test]
    fn call_bodies_are_json_rpc() {
        let mut out = Vec::new();
        write_call(&mut out, 7, Revision::V2025_11_25, "a\"b", &json!({"x": 1}));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["params"]["name"], "a\"b");
        assert_eq!(v["params"]["arguments"]["x"], 1);
        assert!(v["params"].get("_meta").is_none());
        out.clear();
        write_call(&mut out, 8, Revision::V2026_07_28, "echo", &json!({}));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }
}
pub mod init;
