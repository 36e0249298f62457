//! Shared test helpers: raw HTTP, scenario files, servers on 127.0.0.1:0.

#![allow(dead_code)]

pub mod broken;
pub mod capacity;
pub mod raw_http;
pub mod release;

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

/// One raw HTTP/1.1 response (a chunked body decoded).
pub fn parse_response(raw: &[u8]) -> Resp {
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
/// Parses a scenario (panicking on a bad one: a test's own text) as if it were `dir/test.toml`
/// (relative paths in it resolve against `dir`) and runs it with results under `dir/run`; the
/// run's own error is returned.
pub fn run_in(
    text: &str,
    dir: &Path,
) -> Result<mcpbench::driver::RunOutput, mcpbench::driver::RunError> {
    let file = dir.join("test.toml").display().to_string();
    let plan = mcpbench::scenario::parse(&file, text, &|_| None).unwrap_or_else(|e| panic!("{e}"));
    let opts = mcpbench::driver::RunOptions {
        output: Some(dir.join("run")),
        scenario_file: file,
        ..Default::default()
    };
    mcpbench::driver::run(
        std::sync::Arc::new(plan),
        &opts,
        mcpbench::driver::Interrupt::default(),
    )
}

/// The values of one column of `timeseries.csv`, by its header name.
pub fn csv_column(csv: &str, name: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let header = lines.next().expect("a header line");
    let i = header
        .split(',')
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header}"));
    lines
        .map(|l| l.split(',').nth(i).expect("a full row").to_string())
        .collect()
}

/// A numeric column of `timeseries.csv`.
pub fn csv_numbers(csv: &str, name: &str) -> Vec<u64> {
    csv_column(csv, name)
        .iter()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: {v} is not a count"))
        })
        .collect()
}

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

/// A TCP port on 127.0.0.1 that nothing can listen on: connecting to port 0 is always
/// refused (a port bound and released could be taken by another test meanwhile).
pub const DEAD_PORT: u16 = 0;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// results/schema.json, compiled.
pub fn summary_schema() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("results/schema.json")).unwrap())
            .unwrap();
    jsonschema::validator_for(&schema).expect("schema compiles")
}

/// A run directory's summary.json, which must validate against results/schema.json.
pub fn valid_summary(dir: &Path) -> serde_json::Value {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let errors: Vec<String> = summary_schema()
        .iter_errors(&summary)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{}/summary.json breaks the schema: {errors:#?}",
        dir.display()
    );
    summary
}

/// A self-signed certificate for `localhost` and `127.0.0.1`, minted now with rcgen and written
/// as PEM into `dir`: (certificate path, private key path). No key material is committed.
pub fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("self-signed certificate");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// The reference server with `config` (and a mock backend) on 127.0.0.1:0.
pub fn launch(config: mcpbench::server::Config) -> EmbeddedServers {
    EmbeddedServers::launch(mcpbench::server::Launch {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        config,
        backend: mock_backend::Config::default(),
        threads: 2,
    })
    .expect("embedded servers start")
}

/// Upstream specs (`NAME=TARGET`) with the tests' timeouts.
pub fn upstream_specs(upstreams: &[String]) -> Vec<mcpbench::gateway::UpstreamSpec> {
    upstreams
        .iter()
        .map(|s| {
            mcpbench::gateway::UpstreamSpec::parse(
                s,
                Duration::from_secs(10),
                &mcpbench::gateway::UpstreamTls::default(),
            )
            .expect("upstream spec")
        })
        .collect()
}

/// The reference gateway in front of `specs`, with `config` (policy, audit…) on 127.0.0.1:0.
pub fn gateway(
    specs: Vec<mcpbench::gateway::UpstreamSpec>,
    config: mcpbench::server::Config,
) -> EmbeddedServers {
    let gw = mcpbench::gateway::Gateway::start(
        specs,
        &mcpbench::gateway::GatewayOptions {
            threads: 2,
            pool: 16,
            timeout: Duration::from_secs(10),
        },
    )
    .expect("the upstreams answer");
    launch(mcpbench::server::Config {
        proxy: Some(gw),
        ..config
    })
}

/// A plain TCP relay to `upstream` on 127.0.0.1:0 (a "gateway" that forwards every byte,
/// credentials included); it runs until the test process ends.
pub fn relay(upstream: SocketAddr) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                pipe(client, s2);
                pipe(server, c2);
            }
        }
    });
    addr
}

