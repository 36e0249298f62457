//! A network target's URL: its scheme (http, https, ws, wss), host, port and path, parsed
//! once ([`parse_url`]); credentials in it are refused (headers carry them).

/// URL schemes of network targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
    Ws,
    Wss,
}

impl Scheme {
    pub fn is_tls(self) -> bool {
        matches!(self, Scheme::Https | Scheme::Wss)
    }
}

/// A parsed target URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// As written (for reports; URLs never carry secrets — headers do).
    pub text: String,
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Path and query.
    pub path: String,
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
}
