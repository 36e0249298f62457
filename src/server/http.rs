//! The reference server's HTTP front: routing, DNS-rebinding checks, and Streamable HTTP at
//! `/mcp` for the handshake era (2025-03-26, 2025-06-18, 2025-11-25; mcp-protocol.md §3.3,
//! §7.2). 2026-07-28 requests to the same endpoint go to `super::stateless` instead.
//!
//! Requests are answered inline on the connection's task (no task per request). Only a call that
//! sends progress (or a batch answered as SSE) gets a streamed body, which drives the call
//! itself. Cancellation (`notifications/cancelled` on another POST) ends a call early: a JSON
//! response becomes `202 Accepted` with an empty body, an SSE stream ends without a response.
//!
//! There is no standalone GET stream (405); a GET with `Last-Event-ID` resumes a stream the
//! server parked (SEP-1699 polling, only the conformance fixture `test_reconnection` parks).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};
use tokio::sync::mpsc;

use super::body::{Body, SseStream, write_event};
use super::context::Io;
use super::dispatch::{Pending, on_notification, on_response};
use super::policy::Auth;
use super::proxy::timed;
use super::response::{
    Req, SESSION, VERSION, accepted, has_media_type, http_error, json, method_not_allowed,
    read_body, respond, sse, too_many, unauthorized, unavailable,
};
use super::session::{Lookup, ResumeError, Session, audit_foreign, seat};
use super::wire::{self, Kind, MODERN, Params, Rejection, is_batch, rejection_body, write_array};
use super::{ResponseMode, State, legacy_sse, stateless, websocket};
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

fn rejected(status: StatusCode, r: &Rejection) -> Response<Body> {
    json(status, rejection_body(r))
}

/// The host part of `host[:port]` or `[v6]:port`.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.find(']').map_or(authority, |i| &authority[..i + 2]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

impl State {
    fn host_allowed(&self, name: &str) -> bool {
        self.config
            .allowed_hosts
            .iter()
            .any(|h| h == "*" || h.eq_ignore_ascii_case(name))
    }

    /// DNS-rebinding protection: the Host (or HTTP/2 authority) must name this server, and an
    /// `Origin`, when present, must be one of the allowed hosts.
    fn check_host_and_origin(&self, req: &Req) -> Result<(), &'static str> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        match host {
            Some(h) if self.host_allowed(host_name(h)) => {}
            _ => {
                return Err("Forbidden: Host not allowed");
            }
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let ok = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
                .is_some_and(|authority| self.host_allowed(host_name(authority)));
            if !ok {
                return Err("Forbidden: Origin not allowed");
            }
        }
        Ok(())
    }
}

/// The client must accept both JSON and SSE (a wildcard counts).
fn accepts_both(h: &HeaderMap) -> bool {
    // What every client of the spec's examples sends, recognised by one compare.
    const BOTH: &[u8] = b"application/json, text/event-stream";
    let mut all = h.get_all(header::ACCEPT).iter();
    if let (Some(v), None) = (all.next(), all.next())
        && v.as_bytes() == BOTH
    {
        return true;
    }
    let mut json = false;
    let mut sse = false;
    for v in h.get_all(header::ACCEPT) {
        // Every request: compared in place, without a lowercased copy of each item.
        for item in v.as_bytes().split(|&b| b == b',') {
            let m = item
                .split(|&b| b == b';')
                .next()
                .unwrap_or(item)
                .trim_ascii();
            let is = |name: &str| m.eq_ignore_ascii_case(name.as_bytes());
            if is("*/*") {
                json = true;
                sse = true;
            } else if is("application/json") || is("application/*") {
                json = true;
            } else if is("text/event-stream") || is("text/*") {
                sse = true;
            }
        }
    }
    json && sse
}

enum Route {
    Mcp,
    Sse,
    Messages,
    Ws,
    Seen,
}

