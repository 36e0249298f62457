//! The validated plan: what a run will do, with every value checked and every default filled.

use std::time::Duration;

use super::Place;
use super::args::ArgTemplate;
use super::thresholds::Thresholds;
use crate::protocol::ResponseMode;
use crate::protocol::version::Revision;
use crate::transport::net::Trust;
use crate::transport::{CommandSpec, TransportKind};

/// A validated scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub description: Option<String>,
    pub target: Target,
    pub load: Load,
    pub workload: Vec<WorkItem>,
    /// Operation names; a request's op is an index here. `0` is always `initialize`.
    pub ops: Vec<String>,
    /// Search for the highest load that meets an SLO instead of one run.
    pub find_max: Option<FindMax>,
    /// Pass/fail conditions on the result (`[thresholds]`).
    pub thresholds: Thresholds,
    /// `[compare]`: how much worse each metric may get when `mcpbench compare` judges a run
    /// of this scenario against a base.
    pub budgets: Vec<super::budget::Budget>,
    /// `[[targets]]` and `[ab]`: several targets compared under identical load instead of one
    /// run (`target` is then the first, the baseline).
    pub ab: Option<Ab>,
    /// `[replay]` with `mode = "timing"`: each recorded session's requests at their recorded
    /// times (the workload is the trace's distinct requests).
    pub replay: Option<Replay>,
}

/// A trace replayed with its timing: virtual user `i` plays recorded session `i`.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The trace file, as the scenario names it.
    pub trace: String,
    /// Per recorded session: (seconds from the start of the run, workload entry), in order.
    /// Times are already divided by the speed factor.
    pub scripts: std::sync::Arc<Vec<Vec<(f64, usize)>>>,
    /// Looping: the length of one pass (seconds); `None`: one pass, then the users stop.
    pub period: Option<f64>,
    pub speed: f64,
}

/// How a worker drives its virtual users (`[load] engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The worker's event loop where the load fits it (a closed loop over Streamable
    /// HTTP/1.1 with nothing to wait for between requests), a task per virtual user elsewhere.
    #[default]
    Auto,
    /// A task per virtual user always (to compare the two).
    Tasks,
}

/// What a virtual user does in a round (`[load] pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Sessions stay open and carry request after request.
    Steady,
    /// Rounds: every virtual user opens a new session (stdio: they share one new process),
    /// waits until all have initialized, then all send their first call together — user `i`
    /// calls workload entry `i mod entries` — and the sessions close when every call ended.
    FirstCall,
    /// Every request opens a new session (spawn or connect, initialize), sends one call and
    /// closes; the connection, the handshake, the first call and the whole are timed apart.
    ColdStart,
}

/// The operation that times connecting (or spawning) in a cold start.
pub const OP_CONNECT: &str = "connect";
/// The operation that times a whole cold start: spawn or connect to the first call's answer.
pub const OP_COLD_START: &str = "cold_start";

/// An A/B comparison: short slices of identical load alternate between the targets.
#[derive(Debug, Clone)]
pub struct Ab {
    /// Named targets; the first is the baseline the others are compared with.
    pub targets: Vec<(String, Target)>,
    /// How long each slice runs (its own short warm-up included).
    pub slice: Duration,
    /// Rounds per level: each round runs one slice on every target, the order rotating from
    /// round to round. `[ab] pairs`, or as many as fit in `load.duration` (at least 5).
    pub pairs: usize,
    /// The load levels (virtual users, or requests per second), in order; one level (the
    /// scenario's) unless a sweep is asked for.
    pub levels: Vec<f64>,
}

