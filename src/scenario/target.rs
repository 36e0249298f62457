//! `[target]` (a server or gateway to load) and `[embedded]` (the built-in reference server's
//! options when there is no target).

use std::collections::BTreeMap;

use toml::Spanned;

use super::args::expand_env;
use super::check::{duration, key_hint, one_of, opt_within};
use super::plan::{Connection, Credential, Embedded, OAuth, ProtocolChoice, Remote, Scheme, Url};
use super::raw::{RawEmbedded, RawOAuth, RawTarget, RawTls};
use super::{ScenarioError, Source};
use crate::protocol::ResponseMode;
use crate::protocol::version::{Revision, UnknownRevision};
use crate::transport::net::Trust;
use crate::transport::{
    CommandSpec, RESERVED_HEADERS, TransportKind, header_name_ok, header_value_ok,
};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A remote target: transport, URL or command, revision, HTTP version, TLS trust, headers.
pub(super) fn target(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    env: Env<'_>,
) -> Result<Remote, ScenarioError> {
    let raw = t.get_ref();
    let urls = match &raw.url {
        Some(u) => {
            let list = u.get_ref().urls();
            if list.is_empty() {
                return Err(src.error(u.span(), "target.url lists no URL", key_hint("target.url")));
            }
            list.into_iter()
                .map(|s| parse_url(s).map_err(|m| src.error(u.span(), m, key_hint("target.url"))))
                .collect::<Result<Vec<_>, _>>()?
        }
        None => Vec::new(),
    };
    let url = urls.first().cloned();
    let transport = transport_of(src, t, url.as_ref())?;
    let command = if transport == TransportKind::Stdio {
        Some(stdio_command(src, t, env)?)
    } else {
        network_url_fits(src, t, transport, url.as_ref())?;
        None
    };
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
    // Several: mixed clients, virtual user i speaking revisions[i mod n].
    let revisions: Vec<Revision> = if protocols.len() > 1 {
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
        fixed
    } else {
        Vec::new()
    };
    let http2 = match &raw.http {
        Some(h) => http_version(src, h, "target.http", transport)?,
        None => false,
    };
    let tls_url = url.as_ref().is_some_and(|u| u.scheme.is_tls());
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
    let headers = headers(src, &raw.headers, env)?;
    let credentials = credentials(src, raw, env)?;
    if transport == TransportKind::Stdio && !credentials.is_empty() {
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
    if transport == TransportKind::Stdio && !headers.is_empty() {
        return Err(src.error_at_key(
            t.span(),
            "target.headers",
            "stdio targets take credentials from `env`, not headers",
            None,
        ));
    }
    let timing = match &raw.timing_header {
        None => None,
        Some(v) if transport != TransportKind::StreamableHttp => {
            return Err(src.error(
                v.span(),
                "a timing header is read from each request's HTTP response: only Streamable HTTP has one per request",
                Some("remove timing_header, or measure through a Streamable HTTP endpoint".into()),
            ));
        }
        Some(v) => Some(crate::transport::TimingHeader::parse(v.get_ref()).map_err(|m| {
            src.error(
                v.span(),
                m,
                Some("e.g. timing_header = \"x-envoy-upstream-service-time\", or \"server-timing:upstream\"".into()),
            )
        })?),
    };
    if urls.len() > 1 {
        let at = raw.url.as_ref().map_or(t.span(), |u| u.span());
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
    }
    let replicas = if urls.len() > 1 { urls } else { Vec::new() };
    let oauth = raw.oauth.as_ref().map(|o| oauth(src, o, env)).transpose()?;
    if let Some(o) = &raw.oauth {
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
    }
    let tool_prefix = match &raw.tool_prefix {
        None => None,
        Some(p) if p.get_ref().is_empty() || p.get_ref().contains(char::is_whitespace) => {
            return Err(src.error(
                p.span(),
                "tool_prefix must be non-empty and hold no whitespace",
                Some(
                    "e.g. tool_prefix = \"upstream__\" for a gateway that lists upstream__echo"
                        .into(),
                ),
            ));
        }
        Some(p) => Some(p.get_ref().clone()),
    };
    let pids = match &raw.pid {
        None => Vec::new(),
        Some(p) => pids(src, p)?,
    };
    Ok(Remote {
        pids,
        revisions,
        replicas,
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

/// Extra headers: valid names, none that mcpbench sets itself, values expanded from the
/// environment and free of line breaks.
fn headers(
    src: &Source<'_>,
    raw: &BTreeMap<String, Spanned<String>>,
    env: Env<'_>,
) -> Result<Vec<(String, String)>, ScenarioError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        if !header_name_ok(name) {
            return Err(src.error(
                value.span(),
                format!("`{name}` is not a valid header name"),
                None,
            ));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(src.error(
                value.span(),
                format!("header `{name}` is set by mcpbench itself"),
                Some("remove it; mcpbench sends it as the protocol requires".into()),
            ));
        }
        let v = expand_env(value.get_ref(), env).map_err(|e| {
            src.error(
                value.span(),
                e.message,
                Some("export the variable before running, e.g. MCP_TOKEN=… mcpbench run …".into()),
            )
        })?;
        if !header_value_ok(&v) {
            return Err(src.error(
                value.span(),
                format!(
                    "the value of header `{name}` contains a line break or another control character"
                ),
                Some("header values are one line of printable text (tabs allowed)".into()),
            ));
        }
        out.push((name.clone(), v));
    }
    Ok(out)
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

/// `credentials` (inline tables) or `credentials_file` (JSON Lines, relative to the scenario):
/// a tenant and a bearer `token` or `headers` each, values expanded from the environment.
fn credentials(
    src: &Source<'_>,
    raw: &RawTarget,
    env: Env<'_>,
) -> Result<Vec<Credential>, ScenarioError> {
    let mut out = Vec::new();
    for c in &raw.credentials {
        let rc = c.get_ref();
        let tenant = rc.tenant.as_ref().ok_or_else(|| {
            src.error(
                c.span(),
                "every credential names its tenant",
                Some("tenant = \"acme\"".into()),
            )
        })?;
        let mut headers = headers(src, &rc.headers, env)?;
        if let Some(token) = &rc.token {
            let mut one = BTreeMap::new();
            one.insert(
                "Authorization".to_string(),
                Spanned::new(token.span(), format!("Bearer {}", token.get_ref())),
            );
            headers.extend(self::headers(src, &one, env)?);
        }
        if headers.is_empty() {
            return Err(src.error(
                c.span(),
                "a credential needs a token or headers",
                Some(
                    "token = \"${ACME_TOKEN}\", or headers = { \"X-Api-Key\" = \"${ACME_KEY}\" }"
                        .into(),
                ),
            ));
        }
        out.push(Credential {
            tenant: tenant.get_ref().clone(),
            headers,
        });
    }
    if let Some(f) = &raw.credentials_file {
        if !raw.credentials.is_empty() {
            return Err(src.error(
                f.span(),
                "credentials inline and from a file: give one or the other",
                None,
            ));
        }
        let base = std::path::Path::new(src.name)
            .parent()
            .unwrap_or(std::path::Path::new("."));
        let path = base.join(f.get_ref());
        let bad = |m: String| {
            src.error(f.span(), m, Some("one JSON object per line: {\"tenant\": \"acme\", \"token\": \"…\"} or {\"tenant\": \"acme\", \"headers\": {\"X-Api-Key\": \"…\"}}".into()))
        };
        let text =
            std::fs::read_to_string(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            // The line's contents are secrets: errors name the line, never its text.
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                bad(format!(
                    "{} line {}: not JSON (at column {})",
                    path.display(),
                    i + 1,
                    e.column()
                ))
            })?;
            let tenant = v["tenant"]
                .as_str()
                .ok_or_else(|| bad(format!("{} line {}: no \"tenant\"", path.display(), i + 1)))?;
            let mut headers = Vec::new();
            if let Some(t) = v["token"].as_str() {
                headers.push(("Authorization".to_string(), format!("Bearer {t}")));
            }
            if let Some(h) = v["headers"].as_object() {
                for (k, val) in h {
                    let val = val.as_str().ok_or_else(|| {
                        bad(format!(
                            "{} line {}: header {k} is not a string",
                            path.display(),
                            i + 1
                        ))
                    })?;
                    headers.push((k.clone(), val.to_string()));
                }
            }
            let clean = headers.iter().all(|(k, v)| {
                header_name_ok(k)
                    && !RESERVED_HEADERS.contains(&k.to_ascii_lowercase().as_str())
                    && header_value_ok(v)
            });
            if headers.is_empty() || !clean {
                return Err(bad(format!(
                    "{} line {}: a token or headers (no reserved names, no line breaks) are needed",
                    path.display(),
                    i + 1
                )));
            }
            out.push(Credential {
                tenant: tenant.to_string(),
                headers,
            });
        }
        if out.is_empty() {
            return Err(bad(format!("{}: no credentials in it", path.display())));
        }
    }
    Ok(out)
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

/// The revision a transport offers when the scenario names none.
fn default_protocol(t: TransportKind) -> ProtocolChoice {
    match t {
        TransportKind::LegacySse => ProtocolChoice::Fixed(Revision::V2024_11_05),
        _ => ProtocolChoice::Fixed(Revision::LATEST_HANDSHAKE),
    }
}

/// Splits `scheme://host:port/path` into its parts (http, https, ws, wss).
pub fn parse_url(url: &str) -> Result<Url, String> {
    let schemes = [
        ("http://", Scheme::Http),
        ("https://", Scheme::Https),
        ("ws://", Scheme::Ws),
        ("wss://", Scheme::Wss),
    ];
    let Some((scheme, rest)) = schemes
        .iter()
        .find_map(|(prefix, s)| url.strip_prefix(prefix).map(|r| (*s, r)))
    else {
        return Err(format!(
            "`{url}` is not an http://, https://, ws:// or wss:// URL"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(
            "credentials in the URL are not allowed; use a header (e.g. Authorization)".into(),
        );
    }
    let (host, port) = if let Some(h) = authority.strip_prefix('[') {
        let end = h.find(']').ok_or("unclosed [ in the host")?;
        let port = h[end + 1..].strip_prefix(':');
        (format!("[{}]", &h[..end]), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("`{url}` has no host"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("`{p}` is not a port number"))?,
        None if scheme.is_tls() => 443,
        None => 80,
    };
    Ok(Url {
        text: url.to_string(),
        scheme,
        host,
        port,
        path: path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::refusal;
    use super::{Scheme, parse_url};

    #[test]
    fn urls_parse() {
        let u = parse_url("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str(), u.scheme),
            ("127.0.0.1", 8080, "/mcp", Scheme::Http)
        );
        assert_eq!(parse_url("https://localhost").unwrap().port, 443);
        assert_eq!(parse_url("wss://h/ws").unwrap().scheme, Scheme::Wss);
        let u = parse_url("http://[::1]:9/x?y=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("[::1]", 9, "/x?y=1")
        );
        assert!(parse_url("http://u:p@h/").is_err());
        assert!(parse_url("http://h:99999/").is_err());
        assert!(parse_url("ftp://h/").is_err());
    }

    /// A header value with a line break or another control character would let the value
    /// write a header (or garble a log line) of its own: refused, named by key and line.
    #[test]
    fn header_values_with_control_characters_are_refused() {
        for value in [
            r"a\r\nX-Injected: 1",
            r"a\nb",
            r"esc\u001b[31m",
            r"nul\u0000",
            r"del\u007f",
        ] {
            let text = format!(
                "[target]\nurl = \"http://localhost:8080/mcp\"\nheaders = {{ X-Key = \"{value}\" }}\n[[workload]]\nmethod = \"tools/list\"\n"
            );
            let d = refusal(&text);
            assert_eq!(d.key, "target.headers.X-Key", "{value}: {d}");
            assert_eq!(d.line, 3, "{value}: {d}");
            assert!(d.message.contains("control character"), "{value}: {d}");
        }
    }
}