/// The gateway's split of a proxied request's time (`upstream;dur=…, gateway;dur=…`, in ms).
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// Handles one HTTP request to the server.
pub(crate) async fn handle(
    state: &Arc<State>,
    req: Req,
    cert_names: Option<&[String]>,
) -> Result<Response<Body>, Infallible> {
    let start = Instant::now();
    let c = &state.config;
    let path = req.uri().path();
    let route = if path == c.path {
        Route::Mcp
    } else if path == c.sse_path {
        Route::Sse
    } else if path == c.messages_path {
        Route::Messages
    } else if path == c.ws_path {
        Route::Ws
    } else if path == super::credentials::PATH && state.seen.is_some() {
        Route::Seen
    } else {
        return Ok(http_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "Not Found",
        ));
    };
    if let Err(why) = state.check_host_and_origin(&req) {
        return Ok(http_error(
            StatusCode::FORBIDDEN,
            code::INVALID_REQUEST,
            why,
        ));
    }
    if let Some(seen) = &state.seen {
        seen.note(req.headers());
    }
    let tenant = match authenticate(state, &req, cert_names) {
        Ok(t) => t,
        Err(refused) => return Ok(*refused),
    };
    // The request futures are boxed: hyper keeps room for this future in every connection
    // for as long as it lives, so its size is memory per idle session (one allocation per
    // request instead; docs/reference-server.md, "Many sessions").
    Ok(match route {
        Route::Mcp => match *req.method() {
            Method::POST if c.proxy.is_some() => {
                // A gateway says how much of the time was upstream (`Server-Timing`).
                // The request's future boxed before it is wrapped: an async wrapper keeps its
                // argument twice, and moving that into a box copied 11 KiB per call.
                let (mut r, timing) = timed(start, Box::pin(post(state, req, tenant))).await;
                if let Some(v) = timing.and_then(|t| HeaderValue::from_str(&t).ok()) {
                    r.headers_mut().insert(SERVER_TIMING, v);
                }
                r
            }
            Method::POST => Box::pin(post(state, req, tenant)).await,
            Method::DELETE => delete(state, &req, tenant),
            Method::GET => resume(state, &req, tenant),
            _ => method_not_allowed("POST, GET, DELETE"),
        },
        Route::Sse => legacy_sse::open(state, &req, tenant),
        Route::Messages => Box::pin(legacy_sse::post(state, req, tenant)).await,
        Route::Ws => websocket::upgrade(state, req, tenant),
        Route::Seen => match (req.method(), &state.seen) {
            (&Method::GET, Some(seen)) => json(StatusCode::OK, seen.to_json()),
            _ => method_not_allowed("GET"),
        },
    })
}

/// Query parameters that carry a token in the URI, where logs and proxies keep it: refused
/// under a policy (MCP authorization: tokens MUST NOT be in the query string).
const QUERY_TOKENS: [&str; 6] = [
    "access_token",
    "token",
    "api_key",
    "apikey",
    "auth",
    "authorization",
];

fn token_in_query(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|kv| {
            let key = kv.split_once('=').map_or(kv, |(k, _)| k);
            QUERY_TOKENS.iter().any(|t| t.eq_ignore_ascii_case(key))
        })
    })
}

/// The tenant of a request under the server's policy (`None` without one), or the 401 (400 for
/// a token in the query string) to answer. Every request carries its credentials (MCP
/// authorization); the token is never logged.
fn authenticate(
    state: &State,
    req: &Req,
    cert_names: Option<&[String]>,
) -> Result<Option<u16>, Box<Response<Body>>> {
    let Some(policy) = &state.config.policy else {
        return Ok(None);
    };
    let headers = req.headers();
    if token_in_query(req.uri().query()) {
        let why =
            "Bad Request: a token in the query string is refused; send it as Authorization: Bearer";
        if let Some(a) = &state.config.audit {
            a.error("auth", None, why);
        }
        return Err(Box::new(http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            why,
        )));
    }
    let auth = policy.authenticate_with(
        headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes),
        cert_names.unwrap_or_default(),
    );
    let why = match auth {
        Auth::Tenant(t) => return Ok(Some(t)),
        Auth::Missing => "Unauthorized: a bearer token is required",
        Auth::Unknown => "Unauthorized: the bearer token is not valid",
    };
    if let Some(a) = &state.config.audit {
        a.error("auth", None, why);
    }
    Err(Box::new(unauthorized(why)))
}

