//! Transport-independent handling of one JSON-RPC message by the reference server.
//!
//! Transports parse the framing (HTTP body, stdio line, WebSocket frame), call [`parse`] and
//! then [`State::handle`], and write back the bytes they get. Requests are answered with a
//! complete JSON-RPC response; notifications and responses get nothing.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::State;
use super::tools;
use crate::protocol::jsonrpc::{code, write_json_str};
use crate::protocol::version::Revision;

/// One received message, envelope only.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    #[serde(default)]
    pub jsonrpc: Option<Cow<'a, str>>,
    /// `Some` when the key is present (even as `null`).
    #[serde(borrow, default, deserialize_with = "present")]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// What kind of message arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// A request; `id` is its raw JSON id text.
    Request {
        id: &'a str,
    },
    Notification,
    /// A response from the client (to a server request).
    Response,
}

/// A message that cannot be handled, with the JSON-RPC error to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Raw id if it could be read.
    pub id: Option<String>,
    pub code: i64,
    pub message: &'static str,
}

/// Parses one message (not a batch).
pub fn parse(body: &[u8]) -> Result<Message<'_>, Rejection> {
    serde_json::from_slice::<Message<'_>>(body).map_err(|_| Rejection {
        id: None,
        code: code::PARSE_ERROR,
        message: "Parse error",
    })
}

fn valid_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => !b.iter().any(|c| matches!(c, b'.' | b'e' | b'E')),
        _ => false,
    }
}

impl<'a> Message<'a> {
    /// Classifies the message, or says why it is not valid JSON-RPC.
    pub fn kind(&self) -> Result<Kind<'a>, Rejection> {
        let id = self.id.map(RawValue::get);
        let invalid = |message| Rejection {
            id: id.filter(|i| valid_id(i)).map(str::to_string),
            code: code::INVALID_REQUEST,
            message,
        };
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Err(invalid("Invalid Request: jsonrpc must be \"2.0\""));
        }
        match (&self.method, id) {
            (Some(_), Some(id)) if valid_id(id) => Ok(Kind::Request { id }),
            (Some(_), Some(_)) => Err(invalid(
                "Invalid Request: id must be a string or an integer",
            )),
            (Some(_), None) => Ok(Kind::Notification),
            (None, Some(_)) if self.result.is_some() != self.error.is_some() => Ok(Kind::Response),
            _ => Err(invalid("Invalid Request")),
        }
    }
}

/// Writes a result response.
pub fn write_result(out: &mut Vec<u8>, id: &str, result: &[u8]) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
}

/// Writes an error response (`id: null` when the id is unknown).
pub fn write_error(
    out: &mut Vec<u8>,
    id: Option<&str>,
    code: i64,
    message: &str,
    data: Option<&Value>,
) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    out.extend_from_slice(br#","message":"#);
    write_json_str(out, message);
    if let Some(d) = data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(d.to_string().as_bytes());
    }
    out.extend_from_slice(b"}}");
}

/// A rejection as response bytes.
pub fn rejection_body(r: &Rejection) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    write_error(&mut out, r.id.as_deref(), r.code, r.message, None);
    out
}

#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// The revision to answer an `initialize` with: the client's if supported, else our latest.
pub fn negotiate(requested: &str) -> Revision {
    match requested.parse::<Revision>() {
        Ok(r) if r.has_handshake() => r,
        _ => Revision::LATEST_HANDSHAKE,
    }
}

