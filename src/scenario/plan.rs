//! The validated plan: what a run will do, with every value checked and every default filled.

use std::time::Duration;

use super::args::ArgTemplate;
use super::check::{line_of, toml_error};
use super::raw::{RawAb, RawScenario};
use super::thresholds::Thresholds;
use super::{Place, ScenarioError, Source, load, target, workload};
use crate::protocol::ResponseMode;
use crate::protocol::version::Revision;
use crate::transport::net::Trust;
use crate::transport::{CommandSpec, TransportKind};
use toml::Spanned;

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

/// Which protocol revision to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// Offer (handshake era) or use (2026-07-28) this revision.
    Fixed(Revision),
    /// Probe `server/discover`; fall back to `initialize` with the newest handshake revision.
    Auto,
}

impl std::fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolChoice::Fixed(r) => r.fmt(f),
            ProtocolChoice::Auto => f.write_str("auto"),
        }
    }
}

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

/// An external target.
#[derive(Debug, Clone)]
pub struct Remote {
    pub conn: Connection,
    /// Network transports (the first replica, when there are several).
    pub url: Option<Url>,
    /// `target.url` as a list: replicas, requests spread over them in turn (Streamable HTTP).
    pub replicas: Vec<Url>,
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
    /// The part of the scenario this process runs (`--shard I/N`); `concurrency`, `requests`
    /// and `max_queued` above are already its share ([`Plan::sharded`]).
    pub shard: super::shard::Shard,
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

/// Builds the plan: every table checked, every default filled.
pub(crate) fn build(
    src: &Source<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, ScenarioError> {
    let raw: RawScenario = toml::from_str(src.text).map_err(|e| toml_error(src, &e))?;
    let name = raw
        .name
        .as_ref()
        .map(|n| n.get_ref().clone())
        .unwrap_or_else(|| stem(src.name));
    if let Some(n) = &raw.name
        && (n.get_ref().trim().is_empty() || n.get_ref().contains(['/', '\\']))
    {
        return Err(src.error(
            n.span(),
            "name must be non-empty and contain no slashes",
            Some("it names the results directory, e.g. name = \"gateway-smoke\"".into()),
        ));
    }
    if let Some(t) = raw.target.as_ref().filter(|t| t.get_ref().name.is_some()) {
        return Err(src.error_at_key(
            t.span(),
            "target.name",
            "name belongs to [[targets]] entries (an A/B comparison), not to [target]",
            Some("remove it, or write [[targets]] entries with a name each".into()),
        ));
    }
    let named = ab_targets(src, &raw, env)?;
    let target = match (&raw.target, &raw.embedded) {
        _ if !named.is_empty() => named[0].1.clone(),
        (Some(t), Some(e)) => {
            return Err(src.error_at_key(
                e.span(),
                "embedded",
                "[embedded] configures the built-in server, which only runs when [target] is omitted",
                Some(format!("remove [embedded], or remove the [target] at line {}", line_of(src, t.span().start))),
            ));
        }
        (Some(t), None) => Target::Remote(target::target(src, t, env)?),
        (None, e) => Target::Embedded(target::embedded(src, e.as_ref())?),
    };
    let load_raw = raw.load.as_ref().ok_or_else(|| {
        src.error_at_key(
            0..0,
            "load",
            "the [load] table is missing",
            Some("add:\n    [load]\n    concurrency = 16\n    duration = \"30s\"".into()),
        )
    })?;
    let mut load = load::load(src, load_raw)?;
    if let Target::Remote(r) = &target
        && (!r.credentials.is_empty() || r.oauth.is_some())
        && load.sessions == Sessions::Shared
    {
        return Err(src.error_at_key(
            load_raw.span(),
            "load.sessions",
            "per-user credentials need a session per user: a shared session carries one user's headers",
            Some("sessions = \"per-vu\" (the default) or \"per-request\"".into()),
        ));
    }
    if let (Some(r), Some(w)) = (&raw.replay, raw.workload.first()) {
        return Err(src.error_at_key(
            w.span(),
            "workload",
            "[replay] makes the workload from its trace; [[workload]] entries beside it would be ignored",
            Some(format!("remove the [[workload]] entries, or the [replay] at line {}", line_of(src, r.span().start))),
        ));
    }
    if raw.workload.is_empty() && raw.replay.is_none() {
        return Err(src.error_at_key(
            src.text.len()..src.text.len(),
            "workload",
            "no [[workload]] entries: there is nothing to send",
            Some("add one:\n    [[workload]]\n    method = \"tools/call\"\n    tool = \"echo\"\n    arguments = { message = \"hi\" }".into()),
        ));
    }
    let mut ops = vec!["initialize".to_string()];
    if matches!(&target, Target::Remote(r) if r.oauth.is_some()) {
        ops.push(OP_OAUTH.to_string());
    }
    let mut workload = Vec::with_capacity(raw.workload.len());
    for w in &raw.workload {
        workload.push(workload::work_item(src, w, &mut ops, env)?);
    }
    let mut replay = None;
    if let Some(r) = &raw.replay {
        if let Some(p) = &load_raw.get_ref().pattern
            && load.pattern != Pattern::Steady
        {
            return Err(src.error(
                p.span(),
                "a replay sends the trace's requests; first_call and cold_start rounds send the workload's",
                Some("remove `pattern`".into()),
            ));
        }
        let got = super::replay::replay(src, r, &mut ops)?;
        workload = got.workload;
        if let Some(timing) = got.timing {
            replay_load(src, load_raw, &mut load, &timing)?;
            replay = Some(timing);
        }
    }
    if load.pattern == Pattern::ColdStart {
        ops.push(OP_CONNECT.to_string());
        ops.push(OP_COLD_START.to_string());
    }
    let find_max = raw
        .find_max
        .as_ref()
        .map(|f| load::find_max(src, f, &load))
        .transpose()?;
    if let (Some(f), Some(r)) = (&raw.find_max, &replay) {
        return Err(src.error_at_key(
            f.span(),
            "find_max",
            format!(
                "a timed replay's load is its trace's ({}); find_max would change it",
                r.trace
            ),
            Some("replay with mode = \"weighted\" to search under [find_max], or remove it".into()),
        ));
    }
    let ab = match (&raw.ab, named.is_empty()) {
        (Some(a), true) => {
            return Err(src.error_at_key(
                a.span(),
                "ab",
                "[ab] compares [[targets]], and there are none",
                Some("add two or more:\n    [[targets]]\n    name = \"direct\"\n    url = \"http://127.0.0.1:8080/mcp\"\n    [[targets]]\n    name = \"gateway\"\n    url = \"http://127.0.0.1:9090/mcp\"".into()),
            ));
        }
        (_, true) => None,
        (a, false) => Some(ab(src, a.as_ref(), named, &load, find_max.is_some())?),
    };
    let thresholds = raw
        .thresholds
        .as_ref()
        .map(|t| super::thresholds::thresholds(src, t, &ops))
        .transpose()?
        .unwrap_or_default();
    let budgets = match &raw.compare {
        Some(t) => super::budget::from_table(src, t)?,
        None => Vec::new(),
    };
    Ok(Plan {
        name,
        description: raw.description.clone(),
        target,
        load,
        workload,
        ops,
        find_max,
        thresholds,
        budgets,
        ab,
        replay,
    })
    .map(|mut p: Plan| {
        // First calls race inside one server process: on stdio (a process per session) the
        // users share one unless the scenario says otherwise.
        if p.load.pattern == Pattern::FirstCall
            && load_raw.get_ref().sessions.is_none()
            && p.connection().transport == TransportKind::Stdio
        {
            p.load.sessions = Sessions::Shared;
        }
        p
    })
}

/// A timed replay's load: a virtual user per recorded session, for the `[load]`'s duration
/// (an upper bound unless the replay loops).
fn replay_load(
    src: &Source<'_>,
    l: &Spanned<super::raw::RawLoad>,
    load: &mut Load,
    r: &Replay,
) -> Result<(), ScenarioError> {
    let raw = l.get_ref();
    let refused = [
        (raw.concurrency.as_ref().map(|s| s.span()), "concurrency"),
        (raw.model.as_ref().map(|s| s.span()), "model"),
        (raw.rate.as_ref().map(|s| s.span()), "rate"),
        (raw.think.as_ref().map(|s| s.span()), "think"),
        (raw.stages.first().map(|s| s.span()), "stages"),
    ];
    if let Some((span, key)) = refused.into_iter().find_map(|(s, k)| Some((s?, k))) {
        return Err(src.error(
            span,
            format!(
                "a timed replay sets the load from its trace ({} sessions at their recorded times); `{key}` would change it",
                r.scripts.len()
            ),
            Some(format!("remove `{key}`, or replay with mode = \"weighted\" under this [load]")),
        ));
    }
    load.concurrency = r.scripts.len();
    load.model = Model::Closed {
        vus: Profile::constant(r.scripts.len() as f64, load.duration),
    };
    Ok(())
}

/// `[[targets]]`: at least two, each named (names unique, fit for a directory), none beside
/// `[target]` or `[embedded]`.
fn ab_targets(
    src: &Source<'_>,
    raw: &RawScenario,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, Target)>, ScenarioError> {
    let Some(first) = raw.targets.first() else {
        return Ok(Vec::new());
    };
    if let Some(other) = raw
        .target
        .as_ref()
        .map(|t| t.span())
        .or(raw.embedded.as_ref().map(|e| e.span()))
    {
        return Err(src.error_at_key(
            other,
            "target",
            "[[targets]] (an A/B comparison) replaces [target] and [embedded]",
            Some(format!("move this target into a [[targets]] entry with a name, or remove the [[targets]] at line {}", line_of(src, first.span().start))),
        ));
    }
    if raw.targets.len() < 2 {
        return Err(src.error_at_key(
            first.span(),
            "targets",
            "an A/B comparison needs at least two [[targets]]",
            Some("add the second target (e.g. the gateway in front of the first), or use [target] for one".into()),
        ));
    }
    let mut out: Vec<(String, Target)> = Vec::new();
    for (i, t) in raw.targets.iter().enumerate() {
        let key = format!("targets[{}].name", i + 1);
        let name = t.get_ref().name.as_ref().ok_or_else(|| {
            src.error_at_key(
                t.span(),
                &key,
                "every [[targets]] entry needs a name",
                Some("name = \"direct\" (it names the target's results)".into()),
            )
        })?;
        let n = name.get_ref().trim();
        if n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(src.error(
                name.span(),
                format!(
                    "`{n}` is not a target name: letters, digits, - and _ (it names a directory)"
                ),
                Some("e.g. name = \"via-gateway\"".into()),
            ));
        }
        if out.iter().any(|(o, _)| o == n) {
            return Err(src.error(
                name.span(),
                format!("two targets are named `{n}`"),
                Some("give each target its own name".into()),
            ));
        }
        out.push((n.to_string(), Target::Remote(target::target(src, t, env)?)));
    }
    Ok(out)
}

/// `[ab]`: slice length, rounds, levels; slices hold one level each.
fn ab(
    src: &Source<'_>,
    raw: Option<&Spanned<RawAb>>,
    targets: Vec<(String, Target)>,
    load: &Load,
    find_max: bool,
) -> Result<Ab, ScenarioError> {
    let at = raw.map_or(0..0, |r| r.span());
    if find_max {
        return Err(src.error_at_key(at, "find_max", "[find_max] and an A/B comparison ([[targets]]) are separate runs", Some("search each target on its own, or compare them at given levels with [ab] levels = [...]".into())));
    }
    let profile = match &load.model {
        Model::Closed { vus } => vus,
        Model::Open { rate, .. } => rate,
    };
    if profile.min() != profile.max() {
        return Err(src.error_at_key(
            at,
            "load.stages",
            "A/B slices each hold one level: stages and ramps do not fit in them",
            Some("use a constant level, or several with [ab] levels = [1, 8, 32]".into()),
        ));
    }
    let slice = match raw.and_then(|r| r.get_ref().slice.as_ref()) {
        Some(d) => {
            let v = super::check::duration(src, d, "ab.slice")?;
            if v < Duration::from_millis(500) {
                return Err(src.error(
                    d.span(),
                    "a slice shorter than 500ms measures mostly its own start",
                    Some("slice = \"2s\"".into()),
                ));
            }
            v
        }
        None => Duration::from_secs(2),
    };
    let levels = match raw.and_then(|r| r.get_ref().levels.as_ref()) {
        Some(l)
            if l.get_ref().is_empty()
                || l.get_ref().iter().any(|v| !(v.is_finite() && *v > 0.0)) =>
        {
            return Err(src.error(l.span(), "levels are positive numbers (virtual users, or requests per second for the open model)", Some("levels = [1, 8, 32]".into())));
        }
        Some(l) => l.get_ref().clone(),
        None => vec![profile.max()],
    };
    // Rounds: as given, or as many as fit in the run's duration (at least 5: Student's t
    // needs pairs).
    let pairs = match raw.and_then(|r| r.get_ref().pairs.as_ref()) {
        Some(p) => super::check::within(src, p, 5, Some(1000), "ab.pairs")? as usize,
        None => {
            let round = slice.as_secs_f64() * targets.len() as f64 * levels.len() as f64;
            ((load.duration.as_secs_f64() / round).floor() as usize).max(5)
        }
    };
    Ok(Ab {
        targets,
        slice,
        pairs,
        levels,
    })
}

fn stem(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{parse, parse_url, refusal as err};

    const OK: &str = "name = \"q\"\n[load]\nconcurrency = 4\nduration = \"2s\"\n\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hi\" }\n\n[[workload]]\nmethod = \"tools/list\"\nweight = 2\n";

    const TWO: &str = "[[targets]]\nname = \"direct\"\nurl = \"http://127.0.0.1:1/mcp\"\n[[targets]]\nname = \"gw\"\nurl = \"http://127.0.0.1:2/mcp\"\n";
    const LOAD: &str =
        "[load]\nconcurrency = 4\nduration = \"40s\"\n[[workload]]\nmethod = \"tools/list\"\n";

    /// `[[targets]]`: the first is the baseline and `target`; rounds fill the duration.
    #[test]
    fn ab_targets_and_defaults() {
        let plan = parse("ab.toml", &format!("{TWO}{LOAD}"), &|_| None).unwrap();
        let ab = plan.ab.unwrap();
        let names: Vec<&str> = ab.targets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["direct", "gw"]);
        // 40 s / (2 targets × 2 s slices) = 10 rounds, at the scenario's level.
        assert_eq!(
            (ab.slice, ab.pairs, ab.levels.clone()),
            (Duration::from_secs(2), 10, vec![4.0])
        );
        assert!(
            matches!(&plan.target, Target::Remote(r) if r.describe() == "http://127.0.0.1:1/mcp")
        );
        let text = format!("{TWO}[ab]\nslice = \"1s\"\npairs = 6\nlevels = [1, 8]\n{LOAD}");
        let ab = parse("ab.toml", &text, &|_| None).unwrap().ab.unwrap();
        assert_eq!((ab.pairs, ab.levels), (6, vec![1.0, 8.0]));
    }