fn delete(state: &State, req: &Req, tenant: Option<u16>) -> Response<Body> {
    match req.headers().get(SESSION) {
        // A 2026-07-28 client has no session to end (mcp-protocol.md §3.4).
        None if req.headers().get(VERSION).map(HeaderValue::as_bytes)
            == Some(MODERN.as_str().as_bytes()) =>
        {
            method_not_allowed("POST")
        }
        None => http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        ),
        Some(id) => {
            let ended = match state.config.leak_sessions {
                // The leaking fixture: the session is found and kept, never ended.
                true => (state.sessions.get(id.as_bytes(), tenant)).map(|s| state.leak(s)),
                false => state.sessions.remove(id.as_bytes(), tenant),
            };
            match ended {
                Ok(()) => respond(StatusCode::OK, None, Body::empty()),
                Err(Lookup::Foreign(s)) => {
                    audit_foreign(state, tenant, &s, "DELETE");
                    SessionError::Unknown.response()
                }
                Err(Lookup::Unknown) => SessionError::Unknown.response(),
            }
        }
    }
}

/// GET: only the resumption of a parked stream (`Last-Event-ID: <stream>-<n>`, this server's
/// event ids); without one there is no server stream to open.
fn resume(state: &State, req: &Req, tenant: Option<u16>) -> Response<Body> {
    let headers = req.headers();
    let mcp = McpHeaders::of(headers);
    let modern = mcp.modern();
    // 2026-07-28 has no GET stream and ignores Last-Event-ID (mcp-protocol.md §7.2).
    let Some(last) = headers.get("last-event-id").filter(|_| !modern) else {
        return method_not_allowed("POST, DELETE");
    };
    let session = match session_of(state, mcp, tenant, "GET") {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    let parsed = last
        .to_str()
        .ok()
        .and_then(|v| v.split_once('-'))
        .and_then(|(s, n)| Some((s.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
    let resumed = match parsed {
        Some((stream, seq)) => session.resume(stream, seq),
        None => Err(ResumeError::Unknown),
    };
    match resumed {
        Ok(s) => sse(Body::stream(s)),
        Err(ResumeError::Unknown) => http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: no stream of this session waits to be resumed from that Last-Event-ID",
        ),
        Err(ResumeError::Gap) => http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: that is not the stream's last event, and this server replays no events",
        ),
    }
}

/// POST: one JSON-RPC message or a batch, answered as JSON or on an SSE stream; a 2026-07-28
/// request statelessly, `initialize` by opening a session, anything else in its session.
async fn post(state: &Arc<State>, req: Req, tenant: Option<u16>) -> Response<Body> {
    let headers = req.headers();
    if !has_media_type(headers, header::CONTENT_TYPE, "application/json") {
        return http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    if !accepts_both(headers) {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            code::INVALID_REQUEST,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        );
    }
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    let body = match read_body(body, state.config.max_body, state.config.body_read_timeout).await {
        Ok(b) => b,
        Err(e) => return e.response(),
    };
    let mcp = McpHeaders::of(headers);
    let (session_header, modern_header) = (mcp.session, mcp.modern());
    if is_batch(&body) {
        if modern_header {
            return http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Invalid Request: 2026-07-28 has no JSON-RPC batches",
            );
        }
        // Boxed: a batch's future is ~15 KiB, and every POST's future would otherwise be as
        // large (and copied into its box on every request).
        return Box::pin(batch(state, headers, body, tenant)).await;
    }
    let msg = match wire::parse(&body) {
        Ok(m) => m,
        Err(r) => return rejected(StatusCode::BAD_REQUEST, &r),
    };
    let kind = match msg.kind() {
        Ok(k) => k,
        Err(r) => return rejected(StatusCode::BAD_REQUEST, &r),
    };
    let method = msg.method.as_deref().unwrap_or_default();
    let params = Params::parse(msg.params);

    // Dual-era endpoint: a 2026-07-28 request is stateless (a session header is then ignored).
    let modern = method != "initialize"
        && (modern_header
            || (session_header.is_none()
                && params.as_ref().and_then(Params::modern_version).is_some()));
    if modern {
        return stateless::post(state, headers, &body, kind, method, params.as_ref(), tenant).await;
    }

    if method == "initialize" && session_header.is_none() {
        return initialize(state, kind, msg.params, tenant);
    }

    let session = match session_of(state, mcp, tenant, "POST") {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    match kind {
        Kind::Notification => {
            on_notification(&session.peer(tenant), method, params.as_ref());
            accepted()
        }
        Kind::Response => {
            on_response(&session.peer(tenant), &msg, &body);
            accepted()
        }
        Kind::Request { id } => {
            let pending = state.prepare(
                &session.peer(tenant),
                session.revision,
                &body,
                id,
                method,
                params.as_ref(),
            );
            if let Pending::Limited(body, retry) = pending {
                return too_many(body, retry);
            }
            if pending.streams() {
                return stream(state, session, vec![pending]);
            }
            let _busy = matches!(pending, Pending::Call { .. }).then(|| state.busy());
            match state.finish(pending, Io::default()).await {
                Some(out) => reply(state, Some(&session), out, None),
                None => cancelled(state, &session),
            }
        }
    }
}

/// `initialize` without a session: the handshake answered and, if it succeeded, a session
/// opened for the client (503 when the server keeps as many as it may).
fn initialize(
    state: &Arc<State>,
    kind: Kind<'_>,
    params: Option<&serde_json::value::RawValue>,
    tenant: Option<u16>,
) -> Response<Body> {
    let Kind::Request { id } = kind else {
        return http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Invalid Request: initialize must be a request",
        );
    };
    let seat = match seat(state, tenant) {
        Ok(seat) => seat,
        Err(refused) => return *refused,
    };
    let (rev, out) = state.initialize(id, params);
    let Some((rev, caps)) = rev else {
        return reply(state, None, out, None);
    };
    match state.sessions.create(rev, tenant, seat) {
        Ok(session) => {
            session.client.set_caps(caps);
            reply(state, Some(&session), out, Some(session.header_value()))
        }
        Err(_) => unavailable(
            &format!(
                "Service Unavailable: too many sessions (this server keeps {}; idle ones are ended); retry later",
                state.sessions.max()
            ),
            state.sessions.reap_every(),
        ),
    }
}

/// Why a request's session cannot be used.
#[derive(Debug, Clone, Copy)]
enum SessionError {
    Missing,
    Unknown,
    Version,
}

impl SessionError {
    fn response(self) -> Response<Body> {
        match self {
            SessionError::Missing => http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            ),
            SessionError::Unknown => http_error(StatusCode::NOT_FOUND, -32001, "Session not found"),
            SessionError::Version => http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Bad Request: unsupported or mismatched MCP-Protocol-Version",
            ),
        }
    }
}