impl State {
    /// Answers `initialize`: the negotiated revision and the response bytes.
    pub fn initialize(&self, id: &str, params: Option<&RawValue>) -> (Option<Revision>, Vec<u8>) {
        let mut out = Vec::with_capacity(384);
        let Some(p) =
            params.and_then(|p| serde_json::from_str::<InitializeParams<'_>>(p.get()).ok())
        else {
            write_error(
                &mut out,
                Some(id),
                code::INVALID_PARAMS,
                "Invalid params: initialize needs protocolVersion",
                None,
            );
            return (None, out);
        };
        let rev = negotiate(&p.protocol_version);
        let mut result = Vec::with_capacity(320);
        result.extend_from_slice(br#"{"protocolVersion":""#);
        result.extend_from_slice(rev.as_str().as_bytes());
        result.extend_from_slice(br#"","capabilities":{"tools":{"listChanged":false}},"serverInfo":{"name":"mcpbench-reference","#);
        if rev.has_tool_title() {
            result.extend_from_slice(br#""title":"mcpbench reference server","#);
        }
        result.extend_from_slice(br#""version":""#);
        result.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        result.extend_from_slice(br#""},"instructions":"Reference MCP server of mcpbench: tools echo, sleep, payload, fail, cpu, REST-backed search-contacts, get-invoice, create-ticket."}"#);
        write_result(&mut out, id, &result);
        (Some(rev), out)
    }

    /// Handles a request other than `initialize` in a session of revision `rev`.
    pub async fn request(
        &self,
        rev: Revision,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        match method {
            "ping" => write_result(&mut out, id, b"{}"),
            "tools/list" => {
                let cursor = match params.map(|p| serde_json::from_str::<ListParams<'_>>(p.get())) {
                    None => None,
                    Some(Ok(p)) => p.cursor,
                    Some(Err(_)) => {
                        write_error(
                            &mut out,
                            Some(id),
                            code::INVALID_PARAMS,
                            "Invalid params",
                            None,
                        );
                        return out;
                    }
                };
                match self.registry.page(rev, cursor.as_deref()) {
                    Some(page) => write_result(&mut out, id, page),
                    None => write_error(
                        &mut out,
                        Some(id),
                        code::INVALID_PARAMS,
                        "Invalid params: unknown cursor",
                        None,
                    ),
                }
            }
            "tools/call" => {
                let Some(p) =
                    params.and_then(|p| serde_json::from_str::<CallParams<'_>>(p.get()).ok())
                else {
                    write_error(
                        &mut out,
                        Some(id),
                        code::INVALID_PARAMS,
                        "Invalid params: tools/call needs a name",
                        None,
                    );
                    return out;
                };
                let Some(tool) = self.registry.get(&p.name) else {
                    write_error(
                        &mut out,
                        Some(id),
                        code::INVALID_PARAMS,
                        &format!("Unknown tool: {}", p.name),
                        None,
                    );
                    return out;
                };
                let args = p
                    .arguments
                    .unwrap_or_else(|| Value::Object(Default::default()));
                let output = tools::call(tool, &args, self.backend.as_ref()).await;
                let mut result = Vec::with_capacity(output.text.len() + 64);
                output.write(&mut result, rev);
                write_result(&mut out, id, &result);
            }
            "initialize" => write_error(
                &mut out,
                Some(id),
                code::INVALID_REQUEST,
                "Invalid Request: the session is already initialized",
                None,
            ),
            _ => write_error(
                &mut out,
                Some(id),
                code::METHOD_NOT_FOUND,
                "Method not found",
                None,
            ),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        fn k(s: &str) -> Result<Kind<'_>, Rejection> {
            parse(s.as_bytes()).and_then(|m| m.kind())
        }
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Kind::Request { id: "1" })
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Ok(Kind::Request { id: "\"a\"" })
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Kind::Response)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#)
                .unwrap_err()
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#)
                .unwrap_err()
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            k(r#"{"id":1,"method":"x"}"#).unwrap_err().id.as_deref(),
            Some("1")
        );
        assert_eq!(k("{oops").unwrap_err().code, code::PARSE_ERROR);
        assert_eq!(negotiate("2025-06-18"), Revision::V2025_06_18);
        assert_eq!(negotiate("2099-01-01"), Revision::V2025_11_25);
        assert_eq!(negotiate("2026-07-28"), Revision::V2025_11_25);
    }
}
