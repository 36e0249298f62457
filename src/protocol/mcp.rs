//! MCP messages the client sends, rendered straight to bytes.
//!
//! Handshake-era requests are plain JSON-RPC; 2026-07-28 requests carry the protocol version,
//! client capabilities and client info in `params._meta` and, over HTTP, mirror the method and
//! name in headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).

use super::jsonrpc::write_json_str;
use super::version::Revision;

/// `"_meta":{…}` for a 2026-07-28 request, without a trailing comma. `progress` adds the
/// request id as `progressToken`.
pub fn write_modern_meta(out: &mut Vec<u8>, rev: Revision, progress_token: Option<u64>) {
    out.extend_from_slice(br#""_meta":{"io.modelcontextprotocol/protocolVersion":""#);
    out.extend_from_slice(rev.as_str().as_bytes());
    out.extend_from_slice(br#"","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpbench","version":""#);
    out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    out.extend_from_slice(b"\"}");
    if let Some(t) = progress_token {
        out.extend_from_slice(br#","progressToken":"#);
        out.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
    }
    out.push(b'}');
}

fn id_tail(out: &mut Vec<u8>, id: u64) {
    out.extend_from_slice(br#","id":"#);
    out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
    out.push(b'}');
}

/// `initialize`, offering `rev`.
pub fn write_initialize(out: &mut Vec<u8>, id: u64, rev: Revision) {
    out.extend_from_slice(
        br#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":""#,
    );
    out.extend_from_slice(rev.as_str().as_bytes());
    out.extend_from_slice(br#"","capabilities":{},"clientInfo":{"name":"mcpbench","version":""#);
    out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    out.extend_from_slice(br#""}}"#);
    id_tail(out, id);
}

pub fn write_initialized(out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
}

/// `server/discover` (2026-07-28).
pub fn write_discover(out: &mut Vec<u8>, id: u64, rev: Revision) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"server/discover","params":{"#);
    write_modern_meta(out, rev, None);
    out.push(b'}');
    id_tail(out, id);
}

/// `tools/call` of `name` with raw JSON `arguments` (absent: none sent).
pub fn write_tools_call(
    out: &mut Vec<u8>,
    id: u64,
    rev: Revision,
    name: &str,
    arguments: Option<&[u8]>,
    progress: bool,
) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"#);
    write_json_str(out, name);
    if let Some(a) = arguments {
        out.extend_from_slice(br#","arguments":"#);
        out.extend_from_slice(a);
    }
    if !rev.has_handshake() {
        out.push(b',');
        write_modern_meta(out, rev, progress.then_some(id));
    } else if progress {
        out.extend_from_slice(br#","_meta":{"progressToken":"#);
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        out.push(b'}');
    }
    out.push(b'}');
    id_tail(out, id);
}

/// `tools/list`, optionally from a cursor.
pub fn write_tools_list(out: &mut Vec<u8>, id: u64, rev: Revision, cursor: Option<&str>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/list""#);
    let modern = !rev.has_handshake();
    if modern || cursor.is_some() {
        out.extend_from_slice(br#","params":{"#);
        if modern {
            write_modern_meta(out, rev, None);
        }
        if let Some(c) = cursor {
            if modern {
                out.push(b',');
            }
            out.extend_from_slice(br#""cursor":"#);
            write_json_str(out, c);
        }
        out.push(b'}');
    }
    id_tail(out, id);
}

/// `notifications/cancelled` for a request that timed out.
pub fn write_cancelled(out: &mut Vec<u8>, request_id: u64) {
    out.extend_from_slice(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"#,
    );
    out.extend_from_slice(itoa::Buffer::new().format(request_id).as_bytes());
    out.extend_from_slice(br#","reason":"timeout"}}"#);
}

/// The answer to a server's `ping` (`id` as received, raw JSON).
pub fn write_empty_result(out: &mut Vec<u8>, raw_id: &str) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(raw_id.as_bytes());
    out.extend_from_slice(br#","result":{}}"#);
}

/// The answer to a server request we don't implement.
pub fn write_method_not_found(out: &mut Vec<u8>, raw_id: &str) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(raw_id.as_bytes());
    out.extend_from_slice(br#","error":{"code":-32601,"message":"Method not found"}}"#);
}

/// The answer to a request from the server: `{}` for `ping`, -32601 for anything else (the
/// load generator declares no client capabilities).
pub fn answer_server_request(
    out: &mut Vec<u8>,
    id: &super::jsonrpc::IdRef<'_>,
    method: &str,
) -> bool {
    use super::jsonrpc::IdRef;
    let raw = match id {
        IdRef::Num(n) => n.to_string(),
        IdRef::Str(s) => serde_json::to_string(s).unwrap_or_else(|_| "null".into()),
        _ => "null".into(),
    };
    out.clear();
    if method == "ping" {
        write_empty_result(out, &raw);
        true
    } else {
        write_method_not_found(out, &raw);
        false
    }
}

/// Is `v` usable as an HTTP header value as is (2026-07-28 §3.4)? Otherwise it is sent as
/// `=?base64?…?=`.
fn header_safe(v: &str) -> bool {
    let looks_like_sentinel = v.starts_with("=?base64?") && v.ends_with("?=");
    let printable = v.bytes().all(|b| (0x20..0x7f).contains(&b));
    printable && !v.is_empty() && !v.starts_with(' ') && !v.ends_with(' ') && !looks_like_sentinel
}

/// A header value per the 2026-07-28 sentinel rule.
pub fn header_value(v: &str) -> String {
    if header_safe(v) {
        v.to_string()
    } else {
        use base64::Engine;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v.as_bytes())
        )
    }
}

/// The per-request HTTP header lines of a 2026-07-28 request (`Mcp-Method`, `Mcp-Name`).
pub fn modern_headers(method: &str, name: Option<&str>) -> Vec<u8> {
    let mut h = format!("Mcp-Method: {method}\r\n");
    if let Some(n) = name {
        h.push_str(&format!("Mcp-Name: {}\r\n", header_value(n)));
    }
    h.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(f: impl FnOnce(&mut Vec<u8>)) -> serde_json::Value {
        let mut out = Vec::new();
        f(&mut out);
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn messages_are_valid_json_rpc() {
        let v = json(|o| write_initialize(o, 1, Revision::V2025_06_18));
        assert_eq!(v["params"]["protocolVersion"], "2025-06-18");
        assert_eq!(v["id"], 1);
        let v = json(|o| write_discover(o, 2, Revision::V2026_07_28));
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(v["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object());
        let v = json(|o| write_tools_list(o, 3, Revision::V2026_07_28, Some("c\"1")));
        assert_eq!(v["params"]["cursor"], "c\"1");
        let v = json(|o| write_tools_list(o, 4, Revision::V2025_11_25, None));
        assert!(v.get("params").is_none());
        let v = json(|o| write_cancelled(o, 9));
        assert_eq!(v["params"]["requestId"], 9);
        let mut o = Vec::new();
        o.push(b'{');
        write_modern_meta(&mut o, Revision::V2026_07_28, Some(5));
        o.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&o).unwrap();
        assert_eq!(v["_meta"]["progressToken"], 5);
    }

    #[test]
    fn header_values_use_the_base64_sentinel_when_needed() {
        assert_eq!(header_value("echo"), "echo");
        assert_eq!(header_value("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert!(header_value("=?base64?x?=").starts_with("=?base64?"));
        assert_eq!(
            modern_headers("tools/call", Some("echo")),
            b"Mcp-Method: tools/call\r\nMcp-Name: echo\r\n"
        );
    }
}
