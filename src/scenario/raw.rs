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
    /// A/B: several named targets, compared under identical load (with `[ab]`).
    #[serde(default)]
    pub targets: Vec<Spanned<RawTarget>>,
    pub ab: Option<Spanned<RawAb>>,
    pub embedded: Option<Spanned<RawEmbedded>>,
    pub load: Option<Spanned<RawLoad>>,
    #[serde(default)]
    pub workload: Vec<Spanned<RawWorkload>>,
    pub find_max: Option<Spanned<RawFindMax>>,
    /// Replays a recorded trace instead of (timing) or as (weighted) the workload.
    pub replay: Option<Spanned<RawReplay>>,
    /// Read by `thresholds`: metric = "condition", or an operation's table of them.
    pub thresholds: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    /// `mcpbench compare`'s budgets for this scenario's runs: metric = "change".
    pub compare: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFindMax {
    pub search: Option<Spanned<String>>,
    pub start: Option<Spanned<f64>>,
    pub step: Option<Spanned<f64>>,
    pub factor: Option<Spanned<f64>>,
    pub max: Option<Spanned<f64>>,
    pub step_duration: Option<Spanned<String>>,
    pub precision: Option<Spanned<f64>>,
    pub confirm_duration: Option<Spanned<String>>,
    pub p99: Option<Spanned<String>>,
    pub error_rate: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAb {
    pub slice: Option<Spanned<String>>,
    pub pairs: Option<Spanned<u32>>,
    pub levels: Option<Spanned<Vec<f64>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    /// `[[targets]]` entries only.
    pub name: Option<Spanned<String>>,
    pub transport: Option<Spanned<String>>,
    pub url: Option<Spanned<UrlList>>,
    pub command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    pub cwd: Option<Spanned<String>>,
    pub protocol: Option<Spanned<UrlList>>,
    pub http: Option<Spanned<String>>,
    /// HTTP/2: sessions of a worker sharing one connection.
    pub sessions_per_connection: Option<Spanned<u32>>,
    pub tls: Option<Spanned<RawTls>>,
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
    pub timing_header: Option<Spanned<String>>,
    /// Per-virtual-user credentials, each with its tenant.
    #[serde(default)]
    pub credentials: Vec<Spanned<RawCredential>>,
    /// The same as a JSON Lines file, relative to the scenario.
    pub credentials_file: Option<Spanned<String>>,
    /// Prepended to every tool name the workload calls (a gateway that namespaces tools).
    pub tool_prefix: Option<Spanned<String>>,
    /// OAuth 2.1 client credentials: a bearer token per virtual user from a token endpoint.
    pub oauth: Option<Spanned<RawOAuth>>,
    /// Processes of the target to sample (CPU, memory, descriptors): a pid or a list.
    pub pid: Option<Spanned<toml::Value>>,
    /// The local addresses connections come from: one, a list or a CIDR block.
    pub source_address: Option<Spanned<String>>,
}

/// A string or a list of them: `target.url` (replicas), `target.protocol` (mixed revisions).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum UrlList {
    One(String),
    Many(Vec<String>),
}

