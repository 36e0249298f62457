//! `mcpbench probe --tenants FILE URL`: a gateway checked as a hostile tenant would check it.
//!
//! With two or more tenants' credentials, over Streamable HTTP (handshake era, where sessions
//! exist), it asks:
//! - does the gateway refuse a request with no credentials, and one whose token is in the query
//!   string (where logs and proxies keep it)?
//! - can a tenant use, listen on or end another tenant's session — POST, GET and DELETE with
//!   the other's `Mcp-Session-Id` and its own credentials? A safe gateway answers exactly as it
//!   answers an id it never issued, and the owner's session lives on;
//! - are session ids unguessable (≥ 122 random bits, and a guess finds nothing)?
//! - does any tenant's credential reach the upstream? Only when the gateway fronts `mcpbench
//!   serve` and `--upstream` names it: that server fingerprints every credential it receives
//!   (`GET /seen-credentials`), and none may be a tenant's.
//!
//! Each check is a row: pass, fail, warn (refused, but unlike an unknown session: the answer
//! says the session exists) or skip (does not apply, with why). Exit 1 if any failed.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use http_body_util::Full;
use rand::RngExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ProbeError, ProbeOptions, endpoint};
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::server::credentials::fingerprint;
use crate::transport::exchange::{Answer, exchange};
use crate::transport::net::NetTarget;
use crate::transport::sse_decoder::SseDecoder;
use crate::transport::{Endpoint, header_name_ok, header_value_ok};

/// One tenant's credentials, as the file gives them.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub name: String,
    /// Headers sent on each of its requests (secrets: never printed).
    pub headers: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    tenant: Vec<RawTenant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: String,
    /// Shorthand for `Authorization: Bearer TOKEN`.
    token: Option<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

/// Reads a tenants file (TOML): `[[tenant]] name, token | headers`, `${VAR}` from `env`.
pub fn load(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Credentials>, ProbeError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ProbeError::Usage(format!("cannot read the tenants file {shown}: {e}")))?;
    parse(&text, env).map_err(|e| ProbeError::Usage(format!("{shown}: {e}")))
}

/// Parses a tenants file; errors name the tenant and say what to write.
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Credentials>, String> {
    const EXAMPLE: &str = "[[tenant]]\n    name = \"alpha\"\n    token = \"${ALPHA_TOKEN}\"\n    [[tenant]]\n    name = \"beta\"\n    headers = { Authorization = \"Bearer ${BETA_TOKEN}\" }";
    let raw: RawFile = toml::from_str(text).map_err(|e| e.to_string())?;
    if raw.tenant.len() < 2 {
        return Err(format!(
            "two or more [[tenant]] are needed, each with its own credentials, e.g.\n    {EXAMPLE}"
        ));
    }
    let mut out = Vec::new();
    for t in raw.tenant {
        let name = t.name.trim().to_string();
        if name.is_empty() || out.iter().any(|c: &Credentials| c.name == name) {
            return Err(format!(
                "tenant `{name}`: names must be unique and not empty"
            ));
        }
        let mut headers = Vec::new();
        if let Some(token) = &t.token {
            headers.push(("Authorization".to_string(), format!("Bearer {token}")));
        }
        headers.extend(t.headers);
        if headers.is_empty() {
            return Err(format!(
                "tenant `{name}`: give its credentials, `token = \"…\"` or `headers = {{ … }}`"
            ));
        }
        for (h, v) in &mut headers {
            let expanded = crate::scenario::args::expand_env(v, env)
                .map_err(|e| format!("tenant `{name}`, header `{h}`: {}", e.message))?;
            if !header_name_ok(h) || !header_value_ok(&expanded) {
                return Err(format!(
                    "tenant `{name}`: header `{h}` is not a header name, or its value holds a control character"
                ));
            }
            *v = expanded;
        }
        out.push(Credentials { name, headers });
    }
    if out.windows(2).any(|w| w[0].headers == w[1].headers) {
        return Err("two tenants have the same credentials; each needs its own".into());
    }
    Ok(out)
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Refused, but not as an unknown session is: the answer tells the session exists.
    Warn,
    Fail,
    /// Does not apply here (the detail says why).
    Skip,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Check {
    pub check: &'static str,
    /// Who tried what on whom, e.g. `beta → alpha`.
    pub who: String,
    pub verdict: Verdict,
    pub detail: String,
}

/// What to probe.
#[derive(Debug, Clone)]
pub struct TenantsOptions {
    /// The gateway's endpoint, revision, timeout, TLS (its `calls`: what each tenant calls
    /// before the passthrough check; its `headers`: sent by every tenant too).
    pub probe: ProbeOptions,
    pub tenants: Vec<Credentials>,
    /// `mcpbench serve` behind the gateway (its base URL or its /mcp URL), for the passthrough
    /// check.
    pub upstream: Option<String>,
}

/// Largest body read.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A request to the gateway, as a hostile tenant would write it.
#[derive(Default)]
struct Req<'a> {
    method: &'static str,
    /// Whose credentials (none: no credentials at all).
    tenant: Option<&'a Credentials>,
    session: Option<&'a str>,
    /// `MCP-Protocol-Version`, once negotiated.
    version: Option<&'a str>,
    query: Option<String>,
    body: Option<Vec<u8>>,
}

