//! Tenants of a gateway: bearer token → tenant, the tools each tenant may list and call, and
//! per-tenant rate limits (token buckets). Loaded from a policy file (`mcpbench serve --policy`):
//!
//! ```toml
//! anonymous = "public"            # requests without a token are this tenant (else 401)
//!
//! [[tenant]]
//! name = "alpha"
//! tokens = ["alpha-token-1"]      # its bearer tokens (secrets: never logged)
//! certs = ["alpha-client"]        # client certificates (mutual TLS) by subject CN or DNS name
//! tools = ["ref__echo", "ref__get-*"]  # globs (`*`) over the names tools/list shows; absent: all
//! rate = 50                       # tools/call per second; absent: unlimited
//! burst = 10                      # bucket size (default: one second's worth, at least 1)
//! sessions = 1000                 # sessions open at once; absent: an equal share of the server's
//! ```
//!
//! The catalog check (every pattern matches some tool) happens when the server builds its
//! registry, since only then are the upstreams' tools known.
//!
//! Tokens are kept only as SHA-256 digests, and a presented token is found by its digest: no
//! comparison ever runs over a real token's bytes, so how long a check takes says nothing about
//! how much of a token a guess got right (a constant-time check), and a dump of the process
//! holds no token. Names (tenants, certificates, tool patterns) are printable text: a control
//! character (CR, LF, ESC…) in one is refused, so none can forge an audit line or a header.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// Why a policy file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    anonymous: Option<String>,
    #[serde(default)]
    tenant: Vec<RawTenant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: String,
    #[serde(default)]
    tokens: Vec<String>,
    #[serde(default)]
    certs: Vec<String>,
    tools: Option<Vec<String>>,
    rate: Option<f64>,
    burst: Option<f64>,
    sessions: Option<usize>,
}

/// One tenant's rules.
#[derive(Debug)]
pub struct Tenant {
    pub name: String,
    /// Tool-name globs; `None` allows every tool.
    pub tools: Option<Vec<String>>,
    /// `tools/call` rate limit: one bucket for the tenant, however many sessions it opens.
    pub bucket: Option<Bucket>,
    /// Sessions the tenant may have open at once (`None`: an equal share of the server's cap).
    pub max_sessions: Option<usize>,
    /// Sessions it has open (every transport), counted by [`Seat`]s.
    open: Arc<AtomicUsize>,
}

impl Tenant {
    /// Whether the tenant may list and call `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|globs| globs.iter().any(|g| glob(g, tool)))
    }
}

/// The tenants, and how a request is mapped to one.
#[derive(Debug)]
pub struct Policy {
    pub tenants: Vec<Tenant>,
    /// SHA-256 of each token → its tenant (see the module doc).
    tokens: HashMap<Digest, u16>,
    /// Client certificate names (subject CN, DNS names) → tenant.
    certs: HashMap<String, u16>,
    anonymous: Option<u16>,
}

/// A token's SHA-256 digest.
type Digest = [u8; 32];

fn digest(token: &[u8]) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Whether `s` holds a control character (CR, LF, NUL, ESC, DEL…): refused in every name.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// A session a tenant holds open: counted against its cap until dropped.
#[derive(Debug)]
pub struct Seat {
    open: Arc<AtomicUsize>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A tenant is at its session cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtCap {
    /// The cap it is at.
    pub max: usize,
}

/// Who sent a request, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    Tenant(u16),
    /// No credentials and no anonymous tenant.
    Missing,
    /// A token no tenant has.
    Unknown,
}

