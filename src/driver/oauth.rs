//! OAuth 2.1 client credentials for `[target.oauth]`: a token request (`POST token_url`,
//! `grant_type=client_credentials`, the client's id and secret in the form body) on a fresh
//! connection, its answer read as JSON. The runner calls it per virtual user, times it as the
//! `oauth/token` operation and caches the token until `refresh_before` its expiry or a 401.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use serde::Deserialize;

use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::percent_encode;
use crate::scenario::plan::OAuth;
use crate::transport::exchange::{ExchangeError, exchange};
use crate::transport::net::NetTarget;

/// Largest token response read.
const MAX_RESPONSE: usize = 64 * 1024;

/// Lifetime assumed when the server gives no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

/// A token and when to get the next one.
#[derive(Debug, Clone)]
pub struct Token {
    pub access_token: String,
    /// `refresh_before` ahead of its expiry (at least half its lifetime from now).
    pub refresh_at: Instant,
}

/// The token endpoint: where it is and what to send.
#[derive(Clone)]
pub struct TokenEndpoint {
    net: NetTarget,
    host: String,
    path: String,
    /// The form body (holds the client secret).
    form: Bytes,
    refresh_before: Duration,
}

impl std::fmt::Debug for TokenEndpoint {
    /// The form holds the client secret: never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("host", &self.host)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenEndpoint {
    pub fn new(o: &OAuth, net: NetTarget, host: String) -> Self {
        let mut form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}",
            percent_encode(&o.client_id),
            percent_encode(&o.client_secret)
        );
        if let Some(s) = &o.scope {
            form.push_str(&format!("&scope={}", percent_encode(s)));
        }
        if let Some(r) = &o.resource {
            form.push_str(&format!("&resource={}", percent_encode(r)));
        }
        TokenEndpoint {
            net,
            host,
            path: o.token_url.path.clone(),
            form: Bytes::from(form),
            refresh_before: o.refresh_before,
        }
    }

    /// Asks for a token; the outcome class of a failure (HTTP status, connect, bad answer).
    pub async fn fetch(&self) -> Result<Token, Outcome> {
        let req = hyper::Request::post(self.path.as_str())
            .header("host", self.host.as_str())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .header(
                "user-agent",
                concat!("mcpbench/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(self.form.clone()))
            .map_err(|_| Outcome::Protocol(ProtocolKind::BadHttp))?;
        let answer = exchange(&self.net, req, MAX_RESPONSE, true)
            .await
            .map_err(|e| match e {
                ExchangeError::Connect => Outcome::Connect,
                ExchangeError::Io | ExchangeError::TooLarge(_) => Outcome::Io,
            })?;
        if answer.status != 200 {
            return Err(Outcome::Http(answer.status));
        }
        parse(&answer.body, self.refresh_before, Instant::now())
    }
}

/// A token response: `access_token` (a bearer token) and `expires_in` seconds.
fn parse(body: &[u8], refresh_before: Duration, now: Instant) -> Result<Token, Outcome> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: String,
        #[serde(default)]
        token_type: Option<String>,
        #[serde(default)]
        expires_in: Option<f64>,
    }
    let a: Answer =
        serde_json::from_slice(body).map_err(|_| Outcome::Protocol(ProtocolKind::BadJson))?;
    let bearer = a
        .token_type
        .as_deref()
        .is_none_or(|t| t.eq_ignore_ascii_case("bearer"));
    let printable =
        !a.access_token.is_empty() && a.access_token.bytes().all(|b| b.is_ascii_graphic());
    if !bearer || !printable {
        return Err(Outcome::Protocol(ProtocolKind::NotJsonRpc));
    }
    let lifetime = a
        .expires_in
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_LIFETIME, Duration::from_secs_f64);
    let early = refresh_before.min(lifetime / 2);
    Ok(Token {
        access_token: a.access_token,
        refresh_at: now + lifetime - early,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_parse() {
        let now = Instant::now();
        let t = parse(
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":60}"#,
            Duration::from_secs(10),
            now,
        )
        .unwrap();
        assert_eq!(t.access_token, "abc");
        assert_eq!(t.refresh_at, now + Duration::from_secs(50));
        // A short lifetime is refreshed at its half, not before it was issued.
        let t = parse(
            br#"{"access_token":"abc","expires_in":4}"#,
            Duration::from_secs(10),
            now,
        )
        .unwrap();
        assert_eq!(t.refresh_at, now + Duration::from_secs(2));
        for bad in [
            &br#"{"token_type":"Bearer"}"#[..],
            br#"{"access_token":"a b"}"#,
            br#"{"access_token":"abc","token_type":"mac"}"#,
            b"<html>",
        ] {
            assert!(parse(bad, Duration::from_secs(1), now).is_err());
        }
    }
}