/// `[find_max]`: the highest load level (rate, or virtual users) that meets an SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct FindMax {
    pub search: Search,
    pub start: f64,
    /// How the level grows: each step (`step` search), or while growing (`adaptive`).
    pub step: Step,
    pub max: f64,
    pub step_duration: Duration,
    /// Adaptive: bisection stops when the bracket is narrower than this fraction of its top.
    pub precision: f64,
    /// Adaptive: how long the confirmation stage holds the level found.
    pub confirm_duration: Duration,
    /// SLO: p99 latency of ok responses, all operations together.
    pub p99: Option<Duration>,
    /// SLO: errors over requests ended.
    pub error_rate: Option<f64>,
}

/// How `[find_max]` searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Up by fixed increments (or factors) until a step breaks the SLO.
    Step,
    /// Exponential growth until a level breaks the SLO, bisection of the last bracket, then a
    /// longer confirmation stage at the level found (as Envoy's Nighthawk searches).
    Adaptive,
}

/// How the level grows between steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    Add(f64),
    Multiply(f64),
}

/// Index of the `initialize` operation.
pub const OP_INITIALIZE: usize = 0;

/// Where load goes.
// Built once per run and never on the hot path: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Target {
    /// The built-in reference server and mock backend, started in-process on 127.0.0.1 (a
    /// child process of the same binary for stdio).
    Embedded(Embedded),
    Remote(Remote),
}

pub use crate::protocol::version::ProtocolChoice;
pub use crate::transport::url::{Scheme, Url};

/// How the client talks to the server, embedded or remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub transport: TransportKind,
    pub protocol: ProtocolChoice,
    /// HTTP/2 for the HTTP transports.
    pub http2: bool,
}

/// Options for the embedded reference server and mock backend.
#[derive(Debug, Clone)]
pub struct Embedded {
    pub conn: Connection,
    pub response: ResponseMode,
    pub catalog: usize,
    pub page_size: usize,
    pub backend: mcpbench_knobs::Knobs,
}

impl Default for Embedded {
    fn default() -> Self {
        Embedded {
            conn: Connection {
                transport: TransportKind::StreamableHttp,
                protocol: ProtocolChoice::Fixed(Revision::LATEST_HANDSHAKE),
                http2: false,
            },
            response: ResponseMode::Json,
            catalog: 0,
            page_size: 100,
            backend: mcpbench_knobs::Knobs::default(),
        }
    }
}

/// An external target.
#[derive(Debug, Clone)]
pub struct Remote {
    pub conn: Connection,
    /// Network transports (the first replica, when there are several).
    pub url: Option<Url>,
    /// `target.url` as a list: replicas, requests spread over them in turn (Streamable HTTP).
    pub replicas: Vec<Url>,
    /// `sessions_per_connection` (HTTP/2): the sessions of a worker share connections, this
    /// many each; 1: a connection per session.
    pub sessions_per_connection: usize,
    /// `target.protocol` as a list: mixed clients, virtual user `i` speaking
    /// `revisions[i % n]`; results break down by revision (as tenants).
    pub revisions: Vec<crate::protocol::version::Revision>,
    /// stdio: the server command.
    pub command: Option<CommandSpec>,
    /// Extra headers; values may be secrets and are never logged or reported.
    pub headers: Vec<(String, String)>,
    /// How https/wss certificates are checked.
    pub trust: Trust,
    /// `[target.tls] cert`/`key`: a client certificate to present (mutual TLS).
    pub identity: Option<crate::transport::net::IdentityFiles>,
    /// `timing_header`: the response header carrying the server's own timing.
    pub timing: Option<crate::transport::TimingHeader>,
    /// Per-virtual-user credentials (virtual user `i` uses `credentials[i % n]`); empty: every
    /// user sends `headers` alone.
    pub credentials: Vec<Credential>,
    /// `tool_prefix`: prepended to every tool name the workload calls on this target (a
    /// gateway that namespaces its upstreams' tools, `upstream__tool`); results keep the names
    /// as the workload writes them, so targets with and without a prefix compare.
    pub tool_prefix: Option<String>,
    /// `[target.oauth]`: each virtual user gets its own bearer token from a token endpoint.
    pub oauth: Option<OAuth>,
    /// `pid`: processes of the target (a gateway, its upstreams) whose CPU time, memory,
    /// descriptors and threads are sampled every interval.
    pub pids: Vec<u32>,
    /// `source_address`: the local addresses connections come from (`--source-address`
    /// replaces it).
    pub sources: Option<crate::transport::sources::Sources>,
    /// Where the target is written (`target.url`, or `target.command` for stdio): for
    /// messages about the target itself (nothing listens there, the command is not found).
    pub place: Place,
}

