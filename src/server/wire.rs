//! The reference server's JSON-RPC on the wire, shared by every part of it: messages read
//! envelope-first (id, method and params stay raw), `params` fields parsed once, responses and
//! errors written straight to bytes, the `_meta` checks of 2026-07-28, and the constants every
//! result carries (server info, the 2026-07-28 result tail, cache lifetimes).

use std::borrow::Cow;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::protocol::jsonrpc::{code, write_json_str};
use crate::protocol::version::Revision;

/// The only revision of the stateless era this server speaks.
pub(crate) const MODERN: Revision = Revision::V2026_07_28;

/// `serverInfo` of this server.
pub(crate) const SERVER_INFO: &str = concat!(
    r#"{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// Appended to every 2026-07-28 result object (before its closing brace).
pub(crate) const MODERN_RESULT_TAIL: &str = concat!(
    r#","resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpbench-reference","title":"mcpbench reference server","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}}"#
);

/// How long 2026-07-28 clients may cache `server/discover` and `tools/list` results.
pub(crate) const TTL_MS: u64 = 300_000;

/// `serverInfo` as a JSON value.
pub(crate) fn server_info() -> Value {
    serde_json::from_str(SERVER_INFO).unwrap_or(Value::Null)
}

/// A result object as bytes, with the 2026-07-28 additions for `rev` (`resultType`, `_meta`
/// serverInfo, and for cacheable results `ttlMs` + `cacheScope`). For results rendered once
/// (tool lists, discovery) or off the hot path (conformance fixtures).
pub(crate) fn result_json(v: Value, rev: Revision, cacheable: bool) -> Vec<u8> {
    result_json_as(v, rev, cacheable, &server_info())
}

/// [`result_json`] of a server that names itself `info` (see `Config::identity`).
pub(crate) fn result_json_as(
    mut v: Value,
    rev: Revision,
    cacheable: bool,
    info: &Value,
) -> Vec<u8> {
    if !rev.has_handshake()
        && let Some(o) = v.as_object_mut()
    {
        if cacheable {
            o.insert("ttlMs".into(), json!(TTL_MS));
            o.insert("cacheScope".into(), json!("public"));
        }
        o.entry("resultType").or_insert(json!("complete"));
        o.insert(
            "_meta".into(),
            json!({"io.modelcontextprotocol/serverInfo": info}),
        );
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The `server/discover` result (2026-07-28) of a server named `info` with these
/// capabilities.
pub(crate) fn discover(capabilities: Value, instructions: &str, info: &Value) -> Vec<u8> {
    result_json_as(
        json!({
            "supportedVersions": [MODERN.as_str()],
            "capabilities": capabilities,
            "serverInfo": info,
            "instructions": instructions,
        }),
        MODERN,
        true,
        info,
    )
}

/// One received message, envelope only.
#[derive(Debug, Deserialize)]
pub(crate) struct Message<'a> {
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
pub(crate) enum Kind<'a> {
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
pub(crate) struct Rejection {
    /// Raw id if it could be read.
    pub id: Option<String>,
    pub code: i64,
    pub message: &'static str,
}

/// Parses one message (not a batch): `-32700` if it is not JSON, `-32600` if it is JSON but
/// not an object of the envelope's shape. JSON text is UTF-8: invalid bytes anywhere (also in
/// a member serde would skip without reading it) make it not JSON.
pub(crate) fn parse(body: &[u8]) -> Result<Message<'_>, Rejection> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(Rejection {
            id: None,
            code: code::PARSE_ERROR,
            message: "Parse error",
        });
    };
    // From the checked text: serde_json then does not check each string and raw value again.
    serde_json::from_str::<Message<'_>>(text).map_err(|_| {
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
            Rejection {
                id: None,
                code: code::INVALID_REQUEST,
                message: "Invalid Request",
            }
        } else {
            Rejection {
                id: None,
                code: code::PARSE_ERROR,
                message: "Parse error",
            }
        }
    })
}

