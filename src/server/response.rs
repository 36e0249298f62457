//! HTTP responses every endpoint of the reference server shares (Streamable HTTP at `/mcp`,
//! legacy HTTP+SSE, the WebSocket upgrade): statuses with JSON-RPC error bodies, SSE response
//! headers, request bodies bounded in size and time, and the MCP header names.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

use super::body::Body;
use super::wire::write_error;
use crate::protocol::jsonrpc::code;

// Header names as `HeaderName`s: a lookup by `&str` parses and hashes the name on every call.
pub(crate) const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
pub(crate) const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

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

/// Whether header `name` names media type `expected` (lowercase; parameters after `;` ignored),
/// compared in place: every POST checks its `Content-Type`, without a lowercased copy.
pub(crate) fn has_media_type(h: &HeaderMap, name: header::HeaderName, expected: &str) -> bool {
    h.get(name).is_some_and(|v| {
        let v = v.as_bytes();
        let m = v.split(|&b| b == b';').next().unwrap_or(v).trim_ascii();
        m.eq_ignore_ascii_case(expected.as_bytes())
    })
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

/// A request's body: hyper's, still to be read, or one the server's own HTTP/1.1 loop (h1.rs)
/// has already read whole.
#[derive(Debug)]
pub(crate) enum ReqBody {
    Hyper(Incoming),
    Whole(Bytes),
}

/// A request as the handlers take it.
pub(crate) type Req = hyper::Request<ReqBody>;

/// Reads a request body of at most `max` bytes, within `timeout`. The timer is armed only if
/// the body is not complete when first asked for (hyper has usually read a small one with its
/// head), so the common request pays neither a clock read nor a timer. A body that arrives as
/// one frame is returned as that frame (no collector, no copy). A body over `max` is refused
/// once more than that has been read, not on its declared length alone: that would leave the
/// whole body unread for the client to push into a connection that is closing.
pub(crate) async fn read_body(
    body: ReqBody,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    let mut body = match body {
        ReqBody::Whole(b) if b.len() > max => return Err(BodyError::TooLarge),
        ReqBody::Whole(b) => return Ok(b),
        ReqBody::Hyper(b) => b,
    };
    let mut read = pin!(async move {
        // The first frame is kept as it came; only a second one makes a joined copy.
        let mut first: Option<Bytes> = None;
        let mut joined = BytesMut::new();
        let mut len = 0;
        while let Some(frame) = body.frame().await {
            // Trailers (chunked bodies may carry them) are not part of the message.
            let Ok(data) = frame.map_err(|_| BodyError::Unreadable)?.into_data() else {
                continue;
            };
            len += data.len();
            if len > max {
                return Err(BodyError::TooLarge);
            }
            if len == data.len() {
                first = Some(data);
            } else {
                if let Some(f) = first.take() {
                    joined.extend_from_slice(&f);
                }
                joined.extend_from_slice(&data);
            }
        }
        Ok(first.unwrap_or_else(|| joined.freeze()))
    });
    let first = poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(r) => r,
        Poll::Pending => tokio::time::timeout(timeout, read)
            .await
            .unwrap_or(Err(BodyError::Timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_compare_without_case_or_parameters() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(v));
            has_media_type(&h, header::CONTENT_TYPE, "application/json")
        };
        assert!(with("application/json"));
        assert!(with(" Application/JSON ; charset=utf-8"));
        assert!(!with("application/jsonx"));
        assert!(!with("text/plain; application/json"));
        assert!(!has_media_type(
            &HeaderMap::new(),
            header::CONTENT_TYPE,
            "application/json"
        ));
    }
}
