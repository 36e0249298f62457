//! What a `[target]`'s requests carry besides the protocol's own headers: extra headers
//! (values from the environment, checked for injection) and per-virtual-user credentials, each
//! with its tenant, inline or from a JSON Lines file.

use std::collections::BTreeMap;

use toml::Spanned;

use super::args::expand_env;
use super::plan::Credential;
use super::raw::RawTarget;
use super::{ScenarioError, Source};
use crate::transport::{RESERVED_HEADERS, header_name_ok, header_value_ok};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Extra headers: valid names, none that mcpbench sets itself, values expanded from the
/// environment and free of line breaks.
pub(super) fn headers(
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

/// `credentials` (inline tables) or `credentials_file` (JSON Lines, relative to the scenario):
/// a tenant and a bearer `token` or `headers` each, values expanded from the environment.
pub(super) fn credentials(
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
        out = credentials_file(src, f)?;
    }
    Ok(out)
}

/// `credentials_file`: JSON Lines, relative to the scenario, a tenant and a bearer `token` or
/// `headers` on each line; at least one.
fn credentials_file(
    src: &Source<'_>,
    f: &Spanned<String>,
) -> Result<Vec<Credential>, ScenarioError> {
    let mut out = Vec::new();
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
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::refusal;

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