/// An open session of one tenant.
#[derive(Debug, Clone)]
struct Opened {
    id: Option<String>,
    version: String,
    tools: Vec<String>,
}

struct Prober<'a> {
    ep: Endpoint,
    o: &'a TenantsOptions,
    rev: Revision,
    next_id: u64,
}

impl Prober<'_> {
    async fn send(&mut self, r: Req<'_>) -> Result<Answer, String> {
        let path = match &r.query {
            Some(q) => format!("{}?{q}", self.ep.path),
            None => self.ep.path.clone(),
        };
        let mut b = hyper::Request::builder()
            .method(r.method)
            .uri(path)
            .header("host", self.ep.host.as_str())
            .header("accept", "application/json, text/event-stream");
        if r.body.is_some() {
            b = b.header("content-type", "application/json");
        }
        if let Some(s) = r.session {
            b = b.header("mcp-session-id", s);
        }
        if let Some(v) = r.version {
            b = b.header("mcp-protocol-version", v);
        }
        for (n, v) in &self.o.probe.headers {
            b = b.header(n.as_str(), v.as_str());
        }
        for (n, v) in r.tenant.map(|t| t.headers.as_slice()).unwrap_or_default() {
            b = b.header(n.as_str(), v.as_str());
        }
        let body = Full::new(Bytes::from(r.body.unwrap_or_default()));
        let req = b.body(body).map_err(|e| e.to_string())?;
        let net = self.net()?;
        // A GET may open a stream that never ends: its head is the answer.
        let read_body = r.method != "GET";
        let timeout = self.o.probe.timeout;
        tokio::time::timeout(timeout, exchange(&net, req, MAX_BODY, read_body))
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
            .map_err(|e| e.to_string())
    }

    fn net(&self) -> Result<NetTarget, String> {
        self.ep
            .net
            .clone()
            .ok_or_else(|| "the gateway's URL has no address".to_string())
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Opens a session as `t`: initialize, notifications/initialized, tools/list.
    async fn open(&mut self, t: &Credentials) -> Result<Opened, String> {
        let mut body = Vec::new();
        let id = self.id();
        mcp::write_initialize(&mut body, id, self.rev);
        let a = self.post(Some(t), None, None, body).await?;
        let msg = message(&a);
        if a.status != 200 || msg.get("result").is_none() {
            return Err(format!("initialize got {}", summary(&a)));
        }
        let id = a
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let version = msg
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(self.rev.as_str())
            .to_string();
        let mut body = Vec::new();
        mcp::write_initialized(&mut body);
        self.post(Some(t), id.as_deref(), Some(&version), body)
            .await?;
        let tools = match self.list(t, id.as_deref(), &version).await? {
            Ok(tools) => tools,
            Err(a) => return Err(format!("tools/list got {}", summary(&a))),
        };
        Ok(Opened { id, version, tools })
    }

    /// tools/list in a session: the names, or the answer that was not a result.
    async fn list(
        &mut self,
        t: &Credentials,
        session: Option<&str>,
        version: &str,
    ) -> Result<Result<Vec<String>, Answer>, String> {
        let mut body = Vec::new();
        let id = self.id();
        mcp::write_tools_list(&mut body, id, self.rev, None);
        let a = self.post(Some(t), session, Some(version), body).await?;
        let msg = message(&a);
        let Some(tools) = msg.pointer("/result/tools").and_then(Value::as_array) else {
            return Ok(Err(a));
        };
        Ok(Ok(tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .collect()))
    }

    async fn post(
        &mut self,
        tenant: Option<&Credentials>,
        session: Option<&str>,
        version: Option<&str>,
        body: Vec<u8>,
    ) -> Result<Answer, String> {
        self.send(Req {
            method: "POST",
            tenant,
            session,
            version,
            body: Some(body),
            ..Req::default()
        })
        .await
    }
}