/// OAuth 2.1 client credentials (`[target.oauth]`): each virtual user obtains a token
/// (`grant_type=client_credentials`, credentials in the form body), caches it, refreshes it
/// `refresh_before` its expiry and after a 401; obtaining one is measured as the `oauth/token`
/// operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth {
    pub token_url: Url,
    pub client_id: String,
    /// A secret: on the wire only.
    pub client_secret: String,
    pub scope: Option<String>,
    /// RFC 8707 `resource` (the MCP server's URL, for servers that check the audience).
    pub resource: Option<String>,
    /// The tenant its users count for.
    pub tenant: Option<String>,
    pub refresh_before: Duration,
}

/// The operation that times obtaining an OAuth token.
pub const OP_OAUTH: &str = "oauth/token";

/// Whether operation `i` named `name` is one the workload sends (not the session opening,
/// not a token request).
pub fn is_workload_op(i: usize, name: &str) -> bool {
    i != OP_INITIALIZE && name != OP_OAUTH && name != OP_CONNECT && name != OP_COLD_START
}

/// One client's credentials: headers (values are secrets) and the tenant they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub tenant: String,
    pub headers: Vec<(String, String)>,
}

impl Remote {
    /// The tenants of the credentials (or of the OAuth client), each once, in order of first
    /// appearance.
    pub fn tenants(&self) -> Vec<String> {
        if !self.revisions.is_empty() {
            let mut out: Vec<String> = Vec::new();
            for r in &self.revisions {
                if !out.contains(&r.to_string()) {
                    out.push(r.to_string());
                }
            }
            return out;
        }
        let mut out: Vec<String> = self
            .oauth
            .as_ref()
            .and_then(|o| o.tenant.clone())
            .into_iter()
            .collect();
        for c in &self.credentials {
            if !out.contains(&c.tenant) {
                out.push(c.tenant.clone());
            }
        }
        out
    }
}

impl Remote {
    /// What to show for this target in reports (never secrets).
    pub fn describe(&self) -> String {
        match (&self.url, &self.command) {
            (Some(_), _) if !self.replicas.is_empty() => self
                .replicas
                .iter()
                .map(|u| u.text.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            (Some(u), _) => u.text.clone(),
            (None, Some(c)) => std::iter::once(c.program.as_str())
                .chain(c.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, None) => String::new(),
        }
    }
}

/// Who shares a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sessions {
    /// Each virtual user has its own session (and connection or process).
    PerVu,
    /// Every request opens its own session and closes it (session churn); opening is
    /// measured as its own operation.
    PerRequest,
    /// The virtual users of a worker thread share one session on one connection, many
    /// requests in flight (stdio, WebSocket, legacy SSE).
    Shared,
}

/// The time bound of a run stopped by a request count alone (no `duration`).
pub const REQUESTS_ONLY_LIMIT: Duration = Duration::from_secs(3600 * 24);

