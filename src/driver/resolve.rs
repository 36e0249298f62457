//! From a plan's target to an [`Endpoint`]: the embedded servers started (or the child
//! command of a stdio target), names resolved, TLS configured, headers rendered.

use std::net::SocketAddr;

use super::{RunError, RunOptions};
use crate::client::endpoint::{self, net_target};
use crate::scenario::plan::Embedded;
use crate::scenario::{Plan, Target};
use crate::server::EmbeddedServers;
use crate::transport::net::NetTarget;
use crate::transport::sources::Sources;
use crate::transport::{CommandSpec, Endpoint, TransportKind};

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
/// connections from the first source address if given (each user's own is set where the run's
/// context is built, which calls [`sources`] too).
pub fn resolve(plan: &Plan, opts: &RunOptions) -> Result<Resolved, RunError> {
    let mut resolved = resolve_target(plan, opts)?;
    if let Some(sources) = sources(plan, opts) {
        let ep = &mut resolved.endpoint;
        for net in ep.net.iter_mut().chain(ep.replicas.iter_mut()) {
            for &ip in sources.addrs() {
                usable_source(ip, net.addr)?;
            }
            net.source = Some(sources.addrs()[0]);
        }
    }
    Ok(resolved)
}

/// The source addresses of a run: `--source-address`, else the scenario's
/// `target.source_address`.
pub fn sources<'a>(plan: &'a Plan, opts: &'a RunOptions) -> Option<&'a Sources> {
    opts.source_address.as_ref().or(match &plan.target {
        Target::Remote(r) => r.sources.as_ref(),
        Target::Embedded(_) => None,
    })
}

/// A source address this machine has, of the target's family: bound once here, so that a
/// wrong one is one clear error before load rather than a failed connection per request.
fn usable_source(ip: std::net::IpAddr, target: SocketAddr) -> Result<(), RunError> {
    let fail = |reason: String| RunError::Resolve {
        target: format!("source address {ip}"),
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
    let mut endpoint = endpoint::for_plan(plan);
    endpoint.codec = opts.codec;
    match &plan.target {
        Target::Embedded(e) => embedded(e, endpoint),
        Target::Remote(r) => {
            endpoint::of_remote(&mut endpoint, r).map_err(|e| match e.unreachable() {
                Ok(source) => RunError::Preflight {
                    url: r.describe(),
                    at: Some(Box::new(r.place.clone())),
                    source,
                },
                Err(e) => e.into(),
            })?;
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