    #[test]
    fn ab_mistakes_name_the_key_and_a_fix() {
        let one = "[[targets]]\nname = \"direct\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
        let cases = [
            (
                format!("{one}{LOAD}"),
                "an A/B comparison needs at least two [[targets]]",
            ),
            (
                format!("{TWO}[target]\nurl = \"http://127.0.0.1:3/mcp\"\n{LOAD}"),
                "[[targets]] (an A/B comparison) replaces [target] and [embedded]",
            ),
            (
                format!("{}{LOAD}", TWO.replace("name = \"gw\"\n", "")),
                "every [[targets]] entry needs a name",
            ),
            (
                format!("{}{LOAD}", TWO.replace("\"gw\"", "\"direct\"")),
                "two targets are named `direct`",
            ),
            (
                format!("{}{LOAD}", TWO.replace("\"gw\"", "\"a/b\"")),
                "`a/b` is not a target name",
            ),
            (
                format!("[ab]\nslice = \"1s\"\n{LOAD}"),
                "[ab] compares [[targets]], and there are none",
            ),
            (
                format!("[target]\nname = \"x\"\nurl = \"http://127.0.0.1:3/mcp\"\n{LOAD}"),
                "name belongs to [[targets]] entries",
            ),
            (
                format!("{TWO}[ab]\nslice = \"100ms\"\n{LOAD}"),
                "a slice shorter than 500ms",
            ),
            (
                format!("{TWO}[ab]\npairs = 3\n{LOAD}"),
                "pairs must be from 5 to 1000",
            ),
            (
                format!("{TWO}[ab]\nlevels = [0]\n{LOAD}"),
                "levels are positive numbers",
            ),
            (
                format!(
                    "{TWO}[load]\n[[load.stages]]\nduration = \"5s\"\nconcurrency = 2\n[[load.stages]]\nduration = \"5s\"\nconcurrency = 9\n[[workload]]\nmethod = \"tools/list\"\n"
                ),
                "A/B slices each hold one level",
            ),
        ];
        for (text, message) in cases {
            let d = err(&text);
            assert!(d.message.contains(message), "{message}: {d:?}");
            assert!(d.hint.is_some(), "{message}: a fix");
        }
    }

