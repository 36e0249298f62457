//! `[target]` (a server or gateway to load) and `[embedded]` (the built-in reference server's
//! options when there is no target). Headers and per-user credentials are `target_headers`'.

use crate::transport::url::parse_url;
use toml::Spanned;

use super::args::expand_env;
use super::check::{duration, key_hint, one_of, opt_within};
use super::plan::{Connection, Credential, Embedded, OAuth, ProtocolChoice, Remote, Scheme, Url};
use super::raw::{RawEmbedded, RawOAuth, RawTarget, RawTls};
use super::target_headers::{credentials, headers};
use super::{ScenarioError, Source};
use crate::protocol::ResponseMode;
use crate::protocol::version::{Revision, UnknownRevision};
use crate::transport::net::Trust;
use crate::transport::sources::Sources;
use crate::transport::{CommandSpec, TransportKind};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A remote target: transport, URL or command, revision, HTTP version, TLS trust, headers.
pub(super) fn target(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    env: Env<'_>,
) -> Result<Remote, ScenarioError> {
    let raw = t.get_ref();
    let urls = urls(src, raw)?;
    let url = urls.first().cloned();
    let transport = transport_of(src, t, url.as_ref())?;
    let command = if transport == TransportKind::Stdio {
        Some(stdio_command(src, t, env)?)
    } else {
        network_url_fits(src, t, transport, url.as_ref())?;
        None
    };
    let (protocol, revisions) = revisions(src, t, transport)?;
    let http2 = match &raw.http {
        Some(h) => http_version(src, h, "target.http", transport)?,
        None => false,
    };
    let sessions_per_connection = sessions_per_connection(src, raw, http2, urls.len())?;
    let (trust, identity) = tls(src, raw, url.as_ref())?;
    let headers = headers(src, &raw.headers, env)?;
    let credentials = credentials(src, raw, env)?;
    stdio_sends_no_headers(src, t, transport, &headers, &credentials)?;
    let timing = timing_header(src, raw, transport)?;
    let replicas = replicas(src, t, transport, urls)?;
    let oauth = target_oauth(src, raw, transport, &credentials, env)?;
    let tool_prefix = tool_prefix(src, raw)?;
    let pids = match &raw.pid {
        None => Vec::new(),
        Some(p) => pids(src, p)?,
    };
    let sources = source_address(src, raw, transport)?;
    let written = raw.url.as_ref().map(|u| u.span());
    let place = src.place(
        written
            .or(raw.command.as_ref().map(|c| c.span()))
            .unwrap_or(t.span()),
    );
    Ok(Remote {
        place,
        pids,
        sources,
        revisions,
        replicas,
        sessions_per_connection,
        identity,
        oauth,
        tool_prefix,
        conn: Connection {
            transport,
            protocol,
            http2,
        },
        url,
        command,
        headers,
        trust,
        timing,
        credentials,
    })
}

/// `target.url`: one URL, or a list of them (replicas).
fn urls(src: &Source<'_>, raw: &RawTarget) -> Result<Vec<Url>, ScenarioError> {
    let Some(u) = &raw.url else {
        return Ok(Vec::new());
    };
    let list = u.get_ref().urls();
    if list.is_empty() {
        return Err(src.error(u.span(), "target.url lists no URL", key_hint("target.url")));
    }
    list.into_iter()
        .map(|s| parse_url(s).map_err(|m| src.error(u.span(), m, key_hint("target.url"))))
        .collect()
}