/// The JSON-RPC message of an answer (JSON, or the last message event of an SSE body).
fn message(a: &Answer) -> Value {
    if a.media_type() == "text/event-stream" {
        let mut last = Value::Null;
        let mut d = SseDecoder::new(MAX_BODY);
        let _ = d.feed(&a.body, |ev| {
            if ev.is_message()
                && let Ok(v) = serde_json::from_slice::<Value>(ev.data)
            {
                last = v;
            }
            std::ops::ControlFlow::Continue(())
        });
        return last;
    }
    serde_json::from_slice(&a.body).unwrap_or(Value::Null)
}

/// Whether an answer carries a JSON-RPC result (the request ran).
fn ran(a: &Answer) -> bool {
    (200..300).contains(&a.status) && message(a).get("result").is_some()
}

/// `404 application/json` and the JSON-RPC error's code, for a detail column.
fn summary(a: &Answer) -> String {
    let code = message(a)
        .pointer("/error/code")
        .and_then(Value::as_i64)
        .map(|c| format!(" (JSON-RPC {c})"))
        .unwrap_or_default();
    format!("{}{code}", a.status)
}

/// Random bits a session id can carry at most, judged by its length and alphabet: a UUID
/// (version 4: 122), hex (4 a character), base64/base64url (6), else printable ASCII.
fn id_bits(id: &str) -> f64 {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = id.split('-').collect();
    if parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| hex(p)) {
        return 122.0;
    }
    let n = id.len() as f64;
    if hex(id) {
        return 4.0 * n;
    }
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b"-_+/=".contains(&b);
    if id.bytes().all(b64) {
        return 6.0 * id.trim_end_matches('=').len() as f64;
    }
    n * 95f64.log2()
}

/// An id shaped like `id` (same length, same kind of characters), made up.
fn guess_like(id: &str) -> String {
    let mut rng = rand::rng();
    id.chars()
        .map(|c| match c {
            '0'..='9' => char::from(b'0' + rng.random_range(0..10u8)),
            'a'..='f' if id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') => {
                char::from(b"0123456789abcdef"[rng.random_range(0..16usize)])
            }
            'a'..='z' => char::from(b'a' + rng.random_range(0..26u8)),
            'A'..='Z' => char::from(b'A' + rng.random_range(0..26u8)),
            other => other,
        })
        .collect()
}

/// Runs every check; the rows of the report.
pub fn run(o: &TenantsOptions) -> Result<Vec<Check>, ProbeError> {
    if o.tenants.len() < 2 {
        return Err(ProbeError::Usage(
            "--tenants needs two or more tenants' credentials".into(),
        ));
    }
    let ep = endpoint(&o.probe)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ProbeError::Failed(format!("cannot start a runtime: {e}")))?;
    let mut p = Prober {
        ep,
        o,
        rev: o.probe.protocol,
        next_id: 0,
    };
    rt.block_on(checks(&mut p))
        .map_err(|e| ProbeError::Failed(format!("{}: {e}", o.probe.url)))
}

async fn checks(p: &mut Prober<'_>) -> Result<Vec<Check>, String> {
    let mut out = Vec::new();
    let o = p.o;
    let open_to_all = no_credentials(p).await?;
    let anyone = open_to_all.verdict == Verdict::Fail;
    out.push(open_to_all);
    out.push(if anyone {
        skip(
            "token in query string",
            "-",
            "the gateway asks for no credentials: a token anywhere is ignored",
        )
    } else {
        query_token(p).await?
    });
    if !p.rev.has_handshake() {
        for check in [
            "cross-tenant POST",
            "cross-tenant GET",
            "cross-tenant DELETE",
        ] {
            out.push(skip(
                check,
                "-",
                "2026-07-28 has no sessions: nothing to ride",
            ));
        }
    } else {
        let mut opened = Vec::new();
        for t in &o.tenants {
            let s = p.open(t).await;
            if let Err(e) = &s {
                out.push(Check {
                    check: "open a session",
                    who: t.name.clone(),
                    verdict: Verdict::Warn,
                    detail: format!("{e}: are its credentials right? checks with it skipped"),
                });
            }
            opened.push(s.ok());
        }
        let live: Vec<usize> = (0..opened.len()).filter(|&i| opened[i].is_some()).collect();
        let why = if live.len() < 2 {
            Some("fewer than two tenants could open a session")
        } else if live
            .iter()
            .all(|&i| opened[i].as_ref().is_some_and(|s| s.id.is_none()))
        {
            Some("the gateway keeps no sessions (no Mcp-Session-Id)")
        } else {
            None
        };
        if let Some(why) = why {
            for check in [
                "cross-tenant POST",
                "cross-tenant GET",
                "cross-tenant DELETE",
            ] {
                out.push(skip(check, "-", why));
            }
        } else {
            for (k, &victim) in live.iter().enumerate() {
                let attacker = live[(k + 1) % live.len()];
                out.extend(cross_tenant(p, &mut opened, victim, attacker).await?);
            }
            out.push(guessing(p, &opened).await?);
        }
    }
    out.push(passthrough(p).await?);
    Ok(out)
}

