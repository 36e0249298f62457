//! The validated plan: what a run will do, with every value checked and every default filled.

use std::time::Duration;

use toml::Spanned;

use super::args::{ArgTemplate, expand_env};
use super::raw::{KNOWN_KEYS, RawEmbedded, RawLoad, RawScenario, RawTarget, RawWorkload};
use super::{ScenarioError, Source, duration};
use crate::protocol::version::Revision;
use crate::server::ResponseMode;
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
}

/// `[find_max]`: step the load level (rate, or virtual users) until the SLO breaks.
#[derive(Debug, Clone, PartialEq)]
pub struct FindMax {
    pub start: f64,
    pub step: Step,
    pub max: f64,
    pub step_duration: Duration,
    /// SLO: p99 latency of ok responses, all operations together.
    pub p99: Option<Duration>,
    /// SLO: errors over requests ended.
    pub error_rate: Option<f64>,
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
    pub backend: mock_backend::Knobs,
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
            backend: mock_backend::Knobs::default(),
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
    /// Network transports.
    pub url: Option<Url>,
    /// stdio: the server command.
    pub command: Option<CommandSpec>,
    /// Extra headers; values may be secrets and are never logged or reported.
    pub headers: Vec<(String, String)>,
    /// How https/wss certificates are checked.
    pub trust: Trust,
}

impl Remote {
    /// What to show for this target in reports (never secrets).
    pub fn describe(&self) -> String {
        match (&self.url, &self.command) {
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
    /// Closed loop: a pause after each request, uniform in [min, max].
    pub think: Option<(Duration, Duration)>,
    /// Generator threads; `None` picks one per core, at most one per virtual user.
    pub workers: Option<usize>,
    pub sessions: Sessions,
}

/// Closed loop (virtual users) or open loop (arrival rate).
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// Virtual users, each one request at a time; their number follows the profile.
    Closed { vus: Profile },
    /// Arrivals at a rate (per second) following the profile, each request timed from its
    /// intended start; at most `concurrency` in flight, excess arrivals counted as dropped.
    Open { rate: Profile, arrival: Arrival },
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
    /// Where it is written, for later errors (e.g. an unknown tool on a remote target).
    pub line: usize,
}

impl Plan {
    pub fn connection(&self) -> Connection {
        match &self.target {
            Target::Embedded(e) => e.conn,
            Target::Remote(r) => r.conn,
        }
    }
}

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
    let target = match (&raw.target, &raw.embedded) {
        (Some(t), Some(e)) => {
            return Err(src.error_at_key(
                e.span(),
                "embedded",
                "[embedded] configures the built-in server, which only runs when [target] is omitted",
                Some(format!("remove [embedded], or remove the [target] at line {}", line_of(src, t.span().start))),
            ));
        }
        (Some(t), None) => Target::Remote(target(src, t, env)?),
        (None, e) => Target::Embedded(embedded(src, e.as_ref())?),
    };
    let load_raw = raw.load.as_ref().ok_or_else(|| {
        src.error_at_key(
            0..0,
            "load",
            "the [load] table is missing",
            Some("add:\n    [load]\n    concurrency = 16\n    duration = \"30s\"".into()),
        )
    })?;
    let load = load(src, load_raw)?;
    if raw.workload.is_empty() {
        return Err(src.error_at_key(
            src.text.len()..src.text.len(),
            "workload",
            "no [[workload]] entries: there is nothing to send",
            Some("add one:\n    [[workload]]\n    method = \"tools/call\"\n    tool = \"echo\"\n    arguments = { message = \"hi\" }".into()),
        ));
    }
    let mut ops = vec!["initialize".to_string()];
    let mut workload = Vec::with_capacity(raw.workload.len());
    for w in &raw.workload {
        workload.push(work_item(src, w, &target, &mut ops, env)?);
    }
    let find_max = raw
        .find_max
        .as_ref()
        .map(|f| find_max(src, f, &load))
        .transpose()?;
    Ok(Plan {
        name,
        description: raw.description.clone(),
        target,
        load,
        workload,
        ops,
        find_max,
    })
}

