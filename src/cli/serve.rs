//! `mcpbench serve` (the reference server, or a gateway in front of upstreams) and `mcpbench
//! mcp` (mcpbench as an MCP server for agents); how servers take their clients (`FrontArgs`,
//! shared with `record`) and reach upstreams (`UpstreamArgs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::error;
use super::signals::{Signals, signalled};
use super::values::{self, Number};
use crate::protocol::ResponseMode;
use crate::server;

/// `serve`'s command line.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub front: FrontArgs,
    /// Base URL of the REST backend for REST-backed tools; without it a mock backend is
    /// started in-process on 127.0.0.1.
    #[arg(long, value_name = "URL")]
    pub backend: Option<String>,
    /// Synthetic tools added to tools/list.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(0, "synthetic tools")
    )]
    pub catalog: usize,
    /// Tools per tools/list page.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100,
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "tools per page")
    )]
    pub page_size: usize,
    /// Also serve the official conformance suite's fixtures: `test_*` tools, prompts,
    /// resources, completions and logging (the benchmark catalog is unchanged).
    #[arg(long)]
    pub conformance: bool,
    /// A test fixture for the session-leak check, never for production: DELETE answers 200
    /// but the session is never freed, and holds 16 KiB more (see docs/reference-server.md).
    #[arg(long)]
    pub leak_sessions: bool,
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

/// How `serve` and `record` take their clients: on an address (Streamable HTTP, HTTP+SSE,
/// WebSocket; TLS if asked) or on stdin/stdout.
#[derive(Debug, Clone, clap::Args)]
pub struct FrontArgs {
    /// Address to listen on; loopback unless you say otherwise (port 0 picks one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// How Streamable HTTP answers requests: `json` (application/json) or `sse`
    /// (text/event-stream, one message event).
    #[arg(
        long,
        default_value = "json",
        value_parser = values::one_of::<ResponseMode>(["json", "sse"])
    )]
    response: ResponseMode,
    /// Extra host names accepted in Host and Origin headers (`*` accepts any).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Runtime threads (default: one per core).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "runtime threads")
    )]
    threads: Option<usize>,
    /// Serve one MCP session on stdin/stdout (one JSON message per line) instead of
    /// listening; exits when stdin closes.
    #[arg(long, conflicts_with_all = ["listen", "tls_cert", "tls_key"])]
    stdio: bool,
    /// Serve HTTPS/WSS (ALPN h2 and http/1.1) with this PEM certificate chain.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: require client certificates signed by a CA in this PEM file (a policy
    /// maps their subject CN or DNS names to tenants with `certs`).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: also accept clients without a certificate (tokens then).
    #[arg(long, requires = "tls_client_ca")]
    tls_client_optional: bool,
    /// Connections open at once (WebSockets included); one more is answered 503 with
    /// Retry-After and closed. Default: what the open-file limit holds (the soft limit, raised
    /// to the hard one at start), less 512 descriptors kept for the process itself.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "connections")
    )]
    max_connections: Option<usize>,
    /// Streamable HTTP sessions (and legacy HTTP+SSE sessions) open at once, each transport
    /// counted apart; `initialize` beyond it is answered 503 with Retry-After.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100_000,
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "sessions")
    )]
    max_sessions: usize,
    /// End a Streamable HTTP session no request has named for this long (its calls cancelled;
    /// its next request gets 404). Each is counted, and the count printed at shutdown.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10m", value_parser = idle_duration)]
    session_idle: Duration,
    /// Set SO_REUSEPORT on the listener (Linux): several `mcpbench serve` processes on one
    /// address, the kernel spreading connections over them (to hold more connections than one
    /// process's open-file limit).
    #[arg(long)]
    reuse_port: bool,
}

/// Descriptors `serve` keeps for itself below the open-file limit: listeners, the runtime's,
/// the in-process mock backend's connections (both ends), the audit log, stdio.
const RESERVED_FDS: u64 = 512;

/// The default of `--max-connections`: the open-file soft limit (already raised to the hard one)
/// less [`RESERVED_FDS`], at least half the limit.
fn default_max_connections() -> usize {
    let (soft, _) = crate::driver::limits::open_files();
    let held = soft.saturating_sub(RESERVED_FDS).max(soft / 2).max(1);
    usize::try_from(held).unwrap_or(usize::MAX)
}

fn idle_duration(s: &str) -> Result<Duration, String> {
    match mcpbench_knobs::parse_duration(s).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("a session idle timeout must be more than 0".into()),
        d => Ok(d),
    }
}

