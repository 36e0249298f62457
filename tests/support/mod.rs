//! Shared test helpers: raw HTTP, scenario files, servers on 127.0.0.1:0.

#![allow(dead_code)]

pub mod broken;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpbench::server::{EmbeddedServers, ResponseMode};

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The JSON-RPC message in the body, whether JSON or a one-event SSE stream.
    pub fn message(&self) -> serde_json::Value {
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            let text = String::from_utf8_lossy(&self.body);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            serde_json::from_str(data.last().expect("an SSE data line")).expect("SSE data is JSON")
        } else {
            self.json()
        }
    }
}

/// Sends one raw HTTP/1.1 request (with `Connection: close`) and reads the whole response.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("complete head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(
            std::str::from_utf8(&b[..nl])
                .unwrap()
                .split(';')
                .next()
                .unwrap(),
            16,
        )
        .unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = &b[nl + 2 + size + 2..];
    }
}

pub const MCP_HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

/// POSTs a JSON-RPC body to /mcp with the standard headers plus `extra`.
pub fn post(addr: SocketAddr, extra: &[(&str, &str)], body: &str) -> Resp {
    let mut h: Vec<(&str, &str)> = MCP_HEADERS.to_vec();
    h.extend_from_slice(extra);
    http(addr, "POST", "/mcp", &h, body.as_bytes())
}

/// Opens a session; returns its id.
pub fn initialize(addr: SocketAddr, version: &str) -> (String, Resp) {
    let r = post(
        addr,
        &[],
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"test","version":"0"}}}}}}"#
        ),
    );
    let sid = r.header("mcp-session-id").unwrap_or_default().to_string();
    (sid, r)
}

/// Starts the reference server and mock backend in-process.
pub fn servers(
    response: ResponseMode,
    catalog: usize,
    page_size: usize,
    knobs: mock_backend::Knobs,
) -> EmbeddedServers {
    EmbeddedServers::start(response, catalog, page_size, knobs, 2).expect("embedded servers start")
}

/// Reads the mock backend's counters.
pub fn backend_stats(addr: SocketAddr) -> serde_json::Value {
    http(addr, "GET", "/stats", &[], b"").json()
}

/// A scratch directory that is removed at the end of the test.
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Writes a scenario file into `dir`.
pub fn scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs the mcpbench binary; returns (exit code, stdout, stderr).
pub fn mcpbench(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"))
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run mcpbench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