fn find_max(
    src: &Source<'_>,
    f: &Spanned<super::raw::RawFindMax>,
    load: &Load,
) -> Result<FindMax, ScenarioError> {
    let raw = f.get_ref();
    let positive = |v: &Option<Spanned<f64>>, key: &str| -> Result<Option<f64>, ScenarioError> {
        match v {
            Some(x) if !(x.get_ref().is_finite() && *x.get_ref() > 0.0) => {
                Err(src.error(x.span(), format!("{key} must be a positive number"), None))
            }
            Some(x) => Ok(Some(*x.get_ref())),
            None => Ok(None),
        }
    };
    let default_start = match &load.model {
        Model::Open { rate, .. } => rate.max(),
        Model::Closed { vus } => vus.max(),
    };
    let start = positive(&raw.start, "start")?.unwrap_or(default_start);
    let step = match (
        positive(&raw.step, "step")?,
        positive(&raw.factor, "factor")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(src.error_at_key(
                f.span(),
                "find_max",
                "give either step (added) or factor (multiplied), not both",
                None,
            ));
        }
        (Some(s), None) => Step::Add(s),
        (None, Some(x)) if x > 1.0 => Step::Multiply(x),
        (None, Some(_)) => {
            return Err(src.error_at_key(
                f.span(),
                "find_max.factor",
                "factor must be greater than 1",
                None,
            ));
        }
        (None, None) => Step::Multiply(1.5),
    };
    let max = positive(&raw.max, "max")?.unwrap_or(start * 1000.0);
    if max < start {
        return Err(src.error_at_key(f.span(), "find_max.max", "max is below start", None));
    }
    let step_duration = match &raw.step_duration {
        Some(d) => dur(src, d, "find_max.step_duration")?,
        None => load.duration.min(Duration::from_secs(10)),
    };
    let p99 = raw
        .p99
        .as_ref()
        .map(|d| dur(src, d, "find_max.p99"))
        .transpose()?;
    let error_rate = match &raw.error_rate {
        Some(e) if !(0.0..=1.0).contains(e.get_ref()) => {
            return Err(src.error(e.span(), "error_rate is a fraction from 0 to 1", None));
        }
        Some(e) => Some(*e.get_ref()),
        None => None,
    };
    if p99.is_none() && error_rate.is_none() {
        return Err(src.error_at_key(
            f.span(),
            "find_max",
            "[find_max] needs an SLO: p99, error_rate or both",
            Some("e.g. p99 = \"50ms\"\n    error_rate = 0.01".into()),
        ));
    }
    Ok(FindMax {
        start,
        step,
        max,
        step_duration,
        p99,
        error_rate,
    })
}

fn stem(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into())
}

fn line_of(src: &Source<'_>, offset: usize) -> usize {
    src.text[..offset.min(src.text.len())].matches('\n').count() + 1
}

fn toml_error(src: &Source<'_>, e: &toml::de::Error) -> ScenarioError {
    let span = e.span().unwrap_or(0..0);
    let raw_msg = e.message().trim().to_string();
    let mut message = raw_msg
        .replace("expected u32", "expected a non-negative integer")
        .replace("expected f64", "expected a number")
        .replace("expected a string", "expected a string (in quotes)");
    let loc_key = super::locate::locate(src.text, span.start).key;
    let mut hint = key_hint(&loc_key);
    if let Some(field) = between(&raw_msg, "unknown field `", "`") {
        let table = table_of(&loc_key, field);
        let known = KNOWN_KEYS
            .iter()
            .find(|(t, _)| *t == table)
            .map(|(_, k)| *k)
            .unwrap_or(&[]);
        message = format!("unknown key `{field}`");
        hint = Some(match closest(field, known) {
            Some(k) => format!("did you mean `{k}`? (keys here: {})", known.join(", ")),
            None => format!("keys here: {}", known.join(", ")),
        });
    } else if let Some(field) = between(&raw_msg, "missing field `", "`") {
        message = format!("missing key `{field}`");
    }
    if hint.is_none() && span.is_empty() {
        hint =
            Some("check the TOML syntax: key = value, strings in quotes, [table] headers".into());
    }
    src.error(span, message, hint)
}