    #[test]
    fn builds_a_plan_with_defaults() {
        let p = parse("t.toml", OK, &|_| None).unwrap();
        assert_eq!(p.name, "q");
        assert_eq!(p.load.concurrency, 4);
        assert_eq!(p.load.timeout, Duration::from_secs(10));
        assert_eq!(p.ops, vec!["initialize", "tools/call:echo", "tools/list"]);
        assert!(matches!(p.target, Target::Embedded(_)));
        assert_eq!(p.workload[1].weight, 2);
    }

    #[test]
    fn closed_sets_of_values_name_the_bad_one_and_the_choices() {
        // An open-model load section, for the arrival process.
        let open = OK.replace("concurrency = 4", "model = \"open\"\nrate = 10");
        let cases = [
            (
                OK,
                "model",
                "closed",
                "batch",
                "load.model",
                "unknown load model `batch`",
                "\"open\"",
            ),
            (
                OK,
                "sessions",
                "per-request",
                "pooled",
                "load.sessions",
                "unknown session mode `pooled`",
                "\"per-request\"",
            ),
            (
                open.as_str(),
                "arrival",
                "uniform",
                "bursty",
                "load.arrival",
                "unknown arrival process `bursty`",
                "\"uniform\"",
            ),
        ];
        for (base, key, good, bad, path, message, choice) in cases {
            let with = |v: &str| {
                base.replace(
                    "duration = \"2s\"",
                    &format!("duration = \"2s\"\n{key} = \"{v}\""),
                )
            };
            let d = err(&with(bad));
            assert_eq!((d.key.as_str(), d.message.as_str()), (path, message));
            assert!(d.hint.unwrap().contains(choice), "{key}");
            parse("t.toml", &with(good), &|_| None).unwrap();
        }
        let d = err(&OK.replace(
            "name = \"q\"\n",
            "name = \"q\"\n[target]\nurl = \"http://127.0.0.1:1/mcp\"\nhttp = \"3\"\n",
        ));
        assert_eq!(
            (d.key.as_str(), d.message.as_str()),
            ("target.http", "unknown HTTP version `3`")
        );
        let d = err(&OK.replace("name = \"q\"\n", "name = \"q\"\n[target]\nurl = \"http://127.0.0.1:1/mcp\"\ntransport = \"carrier-pigeon\"\n"));
        assert_eq!(d.message, "unknown transport `carrier-pigeon`");
        assert!(d.hint.unwrap().contains("websocket"));
    }

