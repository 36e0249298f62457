//! The legacy HTTP+SSE transport (2024-11-05; deprecated since 2025-03-26; mcp-protocol.md
//! §3.2): `GET /sse` opens a stream whose first event is `endpoint` (data
//! `/messages?sessionId=<32 hex>`); the client POSTs every message there (`202 Accepted`, body
//! `Accepted`), and every response and notification arrives on the stream as a `message` event.
//!
//! The session lives exactly as long as its stream: when the client closes it (or the server
//! shuts down) the session is removed and its calls are cancelled.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Response, StatusCode};
use rand::RngExt;
use tokio::sync::mpsc;

use super::State;
use super::body::{Body, SseStream};
use super::conn::{Conn, Received};
use super::policy::Seat;
use super::response::{
    Req, has_media_type, http_error, json, method_not_allowed, read_body, respond, sse, unavailable,
};
use super::session::seat;
use crate::protocol::jsonrpc::code;

/// Open legacy sessions by id.
#[derive(Debug)]
pub(crate) struct LegacySessions {
    map: RwLock<HashMap<u128, Arc<Conn>>>,
    max: usize,
}

impl LegacySessions {
    pub(crate) fn new(max: usize) -> Self {
        LegacySessions {
            map: RwLock::new(HashMap::new()),
            max,
        }
    }

    fn get(&self, id: u128) -> Option<Arc<Conn>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Removes the session when its stream is dropped (and gives its tenant's seat back).
struct Close {
    state: Arc<State>,
    id: u128,
    _seat: Option<Seat>,
}

impl Drop for Close {
    fn drop(&mut self) {
        let removed = self
            .state
            .legacy
            .map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        if let Some(conn) = removed {
            conn.close();
        }
    }
}

/// `GET /sse`: a new session and its stream.
pub(crate) fn open(state: &Arc<State>, req: &Req, tenant: Option<u16>) -> Response<Body> {
    if req.method() != Method::GET {
        return method_not_allowed("GET");
    }
    let seat = match seat(state, tenant) {
        Ok(seat) => seat,
        Err(refused) => return *refused,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let conn = Conn::new(state.clone(), tx, tenant);
    let id: u128 = rand::rng().random();
    {
        let mut map = state.legacy.map.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= state.legacy.max {
            // A session lives as long as its stream: a place frees when a client goes away.
            return unavailable(
                &format!(
                    "Service Unavailable: too many sessions (this server keeps {}); retry later",
                    state.legacy.max
                ),
                Duration::from_secs(1),
            );
        }
        map.insert(id, conn);
    }
    let endpoint = format!(
        "event: endpoint\ndata: {}?sessionId={id:032x}\n\n",
        state.config.messages_path
    );
    let stream = SseStream::new(rx)
        .first(endpoint)
        .keepalive(state.config.keepalive)
        .until(state.closing.clone())
        .guard(Close {
            state: state.clone(),
            id,
            _seat: seat,
        });
    sse(Body::stream(stream))
}

/// The `sessionId` query parameter: `None` if absent, `Some(None)` if not a session id.
fn session_param(query: Option<&str>) -> Option<Option<u128>> {
    let value = query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "sessionId")
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())?;
    Some(
        (value.len() == 32)
            .then(|| u128::from_str_radix(value, 16).ok())
            .flatten(),
    )
}

/// `POST /messages?sessionId=…`: one message for the session's stream.
pub(crate) async fn post(state: &Arc<State>, req: Req, tenant: Option<u16>) -> Response<Body> {
    if req.method() != Method::POST {
        return method_not_allowed("POST");
    }
    let conn = match session_param(req.uri().query()) {
        None => {
            return http_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "Bad Request: the sessionId query parameter is required",
            );
        }
        Some(id) => match id.and_then(|id| state.legacy.get(id)) {
            Some(c) => c,
            None => {
                return http_error(StatusCode::NOT_FOUND, -32001, "Session not found");
            }
        },
    };
    if conn.tenant() != tenant {
        // Answered exactly like an unknown session: nothing says the id is in use.
        if let Some(a) = &state.config.audit {
            let (who, owner) = (state.tenant_name(tenant), state.tenant_name(conn.tenant()));
            a.foreign_session(who, owner, conn.number(), "POST");
        }
        return http_error(StatusCode::NOT_FOUND, -32001, "Session not found");
    }
    if !has_media_type(req.headers(), header::CONTENT_TYPE, "application/json") {
        return http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let body = match read_body(
        req.into_body(),
        state.config.max_body,
        state.config.body_read_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(e) => return e.response(),
    };
    match conn.receive(body) {
        Received::Invalid(err) => return json(StatusCode::BAD_REQUEST, err.to_vec()),
        Received::Reply(out) => {
            // The stream is gone if this fails; the session is being removed with it.
            let _ = conn.sink().send(out).await;
        }
        Received::Nothing => {}
    }
    let mut r = respond(
        StatusCode::ACCEPTED,
        Some("text/plain; charset=utf-8"),
        Body::full(Bytes::from_static(b"Accepted")),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_in_queries() {
        let id = format!("{:032x}", 0xabcu128);
        assert_eq!(
            session_param(Some(&format!("sessionId={id}"))),
            Some(Some(0xabc))
        );
        assert_eq!(
            session_param(Some(&format!("x=1&sessionId={id}"))),
            Some(Some(0xabc))
        );
        assert_eq!(session_param(Some("sessionId=zz")), Some(None));
        assert_eq!(session_param(Some("sessionId=")), None);
        assert_eq!(session_param(Some("other=1")), None);
        assert_eq!(session_param(None), None);
    }
}
