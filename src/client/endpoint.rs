//! An [`Endpoint`] built one way: the defaults every target shares ([`blank`]), a URL's
//! address, TLS and `Host` ([`net_target`], [`at_url`]), and a scenario's remote target
//! ([`of_remote`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::failure::PreflightError;
use crate::protocol::jsonrpc::Codec;
use crate::protocol::version::Revision;
use crate::scenario::Plan;
use crate::scenario::plan::Remote;
use crate::transport::net::{IdentityFiles, NetTarget, TlsClient, Trust};
use crate::transport::url::Url;
use crate::transport::{Endpoint, TransportKind};

/// The least time a session opening gets (connecting, TLS, launching a process, the
/// handshake are slower than a call).
pub const OPEN_TIMEOUT_MIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Largest response or event accepted from a server.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// Why a target cannot be reached at all (before any session).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("cannot resolve {target}: {reason}")]
    Resolve { target: String, reason: String },
    #[error("TLS set-up for {target}: {reason}")]
    Tls { target: String, reason: String },
}

impl ClientError {
    /// A host name that does not resolve, as why the target cannot be used (with what to
    /// check); any other error as it is.
    pub fn unreachable(self) -> Result<PreflightError, ClientError> {
        match self {
            ClientError::Resolve { reason, .. } => Ok(PreflightError::Unreachable {
                why: reason,
                hint: Some("is the host name right? (an IP address needs no lookup)".into()),
            }),
            other => Err(other),
        }
    }
}

/// An endpoint of `kind` with nothing to connect to yet: no address, command or headers; the
/// default codec, [`MAX_BODY`], `timeout` for connecting and each handshake step.
pub fn blank(kind: TransportKind, protocol: Revision, timeout: Duration) -> Endpoint {
    Endpoint {
        kind,
        net: None,
        host: String::new(),
        path: String::new(),
        extra_headers: Vec::new(),
        headers: Vec::new(),
        http2: false,
        sessions_per_connection: 1,
        command: None,
        protocol,
        codec: Codec::default(),
        max_body: MAX_BODY,
        timeout,
        timing: None,
        replicas: Vec::new(),
        id_base: 0,
        children: Default::default(),
    }
}

/// The endpoint of a scenario's connection before its target is filled in: its transport,
/// the revision it offers first, HTTP/2 or not, and a session opening bounded by the request
/// timeout but never under [`OPEN_TIMEOUT_MIN`] (a child process or a TLS handshake is
/// slower than a call).
pub fn for_plan(plan: &Plan) -> Endpoint {
    let conn = plan.connection();
    let timeout = plan.load.timeout.max(OPEN_TIMEOUT_MIN);
    let mut ep = blank(conn.transport, conn.protocol.offered(), timeout);
    ep.http2 = conn.http2;
    ep
}

/// Points `ep` at a URL: its address (resolved), TLS client and `Host`, and its path.
pub fn at_url(
    ep: &mut Endpoint,
    u: &Url,
    trust: &Trust,
    identity: Option<&IdentityFiles>,
) -> Result<(), ClientError> {
    let (net, host) = net_target(u, trust, identity, ep.http2, ep.timeout)?;
    ep.net = Some(net);
    ep.host = host;
    ep.path = u.path.clone();
    Ok(())
}

/// A scenario's remote target as an endpoint: command or URL, replicas, timing header and
/// headers (the per-user credentials and OAuth are the driver's).
pub fn of_remote(ep: &mut Endpoint, r: &Remote) -> Result<(), ClientError> {
    ep.command = r.command.clone();
    ep.timing = r.timing.clone();
    ep.sessions_per_connection = r.sessions_per_connection;
    if let Some(u) = &r.url {
        at_url(ep, u, &r.trust, r.identity.as_ref())?;
    }
    for u in &r.replicas {
        let (net, _) = net_target(u, &r.trust, r.identity.as_ref(), ep.http2, ep.timeout)?;
        ep.replicas.push(net);
    }
    for (name, value) in &r.headers {
        ep.add_header(name, value);
    }
    Ok(())
}

/// A URL's address (resolved), TLS client (ALPN `h2` or `http/1.1`) and `Host` header value.
pub fn net_target(
    u: &Url,
    trust: &Trust,
    identity: Option<&IdentityFiles>,
    http2: bool,
    timeout: Duration,
) -> Result<(NetTarget, String), ClientError> {
    let addr = resolve_addr(u)?;
    let tls = if u.scheme.is_tls() {
        let alpn: &[&[u8]] = if http2 { &[b"h2"] } else { &[b"http/1.1"] };
        Some(
            TlsClient::new(&u.host, trust, identity, alpn).map_err(|e| ClientError::Tls {
                target: u.text.clone(),
                reason: e.to_string(),
            })?,
        )
    } else {
        None
    };
    Ok((
        NetTarget {
            addr,
            tls,
            connect_timeout: timeout,
            source: None,
        },
        host_header(u),
    ))
}

/// The `Host` header of a URL: the port only when it is not the scheme's default.
pub fn host_header(u: &Url) -> String {
    let default_port = if u.scheme.is_tls() { 443 } else { 80 };
    if u.port == default_port {
        u.host.clone()
    } else {
        format!("{}:{}", u.host, u.port)
    }
}

fn resolve_addr(u: &Url) -> Result<SocketAddr, ClientError> {
    let hostport = format!(
        "{}:{}",
        u.host.trim_start_matches('[').trim_end_matches(']'),
        u.port
    );
    let resolve_error = |reason: String| ClientError::Resolve {
        target: u.text.clone(),
        reason: format!("the host name `{}` does not resolve ({reason})", u.host),
    };
    hostport
        .to_socket_addrs()
        .map_err(|e| resolve_error(e.to_string()))?
        .next()
        .ok_or_else(|| resolve_error("no address".into()))
}