/// The verdicts `probe --tenants --format json` gave `check`, in order.
pub fn probe_verdicts(report: &serde_json::Value, check: &str) -> Vec<String> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == check)
        .map(|c| c["verdict"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// How long a test waits for something that should happen before it declares a hang.
pub const HANG: Duration = Duration::from_secs(30);

/// Polls `cond` until it holds; panics (naming `what`) if it still doesn't after [`HANG`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `_meta` every 2026-07-28 request carries.
pub const MODERN_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// One SSE event (or a run of comment lines) read off a stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    /// `data` lines joined with `\n`; `None` when the event had no data line.
    pub data: Option<String>,
    pub comments: Vec<String>,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.data.as_deref().expect("data")).expect("event data is JSON")
    }
}

/// An HTTP/1.1 response read incrementally (chunked or not): for SSE streams that stay open.
pub struct Streamed {
    pub status: u16,
    pub headers: HashMap<String, String>,
    reader: std::io::BufReader<TcpStream>,
    framing: Framing,
    buf: Vec<u8>,
    ended: bool,
}

enum Framing {
    Chunked { left: usize },
    Length(usize),
    UntilClose,
}

impl Streamed {
    /// Sends one request (with `Connection: close`) and reads the response head.
    pub fn open(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Streamed {
        use std::io::BufRead;
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(HANG)).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut reader = std::io::BufReader::new(s);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .expect("status line")
            .parse()
            .unwrap();
        let mut headers = HashMap::new();
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((n, v)) = l.split_once(':') {
                headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let framing = if headers
            .get("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            Framing::Chunked { left: 0 }
        } else if let Some(n) = headers.get("content-length") {
            Framing::Length(n.parse().unwrap())
        } else {
            Framing::UntilClose
        };
        Streamed {
            status,
            headers,
            reader,
            framing,
            buf: Vec::new(),
            ended: false,
        }
    }

    /// POSTs `body` to `/mcp` with the standard MCP headers plus `extra`.
    pub fn post(addr: SocketAddr, extra: &[(&str, &str)], body: &str) -> Streamed {
        let mut h: Vec<(&str, &str)> = MCP_HEADERS.to_vec();
        h.extend_from_slice(extra);
        Streamed::open(addr, "POST", "/mcp", &h, body.as_bytes())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Reads more body bytes into the buffer; false at the end of the body.
    fn fill(&mut self) -> bool {
        use std::io::BufRead;
        if self.ended {
            return false;
        }
        let mut chunk = [0u8; 4096];
        match &mut self.framing {
            Framing::Chunked { left } => {
                if *left == 0 {
                    let mut line = String::new();
                    if self.reader.read_line(&mut line).unwrap_or(0) == 0 {
                        self.ended = true;
                        return false;
                    }
                    if line.trim().is_empty() {
                        // The CRLF after the previous chunk.
                        line.clear();
                        if self.reader.read_line(&mut line).unwrap_or(0) == 0 {
                            self.ended = true;
                            return false;
                        }
                    }
                    let size = usize::from_str_radix(line.trim().split(';').next().unwrap(), 16)
                        .unwrap_or_else(|_| panic!("chunk size line {line:?}"));
                    if size == 0 {
                        self.ended = true;
                        return false;
                    }
                    *left = size;
                }
                let want = (*left).min(chunk.len());
                let n = self.reader.read(&mut chunk[..want]).expect("read chunk");
                if n == 0 {
                    self.ended = true;
                    return false;
                }
                *left -= n;
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Framing::Length(left) => {
                if *left == 0 {
                    self.ended = true;
                    return false;
                }
                let want = (*left).min(chunk.len());
                let n = self.reader.read(&mut chunk[..want]).expect("read body");
                if n == 0 {
                    self.ended = true;
                    return false;
                }
                *left -= n;
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Framing::UntilClose => {
                let n = self.reader.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    self.ended = true;
                    return false;
                }
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The whole remaining body.
    pub fn rest(&mut self) -> Vec<u8> {
        while self.fill() {}
        std::mem::take(&mut self.buf)
    }

    /// The next SSE event (comment-only blocks included), or `None` at the end of the stream.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        let mut ev = SseEvent::default();
        let mut any = false;
        loop {
            let Some(nl) = self.buf.iter().position(|&b| b == b'\n') else {
                if !self.fill() {
                    return None;
                }
                continue;
            };
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            let line = String::from_utf8(line).expect("UTF-8 event stream");
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if any {
                    return Some(ev);
                }
                continue;
            }
            any = true;
            if let Some(c) = line.strip_prefix(':') {
                ev.comments.push(c.trim().to_string());
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => ev.event = value.to_string(),
                "id" => ev.id = Some(value.to_string()),
                "data" => {
                    ev.data = Some(match ev.data.take() {
                        Some(d) => format!("{d}\n{value}"),
                        None => value.to_string(),
                    })
                }
                _ => {}
            }
        }
    }

    /// The next event that carries a JSON-RPC message (skips comments and priming events).
    pub fn next_message(&mut self) -> Option<serde_json::Value> {
        loop {
            let ev = self.next_event()?;
            if ev.data.as_deref().is_some_and(|d| !d.is_empty())
                && (ev.event.is_empty() || ev.event == "message")
            {
                return Some(ev.json());
            }
        }
    }
}

/// `mcpbench init ARGS… --output DIR/init.toml`, then the written scenario validated against
/// the target (`validate --connect`) and run briefly: it must run with zero errors, every tool
/// it kept answering ok. Returns the scenario text and init's stdout.
pub fn init_runs_clean(label: &str, args: &[&str], dir: &Path) -> (String, String) {
    let file = dir.join("init.toml");
    let file_arg = file.display().to_string();
    let mut init = vec!["init", "--output", &file_arg];
    init.extend_from_slice(args);
    let (code, out, err) = mcpbench(&init, dir);
    assert_eq!(code, 0, "{label}: init failed: {out}{err}");
    let text = std::fs::read_to_string(&file).expect("the scenario is written");
    let (code, out_v, err_v) = mcpbench(&["validate", "--connect", &file_arg], dir);
    assert_eq!(
        code, 0,
        "{label}: validate --connect: {out_v}{err_v}\n{text}"
    );
    let run_dir = dir.join("run").display().to_string();
    let (code, out_r, err_r) = mcpbench(
        &[
            "run",
            &file_arg,
            "--duration",
            "3s",
            "--set",
            "load.warmup=1s",
            "--set",
            "load.concurrency=2",
            "--quiet",
            "--output",
            &run_dir,
        ],
        dir,
    );
    assert_eq!(code, 0, "{label}: run: {out_r}{err_r}\n{text}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run/summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["totals"]["error_rate"], 0.0,
        "{label}: {out_r}\n{text}"
    );
    let kept: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("tool = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    assert!(!kept.is_empty(), "{label}: no tool kept: {out}\n{text}");
    for tool in kept {
        let op = summary["operations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == format!("tools/call:{tool}"))
            .unwrap_or_else(|| panic!("{label}: {tool} was not called"));
        let ok = op["outcomes"]["ok"].as_u64().unwrap();
        assert!(
            ok > 0 && op["failed"] == 0 && op["outcomes"]["tool_error"] == 0,
            "{label}: {tool}: {op}"
        );
    }
    (text, out)
}

/// `mcpbench run scenarios/quickstart.toml` without warm-up, quiet, into `dir/run`, with
/// `extra` arguments (`--duration` among them; a later `--set` wins); (exit code, stdout,
/// stderr, run directory).
pub fn quickstart(dir: &Path, extra: &[&str]) -> (i32, String, String, PathBuf) {
    let out = dir.join("run");
    let out_arg = out.display().to_string();
    let mut args = vec![
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "load.warmup=0s",
        "--quiet",
        "--output",
        &out_arg,
    ];
    args.extend_from_slice(extra);
    let (code, o, e) = mcpbench(&args, &repo());
    (code, o, e, out)
}

/// A private PKI minted now with rcgen, as PEM files in `dir`: a CA, a server certificate for
/// `localhost` and `127.0.0.1`, and a client certificate whose subject CN is `client_cn`
/// (client authentication), both signed by the CA. No key material is committed.
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

pub fn pki(dir: &Path, client_cn: &str) -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "mcpbench test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |sans: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        "localhost",
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) =
        leaf(Vec::new(), client_cn, ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca: write("ca.pem", ca_cert.pem()),
        server_cert: write("server.pem", server_cert),
        server_key: write("server-key.pem", server_key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client-key.pem", client_key),
    }
}

/// A child process killed (and reaped) when dropped.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server that prints `listening on http://ADDR…` first: the child and ADDR.
pub fn listening(cmd: &mut std::process::Command) -> (Killed, SocketAddr) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("its first line");
    let addr = line
        .strip_prefix("listening on http://")
        .and_then(|l| l.split(['/', ' ', '\n']).next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not an address line: {line}"));
    (Killed(child), addr)
}