/// True when the first non-blank byte opens an array (a JSON-RPC batch).
pub(crate) fn is_batch(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// A string or integer id (the only kinds JSON-RPC allows; also progress tokens).
pub(crate) fn valid_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => !b.iter().any(|c| matches!(c, b'.' | b'e' | b'E')),
        _ => false,
    }
}

impl<'a> Message<'a> {
    /// Classifies the message, or says why it is not valid JSON-RPC.
    pub(crate) fn kind(&self) -> Result<Kind<'a>, Rejection> {
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

/// The `params` fields any method of this server reads, parsed once per message.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub cursor: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub uri: Option<Cow<'a, str>>,
    /// `notifications/cancelled`.
    #[serde(rename = "requestId", borrow, default)]
    pub request_id: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    pub meta: Option<Meta<'a>>,
}

/// `params._meta`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    pub progress_token: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    pub protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    pub client_capabilities: Option<&'a RawValue>,
}

impl<'a> Params<'a> {
    /// Absent params parse as empty; `None` means they were not an object of the right shape.
    pub(crate) fn parse(raw: Option<&'a RawValue>) -> Option<Params<'a>> {
        match raw {
            None => Some(Params::default()),
            Some(r) => serde_json::from_str(r.get()).ok(),
        }
    }

    /// `_meta["io.modelcontextprotocol/protocolVersion"]`: the mark of a 2026-07-28 request.
    pub(crate) fn modern_version(&self) -> Option<&str> {
        self.meta.as_ref()?.protocol_version.as_deref()
    }

    pub(crate) fn progress_token(&self) -> Option<&'a RawValue> {
        self.meta.as_ref()?.progress_token
    }
}

/// Writes a result response.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &str, result: &[u8]) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
}

/// Writes an error response (`id: null` when the id is unknown); `data` is raw JSON.
pub(crate) fn write_error(
    out: &mut Vec<u8>,
    id: Option<&str>,
    code: i64,
    message: &str,
    data: Option<&[u8]>,
) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    out.extend_from_slice(br#","message":"#);
    write_json_str(out, message);
    if let Some(d) = data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(d);
    }
    out.extend_from_slice(b"}}");
}

/// An error response as bytes.
pub(crate) fn error_body(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + message.len());
    write_error(&mut out, id, code, message, None);
    out
}

/// A rejection as response bytes.
pub(crate) fn rejection_body(r: &Rejection) -> Vec<u8> {
    error_body(r.id.as_deref(), r.code, r.message)
}

/// Responses of a batch as one JSON array.
pub(crate) fn write_array(responses: &[Vec<u8>]) -> Vec<u8> {
    let len = responses.iter().map(|r| r.len() + 1).sum::<usize>() + 2;
    let mut out = Vec::with_capacity(len);
    out.push(b'[');
    for (i, r) in responses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(r);
    }
    out.push(b']');
    out
}

/// `s` (which points into `frame`) as a zero-copy slice of `frame`; copied if it does not.
pub(crate) fn sub(frame: &Bytes, s: &str) -> Bytes {
    let start = (s.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
    if start <= frame.len() && s.len() <= frame.len() - start {
        frame.slice(start..start + s.len())
    } else {
        Bytes::copy_from_slice(s.as_bytes())
    }
}

/// A 2026-07-28 request refused before dispatch (mcp-protocol.md §2.6, §3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub code: i64,
    pub message: &'static str,
    /// Raw JSON `data`.
    pub data: Option<Vec<u8>>,
}

impl Refusal {
    pub(crate) fn new(code: i64, message: &'static str) -> Self {
        Refusal {
            code,
            message,
            data: None,
        }
    }

    /// The error response to request `id`.
    pub(crate) fn body(&self, id: Option<&str>) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        write_error(&mut out, id, self.code, self.message, self.data.as_deref());
        out
    }

    /// The HTTP status the Streamable HTTP transport answers with.
    pub(crate) fn http_status(&self) -> u16 {
        if self.code == code::METHOD_NOT_FOUND {
            404
        } else {
            400
        }
    }
}

