//! Running a plan: embedded servers, preflight, worker threads, collection, results.

pub mod findmax;
pub mod preflight;
pub mod runner;
pub mod schedule;
pub mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::metrics::collector::{Collector, CsvWriter, HlogWriter, IntervalSnapshot};
use crate::metrics::recorder::SessionCounts;
use crate::protocol::jsonrpc::Codec;
use crate::protocol::version::Revision;
use crate::report::summary::{
    self, Generator, LoadInfo, Operation, ProfileInfo, ScenarioInfo, StageInfo, Summary,
    TargetInfo, WarmupOperation,
};
use crate::report::{files, text};
use crate::scenario::plan::Url;
use crate::scenario::plan::{Arrival, Model};
use crate::scenario::{Method, Plan, ProtocolChoice, Sessions, Target};
use crate::server::EmbeddedServers;
use crate::transport::net::{NetTarget, TlsClient};
use crate::transport::{CommandSpec, Endpoint, TransportKind};

/// How to run (beyond what the scenario says).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The run directory; `None` makes `<results_root>/<UTC time>-<name>`.
    pub output: Option<PathBuf>,
    pub results_root: PathBuf,
    pub codec: Codec,
    /// Length of a histogram interval (time series, hlog, progress lines).
    pub interval: Duration,
    /// Print one progress line per interval to stderr.
    pub progress: bool,
    /// Overrides the scenario's `workers`.
    pub workers: Option<usize>,
    /// Scenario file path, for the report.
    pub scenario_file: String,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            output: None,
            results_root: PathBuf::from("results"),
            codec: Codec::default(),
            interval: Duration::from_secs(1),
            progress: false,
            workers: None,
            scenario_file: String::new(),
        }
    }
}

/// A run that could not start, or whose results could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Embedded(#[from] crate::server::EmbeddedError),
    #[error("cannot resolve {target}: {reason}")]
    Resolve { target: String, reason: String },
    #[error("target {url} is not usable: {source}")]
    Preflight {
        url: String,
        source: preflight::PreflightError,
    },
    #[error("{file}:{line}: tool `{tool}` is not listed by the target{}", suggest(.available))]
    UnknownTool {
        file: String,
        line: usize,
        tool: String,
        available: Vec<String>,
    },
    #[error(
        "{file}:{line}: the arguments generated for tool `{tool}` do not fit its input schema: {message}\n  example: {example}\n  hint: fix the generators in `arguments` (see scenarios/README.md)"
    )]
    Arguments {
        file: String,
        line: usize,
        tool: String,
        message: String,
        example: String,
    },
    #[error("TLS set-up for {target}: {reason}")]
    Tls { target: String, reason: String },
    #[error("cannot write results to {path}: {source}")]
    Output {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
}

fn suggest(available: &[String]) -> String {
    if available.is_empty() {
        return " (it lists no tools)".into();
    }
    let shown: Vec<&str> = available.iter().take(20).map(String::as_str).collect();
    let more = if available.len() > 20 {
        format!(" and {} more", available.len() - 20)
    } else {
        String::new()
    };
    format!("\n  hint: it lists {}{more}", shown.join(", "))
}