impl Policy {
    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Policy::parse(&text).map_err(|message| PolicyError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parses a policy (TOML); errors name the line or the tenant and say what to write.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| e.to_string())?;
        if raw.tenant.is_empty() {
            return Err("no [[tenant]]: add one, e.g.\n    [[tenant]]\n    name = \"alpha\"\n    tokens = [\"…\"]".into());
        }
        let mut tenants = Vec::new();
        let mut tokens = HashMap::new();
        let mut certs = HashMap::new();
        for (i, t) in raw.tenant.into_iter().enumerate() {
            let name = t.name.trim().to_string();
            if has_control(&name) {
                return Err(format!(
                    "tenant #{}: its name holds a control character (CR, LF, tab…); names are printable text",
                    i + 1
                ));
            }
            if name.is_empty() || tenants.iter().any(|x: &Tenant| x.name == name) {
                return Err(format!(
                    "tenant #{}: name `{name}` is empty or used twice; give each [[tenant]] its own name",
                    i + 1
                ));
            }
            let index = u16::try_from(i).map_err(|_| "more than 65535 tenants".to_string())?;
            for token in t.tokens {
                if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(format!(
                        "tenant `{name}`: a token is empty or holds whitespace (the token itself is not shown)"
                    ));
                }
                if tokens.insert(digest(token.as_bytes()), index).is_some() {
                    return Err(format!(
                        "tenant `{name}`: a token already belongs to another tenant (the token itself is not shown); tokens must be unique"
                    ));
                }
            }
            for c in t.certs {
                if c.trim().is_empty() || has_control(&c) {
                    return Err(format!(
                        "tenant `{name}`: a certificate name is empty or holds a control character"
                    ));
                }
                if let Some(other) = certs.insert(c.clone(), index) {
                    return Err(format!(
                        "tenant `{name}`: certificate name `{c}` already belongs to tenant #{}",
                        other + 1
                    ));
                }
            }
            let bucket = match (t.rate, t.burst) {
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(format!(
                        "tenant `{name}`: burst without rate; add rate = <calls per second>"
                    ));
                }
                (Some(rate), burst) => {
                    if !(rate.is_finite() && rate > 0.0) {
                        return Err(format!(
                            "tenant `{name}`: rate = {rate} must be a positive number of tools/call per second"
                        ));
                    }
                    let burst = burst.unwrap_or(rate.max(1.0));
                    if !(burst.is_finite() && burst >= 1.0) {
                        return Err(format!(
                            "tenant `{name}`: burst = {burst} must be at least 1"
                        ));
                    }
                    Some(Bucket::new(rate, burst))
                }
            };
            if let Some(g) = t.tools.iter().flatten().find(|g| g.trim().is_empty()) {
                return Err(format!(
                    "tenant `{name}`: tool pattern `{g}` is empty; write a tool name or a glob like `ref__*`"
                ));
            }
            if let Some(g) = t
                .tools
                .iter()
                .flatten()
                .find(|g| has_control(g) || g.contains(' '))
            {
                return Err(format!(
                    "tenant `{name}`: tool pattern {g:?} holds a space or a control character; tool names have neither"
                ));
            }
            if t.sessions == Some(0) {
                return Err(format!(
                    "tenant `{name}`: sessions = 0 would refuse every session; give at least 1, or leave it out for an equal share"
                ));
            }
            tenants.push(Tenant {
                name,
                tools: t.tools,
                bucket,
                max_sessions: t.sessions,
                open: Arc::new(AtomicUsize::new(0)),
            });
        }
        let anonymous = match raw.anonymous {
            None => None,
            Some(a) => Some(
                tenants
                    .iter()
                    .position(|t| t.name == a)
                    .map(|i| i as u16)
                    .ok_or_else(|| {
                        format!("anonymous = \"{a}\" names no [[tenant]]; name one of them")
                    })?,
            ),
        };
        Ok(Policy {
            tenants,
            tokens,
            certs,
            anonymous,
        })
    }

    /// The tenant of a request's `Authorization` header value (if any).
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Auth {
        self.authenticate_with(authorization, &[])
    }

    /// The tenant of a request: its bearer token if it sends one, else its connection's
    /// client certificate (by any of its names), else the anonymous tenant. The token is found
    /// by its digest (see the module doc); the scheme is case-insensitive (RFC 7235).
    pub fn authenticate_with(&self, authorization: Option<&[u8]>, cert_names: &[String]) -> Auth {
        let Some(value) = authorization else {
            if let Some(&t) = cert_names.iter().find_map(|n| self.certs.get(n)) {
                return Auth::Tenant(t);
            }
            return self.anonymous.map_or(Auth::Missing, Auth::Tenant);
        };
        let token = match value.split_at_checked(7) {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest.trim_ascii(),
            _ => return Auth::Unknown,
        };
        match self.tokens.get(&digest(token)) {
            Some(&i) => Auth::Tenant(i),
            None => Auth::Unknown,
        }
    }

    /// A session for `tenant`, counted against its cap (`sessions`, else `fair` — the
    /// server's cap shared equally), or the cap it is at.
    pub fn seat(&self, tenant: u16, server_max: usize) -> Result<Seat, AtCap> {
        let Some(t) = self.tenant(tenant) else {
            return Err(AtCap { max: 0 });
        };
        let max = t
            .max_sessions
            .unwrap_or_else(|| (server_max / self.tenants.len().max(1)).max(1));
        if t.open.fetch_add(1, Ordering::Relaxed) >= max {
            t.open.fetch_sub(1, Ordering::Relaxed);
            return Err(AtCap { max });
        }
        Ok(Seat {
            open: t.open.clone(),
        })
    }

    /// Sessions `tenant` has open now.
    pub fn open_sessions(&self, tenant: u16) -> usize {
        self.tenant(tenant)
            .map_or(0, |t| t.open.load(Ordering::Relaxed))
    }

    /// Patterns of a tenant that match none of `names`: a typo would deny silently.
    pub fn unmatched<'a>(&'a self, names: &[&str]) -> Vec<(&'a str, &'a str)> {
        let mut out = Vec::new();
        for t in &self.tenants {
            for g in t.tools.iter().flatten() {
                if !names.iter().any(|n| glob(g, n)) {
                    out.push((t.name.as_str(), g.as_str()));
                }
            }
        }
        out
    }

    pub fn tenant(&self, i: u16) -> Option<&Tenant> {
        self.tenants.get(usize::from(i))
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A token bucket: `rate` tokens a second, at most `burst` saved.
#[derive(Debug)]
pub struct Bucket {
    pub rate: f64,
    pub burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    pub fn new(rate: f64, burst: f64) -> Self {
        Bucket {
            rate,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes one token, or says how long until one is there.
    pub fn take(&self, now: Instant) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = *s;
        let refilled =
            (tokens + now.saturating_duration_since(at).as_secs_f64() * self.rate).min(self.burst);
        if refilled >= 1.0 {
            *s = (refilled - 1.0, now.max(at));
            Ok(())
        } else {
            *s = (refilled, now.max(at));
            Err(Duration::from_secs_f64((1.0 - refilled) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names() {
        assert!(glob("ref__*", "ref__echo"));
        assert!(glob("*", "anything"));
        assert!(glob("echo", "echo"));
        assert!(!glob("echo", "echo2"));
        assert!(glob("a*b*c", "a-x-b-y-c"));
        assert!(!glob("a*b*c", "a-x-c"));
        assert!(glob("*-invoice", "get-invoice"));
        assert!(!glob("ref__*", "other__echo"));
        // Exact names: no prefix or suffix tricks unless the glob says so.
        assert!(!glob("ref__echo", "ref__echo_admin"));
        assert!(!glob("ref__echo", "xref__echo"));
        assert!(!glob("ref__echo", "ref__ech"));
        assert!(glob("ref__echo*", "ref__echo_admin"));
        assert!(!glob("ref__e?ho", "ref__echo"), "`?` is a literal");
        let p = Policy::parse("[[tenant]]\nname = \"a\"\ntools = [\"ref__echo\"]").unwrap();
        assert!(p.tenants[0].allows("ref__echo"));
        for sneaky in [
            "ref__echo_admin",
            "ref__echo ",
            "ref__echo\r\n",
            "REF__ECHO",
            "",
        ] {
            assert!(!p.tenants[0].allows(sneaky), "{sneaky:?}");
        }
    }

    #[test]
    fn tokens_are_kept_as_digests_and_checked_whole() {
        let p = Policy::parse(
            "[[tenant]]\nname = \"alpha\"\ntokens = [\"alpha-secret-token\"]\n[[tenant]]\nname = \"beta\"\ntokens = [\"beta-secret-token\"]",
        )
        .unwrap();
        let shown = format!("{p:?}");
        assert!(
            !shown.contains("secret") && !shown.contains("alpha-secret-token"),
            "no token in memory dumps or logs: {shown}"
        );
        assert_eq!(
            p.authenticate(Some(b"Bearer alpha-secret-token")),
            Auth::Tenant(0)
        );
        assert_eq!(
            p.authenticate(Some(b"BEARER beta-secret-token")),
            Auth::Tenant(1)
        );
        assert_eq!(
            p.authenticate(Some(b"bearer  beta-secret-token ")),
            Auth::Tenant(1)
        );
        for wrong in [
            &b"Bearer alpha-secret-toke"[..],
            b"Bearer alpha-secret-token2",
            b"Bearer ALPHA-SECRET-TOKEN",
            b"Basic alpha-secret-token",
            b"alpha-secret-token",
            b"Bearer",
            b"Bearer ",
            b"",
        ] {
            assert_eq!(
                p.authenticate(Some(wrong)),
                Auth::Unknown,
                "{}",
                String::from_utf8_lossy(wrong)
            );
        }
    }

    #[test]
    fn sessions_are_capped_per_tenant() {
        let p = Policy::parse(
            "[[tenant]]\nname = \"alpha\"\nsessions = 2\n[[tenant]]\nname = \"beta\"",
        )
        .unwrap();
        let a1 = p.seat(0, 100).unwrap();
        let _a2 = p.seat(0, 100).unwrap();
        assert_eq!(p.seat(0, 100).unwrap_err(), AtCap { max: 2 });
        assert_eq!(p.open_sessions(0), 2);
        drop(a1);
        let _a3 = p.seat(0, 100).expect("a place freed");
        // beta has no `sessions`: an equal share of the server's cap (100 / 2 tenants).
        let betas: Vec<Seat> = (0..50).map(|_| p.seat(1, 100).unwrap()).collect();
        assert_eq!(p.seat(1, 100).unwrap_err(), AtCap { max: 50 });
        drop(betas);
        assert_eq!(p.open_sessions(1), 0);
    }

    #[test]
    fn policies_map_tokens_and_refuse_mistakes() {
        let p = Policy::parse(
            r#"anonymous = "public"
[[tenant]]
name = "alpha"
tokens = ["ta"]
tools = ["ref__*"]
rate = 10
[[tenant]]
name = "public"
tools = ["echo"]
"#,
        )
        .unwrap();
        assert_eq!(p.authenticate(Some(b"Bearer ta")), Auth::Tenant(0));
        assert_eq!(p.authenticate(None), Auth::Tenant(1));
        assert_eq!(p.authenticate(Some(b"Bearer nope")), Auth::Unknown);
        assert!(p.tenants[0].allows("ref__echo") && !p.tenants[0].allows("echo"));
        assert_eq!(p.unmatched(&["ref__echo"]), vec![("public", "echo")]);
        for (bad, says) in [
            ("", "no [[tenant]]"),
            (
                "[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"a\"",
                "used twice",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntokens = [\"x\"]\n[[tenant]]\nname = \"b\"\ntokens = [\"x\"]",
                "already belongs",
            ),
            ("[[tenant]]\nname = \"a\"\nrate = 0", "positive"),
            ("[[tenant]]\nname = \"a\"\nburst = 3", "burst without rate"),
            ("anonymous = \"z\"\n[[tenant]]\nname = \"a\"", "names no"),
            ("[[tenant]]\nname = \"a\"\nrte = 3", "unknown field"),
            ("[[tenant]]\nname = \"a\\r\\nb\"", "control character"),
            (
                "[[tenant]]\nname = \"a\"\ntokens = [\"x\\r\\n\"]",
                "whitespace",
            ),
            (
                "[[tenant]]\nname = \"a\"\ncerts = [\"c\\u001b\"]",
                "control character",
            ),
            (
                "[[tenant]]\nname = \"a\"\ntools = [\"ref__echo\\r\\nX: 1\"]",
                "control character",
            ),
            ("[[tenant]]\nname = \"a\"\ntools = [\"ref echo\"]", "space"),
            ("[[tenant]]\nname = \"a\"\nsessions = 0", "at least 1"),
        ] {
            let e = Policy::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains("\"x\""), "a token leaked: {e}");
        }
    }

    #[test]
    fn buckets_admit_their_rate() {
        let b = Bucket::new(10.0, 2.0);
        let t0 = Instant::now();
        assert!(b.take(t0).is_ok() && b.take(t0).is_ok());
        let wait = b.take(t0).unwrap_err();
        assert!(wait <= Duration::from_millis(100) && wait > Duration::from_millis(90));
        assert!(b.take(t0 + Duration::from_millis(100)).is_ok());
        // Over 10 s at a steady 1000 tries a second: about 10/s admitted (+ the burst).
        let admitted = (1..=10_000)
            .filter(|i| b.take(t0 + Duration::from_millis(100 + i)).is_ok())
            .count();
        assert!((100..=102).contains(&admitted), "{admitted}");
    }
}