/// A request's two MCP headers, each looked up once (a custom header name costs a hash and a
/// compare per lookup).
#[derive(Clone, Copy)]
struct McpHeaders<'a> {
    session: Option<&'a HeaderValue>,
    version: Option<&'a HeaderValue>,
}

impl<'a> McpHeaders<'a> {
    fn of(headers: &'a HeaderMap) -> Self {
        McpHeaders {
            session: headers.get(SESSION),
            version: headers.get(VERSION),
        }
    }

    /// Whether `MCP-Protocol-Version` names 2026-07-28 (a stateless request).
    fn modern(&self) -> bool {
        self.version.map(HeaderValue::as_bytes) == Some(MODERN.as_str().as_bytes())
    }
}

/// The session a request of `tenant` names, checked against its `MCP-Protocol-Version` header.
/// Another tenant's session is answered as an unknown one (and audited as `request`).
fn session_of(
    state: &State,
    mcp: McpHeaders<'_>,
    tenant: Option<u16>,
    request: &str,
) -> Result<Arc<Session>, SessionError> {
    let sid = mcp.session.ok_or(SessionError::Missing)?;
    let session = match state.sessions.get(sid.as_bytes(), tenant) {
        Ok(s) => s,
        Err(Lookup::Foreign(s)) => {
            audit_foreign(state, tenant, &s, request);
            return Err(SessionError::Unknown);
        }
        Err(Lookup::Unknown) => return Err(SessionError::Unknown),
    };
    // 2025-06-18+: the header names the negotiated revision; absent means 2025-03-26. A header
    // naming 2025-03-26 (the revision without the header) says no more than its absence, so it
    // is accepted on any session like no header is (the TypeScript SDK and the conformance
    // suite send it on requests of their own making).
    if let Some(v) = mcp.version {
        match v.to_str().ok().and_then(|s| s.parse::<Revision>().ok()) {
            Some(r) if r == session.revision || r == Revision::V2025_03_26 => {}
            _ => return Err(SessionError::Version),
        }
    }
    Ok(session)
}

