//! Why a target could not be reached, by the actual error rather than every possible one:
//! nothing listens (refused), no answer (timeout), TLS (a plain HTTP server, a certificate not
//! trusted), a host name that does not resolve, a command that is not found, exits at once or
//! says nothing. Learned on the slow path of a failed preflight, by connecting (or spawning)
//! once more and asking the session what the child said.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use mcpbench_knobs::format_duration;

use super::failure::PreflightError;
use crate::metrics::outcome::Outcome;
use crate::transport::net::{self, ConnectError};
use crate::transport::{CommandSpec, Endpoint};

/// How long the second connection may take after the first timed out (it already waited).
const RETRY: Duration = Duration::from_secs(2);

/// What to do about a certificate the client does not trust.
const TRUST: &str = "if a private CA signed it, give that CA's PEM file as `[target.tls] ca = \
                     \"ca.pem\"` (a gateway: `--upstream-ca`); for a test server only, \
                     `[target.tls] insecure = true`";

/// Why a network connection failed (`outcome` `connect` or `timeout`), by connecting once
/// more; `None` when it connects now and nothing more is known.
pub async fn network(ep: &Endpoint, outcome: Outcome) -> Option<PreflightError> {
    let mut target = ep.net.clone()?;
    let timed_out = outcome == Outcome::Timeout;
    if timed_out {
        target.connect_timeout = target.connect_timeout.min(RETRY);
    }
    match net::connect(&target).await {
        Ok(_) if timed_out => Some(PreflightError::Open {
            why: format!(
                "the server accepted the connection but sent no answer within {}",
                format_duration(ep.timeout)
            ),
            hint: Some(
                "is it an MCP server, and not overloaded? (`load.timeout` is how long an \
                 answer may take)"
                    .into(),
            ),
        }),
        Ok(_) => None,
        Err(e) => Some(cause(&e, ep)),
    }
}

/// The one likely cause of a failed connection, and what to check.
pub fn cause(e: &ConnectError, ep: &Endpoint) -> PreflightError {
    let (why, hint) = match e {
        ConnectError::Tcp { addr, source } if source.kind() == ErrorKind::ConnectionRefused => (
            format!("nothing listens on {addr} (connection refused)"),
            "is the server started? is the port right?".to_string(),
        ),
        ConnectError::Tcp { addr, source } => (
            format!("cannot reach {addr}: {source}"),
            "is the host right? is this machine on its network (VPN, proxy)?".into(),
        ),
        ConnectError::Timeout { addr } => (
            format!(
                "no answer from {addr} within {}",
                format_duration(ep.timeout)
            ),
            "a firewall dropping the connection, or the wrong host or port?".into(),
        ),
        ConnectError::Tls { addr, source } => tls(*addr, source, &ep.host),
    };
    PreflightError::Unreachable {
        why,
        hint: Some(hint),
    }
}

/// Why a TLS handshake failed: no TLS there, a certificate not trusted or not for this
/// host, a server that wants a client certificate.
fn tls(addr: SocketAddr, source: &std::io::Error, host: &str) -> (String, String) {
    use rustls::CertificateError as C;
    let plain = || {
        (
            format!(
                "the TLS handshake with {addr} failed: the server does not speak TLS there ({source})"
            ),
            "does it serve plain HTTP? then the URL starts with http:// (or ws://)".to_string(),
        )
    };
    let Some(e) = source
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    else {
        return if source.kind() == ErrorKind::UnexpectedEof {
            plain()
        } else {
            (
                format!("the TLS handshake with {addr} failed: {source}"),
                TRUST.into(),
            )
        };
    };
    match e {
        rustls::Error::InvalidMessage(_) => plain(),
        rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        ) => (
            format!("the server's certificate is not valid for {host} ({e})"),
            "connect by a name the certificate names (or have one issued for this name)".into(),
        ),
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => (
            format!("the server's certificate has expired ({e})"),
            "renew it".into(),
        ),
        rustls::Error::InvalidCertificate(_) => (
            format!("the server's certificate is not trusted ({e})"),
            TRUST.into(),
        ),
        rustls::Error::AlertReceived(_) => (
            format!("the server ended the TLS handshake ({e})"),
            "does it require a client certificate? give one as `[target.tls] cert` and `key`"
                .into(),
        ),
        _ => (
            format!("the TLS handshake with {addr} failed: {e}"),
            TRUST.into(),
        ),
    }
}

