//! Which credentials reached this server, for checking that a gateway in front of it passes
//! none of its clients' through (`GET /seen-credentials`; `mcpbench probe --tenants … --upstream`).
//!
//! Every distinct value of a credential header (`Authorization`, `Proxy-Authorization`,
//! `Cookie`, `X-Api-Key`) on any request is kept as a fingerprint: the first 128 bits of
//! SHA-256 over a random per-process salt and the value. The salt is published with the
//! fingerprints, so whoever holds a credential can tell whether it arrived; the values
//! themselves are never kept, written or logged. Only a server without a policy records (an
//! upstream; a gateway's own front would otherwise show one tenant the fingerprints of
//! another's tokens).
//!
//! Cost per request: a lookup per header name and, for a value present, a keyed hash checked
//! against a small direct-mapped table of recent values; the lock and the SHA-256 are taken only
//! for a value not seen lately. At most `MAX` (1024) distinct values are kept (then `complete` says
//! false).

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hyper::header::{self, HeaderMap, HeaderName};
use rand::RngExt;

/// Where a server without a policy answers with its record.
pub const PATH: &str = "/seen-credentials";

/// The headers that carry credentials.
const HEADERS: [HeaderName; 4] = [
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
    header::COOKIE,
    HeaderName::from_static("x-api-key"),
];

/// Their names, as reported.
const NAMES: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// Distinct values kept, at most.
pub(crate) const MAX: usize = 1024;

/// Slots of the table of recent values (a power of two).
const RECENT: usize = 256;

/// The record (see the module doc).
#[derive(Debug)]
pub(crate) struct Seen {
    salt: [u8; 16],
    key: std::hash::RandomState,
    recent: Box<[AtomicU64]>,
    kept: Mutex<Kept>,
    overflow: AtomicBool,
}

#[derive(Debug, Default)]
struct Kept {
    hashes: HashSet<u64>,
    /// Header name and fingerprint, in order of arrival.
    list: Vec<(&'static str, String)>,
}

/// The fingerprint of a credential value under `salt` (hex, 128 bits).
pub fn fingerprint(salt: &[u8], value: &[u8]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(salt);
    ctx.update(value);
    let d = ctx.finish();
    d.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Seen {
    pub(crate) fn new() -> Self {
        Seen {
            salt: rand::rng().random(),
            key: std::hash::RandomState::new(),
            recent: (0..RECENT).map(|_| AtomicU64::new(0)).collect(),
            kept: Mutex::new(Kept::default()),
            overflow: AtomicBool::new(false),
        }
    }

    /// Notes the credential headers of a request.
    pub(crate) fn note(&self, headers: &HeaderMap) {
        // One pass over the request's few headers costs less than four lookups.
        for (name, value) in headers {
            if let Some(i) = HEADERS.iter().position(|h| h == name) {
                self.note_value(i, value.as_bytes());
            }
        }
    }

    fn note_value(&self, header: usize, value: &[u8]) {
        // The header's index is hashed too: the same value under two names is two entries.
        let h = self.key.hash_one((header, value)) | 1;
        let slot = &self.recent[h as usize % RECENT];
        if slot.load(Ordering::Relaxed) == h {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if !kept.hashes.contains(&h) {
            if kept.list.len() >= MAX {
                self.overflow.store(true, Ordering::Relaxed);
                return;
            }
            kept.hashes.insert(h);
            kept.list
                .push((NAMES[header], fingerprint(&self.salt, value)));
        }
        slot.store(h, Ordering::Relaxed);
    }

    /// The record as JSON: `{"salt", "credentials": [{"header", "fingerprint"}], "complete"}`.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let salt: String = self.salt.iter().map(|b| format!("{b:02x}")).collect();
        let credentials: Vec<serde_json::Value> = kept
            .list
            .iter()
            .map(|(h, f)| serde_json::json!({"header": h, "fingerprint": f}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "salt": salt,
            "credentials": credentials,
            "complete": !self.overflow.load(Ordering::Relaxed),
        }))
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn distinct_values_are_fingerprinted_once_and_never_kept() {
        let seen = Seen::new();
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tok-a"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("sid=1"));
        h.append(header::COOKIE, HeaderValue::from_static("sid=2"));
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("not a credential"),
        );
        for _ in 0..3 {
            seen.note(&h);
        }
        let v: serde_json::Value = serde_json::from_slice(&seen.to_json()).unwrap();
        let list = v["credentials"].as_array().unwrap();
        assert_eq!(list.len(), 3, "{v}");
        assert_eq!(v["complete"], true);
        let salt: Vec<u8> = (0..16)
            .map(|i| {
                u8::from_str_radix(&v["salt"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap()
            })
            .collect();
        assert_eq!(list[0]["header"], "authorization");
        assert_eq!(list[0]["fingerprint"], fingerprint(&salt, b"Bearer tok-a"));
        let text = String::from_utf8(seen.to_json()).unwrap();
        assert!(!text.contains("tok-a") && !text.contains("sid="), "{text}");
        // Past the bound: still answers, and says it is incomplete.
        let many = Seen::new();
        for i in 0..MAX + 10 {
            let mut h = HeaderMap::new();
            h.insert(
                "x-api-key",
                HeaderValue::from_str(&format!("k{i}")).unwrap(),
            );
            many.note(&h);
        }
        let v: serde_json::Value = serde_json::from_slice(&many.to_json()).unwrap();
        assert_eq!(v["credentials"].as_array().unwrap().len(), MAX);
        assert_eq!(v["complete"], false);
    }
}