/// Every tool the workload calls exists, and its generated arguments fit the tool's input
/// schema (checked on a sample of renderings now, rather than failing every call later).
fn check_workload(plan: &Plan, pre: &preflight::Preflight, file: &str) -> Result<(), RunError> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    for item in &plan.workload {
        let Method::ToolsCall { tool } = &item.method else {
            continue;
        };
        let Some((_, schema)) = pre.tools.iter().find(|(n, _)| n == tool) else {
            return Err(RunError::UnknownTool {
                file: file.into(),
                line: item.line,
                tool: tool.clone(),
                available: pre.tools.iter().map(|(n, _)| n.clone()).collect(),
            });
        };
        for _ in 0..ARGUMENT_SAMPLES {
            let args = item.arguments.sample(&mut rng);
            if let Err(message) = crate::server::schema::validate(schema, &args) {
                return Err(RunError::Arguments {
                    file: file.into(),
                    line: item.line,
                    tool: tool.clone(),
                    message,
                    example: args.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Renderings of each workload entry's arguments checked against the tool's schema.
const ARGUMENT_SAMPLES: usize = 32;

/// The least time a session opening gets.
pub const OPEN_TIMEOUT_MIN: Duration = Duration::from_secs(5);

/// A finished run.
#[derive(Debug)]
pub struct RunOutput {
    pub summary: Summary,
    pub dir: PathBuf,
}

struct Resolved {
    endpoint: Endpoint,
    /// What the report names as the target (never secrets).
    url: String,
    kind: &'static str,
    headers: Vec<String>,
    _embedded: Option<EmbeddedServers>,
}

fn resolve_addr(u: &Url) -> Result<SocketAddr, RunError> {
    let hostport = format!(
        "{}:{}",
        u.host.trim_start_matches('[').trim_end_matches(']'),
        u.port
    );
    hostport
        .to_socket_addrs()
        .map_err(|e| RunError::Resolve {
            target: u.text.clone(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| RunError::Resolve {
            target: u.text.clone(),
            reason: "no address".into(),
        })
}

/// The endpoint for a plan: embedded servers started, names resolved, TLS configured.
fn resolve(plan: &Plan, opts: &RunOptions) -> Result<Resolved, RunError> {
    let max_body = 64 * 1024 * 1024;
    // Opening a session (connecting, TLS, launching a process, the handshake) gets at least
    // 5 s whatever the request timeout: a child process or a TLS handshake is slower than a call.
    let timeout = plan.load.timeout.max(OPEN_TIMEOUT_MIN);
    let conn = plan.connection();
    let base = |kind| Endpoint {
        kind,
        net: None,
        host: String::new(),
        path: String::new(),
        extra_headers: Vec::new(),
        headers: Vec::new(),
        http2: conn.http2,
        command: None,
        protocol: match conn.protocol {
            ProtocolChoice::Fixed(r) => r,
            ProtocolChoice::Auto => Revision::V2026_07_28,
        },
        codec: opts.codec,
        max_body,
        timeout,
    };
    match &plan.target {
        Target::Embedded(e) => {
            let threads = std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(4);
            let servers = EmbeddedServers::start(
                e.response,
                e.catalog,
                e.page_size,
                e.backend.clone(),
                threads,
            )?;
            let mut ep = base(conn.transport);
            let url;
            if conn.transport == TransportKind::Stdio {
                let exe = std::env::current_exe().map_err(RunError::Runtime)?;
                let mut args = vec![
                    "serve".to_string(),
                    "--stdio".into(),
                    "--backend".into(),
                    servers.backend_url.clone(),
                ];
                args.extend([
                    "--catalog".into(),
                    e.catalog.to_string(),
                    "--page-size".into(),
                    e.page_size.to_string(),
                ]);
                url = format!("{} {}", exe.display(), args.join(" "));
                ep.command = Some(CommandSpec {
                    program: exe.display().to_string(),
                    args,
                    env: Vec::new(),
                    cwd: None,
                });
            } else {
                let path = match conn.transport {
                    TransportKind::LegacySse => "/sse",
                    TransportKind::WebSocket => "/ws",
                    _ => "/mcp",
                };
                let scheme = if conn.transport == TransportKind::WebSocket {
                    "ws"
                } else {
                    "http"
                };
                url = format!("{scheme}://{}{path}", servers.mcp_addr);
                ep.net = Some(NetTarget {
                    addr: servers.mcp_addr,
                    tls: None,
                    connect_timeout: timeout,
                });
                ep.host = servers.mcp_addr.to_string();
                ep.path = path.into();
            }
            Ok(Resolved {
                url,
                endpoint: ep,
                kind: "embedded",
                headers: Vec::new(),
                _embedded: Some(servers),
            })
        }
        Target::Remote(r) => {
            let mut ep = base(conn.transport);
            ep.command = r.command.clone();
            if let Some(u) = &r.url {
                let addr = resolve_addr(u)?;
                let tls = if u.scheme.is_tls() {
                    let alpn: &[&[u8]] = if conn.http2 { &[b"h2"] } else { &[b"http/1.1"] };
                    Some(
                        TlsClient::new(&u.host, &r.trust, alpn).map_err(|e| RunError::Tls {
                            target: u.text.clone(),
                            reason: e.to_string(),
                        })?,
                    )
                } else {
                    None
                };
                let default_port = if u.scheme.is_tls() { 443 } else { 80 };
                ep.host = if u.port == default_port {
                    u.host.clone()
                } else {
                    format!("{}:{}", u.host, u.port)
                };
                ep.path = u.path.clone();
                ep.net = Some(NetTarget {
                    addr,
                    tls,
                    connect_timeout: timeout,
                });
            }
            for (name, value) in &r.headers {
                if name.eq_ignore_ascii_case("host") {
                    ep.host = value.clone();
                    continue;
                }
                ep.extra_headers
                    .extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                ep.headers.push((name.clone(), value.clone()));
            }
            Ok(Resolved {
                url: r.describe(),
                endpoint: ep,
                kind: "remote",
                headers: r.headers.iter().map(|(n, _)| n.clone()).collect(),
                _embedded: None,
            })
        }
    }
}

/// Preflight on a local task set (multiplexed transports spawn reader tasks).
fn preflight_on(
    rt: &tokio::runtime::Runtime,
    ep: Endpoint,
) -> Result<preflight::Preflight, preflight::PreflightError> {
    let local = tokio::task::LocalSet::new();
    local.block_on(rt, preflight::run(Arc::new(ep)))
}

/// Runs a plan to the end (or until `interrupt` is cancelled) and writes its results.
pub fn run(
    plan: Arc<Plan>,
    opts: &RunOptions,
    interrupt: CancellationToken,
) -> Result<RunOutput, RunError> {
    let resolved = resolve(&plan, opts)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(RunError::Runtime)?;

    // `protocol = "auto"`: probe server/discover (2026-07-28), else fall back to initialize.
    let mut endpoint = resolved.endpoint;
    let pre = match (
        plan.connection().protocol,
        preflight_on(&rt, endpoint.clone()),
    ) {
        (_, Ok(p)) => p,
        (ProtocolChoice::Auto, Err(modern)) => {
            endpoint.protocol = Revision::LATEST_HANDSHAKE;
            preflight_on(&rt, endpoint.clone()).map_err(|legacy| RunError::Preflight {
                url: resolved.url.clone(),
                source: preflight::PreflightError::Open(format!(
                    "2026-07-28 probe: {modern}; initialize: {legacy}"
                )),
            })?
        }
        (_, Err(source)) => {
            return Err(RunError::Preflight {
                url: resolved.url.clone(),
                source,
            });
        }
    };
    if !pre.revision.has_handshake() {
        endpoint.protocol = pre.revision;
    }
    let endpoint = Arc::new(endpoint);
    check_workload(&plan, &pre, &opts.scenario_file)?;

    // Operation 0 is the session opening: `initialize`, or `server/discover` for 2026-07-28.
    let mut ops = plan.ops.clone();
    if !pre.revision.has_handshake() {
        ops[0] = "server/discover".into();
    }

    let started_wall = SystemTime::now();
    let started_utc = time::OffsetDateTime::from(started_wall);
    let dir = opts
        .output
        .clone()
        .unwrap_or_else(|| files::default_dir(&opts.results_root, &plan.name, started_utc));
    std::fs::create_dir_all(&dir).map_err(|source| RunError::Output {
        path: dir.display().to_string(),
        source,
    })?;
    let hlog_path = dir.join("latency.hlog");
    let hlog =
        HlogWriter::create(&hlog_path, started_wall, &ops).map_err(|source| RunError::Output {
            path: hlog_path.display().to_string(),
            source,
        })?;

    let workers = opts
        .workers
        .or(plan.load.workers)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(plan.load.concurrency)
        .max(1);
    let start = Instant::now() + Duration::from_millis(20);
    let abort = CancellationToken::new();
    let ctx = Arc::new(runner::Ctx {
        templates: plan
            .workload
            .iter()
            .map(|w| workload::RequestTemplate::new(w, pre.revision))
            .collect(),
        specs: plan
            .workload
            .iter()
            .map(|w| workload::call_spec(w, pre.revision))
            .collect(),
        mix: workload::Mix::new(&plan.workload),
        plan: plan.clone(),
        endpoint,
        start,
        warmup_end: start + plan.load.warmup,
        end: start + plan.load.duration,
        timeout: plan.load.timeout,
        interval: opts.interval,
        abort: abort.clone(),
        aborted: std::sync::atomic::AtomicBool::new(false),
        workers,
        seed: started_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64),
    });

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut recyclers = Vec::new();
    let mut threads = Vec::new();
    for w in 0..workers {
        let (rtx, rrx) = std::sync::mpsc::channel();
        recyclers.push(rtx);
        let vus: Vec<usize> = (0..plan.load.concurrency)
            .filter(|v| v % workers == w)
            .collect();
        let (ctx, tx) = (ctx.clone(), tx.clone());
        let t = std::thread::Builder::new()
            .name(format!("mcpbench-worker-{w}"))
            .spawn(move || runner::worker(w, ctx, vus, tx, rrx))
            .map_err(RunError::Runtime)?;
        threads.push(t);
    }
    drop(tx);

    let csv_path = dir.join("timeseries.csv");
    let csv = CsvWriter::create(&csv_path, opts.interval).map_err(|source| RunError::Output {
        path: csv_path.display().to_string(),
        source,
    })?;
    let mut collector =
        Collector::new(ops.clone(), opts.interval, recyclers, Some(hlog)).with_csv(csv);
    // Requests still running after the end get their timeout plus a margin, then are cancelled.
    let drain_deadline = ctx.end + ctx.endpoint.timeout + Duration::from_secs(2);
    let interrupted = rt.block_on(async {
        let mut interrupted = false;
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(m) => {
                        for snap in collector.accept(m) {
                            if opts.progress {
                                progress_line(&snap, opts.interval);
                            }
                        }
                        if collector.all_done() {
                            break;
                        }
                    }
                    None => break,
                },
                _ = interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    ctx.aborted.store(true, std::sync::atomic::Ordering::Relaxed);
                    abort.cancel();
                }
                _ = tokio::time::sleep_until(drain_deadline.into()), if !abort.is_cancelled() => {
                    ctx.aborted.store(true, std::sync::atomic::Ordering::Relaxed);
                    abort.cancel();
                }
            }
        }
        interrupted
    });
    for t in threads {
        let _ = t.join();
    }
    let run_end = Instant::now();
    for snap in collector.finish() {
        if opts.progress {
            progress_line(&snap, opts.interval);
        }
    }
    let measured_from = ctx.warmup_end.min(run_end);
    let seconds = run_end
        .saturating_duration_since(measured_from)
        .as_secs_f64();

    let totals = &collector.totals;
    let operations: Vec<Operation> = ops
        .iter()
        .zip(&totals.ops)
        .map(|(name, s)| Operation::from_shard(name, s, seconds))
        .collect();
    let warmup = ops
        .iter()
        .zip(&totals.warmup)
        .filter(|(_, w)| w.0 > 0)
        .map(|(name, w)| WarmupOperation {
            name: name.clone(),
            started: w.0,
            outcomes: (&w.1).into(),
        })
        .collect();
    let cpu: Option<Duration> = collector.ends.iter().map(|e| e.cpu).sum();
    let all_started: u64 = totals.ops.iter().map(|o| o.started).sum::<u64>()
        + totals.warmup.iter().map(|w| w.0).sum::<u64>();
    let totals_s = summary::totals(&operations, totals, seconds);
    let mut notes = notes(&operations, &totals_s, &totals.sessions);
    if let Some(e) = &collector.hlog_error {
        notes.push(format!("latency.hlog is incomplete: {e}"));
    }
    let summary = Summary {
        schema_version: summary::SCHEMA_VERSION,
        mcpbench_version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: ScenarioInfo {
            name: plan.name.clone(),
            file: opts.scenario_file.clone(),
            description: plan.description.clone(),
        },
        started_at: started_utc
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        target: TargetInfo {
            kind: resolved.kind.into(),
            transport: plan.connection().transport.name().into(),
            http: if plan.connection().http2 {
                "2".into()
            } else {
                "1.1".into()
            },
            url: resolved.url.clone(),
            headers: resolved.headers.clone(),
            protocol_offered: plan.connection().protocol.to_string(),
            protocol_negotiated: pre.revision.to_string(),
        },
        load: load_info(&plan, workers),
        measured_seconds: (seconds * 1000.0).round() / 1000.0,
        interrupted,
        totals: totals_s,
        operations,
        warmup,
        sessions: totals.sessions.into(),
        generator: Generator {
            workers,
            cpu_seconds: cpu.map(|c| c.as_secs_f64()),
            cpu_us_per_request: cpu
                .filter(|_| all_started > 0)
                .map(|c| (c.as_secs_f64() * 1e6 / all_started as f64 * 100.0).round() / 100.0),
            lateness: totals
                .lateness
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(crate::report::summary::Latency::from_hist),
        },
        notes,
    };
    files::write_summary(&dir, &summary).map_err(|source| RunError::Output {
        path: dir.display().to_string(),
        source,
    })?;
    Ok(RunOutput { summary, dir })
}

fn progress_line(s: &IntervalSnapshot, interval: Duration) {
    let t = interval.as_secs_f64() * (s.index + 1) as f64;
    let secs = interval.as_secs_f64();
    if s.started == 0 && s.ended == 0 && s.warmup_ended == 0 && s.in_flight == 0 {
        // Nothing happened (the tail after the end of the run): no line. A stalled target still
        // shows, with requests in flight.
        return;
    }
    if s.ended == 0 && s.warmup_ended > 0 {
        eprintln!(
            "[{t:>6.1}s] {:>10.1} req/s  (warm-up, not measured)",
            s.warmup_ended as f64 / secs
        );
        return;
    }
    eprintln!(
        "[{t:>6.1}s] {:>10.1} ok/s  p50 {:>8.3}ms  p99 {:>8.3}ms  errors {}",
        s.ok as f64 / secs,
        s.p50_us as f64 / 1000.0,
        s.p99_us as f64 / 1000.0,
        s.errors,
    );
}

fn load_info(plan: &Plan, workers: usize) -> LoadInfo {
    let l = &plan.load;
    let (model, arrival, profile) = match &l.model {
        Model::Closed { vus } => ("closed", None, vus),
        Model::Open { rate, arrival } => (
            "open",
            Some(match arrival {
                Arrival::Poisson => "poisson".to_string(),
                Arrival::Uniform => "uniform".to_string(),
            }),
            rate,
        ),
    };
    LoadInfo {
        model: model.into(),
        concurrency: l.concurrency,
        arrival,
        profile: ProfileInfo {
            start: profile.start,
            stages: profile
                .stages
                .iter()
                .map(|(d, t)| StageInfo {
                    duration_seconds: d.as_secs_f64(),
                    target: *t,
                })
                .collect(),
        },
        duration_seconds: l.duration.as_secs_f64(),
        requests: l.requests,
        warmup_seconds: l.warmup.as_secs_f64(),
        timeout_seconds: l.timeout.as_secs_f64(),
        think_seconds: l.think.map(|(a, b)| [a.as_secs_f64(), b.as_secs_f64()]),
        sessions: match l.sessions {
            Sessions::PerVu => "per-vu",
            Sessions::PerRequest => "per-request",
            Sessions::Shared => "shared",
        }
        .into(),
        workers,
    }
}

/// Things in the numbers a reader should not miss.
fn notes(ops: &[Operation], totals: &summary::Totals, sessions: &SessionCounts) -> Vec<String> {
    let mut n = Vec::new();
    if totals.unaccounted != 0 {
        n.push(format!(
            "{} requests are unaccounted for (started but never ended): this is a bug in mcpbench",
            totals.unaccounted
        ));
    }
    for op in ops {
        if let Some(l) = &op.latency
            && l.count >= 20
            && l.p50_ms >= 38.0
            && l.p50_ms <= 46.0
            && l.p90_ms <= 48.0
        {
            n.push(format!(
                    "{}: latency clusters at ~40 ms, the signature of Nagle's algorithm meeting delayed ACKs; check that the server sets TCP_NODELAY",
                    op.name
                ));
        }
        if op.outcomes.protocol.contains_key("wrong_id") {
            n.push(format!(
                "{}: responses carried the wrong JSON-RPC id (a proxy rewriting ids?)",
                op.name
            ));
        }
    }
    let lingering = sessions.lingering_streams;
    if lingering > 0 {
        n.push(format!("{lingering} SSE responses were not ended by the server after the response; those connections were dropped instead of reused"));
    }
    if sessions.unmatched_responses > 0 {
        n.push(format!(
            "{} responses matched no request in flight (wrong ids, or a gateway copying other sessions' traffic); they were ignored",
            sessions.unmatched_responses
        ));
    }
    n
}

/// Renders the table for a finished run.
pub fn render(out: &RunOutput) -> String {
    let mut s = text::render(&out.summary);
    s.push_str(&format!(
        "results: {}/ (summary.json, latency.hlog, timeseries.csv)\n",
        out.dir.display()
    ));
    s
}