/// Checks the `_meta` every 2026-07-28 request must carry: protocol version (supported) and
/// client capabilities (an object).
pub(crate) fn check_modern(params: Option<&Params<'_>>) -> Result<(), Refusal> {
    let meta = params.and_then(|p| p.meta.as_ref());
    let version = meta.and_then(|m| m.protocol_version.as_deref());
    let caps = meta.and_then(|m| m.client_capabilities);
    let (Some(version), Some(caps)) = (version, caps) else {
        return Err(Refusal::new(
            code::INVALID_PARAMS,
            "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
        ));
    };
    if !caps.get().starts_with('{') {
        return Err(Refusal::new(
            code::INVALID_PARAMS,
            "Invalid params: _meta io.modelcontextprotocol/clientCapabilities must be an object",
        ));
    }
    if version != MODERN.as_str() {
        let mut data = Vec::with_capacity(64 + version.len());
        data.extend_from_slice(br#"{"supported":[""#);
        data.extend_from_slice(MODERN.as_str().as_bytes());
        data.extend_from_slice(br#""],"requested":"#);
        write_json_str(&mut data, version);
        data.push(b'}');
        return Err(Refusal {
            code: code::UNSUPPORTED_VERSION,
            message: "Unsupported protocol version",
            data: Some(data),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_json_and_agree() {
        let info = server_info();
        assert_eq!(info["name"], "mcpbench-reference");
        let d: Value = serde_json::from_slice(&discover(json!({}), "hi", &info)).unwrap();
        assert_eq!(d["serverInfo"], info);
        assert_eq!(d["_meta"]["io.modelcontextprotocol/serverInfo"], info);
        assert_eq!(
            (d["ttlMs"].as_u64(), d["instructions"].as_str()),
            (Some(TTL_MS), Some("hi"))
        );
        let tail: Value =
            serde_json::from_str(&format!("{{\"a\":1{MODERN_RESULT_TAIL}}}")).unwrap();
        assert_eq!(tail["_meta"]["io.modelcontextprotocol/serverInfo"], info);
        assert_eq!(tail["resultType"], "complete");
    }

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
        assert_eq!(k("[1]").unwrap_err().code, code::INVALID_REQUEST);
        // Invalid UTF-8 in a member nobody reads (found by the stdio fuzz test): not JSON.
        let bad = parse(b"{\"sonrpc\":\"2\xff.0\",\"id\":\"l\",\"method\":\"tools/list\"}");
        assert_eq!(
            bad.map(|_| ()).unwrap_err(),
            Rejection {
                id: None,
                code: code::PARSE_ERROR,
                message: "Parse error"
            }
        );
        assert_eq!(k("1").unwrap_err().code, code::INVALID_REQUEST);
    }

    #[test]
    fn params_and_modern_checks() {
        fn raw(s: &str) -> &RawValue {
            serde_json::from_str(s).unwrap()
        }
        let p = raw(
            r#"{"name":"echo","_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        let p = Params::parse(Some(p)).unwrap();
        assert_eq!(p.modern_version(), Some("2026-07-28"));
        assert_eq!(p.progress_token().unwrap().get(), "\"t\"");
        assert!(check_modern(Some(&p)).is_ok());
        let missing = Params::parse(Some(raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        )))
        .unwrap();
        assert_eq!(
            check_modern(Some(&missing)).unwrap_err().code,
            code::INVALID_PARAMS
        );
        let old = Params::parse(Some(raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        )))
        .unwrap();
        let r = check_modern(Some(&old)).unwrap_err();
        assert_eq!(r.code, code::UNSUPPORTED_VERSION);
        let data: Value = serde_json::from_slice(r.data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            serde_json::json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
        );
        assert!(Params::parse(Some(raw("[1]"))).is_none());
    }

    #[test]
    fn sub_slices_without_copying() {
        let frame = Bytes::from_static(b"{\"id\":42}");
        let text = std::str::from_utf8(&frame).unwrap();
        let s = sub(&frame, &text[6..8]);
        assert_eq!(&s[..], b"42");
        assert_eq!(s.as_ptr(), frame[6..].as_ptr());
        assert_eq!(&sub(&frame, "elsewhere")[..], b"elsewhere");
    }
}