fn skip(check: &'static str, who: &str, why: &str) -> Check {
    Check {
        check,
        who: who.into(),
        verdict: Verdict::Skip,
        detail: why.into(),
    }
}

/// An initialize with no credentials at all must be refused.
async fn no_credentials(p: &mut Prober<'_>) -> Result<Check, String> {
    let mut body = Vec::new();
    mcp::write_initialize(&mut body, 1, p.rev);
    let a = p.post(None, None, None, body).await?;
    let (verdict, detail) = if ran(&a) {
        (
            Verdict::Fail,
            format!("{}: anyone may open a session", a.status),
        )
    } else {
        (Verdict::Pass, format!("refused: {}", summary(&a)))
    };
    Ok(Check {
        check: "no credentials",
        who: "-".into(),
        verdict,
        detail,
    })
}

/// A bearer token in the query string (and no Authorization header) must not authenticate.
async fn query_token(p: &mut Prober<'_>) -> Result<Check, String> {
    let o = p.o;
    let bearer = o.tenants.iter().find_map(|t| {
        t.headers.iter().find_map(|(n, v)| {
            let token = v.get(7..).filter(|_| {
                n.eq_ignore_ascii_case("authorization")
                    && v.get(..7)
                        .is_some_and(|s| s.eq_ignore_ascii_case("bearer "))
            })?;
            Some((t, token.trim()))
        })
    });
    let Some((t, token)) = bearer else {
        return Ok(skip(
            "token in query string",
            "-",
            "no tenant has a bearer token",
        ));
    };
    // The tenant's other headers go along; only the token moves into the URI.
    let rest = Credentials {
        name: t.name.clone(),
        headers: t
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("authorization"))
            .cloned()
            .collect(),
    };
    let mut body = Vec::new();
    mcp::write_initialize(&mut body, 1, p.rev);
    let query = format!("access_token={}", crate::protocol::percent_encode(token));
    let a = p
        .send(Req {
            method: "POST",
            tenant: Some(&rest),
            query: Some(query),
            body: Some(body),
            ..Req::default()
        })
        .await?;
    let (verdict, detail) = if ran(&a) {
        (
            Verdict::Fail,
            format!(
                "{}: a token in the URI opens a session (URIs end up in logs)",
                a.status
            ),
        )
    } else {
        (Verdict::Pass, format!("refused: {}", summary(&a)))
    };
    Ok(Check {
        check: "token in query string",
        who: t.name.clone(),
        verdict,
        detail,
    })
}

/// A request of `attacker`, with session id `sid`.
fn attempt<'a>(
    method: &'static str,
    attacker: &'a Credentials,
    sid: &'a str,
    version: &'a str,
    body: Option<&[u8]>,
) -> Req<'a> {
    Req {
        method,
        tenant: Some(attacker),
        session: Some(sid),
        version: Some(version),
        body: body.map(<[u8]>::to_vec),
        ..Req::default()
    }
}

/// The answer to `r` (in the victim's session), then to the same request with a made-up id
/// shaped like it (what an unknown session gets).
async fn both(p: &mut Prober<'_>, r: Req<'_>) -> Result<(Answer, Answer), String> {
    let guess = guess_like(r.session.unwrap_or_default());
    let again = Req {
        session: Some(&guess),
        method: r.method,
        tenant: r.tenant,
        version: r.version,
        body: r.body.clone(),
        ..Req::default()
    };
    let got = p.send(r).await?;
    Ok((got, p.send(again).await?))
}