impl UrlList {
    pub fn urls(&self) -> Vec<&str> {
        match self {
            UrlList::One(u) => vec![u.as_str()],
            UrlList::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    pub token_url: Option<Spanned<String>>,
    pub client_id: Option<Spanned<String>>,
    pub client_secret: Option<Spanned<String>>,
    pub scope: Option<Spanned<String>>,
    pub resource: Option<Spanned<String>>,
    pub tenant: Option<Spanned<String>>,
    pub refresh_before: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCredential {
    pub tenant: Option<Spanned<String>>,
    pub token: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub ca: Option<Spanned<String>>,
    pub insecure: Option<Spanned<bool>>,
    /// A client certificate chain (PEM) to present: mutual TLS.
    pub cert: Option<Spanned<String>>,
    /// Its private key (PEM).
    pub key: Option<Spanned<String>>,
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
    pub rate: Option<Spanned<f64>>,
    pub open_rate: Option<Spanned<f64>>,
    pub arrival: Option<Spanned<String>>,
    pub max_in_flight: Option<Spanned<u32>>,
    pub release_interval: Option<Spanned<String>>,
    pub max_queued: Option<Spanned<u32>>,
    pub duration: Option<Spanned<String>>,
    pub requests: Option<Spanned<u64>>,
    pub warmup: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub hang_after: Option<Spanned<String>>,
    pub think: Option<Spanned<String>>,
    pub workers: Option<Spanned<u32>>,
    pub sessions: Option<Spanned<String>>,
    pub pattern: Option<Spanned<String>>,
    pub engine: Option<Spanned<String>>,
    #[serde(default)]
    pub stages: Vec<Spanned<RawStage>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    pub duration: Spanned<String>,
    pub rate: Option<Spanned<f64>>,
    pub concurrency: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub method: Option<Spanned<String>>,
    pub tool: Option<Spanned<String>>,
    pub weight: Option<Spanned<u32>>,
    pub progress: Option<Spanned<bool>>,
    pub rows: Option<Spanned<String>>,
    pub arguments: Option<Spanned<toml::Table>>,
    pub expect: Option<Spanned<RawExpect>>,
    pub deterministic: Option<Spanned<bool>>,
}

/// `[replay]`: a trace written by `mcpbench record` (or converted from an audit log).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReplay {
    pub trace: Spanned<String>,
    pub mode: Option<Spanned<String>>,
    pub speed: Option<Spanned<f64>>,
    #[serde(rename = "loop")]
    pub looped: Option<Spanned<bool>>,
    pub check: Option<Spanned<bool>>,
}

/// `expect` of a workload entry: what every answer must hold.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    pub is_error: Option<Spanned<bool>>,
    pub present: Option<Spanned<Vec<String>>>,
    pub equals: Option<Spanned<toml::Table>>,
    pub output_schema: Option<Spanned<bool>>,
    pub tools: Option<Spanned<Vec<String>>>,
    pub tenant_tools: Option<Spanned<BTreeMap<String, Vec<String>>>>,
}

/// Every key the format knows, per table, for "did you mean" hints: exactly the fields serde
/// accepts in each table (`[[targets]]` entries are `[target]`s). scenarios/schema.json lists
/// the same keys; tests/scenario_schema.rs holds the three to one another.
#[rustfmt::skip]
pub const KNOWN_KEYS: &[(&str, &[&str])] = &[
    ("", &["name", "description", "target", "targets", "ab", "embedded", "load", "workload", "find_max", "replay", "thresholds", "compare"]),
    ("target", TARGET_KEYS),
    ("target.oauth", OAUTH_KEYS),
    ("target.credentials", CREDENTIAL_KEYS),
    ("target.tls", TLS_KEYS),
    ("targets", TARGET_KEYS),
    ("targets.oauth", OAUTH_KEYS),
    ("targets.credentials", CREDENTIAL_KEYS),
    ("targets.tls", TLS_KEYS),
    ("ab", &["slice", "pairs", "levels"]),
    ("embedded", &["transport", "protocol", "http", "response", "catalog", "page_size", "backend_latency", "backend_error_rate", "backend_payload"]),
    ("load", &["model", "concurrency", "rate", "open_rate", "arrival", "max_in_flight", "release_interval", "max_queued", "duration", "requests", "warmup", "timeout", "hang_after", "think", "workers", "sessions", "pattern", "engine", "stages"]),
    ("load.stages", &["duration", "rate", "concurrency"]),
    ("workload", &["method", "tool", "weight", "progress", "rows", "arguments", "expect", "deterministic"]),
    ("workload.expect", &["is_error", "present", "equals", "output_schema", "tools", "tenant_tools"]),
    ("replay", &["trace", "mode", "speed", "loop", "check"]),
    ("find_max", &["search", "start", "step", "factor", "max", "step_duration", "precision", "confirm_duration", "p99", "error_rate"]),
];

#[rustfmt::skip]
const TARGET_KEYS: &[&str] = &["name", "transport", "url", "command", "env", "cwd", "protocol", "http", "sessions_per_connection", "tls", "headers", "timing_header", "credentials", "credentials_file", "tool_prefix", "oauth", "pid", "source_address"];
const OAUTH_KEYS: &[&str] = &[
    "token_url",
    "client_id",
    "client_secret",
    "scope",
    "resource",
    "tenant",
    "refresh_before",
];
const CREDENTIAL_KEYS: &[&str] = &["tenant", "token", "headers"];
const TLS_KEYS: &[&str] = &["ca", "insecure", "cert", "key"];
