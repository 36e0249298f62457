//! The bytes of a workload call: each entry's JSON-RPC body pre-rendered per revision
//! ([`RequestTemplate`]: only the id and the generated arguments are written per request) and
//! its per-request transport data ([`call_spec`]).

use rand::Rng;

use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::scenario::{Method, WorkItem};
use crate::transport::CallSpec;

/// Writes the JSON-RPC body of a workload entry for a request id.
///
/// Everything but the id and the generated arguments is pre-rendered for the session's
/// revision: `a`, (the id as `progressToken`), `b`, (arguments), `c`, `,"id":`, the id, `}`.
/// 2026-07-28 requests carry `_meta` (protocol version, capabilities, client info); a workload
/// entry with `progress = true` asks for progress notifications with the request id as token.
#[derive(Debug)]
pub struct RequestTemplate {
    a: Vec<u8>,
    token: bool,
    b: Vec<u8>,
    has_args: bool,
    c: Vec<u8>,
}

/// Splits a `_meta` rendering at the progress token (the placeholder id `0`).
fn meta_parts(rev: Revision, progress: bool) -> (Vec<u8>, Vec<u8>) {
    let mut m = Vec::new();
    if rev.has_handshake() {
        if !progress {
            return (Vec::new(), Vec::new());
        }
        m.extend_from_slice(br#""_meta":{"progressToken":0}"#);
    } else {
        mcp::write_modern_meta(&mut m, rev, progress.then_some(0));
    }
    match progress
        .then(|| m.windows(16).position(|w| w == br#""progressToken":"#))
        .flatten()
    {
        Some(p) => {
            let cut = p + 16;
            (m[..cut].to_vec(), m[cut + 1..].to_vec())
        }
        None => (m, Vec::new()),
    }
}

impl RequestTemplate {
    pub fn new(item: &WorkItem, rev: Revision) -> Self {
        let (meta_a, meta_b) = meta_parts(rev, item.progress);
        let has_meta = !meta_a.is_empty();
        let mut a = Vec::with_capacity(256);
        let mut b = Vec::with_capacity(96);
        match &item.method {
            Method::ToolsList => {
                a.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/list""#);
                if has_meta {
                    a.extend_from_slice(br#","params":{"#);
                    a.extend_from_slice(&meta_a);
                    b.extend_from_slice(&meta_b);
                    b.push(b'}');
                }
                RequestTemplate {
                    a,
                    token: has_meta && item.progress,
                    b,
                    has_args: false,
                    c: Vec::new(),
                }
            }
            Method::ToolsCall { tool } => {
                a.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"#);
                a.extend_from_slice(&meta_a);
                b.extend_from_slice(&meta_b);
                if has_meta {
                    b.push(b',');
                }
                b.extend_from_slice(br#""name":"#);
                crate::protocol::jsonrpc::write_json_str(&mut b, tool);
                b.extend_from_slice(br#","arguments":"#);
                RequestTemplate {
                    a,
                    token: item.progress,
                    b,
                    has_args: true,
                    c: b"}".to_vec(),
                }
            }
        }
    }

    /// Renders the body into `out`; where its arguments are in `out` (empty for tools/list).
    #[inline]
    pub fn write<R: Rng>(
        &self,
        item: &WorkItem,
        out: &mut Vec<u8>,
        id: u64,
        rng: &mut R,
    ) -> std::ops::Range<usize> {
        let mut digits = itoa::Buffer::new();
        let id_text = digits.format(id).as_bytes();
        out.extend_from_slice(&self.a);
        if self.token {
            out.extend_from_slice(id_text);
        }
        out.extend_from_slice(&self.b);
        let start = out.len();
        if self.has_args {
            item.arguments.write(out, rng);
        }
        let args = start..out.len();
        out.extend_from_slice(&self.c);
        out.extend_from_slice(br#","id":"#);
        out.extend_from_slice(id_text);
        out.push(b'}');
        args
    }
}

/// The per-request transport data of a workload entry (the `Mcp-*` headers of 2026-07-28).
pub fn call_spec(item: &WorkItem, rev: Revision) -> CallSpec {
    match &item.method {
        Method::ToolsList => CallSpec::new("tools/list", None, rev),
        Method::ToolsCall { tool } => CallSpec::new("tools/call", Some(tool), rev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn bodies_are_valid_json_rpc() {
        let plan = crate::scenario::parse(
            "t.toml",
            "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\nweight = 3\narguments = { message = \"${pick:a,b}\" }\n[[workload]]\nmethod = \"tools/list\"\n",
            &|_| None,
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let t0 = RequestTemplate::new(&plan.workload[0], Revision::V2025_11_25);
        let mut out = Vec::new();
        t0.write(&plan.workload[0], &mut out, 42, &mut rng);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 42);
        assert_eq!(v["params"]["name"], "echo");
        assert!(v["params"]["arguments"]["message"].is_string());
        out.clear();
        RequestTemplate::new(&plan.workload[1], Revision::V2025_11_25).write(
            &plan.workload[1],
            &mut out,
            7,
            &mut rng,
        );
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
            serde_json::json!({"jsonrpc":"2.0","method":"tools/list","id":7})
        );
        // Every revision and progress setting renders valid JSON-RPC with the id in place.
        let with_progress = crate::scenario::parse(
            "p.toml",
            "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\nprogress = true\narguments = { message = \"x\" }\n[[workload]]\nmethod = \"tools/list\"\nprogress = true\n",
            &|_| None,
        )
        .unwrap();
        for rev in Revision::ALL {
            for (progress, p) in [(false, &plan), (true, &with_progress)] {
                for item in &p.workload {
                    let t = RequestTemplate::new(item, rev);
                    out.clear();
                    t.write(item, &mut out, 99, &mut rng);
                    let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|e| {
                        panic!("{rev} {progress}: {e}: {}", String::from_utf8_lossy(&out))
                    });
                    assert_eq!(v["id"], 99);
                    if progress {
                        assert_eq!(
                            v["params"]["_meta"]["progressToken"],
                            99,
                            "{}",
                            String::from_utf8_lossy(&out)
                        );
                    }
                    if !rev.has_handshake() {
                        assert_eq!(
                            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                            "2026-07-28"
                        );
                    }
                }
            }
        }
    }
}