/// The table an unknown key was found in, from the located key path.
fn table_of(path: &str, field: &str) -> String {
    let path = strip_indexes(path);
    let trimmed = path
        .strip_suffix(field)
        .unwrap_or(&path)
        .trim_end_matches('.');
    trimmed.to_string()
}

fn strip_indexes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)? + i;
    Some(&s[i..j])
}

/// The known key nearest to `word` by edit distance, if it is plausibly a typo.
pub(crate) fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

fn key_hint(path: &str) -> Option<String> {
    let key = strip_indexes(path);
    let h = match key.as_str() {
        "name" => "a short name for the run, e.g. name = \"gateway-smoke\"",
        "load.concurrency" => "the number of virtual users, a positive integer: concurrency = 16",
        "load.duration" | "load.warmup" | "load.timeout" => {
            "a duration in quotes, e.g. \"30s\", \"500ms\", \"2m\""
        }
        "load.workers" => "generator threads, a positive integer (default: one per core)",
        "load.model" => "\"closed\" (virtual users) or \"open\" (arrival rate)",
        "workload.weight" => {
            "a positive integer; entries are picked in proportion to their weights"
        }
        "workload.method" => "\"tools/list\" or \"tools/call\"",
        "workload.tool" => "the name of a tool the target lists",
        "target.url" => "e.g. url = \"http://127.0.0.1:8080/mcp\" (http, https, ws or wss)",
        "target.transport" | "embedded.transport" => {
            "\"streamable-http\", \"sse\" (legacy HTTP+SSE), \"websocket\" or \"stdio\""
        }
        "target.protocol" | "embedded.protocol" => {
            "\"auto\" or one of 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28"
        }
        "target.http" | "embedded.http" => "\"1.1\" or \"2\"",
        "target.command" => {
            "the server command as an array, e.g. command = [\"node\", \"server.js\", \"stdio\"]"
        }
        "target.tls.ca" => "a PEM file of the CA (or self-signed certificate) to trust",
        "load.sessions" => {
            "\"per-vu\" (a session per virtual user), \"shared\" (one per worker thread, many requests in flight) or \"per-request\" (session churn)"
        }
        "load.arrival" => "\"poisson\" (independent arrivals) or \"uniform\" (evenly spaced)",
        "workload.progress" => {
            "true to ask for progress notifications (progressToken = request id)"
        }
        "embedded.response" => "\"json\" or \"sse\"",
        "embedded.catalog" => {
            "the number of synthetic tools the built-in server adds to tools/list"
        }
        "embedded.page_size" => "tools per tools/list page, a positive integer",
        "embedded.backend_latency" => {
            "e.g. \"5ms\", \"uniform:1ms..10ms\", \"lognormal:p50=2ms,p99=20ms\""
        }
        "embedded.backend_error_rate" => "a fraction from 0.0 to 1.0",
        "embedded.backend_payload" => "extra bytes in each backend response",
        _ => return None,
    };
    Some(h.to_string())
}