/// A JSON-RPC batch (2025-03-26 sessions only): a JSON array of the responses, 202 if it held
/// no request, or an SSE stream (one event per response) in SSE mode or when a call sends
/// progress.
async fn batch(
    state: &Arc<State>,
    headers: &HeaderMap,
    body: Bytes,
    tenant: Option<u16>,
) -> Response<Body> {
    let mcp = McpHeaders::of(headers);
    if mcp.session.is_none() {
        return http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required (and initialize is never sent in a JSON-RPC batch)",
        );
    }
    let session = match session_of(state, mcp, tenant, "POST") {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    let items = match state.prepare_batch(&session.peer(tenant), &body) {
        Ok(items) => items,
        Err(r) => return rejected(StatusCode::BAD_REQUEST, &r),
    };
    if items.is_empty() {
        return accepted();
    }
    if state.config.response == ResponseMode::Sse || items.iter().any(Pending::streams) {
        return stream(state, session, items);
    }
    let busy = state.busy();
    let responses = state.finish_batch(items, Io::default()).await;
    drop(busy);
    if responses.is_empty() {
        // Every request in it was cancelled.
        return accepted();
    }
    json(StatusCode::OK, write_array(&responses))
}

/// Answers prepared requests as an SSE stream that drives them: progress notifications, then
/// each response. Dropping the stream stops the work. A stream with event ids whose call may
/// park it (SEP-1699) can be resumed with GET.
fn stream(state: &Arc<State>, session: Arc<Session>, items: Vec<Pending>) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let mut ids = session.event_ids();
    let mut first = Vec::new();
    if let Some(ids) = ids.as_mut() {
        ids.priming(&mut first);
    }
    let resumable = ids.is_some() && items.iter().any(Pending::parks);
    let runner = state.clone();
    let work = Box::pin(async move {
        let _busy = runner.busy();
        let io = Io {
            resumable,
            ..Io::sink(&tx)
        };
        let responses = runner.finish_batch(items, io).await;
        for r in responses {
            if tx.send(Bytes::from(r)).await.is_err() {
                break;
            }
        }
    });
    let mut s = SseStream::new(rx)
        .ids(ids)
        .drive(work)
        .keepalive(state.config.keepalive)
        .until(state.closing.clone());
    if !first.is_empty() {
        s = s.first(first);
    }
    if resumable {
        s = s.park(Box::new(move |rest| session.park(rest)));
    }
    sse(Body::stream(s))
}

/// A JSON-RPC response as JSON or as a one-event SSE stream, per the server's mode.
fn reply(
    state: &State,
    session: Option<&Session>,
    out: Vec<u8>,
    new_session: Option<String>,
) -> Response<Body> {
    let mut r = match state.config.response {
        ResponseMode::Json => json(StatusCode::OK, out),
        ResponseMode::Sse => {
            let mut ids = session.and_then(Session::event_ids);
            let mut ev = Vec::with_capacity(out.len() + 64);
            if let Some(ids) = ids.as_mut() {
                ids.priming(&mut ev);
            }
            write_event(&mut ev, ids.as_mut(), &out);
            sse(Body::full(ev))
        }
    };
    if let Some(s) = new_session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        r.headers_mut().insert(SESSION, s);
    }
    r
}

/// The answer to a request cancelled while it ran: no JSON-RPC response at all.
fn cancelled(state: &State, session: &Session) -> Response<Body> {
    match state.config.response {
        ResponseMode::Json => accepted(),
        ResponseMode::Sse => {
            let mut ev = Vec::new();
            if let Some(mut ids) = session.event_ids() {
                ids.priming(&mut ev);
            }
            sse(Body::full(ev))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_and_accept() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("[::1]:80"), "[::1]");
        assert_eq!(host_name("localhost"), "localhost");
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json;q=0.9"),
        );
        assert!(accepts_both(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!accepts_both(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts_both(&h));
    }

    #[test]
    fn tokens_in_query_strings() {
        for q in [
            "access_token=x",
            "a=1&token=x",
            "API_KEY=x",
            "auth",
            "sessionId=1&Authorization=Bearer%20x",
        ] {
            assert!(token_in_query(Some(q)), "{q}");
        }
        for q in ["sessionId=abc", "tokens=1", "x=access_token", ""] {
            assert!(!token_in_query(Some(q)), "{q}");
        }
        assert!(!token_in_query(None));
    }
}