impl FrontArgs {
    /// The runtime threads: as given, else one per core.
    pub(super) fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// The server settings these make (TLS loaded).
    pub(super) fn configure(&self, config: &mut server::Config) -> Result<(), String> {
        config.response = self.response;
        config.max_connections = self.max_connections.unwrap_or_else(default_max_connections);
        config.max_sessions = self.max_sessions;
        config.session_idle = self.session_idle;
        config.reuse_port = self.reuse_port;
        config
            .allowed_hosts
            .extend(self.allow_hosts.iter().cloned());
        if let Some((cert, key)) = self.tls_cert.as_ref().zip(self.tls_key.as_ref()) {
            let clients = self
                .tls_client_ca
                .clone()
                .map(|ca| server::tls::ClientAuth {
                    ca,
                    optional: self.tls_client_optional,
                });
            config.tls = Some(
                server::tls::load_pem_with(cert, key, clients.as_ref())
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(())
    }
}

/// `serve` as a gateway: upstreams, tenants, audit.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Gateway")]
pub struct GatewayArgs {
    /// Front an upstream MCP server, its tools listed as NAME__tool: NAME=TARGET with TARGET
    /// http(s)://… (Streamable HTTP, either era), sse+http(s)://… (HTTP+SSE), ws(s)://… or
    /// stdio:COMMAND ARGS…. Repeat for several.
    #[arg(long = "upstream", value_name = "NAME=TARGET")]
    upstreams: Vec<String>,
    /// A header the gateway sends upstream NAME on every request: its credentials there, e.g.
    /// `ref=Authorization: Bearer ${REF_TOKEN}` (`${VAR}` from the environment; never logged).
    /// The only credentials an upstream gets: clients' never leave the gateway. Repeatable.
    #[arg(
        long = "upstream-header",
        value_name = "NAME=HEADER: VALUE",
        requires = "upstreams"
    )]
    upstream_headers: Vec<String>,
    /// List the reference server's own tools (echo, sleep, the REST-backed ones…) beside the
    /// upstreams' (by default a gateway lists only its upstreams' tools, so a workload that
    /// forgot `tool_prefix` cannot measure the gateway's local `echo` by mistake).
    #[arg(long, requires = "upstreams")]
    local_tools: bool,
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// Tenants: bearer tokens, the tools each may list and call (globs), rate limits (TOML;
    /// see docs/gateway.md). Requests without a valid token get 401.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Write audit events (discovery, invocation, error) as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Write call arguments into the audit log (default: "[redacted]").
    #[arg(long, requires = "audit")]
    audit_arguments: bool,
    /// Wait this long before every tool call, to within microseconds (to check what an A/B
    /// comparison reports; the last 3 ms are spent yielding, so it costs CPU).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = mcpbench_knobs::parse_duration)]
    inject_delay: Option<Duration>,
}

/// How the gateway (`serve --upstream`, `record`) reaches its upstreams.
#[derive(Debug, Clone, clap::Args)]
pub struct UpstreamArgs {
    /// Pooled sessions per upstream on each upstream I/O thread.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 32,
        allow_negative_numbers = true,
        value_parser = Number::<usize>::at_least(1, "sessions per upstream and thread")
    )]
    upstream_pool: usize,
    /// Bound on one upstream call.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "30s", value_parser = mcpbench_knobs::parse_duration)]
    pub(super) upstream_timeout: Duration,
    /// Check https/wss upstreams against the CA certificates in this PEM file (default: the
    /// system's roots).
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<PathBuf>,
    /// Mutual TLS to the upstreams: present this PEM client certificate chain…
    #[arg(long, value_name = "FILE", requires = "upstream_key")]
    upstream_cert: Option<PathBuf>,
    /// …with this PEM private key.
    #[arg(long, value_name = "FILE", requires = "upstream_cert")]
    upstream_key: Option<PathBuf>,
}

impl UpstreamArgs {
    /// How upstreams over TLS are checked, and the client certificate shown to them.
    pub(super) fn tls(&self) -> crate::gateway::UpstreamTls {
        crate::gateway::UpstreamTls {
            trust: self.upstream_ca.clone().map_or(
                crate::transport::net::Trust::System,
                crate::transport::net::Trust::CaFile,
            ),
            identity: self
                .upstream_cert
                .clone()
                .zip(self.upstream_key.clone())
                .map(|(cert, key)| crate::transport::net::IdentityFiles { cert, key }),
        }
    }

    /// The gateway's pool and timeout, on `threads` upstream I/O threads.
    pub(super) fn options(&self, threads: usize) -> crate::gateway::GatewayOptions {
        crate::gateway::GatewayOptions {
            threads,
            pool: self.upstream_pool,
            timeout: self.upstream_timeout,
        }
    }
}

/// Says what the gateway found at its upstreams.
fn started(gw: &crate::gateway::Gateway) {
    for s in &gw.started {
        eprintln!(
            "upstream {}: {} tools, {} ({:.1} ms)",
            s.name,
            s.tools,
            s.revision,
            s.took.as_secs_f64() * 1000.0
        );
        for t in &s.refused {
            eprintln!(
                "upstream {}: tool {t:?} left out: its name holds whitespace or a control character",
                s.name
            );
        }
    }
}