/// Verdict of a refused cross-tenant request: pass when answered as an unknown session is.
fn refused(a: &Answer, unknown: &Answer) -> (Verdict, String) {
    if a.status == unknown.status {
        (
            Verdict::Pass,
            format!("refused: {}, as for an unknown session", summary(a)),
        )
    } else {
        (
            Verdict::Warn,
            format!(
                "refused: {}, but an unknown session gets {}: the answer tells the session exists",
                summary(a),
                summary(unknown)
            ),
        )
    }
}

fn row(check: &'static str, who: &str, (verdict, detail): (Verdict, String)) -> Check {
    Check {
        check,
        who: who.to_string(),
        verdict,
        detail,
    }
}

/// POST, GET and DELETE by `attacker` in `victim`'s session.
async fn cross_tenant(
    p: &mut Prober<'_>,
    opened: &mut [Option<Opened>],
    victim: usize,
    attacker: usize,
) -> Result<Vec<Check>, String> {
    let o = p.o;
    let (v, a) = (&o.tenants[victim], &o.tenants[attacker]);
    let who = format!("{} → {}", a.name, v.name);
    let Some(Opened {
        id: Some(sid),
        version: ver,
        ..
    }) = opened[victim].clone()
    else {
        return Ok(vec![skip("cross-tenant POST", &who, "no session id")]);
    };
    let mut body = Vec::new();
    mcp::write_tools_list(&mut body, 99, p.rev, None);

    let (got, unknown) = both(p, attempt("POST", a, &sid, &ver, Some(&body))).await?;
    let post = if ran(&got) {
        let listed = message(&got)
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let (st, an, vn) = (got.status, &a.name, &v.name);
        let why = format!("{st}: {an}'s request ran in {vn}'s session ({listed} tools listed)");
        (Verdict::Fail, why)
    } else {
        refused(&got, &unknown)
    };

    let (got, unknown) = both(p, attempt("GET", a, &sid, &ver, None)).await?;
    let get = if (200..300).contains(&got.status) && got.media_type() == "text/event-stream" {
        let (st, an, vn) = (got.status, &a.name, &v.name);
        (
            Verdict::Fail,
            format!("{st}: {an} listens on {vn}'s session stream"),
        )
    } else {
        refused(&got, &unknown)
    };

    let (got, unknown) = both(p, attempt("DELETE", a, &sid, &ver, None)).await?;
    let delete = match p.list(v, Some(&sid), &ver).await? {
        Ok(_) => refused(&got, &unknown),
        Err(after) => {
            // The session is gone: the victim opens another for the checks that follow.
            opened[victim] = p.open(v).await.ok();
            let (st, an, vn) = (got.status, &a.name, &v.name);
            let next = summary(&after);
            let why = format!("{st}: {an} ended {vn}'s session (its next request got {next})");
            (Verdict::Fail, why)
        }
    };
    Ok(vec![
        row("cross-tenant POST", &who, post),
        row("cross-tenant GET", &who, get),
        row("cross-tenant DELETE", &who, delete),
    ])
}

/// Session ids: distinct, ≥ 122 random bits by their shape, and a guess finds nothing.
async fn guessing(p: &mut Prober<'_>, opened: &[Option<Opened>]) -> Result<Check, String> {
    let o = p.o;
    let ids: Vec<&str> = opened
        .iter()
        .flatten()
        .filter_map(|s| s.id.as_deref())
        .collect();
    let bits = ids.iter().map(|i| id_bits(i)).fold(f64::INFINITY, f64::min);
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let Some((t, s)) = o
        .tenants
        .iter()
        .zip(opened)
        .find_map(|(t, s)| Some((t, s.as_ref()?)))
    else {
        return Ok(skip("session id guessing", "-", "no session"));
    };
    let guess = guess_like(s.id.as_deref().or(ids.first().copied()).unwrap_or_default());
    let mut body = Vec::new();
    mcp::write_tools_list(&mut body, 98, p.rev, None);
    let a = p
        .post(Some(t), Some(&guess), Some(&s.version), body)
        .await?;
    let (verdict, detail) = if ran(&a) {
        (
            Verdict::Fail,
            format!("{}: a made-up id was accepted as a session", a.status),
        )
    } else if distinct.len() < ids.len() {
        (
            Verdict::Fail,
            "two tenants were given the same session id".to_string(),
        )
    } else if bits < 122.0 {
        (
            Verdict::Fail,
            format!(
                "ids carry at most {bits:.0} random bits (fewer than 122); a guess: {}",
                summary(&a)
            ),
        )
    } else {
        (
            Verdict::Pass,
            format!("ids of up to {bits:.0} bits; a guess got {}", summary(&a)),
        )
    };
    Ok(Check {
        check: "session id guessing",
        who: t.name.clone(),
        verdict,
        detail,
    })
}

