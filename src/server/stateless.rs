//! Streamable HTTP for 2026-07-28 on the dual-era `/mcp` endpoint (mcp-protocol.md §2.6, §3.4,
//! §7.2 modern era): no session, every request describes itself.
//!
//! Checks, in order: `_meta` protocol version and client capabilities (400 + `-32602`), a
//! supported version (400 + `-32022` with `data.supported`), headers mirroring the body —
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` (base64 sentinel decoded) — (400 +
//! `-32020`), a known method (404 + `-32601`). Errors found while handling a known method (an
//! unknown tool, a bad cursor) are answered with 200 and the JSON-RPC error. `Mcp-Session-Id`
//! and `Last-Event-ID` are ignored; no session id is ever minted. Closing the response (the
//! request future or the streamed body is dropped) is the cancel: the work stops with it.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::body::{Body, SseStream, write_event};
use super::context::Io;
use super::dispatch::{Step, ToolCall};
use super::response::{VERSION, accepted, http_error, json, sse, too_many};
use super::wire::{Kind, MODERN, Params, Refusal, check_modern, sub};
use super::{ResponseMode, State};
use crate::protocol::jsonrpc::code;

/// Handles a POST the endpoint recognised as 2026-07-28.
pub(super) async fn post(
    state: &Arc<State>,
    headers: &HeaderMap,
    body: &Bytes,
    kind: Kind<'_>,
    method: &str,
    params: Option<&Params<'_>>,
    tenant: Option<u16>,
) -> Response<Body> {
    let id = match kind {
        Kind::Request { id } => id,
        Kind::Notification => return accepted(),
        Kind::Response => {
            return http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Invalid Request: 2026-07-28 clients never send JSON-RPC responses",
            );
        }
    };
    let checked = check_modern(params)
        .and_then(|()| check_headers(headers, method, params))
        .and_then(|()| {
            if state.is_modern_method(method) {
                Ok(())
            } else {
                Err(Refusal::new(code::METHOD_NOT_FOUND, "Method not found"))
            }
        });
    let refused = |r: Refusal| {
        let status = StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        json(status, r.body(Some(id)))
    };
    if let Err(r) = checked {
        return refused(r);
    }
    match state.begin(MODERN, id, method, params, body, None, tenant) {
        Step::Done(out) => reply(state, out),
        Step::Refused(r) => refused(r),
        Step::Limited { body, retry } => too_many(body, retry),
        Step::Call(call) if call.streams => stream(state, sub(body, id), call),
        // Runs on this request's future: if the client goes away, hyper drops it.
        Step::Call(call) => {
            let _busy = state.busy();
            reply(state, state.run(MODERN, id, &call, Io::default()).await)
        }
    }
}

fn reply(state: &State, out: Vec<u8>) -> Response<Body> {
    match state.config.response {
        ResponseMode::Json => json(StatusCode::OK, out),
        ResponseMode::Sse => {
            let mut ev = Vec::with_capacity(out.len() + 32);
            write_event(&mut ev, None, &out);
            sse(Body::full(ev))
        }
    }
}

/// A progress call: an SSE stream (whatever the response mode) that drives the call.
fn stream(state: &Arc<State>, id: Bytes, call: ToolCall) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let runner = state.clone();
    let work = Box::pin(async move {
        let _busy = runner.busy();
        let id = std::str::from_utf8(&id).unwrap_or("null");
        let out = runner.run(MODERN, id, &call, Io::sink(&tx)).await;
        let _ = tx.send(Bytes::from(out)).await;
    });
    sse(Body::stream(
        SseStream::new(rx)
            .drive(work)
            .keepalive(state.config.keepalive)
            .until(state.closing.clone()),
    ))
}

/// Why a header value cannot be compared.
#[derive(Debug, PartialEq, Eq)]
enum BadHeader {
    Missing,
    Unreadable,
}

/// A header's value, with the `=?base64?…?=` sentinel decoded (mcp-protocol.md §3.4).
fn header_value<'h>(
    headers: &'h HeaderMap,
    name: impl hyper::header::AsHeaderName,
) -> Result<Cow<'h, str>, BadHeader> {
    let v = headers.get(name).ok_or(BadHeader::Missing)?;
    let s = v.to_str().map_err(|_| BadHeader::Unreadable)?;
    match s
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| BadHeader::Unreadable)?;
            String::from_utf8(raw)
                .map(Cow::Owned)
                .map_err(|_| BadHeader::Unreadable)
        }
        None => Ok(Cow::Borrowed(s)),
    }
}

/// Headers must mirror the body: version, method, and the name for the named methods.
fn check_headers(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Params<'_>>,
) -> Result<(), Refusal> {
    let mismatch = |m| Err(Refusal::new(code::HEADER_MISMATCH, m));
    let version = params.and_then(Params::modern_version).unwrap_or_default();
    match header_value(headers, VERSION) {
        Ok(v) if v == version => {}
        Err(BadHeader::Missing) => {
            return mismatch("Header mismatch: the MCP-Protocol-Version header is required");
        }
        _ => {
            return mismatch(
                "Header mismatch: MCP-Protocol-Version differs from _meta io.modelcontextprotocol/protocolVersion",
            );
        }
    }
    match header_value(headers, "mcp-method") {
        Ok(m) if m == method => {}
        Err(BadHeader::Missing) => {
            return mismatch("Header mismatch: the Mcp-Method header is required");
        }
        _ => return mismatch("Header mismatch: Mcp-Method differs from the method"),
    }
    let body_name = match method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.name.as_deref()),
        "resources/read" => params.and_then(|p| p.uri.as_deref()),
        _ => return Ok(()),
    };
    match header_value(headers, "mcp-name") {
        Ok(n) if Some(n.as_ref()) == body_name => Ok(()),
        Err(BadHeader::Missing) => {
            mismatch("Header mismatch: the Mcp-Name header is required for this method")
        }
        _ => mismatch("Header mismatch: Mcp-Name differs from the name in params"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn header_values_decode_the_base64_sentinel() {
        let mut h = HeaderMap::new();
        h.insert("mcp-name", HeaderValue::from_static("=?base64?w6ljaG8=?="));
        assert_eq!(header_value(&h, "mcp-name").unwrap(), "écho");
        h.insert("mcp-name", HeaderValue::from_static("=?base64?***?="));
        assert_eq!(header_value(&h, "mcp-name"), Err(BadHeader::Unreadable));
        h.insert("mcp-name", HeaderValue::from_static("echo"));
        assert_eq!(header_value(&h, "mcp-name").unwrap(), "echo");
        assert_eq!(header_value(&h, "mcp-method"), Err(BadHeader::Missing));
    }
}
