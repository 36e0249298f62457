//! Streamable HTTP transport of the reference server (handshake era: 2025-03-26, 2025-06-18,
//! 2025-11-25; mcp-protocol.md §3.3 and §7.2).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::dispatch::{self, Kind, Rejection, rejection_body, write_error};
use super::{ResponseMode, State};
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

pub type Body = Full<Bytes>;

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

fn respond(status: StatusCode, content_type: Option<&'static str>, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    r
}

/// An HTTP error status with a JSON-RPC error body (id unknown).
fn http_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let mut out = Vec::with_capacity(96);
    write_error(&mut out, None, code, message, None);
    respond(status, Some("application/json"), Bytes::from(out))
}

fn rejected(status: StatusCode, r: &Rejection) -> Response<Body> {
    respond(
        status,
        Some("application/json"),
        Bytes::from(rejection_body(r)),
    )
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = http_error(
        StatusCode::METHOD_NOT_ALLOWED,
        code::INVALID_REQUEST,
        "Method Not Allowed",
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
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
    fn check_host_and_origin(&self, req: &Request<Incoming>) -> Result<(), &'static str> {
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

fn media_type(h: &HeaderMap, name: header::HeaderName) -> Option<String> {
    h.get(name)?
        .to_str()
        .ok()
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase())
}

/// The client must accept both JSON and SSE (a wildcard counts).
fn accepts_both(h: &HeaderMap) -> bool {
    let mut json = false;
    let mut sse = false;
    for v in h
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        for item in v.split(',') {
            let m = item
                .split(';')
                .next()
                .unwrap_or(item)
                .trim()
                .to_ascii_lowercase();
            match m.as_str() {
                "*/*" => {
                    json = true;
                    sse = true;
                }
                "application/json" | "application/*" => json = true,
                "text/event-stream" | "text/*" => sse = true,
                _ => {}
            }
        }
    }
    json && sse
}

/// Handles one HTTP request to the server.
pub async fn handle(state: &State, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.uri().path() != state.config.path {
        return Ok(http_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "Not Found",
        ));
    }
    if let Err(why) = state.check_host_and_origin(&req) {
        return Ok(http_error(
            StatusCode::FORBIDDEN,
            code::INVALID_REQUEST,
            why,
        ));
    }
    Ok(match *req.method() {
        Method::POST => post(state, req).await,
        Method::DELETE => delete(state, &req),
        Method::GET => method_not_allowed("POST, DELETE"),
        _ => method_not_allowed("POST, GET, DELETE"),
    })
}

fn delete(state: &State, req: &Request<Incoming>) -> Response<Body> {
    match req.headers().get(SESSION) {
        None => http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        ),
        Some(id) if state.sessions.remove(id.as_bytes()) => {
            respond(StatusCode::OK, None, Bytes::new())
        }
        Some(_) => http_error(StatusCode::NOT_FOUND, -32001, "Session not found"),
    }
}

async fn post(state: &State, req: Request<Incoming>) -> Response<Body> {
    let headers = req.headers();
    if media_type(headers, header::CONTENT_TYPE).as_deref() != Some("application/json") {
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
    let session_header = headers.get(SESSION).cloned();
    let version_header = headers.get(VERSION).cloned();
    let body = match Limited::new(req.into_body(), state.config.max_body)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                code::INVALID_REQUEST,
                "Payload Too Large",
            );
        }
        Err(_) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                code::PARSE_ERROR,
                "Parse error: body could not be read",
            );
        }
    };
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported in this revision",
        );
    }
    let msg = match dispatch::parse(&body) {
        Ok(m) => m,
        Err(r) => return rejected(StatusCode::BAD_REQUEST, &r),
    };
    let kind = match msg.kind() {
        Ok(k) => k,
        Err(r) => return rejected(StatusCode::BAD_REQUEST, &r),
    };
    let method = msg.method.as_deref().unwrap_or_default();

    if method == "initialize" && session_header.is_none() {
        let Kind::Request { id } = kind else {
            return http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Invalid Request: initialize must be a request",
            );
        };
        let (rev, out) = state.initialize(id, msg.params);
        let Some(rev) = rev else {
            return reply(state, out, None);
        };
        return match state.sessions.create(rev) {
            Ok(session) => reply(state, out, Some(session.header_value())),
            Err(_) => http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                code::INTERNAL_ERROR,
                "Service Unavailable: too many sessions",
            ),
        };
    }

    let Some(sid) = session_header else {
        return http_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        );
    };
    let Some(session) = state.sessions.get(sid.as_bytes()) else {
        return http_error(StatusCode::NOT_FOUND, -32001, "Session not found");
    };
    // 2025-06-18+: the header names the negotiated revision; absent means 2025-03-26.
    if let Some(v) = version_header {
        match v.to_str().ok().and_then(|s| s.parse::<Revision>().ok()) {
            Some(r) if r == session.revision => {}
            _ => {
                return http_error(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_REQUEST,
                    "Bad Request: unsupported or mismatched MCP-Protocol-Version",
                );
            }
        }
    }
    match kind {
        Kind::Notification => {
            if method == "notifications/initialized" {
                session
                    .initialized
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            respond(StatusCode::ACCEPTED, None, Bytes::new())
        }
        Kind::Response => respond(StatusCode::ACCEPTED, None, Bytes::new()),
        Kind::Request { id } => {
            let out = state
                .request(session.revision, id, method, msg.params)
                .await;
            reply(state, out, None)
        }
    }
}

/// A JSON-RPC response as JSON or as a one-event SSE stream, per the server's mode.
fn reply(state: &State, out: Vec<u8>, session: Option<String>) -> Response<Body> {
    let mut r = match state.config.response {
        ResponseMode::Json => respond(StatusCode::OK, Some("application/json"), Bytes::from(out)),
        ResponseMode::Sse => {
            let mut ev = Vec::with_capacity(out.len() + 32);
            ev.extend_from_slice(b"event: message\ndata: ");
            ev.extend_from_slice(&out);
            ev.extend_from_slice(b"\n\n");
            let mut r = respond(StatusCode::OK, Some("text/event-stream"), Bytes::from(ev));
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            r.headers_mut()
                .insert("x-accel-buffering", HeaderValue::from_static("no"));
            r
        }
    };
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        r.headers_mut().insert(SESSION, s);
    }
    r
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
}
