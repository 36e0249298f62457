//! From a plan's target to an [`Endpoint`]: the embedded servers started (or the child
//! command of a stdio target), names resolved, TLS configured, headers rendered.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::{RunError, RunOptions};
use crate::protocol::version::Revision;
use crate::scenario::plan::{Embedded, Remote, Url};
use crate::scenario::{Plan, ProtocolChoice, Target};
use crate::server::EmbeddedServers;
use crate::transport::net::{IdentityFiles, NetTarget, TlsClient, Trust};
use crate::transport::{CommandSpec, Endpoint, TransportKind};

/// The least time a session opening gets.
pub const OPEN_TIMEOUT_MIN: Duration = Duration::from_secs(5);

/// Largest response or event accepted from a target.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A target ready to connect to.
#[derive(Debug)]
pub struct Resolved {
    pub endpoint: Endpoint,
    /// What the report names as the target (never secrets).
    pub url: String,
    /// `embedded` or `remote`.
    pub kind: &'static str,
    /// Names of the extra headers (values may be secrets).
    pub headers: Vec<String>,
    /// The embedded servers, kept running as long as this lives.
    pub embedded: Option<EmbeddedServers>,
    /// `[target.oauth]`: where each user gets its token.
    pub oauth: Option<super::oauth::TokenEndpoint>,
}

/// The endpoint for a plan: embedded servers started, names resolved, TLS configured, and
/// connections from `--source-address` if given.
pub fn resolve(plan: &Plan, opts: &RunOptions) -> Result<Resolved, RunError> {
    let mut resolved = resolve_target(plan, opts)?;
    if let Some(ip) = opts.source_address {
        let ep = &mut resolved.endpoint;
        for net in ep.net.iter_mut().chain(ep.replicas.iter_mut()) {
            usable_source(ip, net.addr)?;
            net.source = Some(ip);
        }
    }
    Ok(resolved)
}

/// A source address this machine has, of the target's family: bound once here, so that a
/// wrong one is one clear error before load rather than a failed connection per request.
fn usable_source(ip: std::net::IpAddr, target: SocketAddr) -> Result<(), RunError> {
    let fail = |reason: String| RunError::Resolve {
        target: format!("--source-address {ip}"),
        reason,
    };
    if ip.is_ipv4() != target.is_ipv4() {
        return Err(fail(format!(
            "the target {target} is IPv{}: give a source address of the same family",
            if target.is_ipv4() { 4 } else { 6 }
        )));
    }
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0))
        .map(drop)
        .map_err(|e| {
            fail(format!(
                "not an address of this machine ({e}); on loopback any 127.x.y.z works"
            ))
        })
}

fn resolve_target(plan: &Plan, opts: &RunOptions) -> Result<Resolved, RunError> {
    let conn = plan.connection();
    let mut endpoint = Endpoint {
        timing: None,
        replicas: Vec::new(),
        id_base: 0,
        children: Default::default(),
        kind: conn.transport,
        net: None,
        host: String::new(),
        path: String::new(),
        extra_headers: Vec::new(),
        headers: Vec::new(),
        http2: conn.http2,
        command: None,
        protocol: match conn.protocol {
            ProtocolChoice::Fixed(r) => r,
            ProtocolChoice::Auto => Revision::V2026_07_28,
        },
        codec: opts.codec,
        max_body: MAX_BODY,
        // Opening a session (connecting, TLS, launching a process, the handshake) gets at
        // least 5 s whatever the request timeout: a child process or a TLS handshake is slower
        // than a call.
        timeout: plan.load.timeout.max(OPEN_TIMEOUT_MIN),
    };
    match &plan.target {
        Target::Embedded(e) => embedded(e, endpoint),
        Target::Remote(r) => {
            endpoint.command = r.command.clone();
            endpoint.timing = r.timing.clone();
            if let Some(u) = &r.url {
                network(&mut endpoint, u, r)?;
            }
            for u in &r.replicas {
                let (net, _) = net_target(
                    u,
                    &r.trust,
                    r.identity.as_ref(),
                    endpoint.http2,
                    endpoint.timeout,
                )?;
                endpoint.replicas.push(net);
            }
            for (name, value) in &r.headers {
                endpoint.add_header(name, value);
            }
            let oauth = match &r.oauth {
                None => None,
                Some(o) => {
                    let (net, host) =
                        net_target(&o.token_url, &r.trust, None, false, endpoint.timeout)?;
                    Some(super::oauth::TokenEndpoint::new(o, net, host))
                }
            };
            Ok(Resolved {
                oauth,
                url: r.describe(),
                endpoint,
                kind: "remote",
                headers: r.headers.iter().map(|(n, _)| n.clone()).collect(),
                embedded: None,
            })
        }
    }
}