    #[test]
    fn errors_name_line_column_key_and_hint() {
        let d = err(&OK.replace("concurrency = 4", "concurrency = \"many\""));
        assert_eq!(
            (d.line, d.column, d.key.as_str()),
            (3, 15, "load.concurrency")
        );
        assert!(
            d.message.contains("expected a non-negative integer"),
            "{}",
            d.message
        );
        assert!(d.hint.unwrap().contains("virtual users"));

        let d = err(&OK.replace("concurrency = 4", "concurency = 4"));
        assert_eq!((d.line, d.key.as_str()), (3, "load.concurency"));
        assert_eq!(d.message, "unknown key `concurency`");
        assert!(d.hint.unwrap().starts_with("did you mean `concurrency`?"));

        // A misspelt tool parses: the target is asked (tests/e2e.rs, on the embedded target).
        let p = parse(
            "t.toml",
            &OK.replace("tool = \"echo\"", "tool = \"ecko\""),
            &|_| None,
        )
        .unwrap();
        let place = &p.workload[0].place;
        assert_eq!(
            (place.line, place.column, place.key.as_str()),
            (8, 8, "workload[1].tool")
        );

        let d = err(&OK.replace("duration = \"2s\"", "duration = \"2 parsecs\""));
        assert_eq!(d.key, "load.duration");

        let d = err("[load\nconcurrency = 1");
        assert_eq!(d.line, 1);

        let d = err(&OK.replace("message = \"hi\"", "message = \"${range:5..1}\""));
        assert_eq!(d.key, "workload[1].arguments.message");

        let d = err("[load]\nduration = \"1s\"\n");
        assert_eq!(d.key, "workload");
        let d = err(&OK.replace(
            "name = \"q\"\n",
            "name = \"q\"\n[target]\nurl = \"ftp://x\"\n",
        ));
        assert_eq!(d.key, "target.url");
    }

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