/// How much load, for how long.
#[derive(Debug, Clone)]
pub struct Load {
    pub model: Model,
    /// The most virtual users (closed) or requests in flight (open) at any time: the number of
    /// virtual users the runner starts.
    pub concurrency: usize,
    /// How long the run lasts (warm-up included); with `requests`, an upper bound.
    pub duration: Duration,
    /// Stop once this many requests have started (warm-up included).
    pub requests: Option<u64>,
    /// Open loop: arrivals that may wait for a free virtual user when `concurrency` requests are
    /// in flight (their latency runs from their intended start); beyond it they are dropped.
    pub max_queued: usize,
    /// Excluded from the results (its requests are counted separately).
    pub warmup: Duration,
    pub timeout: Duration,
    /// A request unanswered this long while a request its worker sent after it was answered
    /// ends as a `hang` (the target is alive, this request is stuck); shorter than `timeout`.
    pub hang_after: Option<Duration>,
    /// Closed loop: a pause after each request, uniform in [min, max].
    pub think: Option<(Duration, Duration)>,
    /// Generator threads; `None` picks one per core, at most one per virtual user.
    pub workers: Option<usize>,
    pub sessions: Sessions,
    pub pattern: Pattern,
    pub engine: Engine,
    /// Closed loop: a session-opening storm — virtual user `k` starts (connects and opens its
    /// session) `k / open_rate` seconds into the run instead of with everyone at once.
    pub open_rate: Option<f64>,
    /// The part of the scenario this process runs (`--shard I/N`); `concurrency`, `requests`
    /// and `max_queued` above are already its share ([`Plan::sharded`]).
    pub shard: super::shard::Shard,
}

impl Load {
    /// How far into the run virtual user `global` (its number in the whole scenario) starts.
    pub fn start_offset(&self, global: usize) -> Duration {
        self.open_rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(global as f64 / r)
        })
    }

    /// Whether connecting is timed on its own (`connect`): a cold start, or an opening storm.
    pub fn times_connect(&self) -> bool {
        self.pattern == Pattern::ColdStart || self.open_rate.is_some()
    }
}

/// Closed loop (virtual users) or open loop (arrival rate).
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// Virtual users, each one request at a time; their number follows the profile.
    Closed { vus: Profile },
    /// Arrivals at a rate (per second) following the profile, each request timed from its
    /// intended start; at most `concurrency` in flight, excess arrivals counted as dropped.
    /// `release`: each worker releases the arrivals due at most this often (one wake-up for
    /// all of them), which bounds its wake-ups and adds up to that much lateness.
    Open {
        rate: Profile,
        arrival: Arrival,
        release: Duration,
    },
}

/// Spacing of open-loop arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced.
    Uniform,
    /// A Poisson process (exponential gaps): how independent users arrive.
    Poisson,
}

/// A load level over time: piecewise linear, each stage ramping from the previous level to
/// its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Level at time zero.
    pub start: f64,
    /// (duration, target at its end)
    pub stages: Vec<(Duration, f64)>,
}

impl Profile {
    /// A constant level for `duration`.
    pub fn constant(level: f64, duration: Duration) -> Self {
        Profile {
            start: level,
            stages: vec![(duration, level)],
        }
    }

    /// Stages of whole seconds (tests of schedules and the dispatcher).
    #[cfg(test)]
    pub(crate) fn from_secs(start: f64, stages: &[(u64, f64)]) -> Self {
        Profile {
            start,
            stages: stages
                .iter()
                .map(|&(s, level)| (Duration::from_secs(s), level))
                .collect(),
        }
    }

    pub fn duration(&self) -> Duration {
        self.stages.iter().map(|s| s.0).sum()
    }

    pub fn max(&self) -> f64 {
        self.stages.iter().map(|s| s.1).fold(self.start, f64::max)
    }

    /// The lowest level at any time (a piecewise-linear profile's extremes are its ends).
    pub fn min(&self) -> f64 {
        self.stages.iter().map(|s| s.1).fold(self.start, f64::min)
    }

    /// The level at `t` seconds.
    pub fn at(&self, t: f64) -> f64 {
        let mut from = self.start;
        let mut t0 = 0.0;
        for &(d, to) in &self.stages {
            let len = d.as_secs_f64();
            if t < t0 + len {
                return if len > 0.0 {
                    from + (to - from) * (t - t0) / len
                } else {
                    to
                };
            }
            t0 += len;
            from = to;
        }
        from
    }
}