/// No tenant's credential reaches the upstream: each tenant calls through the gateway, then
/// the upstream (`mcpbench serve`) says which credentials it has seen.
async fn passthrough(p: &mut Prober<'_>) -> Result<Check, String> {
    let o = p.o;
    let Some(up) = &o.upstream else {
        return Ok(skip(
            "no token passthrough",
            "-",
            "point the gateway at `mcpbench serve` and name it with --upstream URL to check",
        ));
    };
    let mut called = 0;
    for t in &o.tenants {
        // A tenant that cannot open a session was reported above.
        called += call_through(p, t).await.unwrap_or(0);
    }
    let seen = seen_credentials(p, up).await?;
    let salt = hex(seen["salt"].as_str().unwrap_or_default());
    let prints: HashMap<&str, &str> = seen["credentials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c["fingerprint"].as_str()?, c["header"].as_str()?)))
        .collect();
    let mut leaked = Vec::new();
    for t in &o.tenants {
        for (name, value) in &t.headers {
            if let Some(h) = prints.get(fingerprint(&salt, value.as_bytes()).as_str()) {
                leaked.push(format!("{}'s {name} (as {h})", t.name));
            }
        }
    }
    let complete = seen["complete"].as_bool().unwrap_or(false);
    let (verdict, detail) = if !leaked.is_empty() {
        (
            Verdict::Fail,
            format!("the upstream received {}", leaked.join(", ")),
        )
    } else if called == 0 {
        (
            Verdict::Skip,
            "no tenant could call a tool through the gateway (give one with --call)".into(),
        )
    } else if !complete {
        (
            Verdict::Warn,
            "none seen, but the upstream saw too many credentials to keep them all".into(),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "{called} call{} through the gateway; the upstream saw {} credential{} (none a tenant's)",
                if called == 1 { "" } else { "s" },
                prints.len(),
                if prints.len() == 1 { "" } else { "s" }
            ),
        )
    };
    Ok(Check {
        check: "no token passthrough",
        who: "-".into(),
        verdict,
        detail,
    })
}

/// `t` opens a session and calls the probe's `--call` tools, else a tool named like `echo`;
/// how many calls were answered.
async fn call_through(p: &mut Prober<'_>, t: &Credentials) -> Result<usize, String> {
    let s = p.open(t).await?;
    let calls: Vec<(String, Value)> = if p.o.probe.calls.is_empty() {
        s.tools
            .iter()
            .find(|n| n.ends_with("echo"))
            .map(|n| (n.clone(), json!({"message": "mcpbench probe"})))
            .into_iter()
            .collect()
    } else {
        p.o.probe.calls.clone()
    };
    let mut answered = 0;
    for (name, args) in calls.iter().filter(|(n, _)| s.tools.contains(n)) {
        let mut body = Vec::new();
        let id = p.id();
        super::write_call(&mut body, id, p.rev, name, args);
        let a = p
            .post(Some(t), s.id.as_deref(), Some(&s.version), body)
            .await?;
        answered += usize::from(ran(&a));
    }
    Ok(answered)
}