/// A value from a closed set of names (aliases included), or an error naming `what` with the
/// key's hint.
fn one_of<T: Copy>(
    src: &Source<'_>,
    v: &Spanned<String>,
    what: &str,
    key: &str,
    options: &[(&str, T)],
) -> Result<T, ScenarioError> {
    let s = v.get_ref().as_str();
    options
        .iter()
        .find(|(name, _)| *name == s)
        .map(|(_, t)| *t)
        .ok_or_else(|| src.error(v.span(), format!("unknown {what} `{s}`"), key_hint(key)))
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
    let r: Revision =
        p.get_ref()
            .parse()
            .map_err(|e: crate::protocol::version::UnknownRevision| {
                src.error(p.span(), e.to_string(), key_hint(key))
            })?;
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

fn target(
    src: &Source<'_>,
    t: &Spanned<RawTarget>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Remote, ScenarioError> {
    let raw = t.get_ref();
    let url = match &raw.url {
        Some(u) => Some(
            parse_url(u.get_ref()).map_err(|m| src.error(u.span(), m, key_hint("target.url")))?,
        ),
        None => None,
    };
    let transport = match (&raw.transport, &url, &raw.command) {
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
    };
    let mut command = None;
    if transport == TransportKind::Stdio {
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
        let mut envs = Vec::new();
        for (k, v) in &raw.env {
            let val =
                expand_env(v.get_ref(), env).map_err(|e| src.error(v.span(), e.message, None))?;
            envs.push((k.clone(), val));
        }
        command = Some(CommandSpec {
            program: program.clone(),
            args: args.to_vec(),
            env: envs,
            cwd: raw.cwd.as_ref().map(|c| c.get_ref().into()),
        });
    } else {
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
        let u = url.as_ref().ok_or_else(|| {
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
    }
    let protocol = match &raw.protocol {
        Some(p) => protocol_choice(src, p, "target.protocol")?,
        None => default_protocol(transport),
    };
    let http2 = match &raw.http {
        Some(h) => http_version(src, h, "target.http", transport)?,
        None => false,
    };
    let tls_url = url.as_ref().is_some_and(|u| u.scheme.is_tls());
    let trust = match &raw.tls {
        None => Trust::System,
        Some(tls) => {
            if !tls_url {
                return Err(src.error_at_key(
                    tls.span(),
                    "target.tls",
                    "[target.tls] applies to https:// and wss:// targets",
                    None,
                ));
            }
            let t = tls.get_ref();
            match (&t.ca, t.insecure.as_ref().map(|i| *i.get_ref())) {
                (Some(ca), Some(true)) => {
                    return Err(src.error(
                        ca.span(),
                        "choose either a CA file or insecure = true",
                        None,
                    ));
                }
                (Some(ca), _) => {
                    let path = std::path::PathBuf::from(ca.get_ref());
                    if !path.is_file() {
                        return Err(src.error(
                            ca.span(),
                            format!("CA file {} does not exist", path.display()),
                            key_hint("target.tls.ca"),
                        ));
                    }
                    Trust::CaFile(path)
                }
                (None, Some(true)) => Trust::Insecure,
                (None, _) => Trust::System,
            }
        }
    };
    let mut headers = Vec::new();
    for (name, value) in &raw.headers {
        let lname = name.to_ascii_lowercase();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(src.error(
                value.span(),
                format!("`{name}` is not a valid header name"),
                None,
            ));
        }
        const RESERVED: &[&str] = &[
            "content-length",
            "content-type",
            "accept",
            "mcp-session-id",
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
            "transfer-encoding",
            "connection",
            "upgrade",
            "sec-websocket-key",
            "sec-websocket-version",
            "sec-websocket-protocol",
        ];
        if RESERVED.contains(&lname.as_str()) {
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
        if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(src.error(
                value.span(),
                format!("the value of header `{name}` contains a line break"),
                None,
            ));
        }
        headers.push((name.clone(), v));
    }
    if transport == TransportKind::Stdio && !headers.is_empty() {
        return Err(src.error_at_key(
            t.span(),
            "target.headers",
            "stdio targets take credentials from `env`, not headers",
            None,
        ));
    }
    Ok(Remote {
        conn: Connection {
            transport,
            protocol,
            http2,
        },
        url,
        command,
        headers,
        trust,
    })
}

/// Splits `scheme://host:port/path` into its parts (http, https, ws, wss).
pub fn parse_url(url: &str) -> Result<Url, String> {
    let (scheme, rest) = if let Some(r) = url.strip_prefix("http://") {
        (Scheme::Http, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (Scheme::Https, r)
    } else if let Some(r) = url.strip_prefix("ws://") {
        (Scheme::Ws, r)
    } else if let Some(r) = url.strip_prefix("wss://") {
        (Scheme::Wss, r)
    } else {
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

fn embedded(src: &Source<'_>, e: Option<&Spanned<RawEmbedded>>) -> Result<Embedded, ScenarioError> {
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
    if let Some(c) = &e.catalog {
        out.catalog = *c.get_ref() as usize;
        if out.catalog > 100_000 {
            return Err(src.error(c.span(), "catalog is limited to 100000 tools", None));
        }
    }
    if let Some(p) = &e.page_size {
        if *p.get_ref() == 0 {
            return Err(src.error(
                p.span(),
                "page_size must be at least 1",
                key_hint("embedded.page_size"),
            ));
        }
        out.page_size = *p.get_ref() as usize;
    }
    if let Some(l) = &e.backend_latency {
        out.backend.latency = Some(l.get_ref().parse().map_err(|m: mock_backend::KnobError| {
            src.error(
                l.span(),
                m.to_string(),
                key_hint("embedded.backend_latency"),
            )
        })?);
    }
    if let Some(r) = &e.backend_error_rate {
        let v = *r.get_ref();
        if !(0.0..=1.0).contains(&v) {
            return Err(src.error(
                r.span(),
                format!("{v} is not a fraction"),
                key_hint("embedded.backend_error_rate"),
            ));
        }
        out.backend.error_rate = Some(v);
    }
    if let Some(p) = &e.backend_payload {
        out.backend.payload = Some(*p.get_ref() as usize);
    }
    Ok(out)
}

fn dur(src: &Source<'_>, v: &Spanned<String>, key: &str) -> Result<Duration, ScenarioError> {
    duration::parse(v.get_ref()).map_err(|m| src.error(v.span(), m, key_hint(key)))
}

fn load(src: &Source<'_>, l: &Spanned<RawLoad>) -> Result<Load, ScenarioError> {
    let raw = l.get_ref();
    let open = match &raw.model {
        None => false,
        Some(m) => one_of(
            src,
            m,
            "load model",
            "load.model",
            &[("closed", false), ("open", true)],
        )?,
    };
    // Keys that belong to the other model are mistakes, not silently ignored.
    if open {
        if let Some(t) = &raw.think {
            return Err(src.error(
                t.span(),
                "think time applies to the closed model; an open model's rate sets the pace",
                None,
            ));
        }
    } else {
        for (span, key) in [
            (raw.rate.as_ref().map(|r| r.span()), "rate"),
            (raw.arrival.as_ref().map(|r| r.span()), "arrival"),
            (
                raw.max_in_flight.as_ref().map(|r| r.span()),
                "max_in_flight",
            ),
        ] {
            if let Some(span) = span {
                return Err(src.error(
                    span,
                    format!("`{key}` belongs to the open model"),
                    Some("add model = \"open\", or use concurrency for virtual users".into()),
                ));
            }
        }
    }
    let timeout = raw
        .timeout
        .as_ref()
        .map(|t| dur(src, t, "load.timeout"))
        .transpose()?
        .unwrap_or(Duration::from_secs(10));
    if timeout < Duration::from_millis(1) {
        let t = raw.timeout.as_ref().map_or(l.span(), |t| t.span());
        return Err(src.error(t, "timeout must be at least 1ms", key_hint("load.timeout")));
    }
    let requests = match &raw.requests {
        Some(r) if *r.get_ref() == 0 => {
            return Err(src.error(
                r.span(),
                "requests must be at least 1",
                key_hint("load.requests"),
            ));
        }
        Some(r) => Some(*r.get_ref()),
        None => None,
    };
    // The level before the stages, or throughout without stages.
    let base = if open {
        match &raw.rate {
            Some(r)
                if !(r.get_ref().is_finite()
                    && *r.get_ref() >= 0.0
                    && *r.get_ref() <= 10_000_000.0) =>
            {
                return Err(src.error(
                    r.span(),
                    "rate must be from 0 to 10000000 requests per second",
                    key_hint("load.rate"),
                ));
            }
            Some(r) => Some(*r.get_ref()),
            None => None,
        }
    } else {
        match &raw.concurrency {
            Some(c) if *c.get_ref() > 100_000 => {
                return Err(src.error(c.span(), "concurrency is limited to 100000", None));
            }
            Some(c) if *c.get_ref() == 0 && raw.stages.is_empty() => {
                return Err(src.error(
                    c.span(),
                    "concurrency must be at least 1",
                    key_hint("load.concurrency"),
                ));
            }
            Some(c) => Some(*c.get_ref() as f64),
            None => None,
        }
    };
    let mut stages = Vec::new();
    for st in &raw.stages {
        let sr = st.get_ref();
        let d = dur(src, &sr.duration, "load.stages.duration")?;
        let target = if open {
            if let Some(c) = &sr.concurrency {
                return Err(src.error(
                    c.span(),
                    "an open-model stage sets a rate",
                    key_hint("load.stages.rate"),
                ));
            }
            match &sr.rate {
                Some(r)
                    if !(r.get_ref().is_finite()
                        && *r.get_ref() >= 0.0
                        && *r.get_ref() <= 10_000_000.0) =>
                {
                    return Err(src.error(
                        r.span(),
                        "rate must be from 0 to 10000000 requests per second",
                        key_hint("load.stages.rate"),
                    ));
                }
                Some(r) => *r.get_ref(),
                None => {
                    return Err(src.error_at_key(
                        st.span(),
                        "load.stages.rate",
                        "an open-model stage needs a rate",
                        key_hint("load.stages.rate"),
                    ));
                }
            }
        } else {
            if let Some(r) = &sr.rate {
                return Err(src.error(
                    r.span(),
                    "a closed-model stage sets a concurrency",
                    key_hint("load.stages.concurrency"),
                ));
            }
            match &sr.concurrency {
                Some(c) if *c.get_ref() > 100_000 => {
                    return Err(src.error(c.span(), "concurrency is limited to 100000", None));
                }
                Some(c) => *c.get_ref() as f64,
                None => {
                    return Err(src.error_at_key(
                        st.span(),
                        "load.stages.concurrency",
                        "a closed-model stage needs a concurrency",
                        key_hint("load.stages.concurrency"),
                    ));
                }
            }
        };
        stages.push((d, target));
    }
    let limit = REQUESTS_ONLY_LIMIT;
    let profile = if stages.is_empty() {
        let level = match (base, open) {
            (Some(b), _) => b,
            (None, false) => 1.0,
            (None, true) => {
                return Err(src.error_at_key(
                    l.span(),
                    "load.rate",
                    "an open model needs a rate (or stages)",
                    key_hint("load.rate"),
                ));
            }
        };
        let duration = match (&raw.duration, requests) {
            (Some(d), _) => dur(src, d, "load.duration")?,
            (None, Some(_)) => limit,
            (None, None) => {
                return Err(src.error_at_key(
                    l.span(),
                    "load.duration",
                    "[load] needs a duration (or a request count)",
                    key_hint("load.duration"),
                ));
            }
        };
        Profile::constant(level, duration)
    } else {
        if let Some(d) = &raw.duration {
            return Err(src.error(
                d.span(),
                "with stages, the duration is the sum of the stages'",
                Some("remove `duration`".into()),
            ));
        }
        Profile {
            start: base.unwrap_or(0.0),
            stages,
        }
    };
    let duration = profile.duration();
    if duration.is_zero() {
        let d = raw.duration.as_ref().map_or(l.span(), |d| d.span());
        return Err(src.error(
            d,
            "duration must be greater than zero",
            key_hint("load.duration"),
        ));
    }
    if profile.max() <= 0.0 {
        return Err(src.error_at_key(
            l.span(),
            if open {
                "load.rate"
            } else {
                "load.concurrency"
            },
            "the load is zero throughout",
            None,
        ));
    }
    let warmup = raw
        .warmup
        .as_ref()
        .map(|w| dur(src, w, "load.warmup"))
        .transpose()?
        .unwrap_or(Duration::ZERO);
    if warmup >= duration {
        let w = raw.warmup.as_ref().map_or(l.span(), |w| w.span());
        return Err(src.error(
            w,
            "warmup must be shorter than duration (warm-up is part of the duration)",
            None,
        ));
    }
    let think = match &raw.think {
        None => None,
        Some(t) => {
            let parsed = match t.get_ref().split_once("..") {
                Some((a, b)) => duration::parse(a).and_then(|a| duration::parse(b).map(|b| (a, b))),
                None => duration::parse(t.get_ref()).map(|d| (d, d)),
            };
            let (a, b) = parsed.map_err(|m| src.error(t.span(), m, key_hint("load.think")))?;
            if a > b {
                return Err(src.error(
                    t.span(),
                    "the think-time range is empty",
                    key_hint("load.think"),
                ));
            }
            Some((a, b))
        }
    };
    let sessions = match &raw.sessions {
        None => Sessions::PerVu,
        Some(s) => {
            let options = [
                ("per-vu", Sessions::PerVu),
                ("shared", Sessions::Shared),
                ("per-request", Sessions::PerRequest),
            ];
            one_of(src, s, "session mode", "load.sessions", &options)?
        }
    };
    let workers = match &raw.workers {
        Some(w) if *w.get_ref() == 0 || *w.get_ref() > 1024 => {
            return Err(src.error(
                w.span(),
                "workers must be from 1 to 1024",
                key_hint("load.workers"),
            ));
        }
        Some(w) => Some(*w.get_ref() as usize),
        None => None,
    };
    let (model, concurrency) = if open {
        let arrival = match &raw.arrival {
            None => Arrival::Poisson,
            Some(a) => {
                let options = [("poisson", Arrival::Poisson), ("uniform", Arrival::Uniform)];
                one_of(src, a, "arrival process", "load.arrival", &options)?
            }
        };
        let max_in_flight = match &raw.max_in_flight {
            Some(m) if *m.get_ref() == 0 || *m.get_ref() > 100_000 => {
                return Err(src.error(
                    m.span(),
                    "max_in_flight must be from 1 to 100000",
                    key_hint("load.max_in_flight"),
                ));
            }
            Some(m) => *m.get_ref() as usize,
            // Enough for the peak rate at a 100 ms latency, within reason.
            None => ((profile.max() * 0.1).ceil() as usize).clamp(16, 10_000),
        };
        (
            Model::Open {
                rate: profile,
                arrival,
            },
            max_in_flight,
        )
    } else {
        let vus = profile.max().ceil() as usize;
        (Model::Closed { vus: profile }, vus)
    };
    let max_queued = match &raw.max_queued {
        Some(q) if *q.get_ref() > 10_000_000 => {
            return Err(src.error(
                q.span(),
                "max_queued is limited to 10000000",
                key_hint("load.max_queued"),
            ));
        }
        Some(q) if !open => {
            return Err(src.error(q.span(), "`max_queued` belongs to the open model", None));
        }
        Some(q) => *q.get_ref() as usize,
        None => concurrency,
    };
    Ok(Load {
        model,
        concurrency,
        duration,
        requests,
        max_queued,
        warmup,
        timeout,
        think,
        workers,
        sessions,
    })
}

fn work_item(
    src: &Source<'_>,
    w: &Spanned<RawWorkload>,
    target: &Target,
    ops: &mut Vec<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<WorkItem, ScenarioError> {
    let raw = w.get_ref();
    let line = line_of(src, w.span().start);
    let method_s = raw.method.as_ref().ok_or_else(|| {
        src.error_at_key(
            w.span(),
            "workload.method",
            "workload entry needs a method",
            key_hint("workload.method"),
        )
    })?;
    let method = match method_s.get_ref().as_str() {
        "tools/list" => {
            if let Some(t) = &raw.tool {
                return Err(src.error(
                    t.span(),
                    "tools/list takes no tool",
                    Some("remove `tool`, or use method = \"tools/call\"".into()),
                ));
            }
            if let Some(a) = &raw.arguments {
                return Err(src.error(
                    a.span(),
                    "tools/list takes no arguments",
                    Some("remove `arguments`".into()),
                ));
            }
            Method::ToolsList
        }
        "tools/call" => {
            let tool = raw.tool.as_ref().ok_or_else(|| {
                src.error(
                    method_s.span(),
                    "tools/call needs a `tool`",
                    Some("add e.g. tool = \"echo\"".into()),
                )
            })?;
            if let Target::Embedded(e) = target
                && !crate::server::tools::is_known(tool.get_ref(), e.catalog)
            {
                let names = crate::server::tools::builtin_names();
                let suggestion = closest(tool.get_ref(), &names)
                    .map(|s| format!("did you mean `{s}`? "))
                    .unwrap_or_default();
                return Err(src.error(
                    tool.span(),
                    format!(
                        "unknown tool `{}`: the built-in server has no such tool",
                        tool.get_ref()
                    ),
                    Some(format!("{suggestion}built-in tools: {}", names.join(", "))),
                ));
            }
            if tool.get_ref().is_empty() {
                return Err(src.error(
                    tool.span(),
                    "tool name is empty",
                    key_hint("workload.tool"),
                ));
            }
            Method::ToolsCall {
                tool: tool.get_ref().clone(),
            }
        }
        other => {
            return Err(src.error(
                method_s.span(),
                format!("unsupported method `{other}`"),
                key_hint("workload.method"),
            ));
        }
    };
    let weight = match &raw.weight {
        Some(wt) if *wt.get_ref() == 0 => {
            return Err(src.error(
                wt.span(),
                "weight must be at least 1",
                key_hint("workload.weight"),
            ));
        }
        Some(wt) => *wt.get_ref(),
        None => 1,
    };
    let rows = match &raw.rows {
        None => None,
        Some(r) => {
            // Relative to the scenario file.
            let base = std::path::Path::new(src.name)
                .parent()
                .unwrap_or(std::path::Path::new("."));
            let path = base.join(r.get_ref());
            Some(std::sync::Arc::new(
                super::args::Rows::load(&path).map_err(|m| {
                    src.error(
                        r.span(),
                        m,
                        Some("a JSON Lines file: one JSON object per line".into()),
                    )
                })?,
            ))
        }
    };
    let arguments = match &raw.arguments {
        None => ArgTemplate::empty(),
        Some(a) => ArgTemplate::compile(a.get_ref(), env, rows).map_err(|e| {
            let key = if e.path.is_empty() {
                "arguments".to_string()
            } else {
                format!("arguments.{}", e.path)
            };
            let loc = super::locate::locate(src.text, a.span().start);
            let prefix = loc
                .key
                .strip_suffix("arguments")
                .unwrap_or(&loc.key)
                .to_string();
            src.error_at_key(
                a.span(),
                &format!("{prefix}{key}"),
                e.message,
                Some(e.hint.to_string()),
            )
        })?,
    };
    let op_name = match &method {
        Method::ToolsList => "tools/list".to_string(),
        Method::ToolsCall { tool } => format!("tools/call:{tool}"),
    };
    let op = match ops.iter().position(|o| *o == op_name) {
        Some(i) => i,
        None => {
            ops.push(op_name);
            ops.len() - 1
        }
    };
    let progress = raw.progress.as_ref().is_some_and(|p| *p.get_ref());
    Ok(WorkItem {
        method,
        weight,
        op,
        arguments,
        progress,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Diagnostic, parse};

    fn err(text: &str) -> Diagnostic {
        match parse("t.toml", text, &|_| None) {
            Err(ScenarioError::Invalid(d)) => *d,
            other => panic!("expected a diagnostic, got {other:?}"),
        }
    }

    const OK: &str = "name = \"q\"\n[load]\nconcurrency = 4\nduration = \"2s\"\n\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hi\" }\n\n[[workload]]\nmethod = \"tools/list\"\nweight = 2\n";

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

        let d = err(&OK.replace("tool = \"echo\"", "tool = \"ecko\""));
        assert_eq!((d.line, d.key.as_str()), (8, "workload[1].tool"));
        assert!(d.message.contains("unknown tool `ecko`"));
        assert!(d.hint.unwrap().contains("did you mean `echo`?"));

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