/// `target.protocol`: the revision to speak (the transport's default when none is named),
/// and, when several are listed, the revisions of mixed clients (virtual user `i` speaking
/// `revisions[i mod n]`; empty otherwise).
fn revisions(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    transport: TransportKind,
) -> Result<(ProtocolChoice, Vec<Revision>), ScenarioError> {
    let raw = t.get_ref();
    let protocols = match &raw.protocol {
        Some(p) => p
            .get_ref()
            .urls()
            .into_iter()
            .map(|one| {
                protocol_choice(
                    src,
                    &Spanned::new(p.span(), one.to_string()),
                    "target.protocol",
                )
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![default_protocol(transport)],
    };
    let protocol = *protocols.first().ok_or_else(|| {
        src.error_at_key(
            t.span(),
            "target.protocol",
            "target.protocol lists no revision",
            None,
        )
    })?;
    if protocols.len() <= 1 {
        return Ok((protocol, Vec::new()));
    }
    let at = raw.protocol.as_ref().map_or(t.span(), |p| p.span());
    let fixed = protocols
        .iter()
        .map(|p| match p {
            ProtocolChoice::Fixed(r) => Ok(*r),
            ProtocolChoice::Auto => Err(src.error(
                at.clone(),
                "a list of revisions names each one: \"auto\" is not one",
                Some("protocol = [\"2025-11-25\", \"2026-07-28\"]".into()),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !raw.credentials.is_empty() || raw.credentials_file.is_some() || raw.oauth.is_some() {
        return Err(src.error(
            at,
            "mixed revisions give each group of users its own row, as credentials do: use one or the other",
            None,
        ));
    }
    Ok((protocol, fixed))
}

/// `[target.tls]` of an https:// or wss:// target: how its certificate is checked, and the
/// client certificate to present.
fn tls(
    src: &Source<'_>,
    raw: &RawTarget,
    url: Option<&Url>,
) -> Result<(Trust, Option<crate::transport::net::IdentityFiles>), ScenarioError> {
    let tls_url = url.is_some_and(|u| u.scheme.is_tls());
    let identity = match &raw.tls {
        Some(tls) if tls_url => identity(src, tls.get_ref())?,
        _ => None,
    };
    let trust = match &raw.tls {
        None => Trust::System,
        Some(tls) if tls_url => trust(src, tls.get_ref())?,
        Some(tls) => {
            return Err(src.error_at_key(
                tls.span(),
                "target.tls",
                "[target.tls] applies to https:// and wss:// targets",
                None,
            ));
        }
    };
    Ok((trust, identity))
}

/// A stdio server takes its credentials from `env`: neither credentials nor headers.
fn stdio_sends_no_headers(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    transport: TransportKind,
    headers: &[(String, String)],
    credentials: &[Credential],
) -> Result<(), ScenarioError> {
    if transport != TransportKind::Stdio {
        return Ok(());
    }
    let raw = t.get_ref();
    if !credentials.is_empty() {
        let at = raw
            .credentials_file
            .as_ref()
            .map(|f| f.span())
            .or(raw.credentials.first().map(|c| c.span()))
            .unwrap_or(t.span());
        return Err(src.error(
            at,
            "credentials are HTTP headers: a stdio server takes its credentials from `env`",
            Some("remove them, or measure the server over HTTP".into()),
        ));
    }
    if !headers.is_empty() {
        return Err(src.error_at_key(
            t.span(),
            "target.headers",
            "stdio targets take credentials from `env`, not headers",
            None,
        ));
    }
    Ok(())
}

/// `timing_header`: the response header carrying the server's own timing (Streamable HTTP).
fn timing_header(
    src: &Source<'_>,
    raw: &RawTarget,
    transport: TransportKind,
) -> Result<Option<crate::transport::TimingHeader>, ScenarioError> {
    match &raw.timing_header {
        None => Ok(None),
        Some(v) if transport != TransportKind::StreamableHttp => Err(src.error(
            v.span(),
            "a timing header is read from each request's HTTP response: only Streamable HTTP has one per request",
            Some("remove timing_header, or measure through a Streamable HTTP endpoint".into()),
        )),
        Some(v) => Ok(Some(crate::transport::TimingHeader::parse(v.get_ref()).map_err(|m| {
            src.error(
                v.span(),
                m,
                Some("e.g. timing_header = \"x-envoy-upstream-service-time\", or \"server-timing:upstream\"".into()),
            )
        })?)),
    }
}

/// Several URLs are replicas that requests are spread over (Streamable HTTP, one scheme);
/// one URL is no replica (empty).
fn replicas(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    transport: TransportKind,
    urls: Vec<Url>,
) -> Result<Vec<Url>, ScenarioError> {
    if urls.len() <= 1 {
        return Ok(Vec::new());
    }
    let at = t.get_ref().url.as_ref().map_or(t.span(), |u| u.span());
    if transport != TransportKind::StreamableHttp {
        return Err(src.error(
            at,
            "several URLs are replicas that each request is spread over: Streamable HTTP only",
            Some("give one URL for this transport".into()),
        ));
    }
    if urls.iter().any(|u| u.scheme != urls[0].scheme) {
        return Err(src.error(at, "the replicas' URLs mix http:// and https://", None));
    }
    Ok(urls)
}

/// `[target.oauth]`, on a Streamable HTTP target whose users are not named by credentials.
fn target_oauth(
    src: &Source<'_>,
    raw: &RawTarget,
    transport: TransportKind,
    credentials: &[Credential],
    env: Env<'_>,
) -> Result<Option<OAuth>, ScenarioError> {
    let Some(o) = &raw.oauth else {
        return Ok(None);
    };
    let parsed = oauth(src, o, env)?;
    if transport != TransportKind::StreamableHttp {
        return Err(src.error_at_key(
            o.span(),
            "target.oauth",
            "OAuth tokens are sent per HTTP request: only Streamable HTTP targets take them",
            Some("remove [target.oauth], or measure through a Streamable HTTP endpoint".into()),
        ));
    }
    if !credentials.is_empty() {
        return Err(src.error_at_key(
            o.span(),
            "target.oauth",
            "[target.oauth] and target.credentials both say who the users are: keep one",
            None,
        ));
    }
    Ok(Some(parsed))
}

/// `tool_prefix`: non-empty, no whitespace.
fn tool_prefix(src: &Source<'_>, raw: &RawTarget) -> Result<Option<String>, ScenarioError> {
    match &raw.tool_prefix {
        None => Ok(None),
        Some(p) if p.get_ref().is_empty() || p.get_ref().contains(char::is_whitespace) => Err(src
            .error(
                p.span(),
                "tool_prefix must be non-empty and hold no whitespace",
                Some(
                    "e.g. tool_prefix = \"upstream__\" for a gateway that lists upstream__echo"
                        .into(),
                ),
            )),
        Some(p) => Ok(Some(p.get_ref().clone())),
    }
}

/// `source_address = "127.0.0.0/28"`: addresses, a list or a CIDR block, of a network target.
fn source_address(
    src: &Source<'_>,
    raw: &RawTarget,
    transport: TransportKind,
) -> Result<Option<Sources>, ScenarioError> {
    let Some(s) = &raw.source_address else {
        return Ok(None);
    };
    if transport == TransportKind::Stdio {
        return Err(src.error(
            s.span(),
            "source_address is where network connections come from; a stdio target has none",
            Some("remove source_address, or give target.url".into()),
        ));
    }
    Sources::parse(s.get_ref()).map(Some).map_err(|e| {
        src.error(
            s.span(),
            format!("source_address {e}"),
            Some("e.g. source_address = \"127.0.0.0/28\" (16 loopback addresses)".into()),
        )
    })
}

/// `pid = 1234` or `pid = [1234, 1240]`: positive integers, each once.
fn pids(src: &Source<'_>, p: &Spanned<toml::Value>) -> Result<Vec<u32>, ScenarioError> {
    let bad = || {
        src.error(
            p.span(),
            "pid must be a process id or a list of them, e.g. pid = 4242 or pid = [4242, 4250]",
            key_hint("target.pid"),
        )
    };
    let values = match p.get_ref() {
        toml::Value::Array(a) if !a.is_empty() => a.iter().collect(),
        toml::Value::Array(_) => return Err(bad()),
        v => vec![v],
    };
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let pid = v
            .as_integer()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(bad)?;
        if out.contains(&pid) {
            return Err(src.error(p.span(), format!("pid {pid} is listed twice"), None));
        }
        out.push(pid);
    }
    Ok(out)
}

/// The transport: as written, else from the URL scheme (ws → WebSocket, http → Streamable
/// HTTP), else stdio when there is a command.
fn transport_of(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    url: Option<&Url>,
) -> Result<TransportKind, ScenarioError> {
    let raw = t.get_ref();
    Ok(match (&raw.transport, url, &raw.command) {
        (Some(tr), _, _) => transport_kind(src, tr, "target.transport")?,
        (None, Some(u), _) if matches!(u.scheme, Scheme::Ws | Scheme::Wss) => {
            TransportKind::WebSocket
        }
        (None, Some(_), _) => TransportKind::StreamableHttp,
        (None, None, Some(_)) => TransportKind::Stdio,
        (None, None, None) => {
            return Err(src.error_at_key(
                t.span(),
                "target.url",
                "[target] needs a url (or a command for stdio)",
                key_hint("target.url"),
            ));
        }
    })
}

/// A stdio target's command, with its environment expanded.
fn stdio_command(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    env: Env<'_>,
) -> Result<CommandSpec, ScenarioError> {
    let raw = t.get_ref();
    if let Some(u) = &raw.url {
        return Err(src.error(
            u.span(),
            "a stdio target has a command, not a url",
            key_hint("target.command"),
        ));
    }
    let c = raw.command.as_ref().ok_or_else(|| {
        src.error_at_key(
            t.span(),
            "target.command",
            "a stdio target needs a command",
            key_hint("target.command"),
        )
    })?;
    let Some((program, args)) = c.get_ref().split_first() else {
        return Err(src.error(c.span(), "the command is empty", key_hint("target.command")));
    };
    let mut envs = Vec::with_capacity(raw.env.len());
    for (k, v) in &raw.env {
        let val = expand_env(v.get_ref(), env).map_err(|e| src.error(v.span(), e.message, None))?;
        envs.push((k.clone(), val));
    }
    Ok(CommandSpec {
        program: program.clone(),
        args: args.to_vec(),
        env: envs,
        cwd: raw.cwd.as_ref().map(|c| c.get_ref().into()),
    })
}

/// A network target has a URL of the transport's kind (ws(s) for WebSocket, http(s) for the
/// others) and no command.
fn network_url_fits(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    transport: TransportKind,
    url: Option<&Url>,
) -> Result<(), ScenarioError> {
    let raw = t.get_ref();
    if let Some(c) = &raw.command {
        return Err(src.error(
            c.span(),
            format!(
                "`command` is for stdio targets; this one is {}",
                transport.name()
            ),
            None,
        ));
    }
    let u = url.ok_or_else(|| {
        src.error_at_key(
            t.span(),
            "target.url",
            format!("a {} target needs a url", transport.name()),
            key_hint("target.url"),
        )
    })?;
    let ws = matches!(u.scheme, Scheme::Ws | Scheme::Wss);
    if ws != (transport == TransportKind::WebSocket) {
        let span = raw.url.as_ref().map_or(t.span(), |u| u.span());
        return Err(src.error(
            span,
            format!(
                "a {} target needs an {} URL",
                transport.name(),
                if ws { "http(s)" } else { "ws(s)" }
            ),
            key_hint("target.url"),
        ));
    }
    Ok(())
}

/// `[target.tls] cert` and `key`: both or neither, each an existing file.
fn identity(
    src: &Source<'_>,
    t: &RawTls,
) -> Result<Option<crate::transport::net::IdentityFiles>, ScenarioError> {
    let file = |v: &Spanned<String>, key: &str| {
        let path = std::path::PathBuf::from(v.get_ref());
        if path.is_file() {
            Ok(path)
        } else {
            Err(src.error(
                v.span(),
                format!("{} does not exist", path.display()),
                key_hint(key),
            ))
        }
    };
    match (&t.cert, &t.key) {
        (None, None) => Ok(None),
        (Some(c), Some(k)) => Ok(Some(crate::transport::net::IdentityFiles {
            cert: file(c, "target.tls.cert")?,
            key: file(k, "target.tls.key")?,
        })),
        (Some(v), None) | (None, Some(v)) => Err(src.error(
            v.span(),
            "a client certificate needs both cert and its key",
            Some("cert = \"client.pem\"\n    key = \"client-key.pem\"".into()),
        )),
    }
}

/// `[target.tls]`: a CA file, or `insecure = true`, or the system roots.
fn trust(src: &Source<'_>, t: &RawTls) -> Result<Trust, ScenarioError> {
    match (&t.ca, t.insecure.as_ref().map(|i| *i.get_ref())) {
        (Some(ca), Some(true)) => Err(src.error(
            ca.span(),
            "choose either a CA file or insecure = true",
            None,
        )),
        (Some(ca), _) => {
            let path = std::path::PathBuf::from(ca.get_ref());
            if !path.is_file() {
                return Err(src.error(
                    ca.span(),
                    format!("CA file {} does not exist", path.display()),
                    key_hint("target.tls.ca"),
                ));
            }
            Ok(Trust::CaFile(path))
        }
        (None, Some(true)) => Ok(Trust::Insecure),
        (None, _) => Ok(Trust::System),
    }
}

/// `[target.oauth]`: the token endpoint and the client's credentials (from the environment).
fn oauth(src: &Source<'_>, o: &Spanned<RawOAuth>, env: Env<'_>) -> Result<OAuth, ScenarioError> {
    let raw = o.get_ref();
    let required = |v: &Option<Spanned<String>>, key: &str, example: &str| {
        let v = v.as_ref().ok_or_else(|| {
            src.error_at_key(
                o.span(),
                &format!("target.oauth.{key}"),
                format!("[target.oauth] needs {key}"),
                Some(format!("{key} = {example}")),
            )
        })?;
        let text = expand_env(v.get_ref(), env).map_err(|e| {
            src.error(
                v.span(),
                e.message,
                Some(
                    "export the variable before running, e.g. OAUTH_CLIENT_SECRET=… mcpbench run …"
                        .into(),
                ),
            )
        })?;
        Ok::<_, ScenarioError>((text, v.span()))
    };
    let (url, span) = required(
        &raw.token_url,
        "token_url",
        "\"https://auth.example.com/oauth/token\"",
    )?;
    let token_url = parse_url(&url).map_err(|m| src.error(span.clone(), m, None))?;
    if !matches!(token_url.scheme, Scheme::Http | Scheme::Https) {
        return Err(src.error(span, "token_url must be an http:// or https:// URL", None));
    }
    let (client_id, _) = required(&raw.client_id, "client_id", "\"${OAUTH_CLIENT_ID}\"")?;
    let (client_secret, _) = required(
        &raw.client_secret,
        "client_secret",
        "\"${OAUTH_CLIENT_SECRET}\"",
    )?;
    let optional = |v: &Option<Spanned<String>>| -> Result<Option<String>, ScenarioError> {
        v.as_ref()
            .map(|v| expand_env(v.get_ref(), env).map_err(|e| src.error(v.span(), e.message, None)))
            .transpose()
    };
    Ok(OAuth {
        token_url,
        client_id,
        client_secret,
        scope: optional(&raw.scope)?,
        resource: optional(&raw.resource)?,
        tenant: raw.tenant.as_ref().map(|t| t.get_ref().clone()),
        refresh_before: match &raw.refresh_before {
            Some(d) => duration(src, d, "target.oauth.refresh_before")?,
            None => std::time::Duration::from_secs(10),
        },
    })
}

/// `[embedded]`: transport, revision and HTTP version of the client, response mode, catalog
/// and page size of the server, knobs of its mock backend.
pub(super) fn embedded(
    src: &Source<'_>,
    e: Option<&Spanned<RawEmbedded>>,
) -> Result<Embedded, ScenarioError> {
    let mut out = Embedded::default();
    let Some(e) = e else { return Ok(out) };
    let e = e.get_ref();
    if let Some(t) = &e.transport {
        out.conn.transport = transport_kind(src, t, "embedded.transport")?;
        out.conn.protocol = default_protocol(out.conn.transport);
    }
    if let Some(p) = &e.protocol {
        out.conn.protocol = protocol_choice(src, p, "embedded.protocol")?;
    }
    if let Some(h) = &e.http {
        out.conn.http2 = http_version(src, h, "embedded.http", out.conn.transport)?;
    }
    if let Some(r) = &e.response {
        let options = [("json", ResponseMode::Json), ("sse", ResponseMode::Sse)];
        out.response = one_of(src, r, "response mode", "embedded.response", &options)?;
    }
    if let Some(c) = opt_within(src, &e.catalog, 0, Some(100_000), "embedded.catalog")? {
        out.catalog = c as usize;
    }
    if let Some(p) = opt_within(src, &e.page_size, 1, None, "embedded.page_size")? {
        out.page_size = p as usize;
    }
    if let Some(l) = &e.backend_latency {
        let latency = l
            .get_ref()
            .parse()
            .map_err(|m: mcpbench_knobs::KnobError| {
                src.error(
                    l.span(),
                    m.to_string(),
                    key_hint("embedded.backend_latency"),
                )
            })?;
        out.backend.latency = Some(latency);
    }
    out.backend.error_rate = opt_within(
        src,
        &e.backend_error_rate,
        0.0,
        Some(1.0),
        "embedded.backend_error_rate",
    )?;
    out.backend.payload = e.backend_payload.as_ref().map(|p| *p.get_ref() as usize);
    Ok(out)
}

fn transport_kind(
    src: &Source<'_>,
    t: &Spanned<String>,
    key: &str,
) -> Result<TransportKind, ScenarioError> {
    use TransportKind::*;
    let options = [
        ("streamable-http", StreamableHttp),
        ("http", StreamableHttp),
        ("sse", LegacySse),
        ("http+sse", LegacySse),
        ("websocket", WebSocket),
        ("ws", WebSocket),
        ("stdio", Stdio),
    ];
    one_of(src, t, "transport", key, &options)
}

fn protocol_choice(
    src: &Source<'_>,
    p: &Spanned<String>,
    key: &str,
) -> Result<ProtocolChoice, ScenarioError> {
    if p.get_ref() == "auto" {
        return Ok(ProtocolChoice::Auto);
    }
    let r: Revision = p
        .get_ref()
        .parse()
        .map_err(|e: UnknownRevision| src.error(p.span(), e.to_string(), key_hint(key)))?;
    Ok(ProtocolChoice::Fixed(r))
}

fn http_version(
    src: &Source<'_>,
    h: &Spanned<String>,
    key: &str,
    transport: TransportKind,
) -> Result<bool, ScenarioError> {
    let options = [("1.1", false), ("1", false), ("2", true), ("2.0", true)];
    let h2 = one_of(src, h, "HTTP version", key, &options)?;
    if h2 && transport != TransportKind::StreamableHttp {
        return Err(src.error(
            h.span(),
            format!(
                "HTTP/2 applies to the streamable-http transport, not {}",
                transport.name()
            ),
            None,
        ));
    }
    Ok(h2)
}

/// `target.sessions_per_connection`: how many sessions of a worker share one HTTP/2
/// connection (1 when not written).
fn sessions_per_connection(
    src: &Source<'_>,
    raw: &RawTarget,
    http2: bool,
    urls: usize,
) -> Result<usize, ScenarioError> {
    let Some(n) = &raw.sessions_per_connection else {
        return Ok(1);
    };
    let key = "target.sessions_per_connection";
    let why = match *n.get_ref() {
        0 => Some("target.sessions_per_connection must be at least 1"),
        1 => None,
        _ if !http2 => {
            Some("target.sessions_per_connection shares HTTP/2 connections: it needs http = \"2\"")
        }
        _ if urls > 1 => Some(
            "target.sessions_per_connection takes one URL (replicas each have their own \
             connections)",
        ),
        _ => None,
    };
    match why {
        Some(m) => Err(src.error(n.span(), m, key_hint(key))),
        None => Ok(*n.get_ref() as usize),
    }
}

/// The revision a transport offers when the scenario names none.
fn default_protocol(t: TransportKind) -> ProtocolChoice {
    match t {
        TransportKind::LegacySse => ProtocolChoice::Fixed(Revision::V2024_11_05),
        _ => ProtocolChoice::Fixed(Revision::LATEST_HANDSHAKE),
    }
}