/// `GET /seen-credentials` of the upstream `mcpbench serve`.
async fn seen_credentials(p: &mut Prober<'_>, upstream: &str) -> Result<Value, String> {
    let base = upstream.trim_end_matches('/').trim_end_matches("/mcp");
    let ep = endpoint(&ProbeOptions {
        url: format!("{base}{}", crate::server::credentials::PATH),
        ..p.o.probe.clone()
    })
    .map_err(|e| e.to_string())?;
    let net = ep.net.clone().ok_or("the upstream URL has no address")?;
    let req = hyper::Request::get(ep.path.as_str())
        .header("host", ep.host.as_str())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let a = tokio::time::timeout(p.o.probe.timeout, exchange(&net, req, MAX_BODY, true))
        .await
        .map_err(|_| "the upstream did not answer".to_string())?
        .map_err(|e| format!("the upstream {upstream}: {e}"))?;
    let v: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
    if a.status != 200 || v.get("salt").is_none() {
        return Err(format!(
            "--upstream {upstream} is not an `mcpbench serve` without a policy (GET {} got {})",
            crate::server::credentials::PATH,
            a.status
        ));
    }
    Ok(v)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// The report as a table (one row per check).
pub fn table(url: &str, checks: &[Check]) -> String {
    let w =
        |f: &dyn Fn(&Check) -> usize, min: usize| checks.iter().map(f).max().unwrap_or(0).max(min);
    let (wc, ww) = (w(&|c| c.check.len(), 5), w(&|c| c.who.chars().count(), 6));
    let mut out = format!("tenant isolation of {url}\n\n");
    out.push_str(&format!(
        "{:wc$}  {:ww$}  {:7}  detail\n",
        "check", "tenant", "verdict"
    ));
    for c in checks {
        out.push_str(&format!(
            "{:wc$}  {:ww$}  {:7}  {}\n",
            c.check,
            c.who,
            c.verdict.as_str(),
            c.detail
        ));
    }
    let failed = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    out.push_str(&match failed {
        0 => "\nno check failed\n".to_string(),
        n => format!("\n{n} check{} failed\n", if n == 1 { "" } else { "s" }),
    });
    out
}

/// The report as JSON: `{url, checks: [{check, tenant, verdict, detail}], failed}`.
pub fn to_json(url: &str, checks: &[Check]) -> Value {
    json!({
        "url": url,
        "checks": checks.iter().map(|c| json!({
            "check": c.check,
            "tenant": c.who,
            "verdict": c.verdict.as_str().to_ascii_lowercase(),
            "detail": c.detail,
        })).collect::<Vec<_>>(),
        "failed": checks.iter().filter(|c| c.verdict == Verdict::Fail).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(v: &str) -> Option<String> {
        (v == "BETA_TOKEN").then(|| "b-secret".to_string())
    }

    #[test]
    fn tenants_files_parse_and_refuse_mistakes() {
        let t = parse(
            "[[tenant]]\nname = \"alpha\"\ntoken = \"a\"\n[[tenant]]\nname = \"beta\"\nheaders = { Authorization = \"Bearer ${BETA_TOKEN}\", X-Org = \"2\" }",
            &env,
        )
        .unwrap();
        assert_eq!(
            t[0].headers,
            vec![("Authorization".into(), "Bearer a".into())]
        );
        assert_eq!(t[1].headers.len(), 2);
        assert!(
            t[1].headers
                .contains(&("Authorization".into(), "Bearer b-secret".into()))
        );
        for (bad, says) in [
            ("[[tenant]]\nname = \"a\"\ntoken = \"x\"", "two or more"),
            (
                "[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"b\"\ntoken = \"y\"",
                "give its credentials",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntoken = \"x\"\n[[tenant]]\nname = \"a\"\ntoken = \"y\"",
                "unique",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntoken = \"x\"\n[[tenant]]\nname = \"b\"\ntoken = \"x\"",
                "same credentials",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntoken = \"x\\r\\nX: 1\"\n[[tenant]]\nname = \"b\"\ntoken = \"y\"",
                "control character",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntoken = \"${NOPE}\"\n[[tenant]]\nname = \"b\"\ntoken = \"y\"",
                "NOPE",
            ),
            ("[[tenant]]\nname = \"a\"\ntokn = \"x\"", "unknown field"),
        ] {
            let e = parse(bad, &env).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn session_id_entropy_by_shape() {
        assert_eq!(id_bits(&format!("{:032x}", 7u128)), 128.0);
        assert_eq!(id_bits("5cd98254-1b2c-4d3e-8f90-a1b2c3d4e5f6"), 122.0);
        assert_eq!(id_bits("gw-1"), 24.0);
        assert_eq!(id_bits("12"), 8.0);
        let g = guess_like("5cd98254-1b2c-4d3e-8f90-a1b2c3d4e5f6");
        assert_eq!(g.len(), 36);
        assert_eq!(id_bits(&g), 122.0);
        assert_ne!(g, "5cd98254-1b2c-4d3e-8f90-a1b2c3d4e5f6");
        let g = guess_like("AbC_123");
        assert!(
            g.chars()
                .zip("AbC_123".chars())
                .all(|(a, b)| (a.is_ascii_uppercase() == b.is_ascii_uppercase())
                    && (a == '_') == (b == '_'))
        );
    }
}