/// What a workload entry sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    ToolsList,
    ToolsCall { tool: String },
}

/// One weighted entry of the workload mix.
#[derive(Debug, Clone)]
pub struct WorkItem {
    pub method: Method,
    pub weight: u32,
    /// Index into [`Plan::ops`].
    pub op: usize,
    pub arguments: ArgTemplate,
    /// Ask for progress notifications (`_meta.progressToken` = the request id).
    pub progress: bool,
    /// Where it is written (the tool name, or the method of `tools/list`): for errors found
    /// before load, such as a tool the target does not list.
    pub place: Place,
    /// Where its `arguments` are written, if they are.
    pub arguments_place: Option<Place>,
    /// `expect`: what every answer must hold; one that does not is an `assertion` outcome.
    pub expect: Option<Expect>,
    /// The same arguments always get the same answer: one that differs from the first seen is
    /// a `divergence`.
    pub deterministic: bool,
    /// A replayed trace's recorded answer (its digest): one that differs is a `divergence`.
    pub digest: Option<String>,
}

/// Rules an answer must hold (`[workload.expect]`). Pointers (RFC 6901) are into the
/// JSON-RPC `result`; tool names are as the workload writes them (a target's `tool_prefix` is
/// added).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// `tools/call`: the result's `isError`.
    pub is_error: Option<bool>,
    /// Pointers that must be present.
    pub present: Vec<String>,
    /// Pointer → the value it must hold.
    pub equals: Vec<(String, serde_json::Value)>,
    /// `tools/call`: `structuredContent` valid against the tool's declared `outputSchema`.
    pub output_schema: bool,
    /// `tools/list`: the tools every user is shown (a page shows none outside it; the last
    /// page completes it).
    pub tools: Option<Vec<String>>,
    /// `tools/list`: the same per tenant (of `target.credentials`).
    pub tenant_tools: Vec<(String, Vec<String>)>,
}

impl Plan {
    /// The part of this plan that `shard` runs: its share of the virtual users (or of the
    /// requests in flight), of the request count and of the backlog; the arrivals and which
    /// users are active follow from `load.shard` (see [`super::shard`]). Find-max and A/B runs
    /// decide as they go from what they measure, so they cannot be split.
    pub fn sharded(&self, shard: super::shard::Shard) -> Result<Plan, String> {
        if shard.is_whole() {
            return Ok(self.clone());
        }
        if self.find_max.is_some() {
            return Err(
                "a find-max search picks each step from the last one's results, which separate \
                 shards do not see: run it on one generator (or split a fixed-rate scenario)"
                    .into(),
            );
        }
        if self.ab.is_some() {
            return Err(
                "an A/B run alternates its targets slice by slice on one generator: run it \
                 unsplit"
                    .into(),
            );
        }
        let mut p = self.clone();
        let l = &mut p.load;
        let what = match l.model {
            Model::Closed { .. } => "virtual users (concurrency)",
            Model::Open { .. } => "requests in flight (max_in_flight)",
        };
        let users = shard.share(l.concurrency as u64) as usize;
        if users == 0 {
            return Err(format!(
                "shard {shard} would run nothing: the scenario has {} {what} for {} shards; \
                 use at most {} shards or raise it",
                l.concurrency, shard.count, l.concurrency
            ));
        }
        if let Some(r) = l.requests
            && shard.share(r) == 0
        {
            return Err(format!(
                "shard {shard} would send no request: `requests = {r}` split {} ways; use at \
                 most {r} shards",
                shard.count
            ));
        }
        l.concurrency = users;
        l.requests = l.requests.map(|r| shard.share(r));
        l.max_queued = shard.share(l.max_queued as u64) as usize;
        l.shard = shard;
        Ok(p)
    }

    pub fn connection(&self) -> Connection {
        match &self.target {
            Target::Embedded(e) => e.conn,
            Target::Remote(r) => r.conn,
        }
    }
}