impl GatewayArgs {
    /// The server settings these add, with the upstreams connected (their tools listed).
    fn apply(&self, config: &mut server::Config, threads: usize) -> Result<(), String> {
        if let Some(p) = &self.policy {
            let policy = server::policy::Policy::load(p).map_err(|e| e.to_string())?;
            config.policy = Some(Arc::new(policy));
        }
        if let Some(a) = &self.audit {
            let audit = server::audit::Audit::create(a, self.audit_arguments)
                .map_err(|e| format!("cannot create the audit log {}: {e}", a.display()))?;
            config.audit = Some(Arc::new(audit));
        }
        config.call_delay = self.inject_delay.unwrap_or_default();
        config.local_tools = self.local_tools;
        if self.upstreams.is_empty() {
            return Ok(());
        }
        let tls = self.upstream.tls();
        let mut specs = self
            .upstreams
            .iter()
            .map(|s| crate::gateway::UpstreamSpec::parse(s, self.upstream.upstream_timeout, &tls))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        crate::gateway::add_headers(&mut specs, &self.upstream_headers, &|v| {
            std::env::var(v).ok()
        })
        .map_err(|e| e.to_string())?;
        let gw = crate::gateway::Gateway::start(specs, &self.upstream.options(threads))
            .map_err(|e| e.to_string())?;
        started(&gw);
        eprintln!(
            "{} upstreams ready in {:.1} ms",
            gw.started.len(),
            gw.startup.as_secs_f64() * 1000.0
        );
        config.proxy = Some(gw);
        Ok(())
    }
}

/// `serve`: the reference server (a gateway with --upstream) until a signal.
pub(super) fn serve(o: ServeArgs) -> ExitCode {
    let mut config = server::Config {
        conformance: o.conformance,
        leak_sessions: o.leak_sessions,
        catalog: o.catalog,
        page_size: o.page_size,
        backend: o.backend,
        ..server::Config::default()
    };
    if let Err(e) = o.front.configure(&mut config) {
        return error(e);
    }
    let threads = o.front.threads();
    if let Err(e) = o.gateway.apply(&mut config, threads) {
        return error(e);
    }
    front(&o.front, config, threads, None)
}

/// Serves `config` as `f` says (listening, or one session on stdio) until a signal or, on
/// stdio, the end of stdin; `recording` is flushed even when a second signal quits at once.
pub(super) fn front(
    f: &FrontArgs,
    config: server::Config,
    threads: usize,
    recording: Option<(Arc<server::trace_recorder::Recorder>, &dyn Fn())>,
) -> ExitCode {
    let (recording, ready) = match recording {
        Some((r, ready)) => (Some(r), Some(ready)),
        None => (None, None),
    };
    let no_anonymous = config
        .policy
        .as_ref()
        .is_some_and(|p| !matches!(p.authenticate(None), server::policy::Auth::Tenant(_)));
    if f.stdio && no_anonymous {
        return error(
            "--stdio carries no credentials: the policy needs `anonymous = \"TENANT\"` to serve it",
        );
    }
    if f.stdio {
        // stdout carries MCP messages only; everything else goes to stderr.
        return match server::run_stdio(
            config,
            mock_backend::Config::default(),
            threads,
            signalled(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => error(e),
        };
    }
    let servers = match server::EmbeddedServers::launch(server::Launch {
        listen: f.listen,
        config,
        backend: mock_backend::Config::default(),
        threads,
    }) {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    if let Some(ready) = ready {
        ready();
    }
    // The first line is parsed by scripts and tests: keep its shape. One write, errors
    // ignored: a reader that stops after the first line must not make this panic.
    let serving = match &recording {
        Some(r) => format!("recording to {}", r.path().display()),
        None => format!("backend {}", servers.backend_url),
    };
    let banner = format!(
        "listening on {} ({serving})\nalso: {} (HTTP+SSE, 2024-11-05), {} (WebSocket, subprotocol mcp)\n",
        servers.mcp_url(),
        servers.sse_url(),
        servers.ws_url()
    );
    // Caught before the banner, which tells scripts they may signal.
    let caught = Signals::caught();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    drop(out);
    if let Some((rt, mut signals)) = caught {
        let name = rt.block_on(signals.next());
        eprintln!(
            "{}: stopping: no new connections, requests in flight get {} to finish",
            name.unwrap_or("signal"),
            mcpbench_knobs::format_duration(mock_backend::accept::DEFAULT_GRACE)
        );
        eprintln!("{}", sessions_line(servers.state()));
        // A second signal does not wait for the drain (what was recorded is written first).
        let _ = std::thread::Builder::new()
            .name("mcpbench-signals".into())
            .spawn(move || {
                rt.block_on(signals.next());
                if let Some(r) = recording {
                    let _ = r.flush();
                }
                std::process::exit(130);
            });
    }
    // Dropping the servers drains them (graceful shutdown, bounded by the grace).
    drop(servers);
    ExitCode::SUCCESS
}

/// What became of the server's Streamable HTTP sessions, printed at shutdown.
fn sessions_line(state: &server::State) -> String {
    format!(
        "sessions: {} open, {} expired after {} idle (--session-idle)",
        state.open_sessions(),
        state.expired_sessions(),
        mcpbench_knobs::format_duration(state.config.session_idle)
    )
}

/// `mcp`: mcpbench as an MCP server on stdin/stdout until EOF or a signal.
pub(super) fn mcp(o: crate::agent::McpOptions) -> ExitCode {
    // stdout carries MCP messages only; everything else goes to stderr.
    match crate::agent::serve(o, signalled()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => error(e),
    }
}
