//! The scenario file exactly as written (serde mirror of the TOML). Every field that a later
//! check may reject keeps its span, so the error can point at it.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<Spanned<String>>,
    pub description: Option<String>,
    pub target: Option<Spanned<RawTarget>>,
    pub embedded: Option<Spanned<RawEmbedded>>,
    pub load: Option<Spanned<RawLoad>>,
    #[serde(default)]
    pub workload: Vec<Spanned<RawWorkload>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub transport: Option<Spanned<String>>,
    pub url: Option<Spanned<String>>,
    pub command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    pub cwd: Option<Spanned<String>>,
    pub protocol: Option<Spanned<String>>,
    pub http: Option<Spanned<String>>,
    pub tls: Option<Spanned<RawTls>>,
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub ca: Option<Spanned<String>>,
    pub insecure: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedded {
    pub transport: Option<Spanned<String>>,
    pub protocol: Option<Spanned<String>>,
    pub http: Option<Spanned<String>>,
    pub response: Option<Spanned<String>>,
    pub catalog: Option<Spanned<u32>>,
    pub page_size: Option<Spanned<u32>>,
    pub backend_latency: Option<Spanned<String>>,
    pub backend_error_rate: Option<Spanned<f64>>,
    pub backend_payload: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    pub model: Option<Spanned<String>>,
    pub concurrency: Option<Spanned<u32>>,
    pub duration: Option<Spanned<String>>,
    pub warmup: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub workers: Option<Spanned<u32>>,
    pub sessions: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub method: Option<Spanned<String>>,
    pub tool: Option<Spanned<String>>,
    pub weight: Option<Spanned<u32>>,
    pub progress: Option<Spanned<bool>>,
    pub arguments: Option<Spanned<toml::Table>>,
}

/// Every key the format knows, per table, for "did you mean" hints.
pub const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "name",
            "description",
            "target",
            "embedded",
            "load",
            "workload",
        ],
    ),
    (
        "target",
        &[
            "transport",
            "url",
            "command",
            "env",
            "cwd",
            "protocol",
            "http",
            "tls",
            "headers",
        ],
    ),
    ("target.tls", &["ca", "insecure"]),
    (
        "embedded",
        &[
            "transport",
            "protocol",
            "http",
            "response",
            "catalog",
            "page_size",
            "backend_latency",
            "backend_error_rate",
            "backend_payload",
        ],
    ),
    (
        "load",
        &[
            "model",
            "concurrency",
            "duration",
            "warmup",
            "timeout",
            "workers",
            "sessions",
        ],
    ),
    (
        "workload",
        &["method", "tool", "weight", "progress", "arguments"],
    ),
];