    #[test]
    fn transports_protocols_and_sessions() {
        let base = "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
        let shared = base.replace("duration", "sessions = \"shared\"\nduration");
        let p = parse("t.toml", &format!("[target]\ncommand = [\"srv\", \"--stdio\"]\nenv = {{ K = \"v\" }}\nprotocol = \"auto\"\n{base}"), &|_| None).unwrap();
        let Target::Remote(r) = &p.target else {
            panic!()
        };
        assert_eq!(r.conn.transport, TransportKind::Stdio);
        assert_eq!(r.conn.protocol, ProtocolChoice::Auto);
        assert_eq!(r.command.as_ref().unwrap().args, vec!["--stdio"]);
        let p = parse(
            "t.toml",
            &format!("[target]\nurl = \"ws://127.0.0.1:1/ws\"\n{shared}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(p.connection().transport, TransportKind::WebSocket);
        assert_eq!(p.load.sessions, Sessions::Shared);
        let p = parse(
            "t.toml",
            &format!("[target]\ntransport = \"sse\"\nurl = \"http://127.0.0.1:1/sse\"\n{base}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            p.connection().protocol,
            ProtocolChoice::Fixed(Revision::V2024_11_05)
        );
        let p = parse(
            "t.toml",
            &format!("[embedded]\nprotocol = \"2026-07-28\"\nhttp = \"2\"\n{base}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            p.connection(),
            Connection {
                transport: TransportKind::StreamableHttp,
                protocol: ProtocolChoice::Fixed(Revision::V2026_07_28),
                http2: true
            }
        );
        let p = parse(
            "t.toml",
            &format!("[target]\nurl = \"http://h/\"\n{shared}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(p.load.sessions, Sessions::Shared);
        assert!(
            err(&format!(
                "[target]\ntransport = \"websocket\"\nurl = \"http://h/\"\n{base}"
            ))
            .message
            .contains("ws(s)")
        );
        // HTTP+SSE is deprecated, not gone, in 2026-07-28: servers that keep it may serve
        // either era on it.
        assert!(
            parse(
                "t.toml",
                &format!(
                    "[target]\ntransport = \"sse\"\nurl = \"http://h/\"\nprotocol = \"auto\"\n{base}"
                ),
                &|_| None
            )
            .is_ok()
        );
        assert!(
            err(&format!(
                "[target]\nurl = \"http://h/\"\ntls = {{ insecure = true }}\n{base}"
            ))
            .message
            .contains("https://")
        );
        assert!(
            err(&format!(
                "[target]\nurl = \"ws://h/\"\nhttp = \"2\"\n{base}"
            ))
            .message
            .contains("HTTP/2")
        );
    }
}
