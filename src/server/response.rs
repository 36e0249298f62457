//! HTTP responses every endpoint of the reference server shares (Streamable HTTP at `/mcp`,
//! legacy HTTP+SSE, the WebSocket upgrade): statuses with JSON-RPC error bodies, SSE response
//! headers, request bodies bounded in size and time, and the MCP header names.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};

use super::body::Body;
use super::wire::write_error;
use crate::protocol::jsonrpc::code;

pub(crate) const SESSION: &str = "mcp-session-id";
pub(crate) const VERSION: &str = "mcp-protocol-version";

pub(crate) fn respond(
    status: StatusCode,
    content_type: Option<&'static str>,
    body: Body,
) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    r
}

pub(crate) fn json(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    respond(status, Some("application/json"), Body::full(body))
}

pub(crate) fn accepted() -> Response<Body> {
    respond(StatusCode::ACCEPTED, None, Body::empty())
}

/// An SSE response with the headers every stream of this server carries.
pub(crate) fn sse(body: Body) -> Response<Body> {
    let mut r = respond(StatusCode::OK, Some("text/event-stream"), body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// 429 with `Retry-After` (whole seconds, at least 1) and the JSON-RPC error body.
pub(crate) fn too_many(body: Vec<u8>, retry: Duration) -> Response<Body> {
    let mut r = json(StatusCode::TOO_MANY_REQUESTS, body);
    let secs = retry.as_secs() + u64::from(retry.subsec_nanos() > 0);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    r
}

/// 503 with `Retry-After` (whole seconds, at least 1) and a JSON-RPC error body: a limit of
/// the server is reached (sessions), and a later attempt may succeed.
pub(crate) fn unavailable(message: &str, retry: Duration) -> Response<Body> {
    let mut r = http_error(
        StatusCode::SERVICE_UNAVAILABLE,
        code::INTERNAL_ERROR,
        message,
    );
    let secs = retry.as_secs() + u64::from(retry.subsec_nanos() > 0);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    r
}

/// 401 with `WWW-Authenticate: Bearer` and a JSON-RPC error body.
pub(crate) fn unauthorized(message: &str) -> Response<Body> {
    let mut r = http_error(StatusCode::UNAUTHORIZED, code::INVALID_REQUEST, message);
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// An HTTP error status with a JSON-RPC error body (id unknown).
pub(crate) fn http_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let mut out = Vec::with_capacity(96);
    write_error(&mut out, None, code, message, None);
    json(status, out)
}

pub(crate) fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = http_error(
        StatusCode::METHOD_NOT_ALLOWED,
        code::INVALID_REQUEST,
        "Method Not Allowed",
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

pub(crate) fn media_type(h: &HeaderMap, name: header::HeaderName) -> Option<String> {
    h.get(name)?
        .to_str()
        .ok()
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase())
}

/// A request body that could not be read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyError {
    TooLarge,
    Unreadable,
    /// Not complete within `Config::body_read_timeout`.
    Timeout,
}

impl BodyError {
    pub(crate) fn response(self) -> Response<Body> {
        match self {
            BodyError::TooLarge => http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                code::INVALID_REQUEST,
                "Payload Too Large",
            ),
            BodyError::Unreadable => http_error(
                StatusCode::BAD_REQUEST,
                code::PARSE_ERROR,
                "Parse error: body could not be read",
            ),
            BodyError::Timeout => {
                let mut r = http_error(
                    StatusCode::REQUEST_TIMEOUT,
                    code::INVALID_REQUEST,
                    "Request Timeout: the body did not arrive in time",
                );
                // The rest of the body may still come: this connection cannot carry another
                // request (hyper drops the header on HTTP/2, where the stream alone ends).
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                r
            }
        }
    }
}

/// Reads a request body of at most `max` bytes, within `timeout`. The timer is armed only if
/// the body is not complete when first asked for (hyper has usually read a small one with its
/// head), so the common request pays neither a clock read nor a timer.
pub(crate) async fn read_body(
    body: Incoming,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    let mut collect = pin!(Limited::new(body, max).collect());
    let first = poll_fn(|cx| Poll::Ready(collect.as_mut().poll(cx))).await;
    let collected = match first {
        Poll::Ready(c) => c,
        Poll::Pending => match tokio::time::timeout(timeout, collect).await {
            Ok(c) => c,
            Err(_) => return Err(BodyError::Timeout),
        },
    };
    match collected {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::Unreadable),
    }
}