/// Why a stdio server gave no session: its command not found or not executable (`outcome`
/// `connect`), ended before answering (`io`, with what it said aside), or silent on its
/// standard output (`timeout`). `None` when none of these.
pub fn stdio(
    spec: &CommandSpec,
    outcome: Outcome,
    aside: Option<String>,
    timeout: Duration,
) -> Option<PreflightError> {
    let shown = std::iter::once(&spec.program)
        .chain(&spec.args)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let said = aside.map_or(String::new(), |a| format!("; {a}"));
    let by_hand = "run it by hand: it must serve MCP on its standard input and output (one JSON \
                   message per line)";
    match outcome {
        Outcome::Connect => not_started(spec),
        Outcome::Io => Some(PreflightError::Open {
            why: format!("the command `{shown}` ended before answering{said}"),
            hint: Some(by_hand.into()),
        }),
        Outcome::Timeout => Some(PreflightError::Open {
            why: format!(
                "the command `{shown}` wrote no answer on its standard output within {}{said}",
                format_duration(timeout)
            ),
            hint: Some(format!(
                "does it serve MCP on stdio (not over HTTP)? {by_hand}"
            )),
        }),
        _ => None,
    }
}

/// Why a command did not start, by spawning it once more (`None` when it starts now).
fn not_started(spec: &CommandSpec) -> Option<PreflightError> {
    let program = &spec.program;
    let e = crate::transport::stdio_client::command(spec)
        .spawn()
        .err()?;
    let from = spec
        .cwd
        .as_ref()
        .map_or("the current directory".into(), |d| d.display().to_string());
    let (why, hint) = match e.kind() {
        ErrorKind::NotFound if program.contains('/') => (
            format!("the command `{program}` does not exist"),
            format!("is the path right? a relative one starts from {from}"),
        ),
        ErrorKind::NotFound => (
            format!("the command `{program}` is not found on PATH"),
            "is it installed? give its full path, or its interpreter and script: command = \
             [\"python3\", \"server.py\"]"
                .into(),
        ),
        ErrorKind::PermissionDenied => (
            format!("the command `{program}` cannot be run (permission denied)"),
            format!(
                "make it executable (`chmod +x`), or name its interpreter first: command = \
                 [\"python3\", \"{program}\"]"
            ),
        ),
        _ => (
            format!("the command `{program}` cannot be started: {e}"),
            "run it by hand to see why".into(),
        ),
    };
    Some(PreflightError::Unreachable {
        why,
        hint: Some(hint),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::endpoint::blank;
    use crate::protocol::version::Revision;
    use crate::transport::TransportKind;

    fn said(e: ConnectError) -> String {
        let ep = blank(
            TransportKind::StreamableHttp,
            Revision::LATEST_HANDSHAKE,
            Duration::from_secs(5),
        );
        cause(&e, &ep).to_string()
    }

    #[test]
    fn each_connection_failure_has_its_one_cause() {
        let addr: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let timed_out = said(ConnectError::Timeout { addr });
        assert_eq!(
            timed_out,
            "no answer from 10.0.0.1:443 within 5s\n  hint: a firewall dropping the \
             connection, or the wrong host or port?"
        );
        let unreachable = said(ConnectError::Tcp {
            addr,
            source: std::io::Error::from(ErrorKind::NetworkUnreachable),
        });
        assert!(
            unreachable.starts_with("cannot reach 10.0.0.1:443: ")
                && unreachable.contains("hint: is the host right?"),
            "{unreachable}"
        );
        let eof = said(ConnectError::Tls {
            addr,
            source: std::io::Error::from(ErrorKind::UnexpectedEof),
        });
        assert!(eof.contains("the server does not speak TLS there"), "{eof}");
    }
}