/// The built-in reference server and mock backend on 127.0.0.1 ephemeral ports; for stdio, a
/// child process of this binary that serves one session (with the same backend).
fn embedded(e: &Embedded, mut ep: Endpoint) -> Result<Resolved, RunError> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let servers = EmbeddedServers::start(
        e.response,
        e.catalog,
        e.page_size,
        e.backend.clone(),
        threads,
    )?;
    let url = if ep.kind == TransportKind::Stdio {
        let exe = std::env::current_exe().map_err(RunError::Runtime)?;
        let args: Vec<String> = [
            "serve",
            "--stdio",
            "--backend",
            &servers.backend_url,
            "--catalog",
            &e.catalog.to_string(),
            "--page-size",
            &e.page_size.to_string(),
        ]
        .map(str::to_string)
        .into();
        let url = format!("{} {}", exe.display(), args.join(" "));
        ep.command = Some(CommandSpec {
            program: exe.display().to_string(),
            args,
            env: Vec::new(),
            cwd: None,
        });
        url
    } else {
        let (scheme, path) = match ep.kind {
            TransportKind::LegacySse => ("http", "/sse"),
            TransportKind::WebSocket => ("ws", "/ws"),
            _ => ("http", "/mcp"),
        };
        ep.net = Some(NetTarget {
            addr: servers.mcp_addr,
            tls: None,
            connect_timeout: ep.timeout,
            source: None,
        });
        ep.host = servers.mcp_addr.to_string();
        ep.path = path.into();
        format!("{scheme}://{}{path}", servers.mcp_addr)
    };
    Ok(Resolved {
        oauth: None,
        url,
        endpoint: ep,
        kind: "embedded",
        headers: Vec::new(),
        embedded: Some(servers),
    })
}

/// Address, TLS client (ALPN as the HTTP version asks), `Host` and path of a network target.
fn network(ep: &mut Endpoint, u: &Url, r: &Remote) -> Result<(), RunError> {
    let (net, host) = net_target(u, &r.trust, r.identity.as_ref(), ep.http2, ep.timeout)?;
    ep.net = Some(net);
    ep.host = host;
    ep.path = u.path.clone();
    Ok(())
}

/// A URL's address (resolved), TLS client (ALPN `h2` or `http/1.1`) and `Host` header value.
pub fn net_target(
    u: &Url,
    trust: &Trust,
    identity: Option<&IdentityFiles>,
    http2: bool,
    timeout: Duration,
) -> Result<(NetTarget, String), RunError> {
    let addr = resolve_addr(u)?;
    let tls = if u.scheme.is_tls() {
        let alpn: &[&[u8]] = if http2 { &[b"h2"] } else { &[b"http/1.1"] };
        Some(
            TlsClient::new(&u.host, trust, identity, alpn).map_err(|e| RunError::Tls {
                target: u.text.clone(),
                reason: e.to_string(),
            })?,
        )
    } else {
        None
    };
    let default_port = if u.scheme.is_tls() { 443 } else { 80 };
    let host = if u.port == default_port {
        u.host.clone()
    } else {
        format!("{}:{}", u.host, u.port)
    };
    Ok((
        NetTarget {
            addr,
            tls,
            connect_timeout: timeout,
            source: None,
        },
        host,
    ))
}

fn resolve_addr(u: &Url) -> Result<SocketAddr, RunError> {
    let hostport = format!(
        "{}:{}",
        u.host.trim_start_matches('[').trim_end_matches(']'),
        u.port
    );
    let resolve_error = |reason: String| RunError::Resolve {
        target: u.text.clone(),
        reason,
    };
    hostport
        .to_socket_addrs()
        .map_err(|e| resolve_error(e.to_string()))?
        .next()
        .ok_or_else(|| resolve_error("no address".into()))
}
