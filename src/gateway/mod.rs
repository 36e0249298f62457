//! The reference gateway's upstream side (`mcpbench serve --upstream NAME=TARGET`): pooled
//! client sessions to upstream MCP servers over any transport, behind the server's
//! [`Proxy`] interface.
//!
//! At start, each upstream gets one session (the preflight's: revision probed, every
//! `tools/list` page walked); its tools are listed as `NAME__tool`. Calls then run on a few
//! upstream I/O threads, each a current-thread runtime that owns its sessions (the client
//! transports are single-threaded): a server task hands a call over a channel, an idle pooled
//! session of that thread carries it, the raw `result` comes back on a oneshot. Sessions open
//! on demand up to the pool size; one the upstream forgot (404) is reopened and the call sent
//! once more; a mux transport (stdio, WebSocket, legacy SSE) shares one connection per thread.

mod result;

use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mock_backend::watchdog::Watchdog;
use send_wrapper::SendWrapper;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::client::endpoint;
use crate::client::sessions::{Opening, Sharing, WithSessions, claim_or_wait, with_sessions};
use crate::client::{describe, failure_text};
use crate::metrics::outcome::Outcome;
use crate::protocol::mcp;
use crate::protocol::version::ProtocolChoice;
use crate::protocol::version::Revision;
use crate::server::proxy::{ProgressRelay, Proxied, ProxiedTool, Proxy, ProxyError, ProxyFuture};
use crate::transport::net::Trust;
use crate::transport::url::parse_url;
use crate::transport::{CallSpec, CommandSpec, Endpoint, Session, TransportKind};
use result::result_of;

/// Separates an upstream's name from its tools' names.
pub const SEPARATOR: &str = "__";

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("--upstream {spec}: {reason}")]
    Spec { spec: String, reason: String },
    #[error("upstream `{name}`: {reason}")]
    Upstream { name: String, reason: String },
    #[error("cannot start the gateway's threads: {0}")]
    Runtime(std::io::Error),
}

/// One upstream as given on the command line.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    pub name: String,
    /// What it is, for messages (a URL, or `stdio:` and the program).
    pub describe: String,
    pub endpoint: Endpoint,
    /// Probe the revision (`server/discover`, else `initialize`), or use the endpoint's.
    pub protocol: ProtocolChoice,
}

impl UpstreamSpec {
    /// `NAME=TARGET`: `http(s)://…` (Streamable HTTP, either era), `sse+http(s)://…` (the
    /// 2024-11-05 HTTP+SSE transport), `ws(s)://…` (WebSocket) or `stdio:COMMAND ARGS…`.
    /// `tls` says how https/wss upstreams are checked and which client certificate (if any)
    /// the gateway presents to them.
    pub fn parse(
        spec: &str,
        timeout: Duration,
        tls: &UpstreamTls,
    ) -> Result<UpstreamSpec, GatewayError> {
        let fail = |reason: String| GatewayError::Spec {
            spec: spec.to_string(),
            reason,
        };
        let (name, target) = spec.split_once('=').ok_or_else(|| {
            fail("write NAME=TARGET, e.g. ref=http://127.0.0.1:8080/mcp or files=stdio:python server.py".into())
        })?;
        let name = name.trim();
        if name.is_empty()
            || name.contains(SEPARATOR)
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(fail(format!(
                "`{name}` is not a usable upstream name: letters, digits, - and _ (no `{SEPARATOR}`)"
            )));
        }
        let mut ep = endpoint::blank(
            TransportKind::StreamableHttp,
            ProtocolChoice::Auto.offered(),
            timeout,
        );
        let mut protocol = ProtocolChoice::Auto;
        let describe = if let Some(cmd) = target.strip_prefix("stdio:") {
            let mut words = cmd.split_whitespace().map(str::to_string);
            let program = words.next().ok_or_else(|| {
                fail("stdio: needs a command, e.g. stdio:python server.py".into())
            })?;
            ep.kind = TransportKind::Stdio;
            ep.command = Some(CommandSpec {
                program: program.clone(),
                args: words.collect(),
                env: Vec::new(),
                cwd: None,
            });
            format!("stdio:{program}")
        } else {
            let (kind, url) = match target.strip_prefix("sse+") {
                Some(u) => (TransportKind::LegacySse, u),
                None if target.starts_with("ws") => (TransportKind::WebSocket, target),
                None => (TransportKind::StreamableHttp, target),
            };
            let u = parse_url(url).map_err(fail)?;
            endpoint::at_url(&mut ep, &u, &tls.trust, tls.identity.as_ref())
                .map_err(|e| fail(e.to_string()))?;
            ep.kind = kind;
            if kind == TransportKind::LegacySse {
                protocol = ProtocolChoice::Fixed(Revision::V2024_11_05);
                ep.protocol = Revision::V2024_11_05;
            }
            target.to_string()
        };
        Ok(UpstreamSpec {
            name: name.to_string(),
            describe,
            endpoint: ep,
            protocol,
        })
    }
}

impl UpstreamSpec {
    /// Adds a header the gateway sends this upstream on every request (`Header: value`,
    /// `${VAR}` taken from `env`): the operator's credentials for it. These are the only
    /// credentials an upstream ever gets; a client's never leave the gateway.
    pub fn add_header(
        &mut self,
        header: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), GatewayError> {
        let fail = |reason: String| GatewayError::Spec {
            spec: format!("{}=<header>", self.name),
            reason,
        };
        if self.endpoint.kind == TransportKind::Stdio {
            return Err(fail(
                "a stdio upstream has no HTTP headers; give it credentials in its environment or arguments".into(),
            ));
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(fail(
                "write NAME=Header: value, e.g. ref=Authorization: Bearer ${REF_TOKEN}".into(),
            ));
        };
        let name = name.trim();
        if !crate::transport::header_name_ok(name) {
            return Err(fail(format!("`{name}` is not a header name")));
        }
        if crate::transport::RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(fail(format!(
                "`{name}` is set by the gateway itself, as the protocol requires"
            )));
        }
        let value = crate::scenario::args::expand_env(value.trim(), env)
            .map_err(|e| fail(format!("header `{name}`: {}", e.message)))?;
        if !crate::transport::header_value_ok(&value) {
            return Err(fail(format!(
                "the value of header `{name}` holds a line break or another control character"
            )));
        }
        self.endpoint.add_header(name, &value);
        Ok(())
    }
}

/// `NAME=Header: value` for each of `headers`, added to the upstream called NAME.
pub fn add_headers(
    specs: &mut [UpstreamSpec],
    headers: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), GatewayError> {
    for h in headers {
        let found = h.split_once('=').and_then(|(name, header)| {
            let spec = specs.iter_mut().find(|s| s.name == name.trim())?;
            Some((spec, header))
        });
        let Some((spec, header)) = found else {
            return Err(GatewayError::Spec {
                spec: h.split_once(':').map_or(h.as_str(), |(n, _)| n).to_string(),
                reason:
                    "names no --upstream; write NAME=Header: value with NAME one of the upstreams"
                        .into(),
            });
        };
        spec.add_header(header, env)?;
    }
    Ok(())
}

/// Whether a tool name an upstream lists can be listed and called through the gateway: no
/// whitespace and no control characters (a CR or LF in a name would reach other servers'
/// headers and every log line that names it).
fn usable_tool_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// How the gateway speaks TLS to its https/wss upstreams.
#[derive(Debug, Clone)]
pub struct UpstreamTls {
    pub trust: Trust,
    /// A client certificate for mutual TLS.
    pub identity: Option<crate::transport::net::IdentityFiles>,
}

impl Default for UpstreamTls {
    fn default() -> Self {
        UpstreamTls {
            trust: Trust::System,
            identity: None,
        }
    }
}

/// A call handed to an upstream I/O thread.
struct Job {
    tool: usize,
    arguments: Option<Bytes>,
    progress: Option<ProgressRelay>,
    client: Revision,
    reply: oneshot::Sender<Result<Proxied, ProxyError>>,
}

/// A started upstream: what the gateway lists for it.
#[derive(Debug, Clone)]
pub struct Started {
    pub name: String,
    pub revision: Revision,
    pub tools: usize,
    /// Opening its session and listing its tools.
    pub took: Duration,
    /// Tools it listed whose names hold whitespace or control characters: not listed, not
    /// callable.
    pub refused: Vec<String>,
}

/// Per upstream: its endpoint and, per gateway tool, the call spec on it.
type Upstreams = Arc<Vec<(Arc<Endpoint>, Vec<CallSpec>)>>;

thread_local! {
    /// The lane of this server thread, when the server runs one per thread.
    static LANE: RefCell<Option<Rc<Lane>>> = const { RefCell::new(None) };
}

/// The upstreams behind a gateway, their tools, and the lanes that call them: one per server
/// thread (on that thread), else the gateway's own I/O threads.
#[derive(Debug)]
pub struct Gateway {
    tools: Vec<ProxiedTool>,
    /// Per tool: its upstream and its name there.
    routes: Arc<Vec<(usize, String)>>,
    upstreams: Upstreams,
    pool: usize,
    timeout: Duration,
    /// Lanes on threads of their own, for callers on threads without a lane.
    lanes: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
    threads: std::sync::Mutex<Vec<JoinHandle<()>>>,
    pub started: Vec<Started>,
    /// From the first connection to the last upstream's tools listed.
    pub startup: Duration,
    /// Server threads' lanes open their upstream sessions at once ([`Gateway::start_transparent`]).
    warm: bool,
    /// Lanes whose upstream sessions are open (`warm`), and its signal.
    warmed: Warmed,
}

/// Settings of [`Gateway::start`].
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Upstream I/O threads.
    pub threads: usize,
    /// Sessions per upstream per thread (HTTP: connections); mux transports share one
    /// connection per thread among them.
    pub pool: usize,
    /// Bound on one upstream call.
    pub timeout: Duration,
}

impl Gateway {
    /// Connects to every upstream (concurrently), lists their tools, starts the I/O threads.
    pub fn start(
        specs: Vec<UpstreamSpec>,
        o: &GatewayOptions,
    ) -> Result<Arc<Gateway>, GatewayError> {
        Self::start_named(specs, o, false)
    }

    /// [`start`](Self::start) with one upstream whose tools keep their own names (no
    /// `NAME__` prefix): a transparent proxy (`mcpbench record`). Each server thread's lane
    /// opens its upstream session at once, so no client's first call pays for it (a stdio
    /// upstream's start included) and recorded latencies are the calls'.
    pub fn start_transparent(
        spec: UpstreamSpec,
        o: &GatewayOptions,
    ) -> Result<Arc<Gateway>, GatewayError> {
        Self::start_named(vec![spec], o, true)
    }

    /// Waits (at most `within`) until `lanes` server threads have their upstream sessions open
    /// (a transparent proxy's); whether they do.
    pub fn wait_warm(&self, lanes: usize, within: Duration) -> bool {
        let (n, ready) = &*self.warmed;
        let guard = n.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = ready
            .wait_timeout_while(guard, within, |n| *n < lanes)
            .unwrap_or_else(|p| p.into_inner());
        *guard >= lanes
    }

    fn start_named(
        specs: Vec<UpstreamSpec>,
        o: &GatewayOptions,
        transparent: bool,
    ) -> Result<Arc<Gateway>, GatewayError> {
        for (i, s) in specs.iter().enumerate() {
            if specs[..i].iter().any(|t| t.name == s.name) {
                return Err(GatewayError::Spec {
                    spec: s.name.clone(),
                    reason: "two upstreams have this name; names must be unique".into(),
                });
            }
        }
        let t0 = Instant::now();
        let found: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = specs
                .iter()
                .map(|s| scope.spawn(move || discover(s)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("the discovery thread panicked".to_string()))
                })
                .collect()
        });
        let startup = t0.elapsed();
        let mut endpoints = Vec::new();
        let mut tools = Vec::new();
        let mut routes = Vec::new();
        let mut started = Vec::new();
        for (i, (spec, found)) in specs.into_iter().zip(found).enumerate() {
            let (ep, listed, took) = found.map_err(|reason| GatewayError::Upstream {
                name: spec.name.clone(),
                reason,
            })?;
            let (listed, refused): (Vec<_>, Vec<_>) =
                listed.into_iter().partition(|(t, _)| usable_tool_name(t));
            started.push(Started {
                name: spec.name.clone(),
                revision: ep.protocol,
                tools: listed.len(),
                took,
                refused: refused.into_iter().map(|(t, _)| t).collect(),
            });
            for (tool, definition) in listed {
                tools.push(ProxiedTool {
                    name: if transparent {
                        tool.clone()
                    } else {
                        format!("{}{SEPARATOR}{tool}", spec.name)
                    },
                    definition,
                });
                routes.push((i, tool));
            }
            endpoints.push(Arc::new(ep));
        }
        let specs: Upstreams = Arc::new(
            endpoints
                .iter()
                .enumerate()
                .map(|(u, ep)| {
                    let calls = routes
                        .iter()
                        .map(|(up, name)| {
                            CallSpec::new(
                                "tools/call",
                                Some(name).filter(|_| *up == u).map(String::as_str),
                                ep.protocol,
                            )
                        })
                        .collect();
                    (ep.clone(), calls)
                })
                .collect(),
        );
        let routes = Arc::new(routes);
        let mut lanes = Vec::new();
        let mut threads = Vec::new();
        for t in 0..o.threads.max(1) {
            let (tx, rx) = mpsc::unbounded_channel();
            lanes.push(tx);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(GatewayError::Runtime)?;
            let (specs, routes, pool, timeout) =
                (specs.clone(), routes.clone(), o.pool.max(1), o.timeout);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("mcpbench-upstream-{t}"))
                    .spawn(move || {
                        let local = tokio::task::LocalSet::new();
                        let lane = Lane::new(specs, routes, (pool, timeout));
                        local.block_on(&rt, io_thread(rx, lane));
                    })
                    .map_err(GatewayError::Runtime)?,
            );
        }
        Ok(Arc::new(Gateway {
            tools,
            routes,
            upstreams: specs,
            pool: o.pool.max(1),
            timeout: o.timeout,
            lanes,
            next: AtomicUsize::new(0),
            threads: std::sync::Mutex::new(threads),
            started,
            startup,
            warm: transparent,
            warmed: Arc::default(),
        }))
    }
}

impl Drop for Gateway {
    /// Closes the lanes; each I/O thread closes its sessions politely (bounded) and ends.
    fn drop(&mut self) {
        self.lanes.clear();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Proxy for Gateway {
    fn tools(&self) -> Vec<ProxiedTool> {
        self.tools.clone()
    }

    fn call(
        &self,
        index: usize,
        arguments: Option<Bytes>,
        progress: Option<ProgressRelay>,
        client: Revision,
    ) -> ProxyFuture {
        // An unknown tool is refused by `Lane::call`, on either path. This thread's lane if it
        // has one: the call runs in the caller's own task (no hand-over to another task or
        // thread). The future holds the thread's sessions, which never leave it: a server
        // thread's connections run on its `LocalSet` (`has_lane`), and `SendWrapper` checks at
        // every poll and at the drop that this stays true.
        if let Some(lane) = LANE.with(|l| l.borrow().clone()) {
            return Box::pin(SendWrapper::new(async move {
                lane.call(index, arguments, progress, client).await
            }));
        }
        let (reply, answer) = oneshot::channel();
        let job = Job {
            tool: index,
            arguments,
            progress,
            client,
            reply,
        };
        let lane = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        let sent = self.lanes[lane].send(job).is_ok();
        Box::pin(async move {
            if !sent {
                return Err(ProxyError::Unavailable {
                    detail: "the gateway is shutting down".into(),
                });
            }
            answer.await.unwrap_or_else(|_| {
                Err(ProxyError::Unavailable {
                    detail: "the upstream call was dropped".into(),
                })
            })
        })
    }

    fn lane(&self) -> Option<std::pin::Pin<Box<dyn Future<Output = ()>>>> {
        let lane = Rc::new(self.new_lane());
        LANE.with(|l| *l.borrow_mut() = Some(lane.clone()));
        let warm = self.warm.then(|| self.warmed.clone());
        Some(Box::pin(async move {
            if let Some(warmed) = warm {
                lane.warm().await;
                let (n, ready) = &*warmed;
                *n.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                ready.notify_all();
            }
            lane.ended.notified().await;
            lane.close().await;
        }))
    }

    fn end_lane(&self) {
        if let Some(lane) = LANE.with(|l| l.borrow_mut().take()) {
            // A permit if the lane is not waiting yet (still warming).
            lane.ended.notify_one();
        }
    }

    fn has_lane(&self) -> bool {
        LANE.with(|l| l.borrow().is_some())
    }
}

impl Gateway {
    fn new_lane(&self) -> Lane {
        Lane::new(
            self.upstreams.clone(),
            self.routes.clone(),
            (self.pool, self.timeout),
        )
    }
}

/// An upstream's endpoint (revision found), its tools (name, definition), and how long that took.
type Discovered = (Endpoint, Vec<(String, serde_json::Value)>, Duration);

/// Opens a session on the upstream (revision probed), lists its tools, closes.
fn discover(s: &UpstreamSpec) -> Result<Discovered, String> {
    let t0 = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut ep = s.endpoint.clone();
    let pre = crate::client::connect(&rt, s.protocol, &mut ep)
        .map_err(|e| format!("{}: {e}", s.describe))?;
    if pre.revision.has_handshake() {
        ep.protocol = pre.revision;
    }
    Ok((ep, pre.tools, t0.elapsed()))
}

/// Lanes counted as their upstream sessions are open.
type Warmed = Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>;

/// One thread's client side of the upstreams: a pool of sessions per upstream, made at the
/// first call (the sessions themselves open on demand), closed when the lane ends.
struct Lane {
    upstreams: Upstreams,
    routes: Arc<Vec<(usize, String)>>,
    pool: usize,
    timeout: Duration,
    pools: tokio::sync::OnceCell<Vec<Rc<dyn Upstream>>>,
    /// A server thread's lane is told to close its sessions ([`Proxy::end_lane`]).
    ended: Notify,
}

impl Lane {
    fn new(
        upstreams: Upstreams,
        routes: Arc<Vec<(usize, String)>>,
        (pool, timeout): (usize, Duration),
    ) -> Lane {
        Lane {
            upstreams,
            routes,
            pool,
            timeout,
            pools: tokio::sync::OnceCell::new(),
            ended: Notify::new(),
        }
    }

    async fn pools(&self) -> &[Rc<dyn Upstream>] {
        self.pools
            .get_or_init(|| async {
                let mut pools: Vec<Rc<dyn Upstream>> = Vec::with_capacity(self.upstreams.len());
                for (ep, calls) in self.upstreams.iter() {
                    let pooled = Pooled {
                        ep: ep.clone(),
                        pool: self.pool,
                        calls: calls.clone(),
                        timeout: self.timeout,
                    };
                    // A mux transport shares one connection per thread; HTTP sessions are each
                    // their own.
                    let sharing = Sharing::Multiplexed { users: self.pool };
                    pools.push(with_sessions(ep, sharing, true, pooled).await.0);
                }
                pools
            })
            .await
    }

    /// Tool `tool` called on one of this thread's sessions of its upstream.
    async fn call(
        &self,
        tool: usize,
        arguments: Option<Bytes>,
        progress: Option<ProgressRelay>,
        client: Revision,
    ) -> Result<Proxied, ProxyError> {
        let Some(&(upstream, _)) = self.routes.get(tool) else {
            return Err(ProxyError::Unavailable {
                detail: format!("the gateway has no tool {tool}"),
            });
        };
        let pool = self.pools().await[upstream].clone();
        pool.call(tool, arguments.as_deref(), progress, client)
            .await
    }

    /// One session of each upstream opened now (a transparent proxy's lanes).
    async fn warm(&self) {
        for p in self.pools().await {
            p.warm().await;
        }
    }

    async fn close(&self) {
        if let Some(pools) = self.pools.get() {
            for p in pools {
                p.close().await;
            }
        }
    }
}

/// One of the gateway's own I/O threads (for callers on threads without a lane): runs each job
/// it is handed on its lane, on a task of its own; closes the sessions when the gateway drops
/// the channel.
async fn io_thread(mut rx: mpsc::UnboundedReceiver<Job>, lane: Lane) {
    let lane = Rc::new(lane);
    while let Some(job) = rx.recv().await {
        let lane = lane.clone();
        tokio::task::spawn_local(async move {
            let result = lane
                .call(job.tool, job.arguments, job.progress, job.client)
                .await;
            let _ = job.reply.send(result);
        });
    }
    lane.close().await;
}

/// What a lane's pool of one upstream is made of.
struct Pooled {
    ep: Arc<Endpoint>,
    pool: usize,
    calls: Vec<CallSpec>,
    timeout: Duration,
}

impl WithSessions for Pooled {
    type Output = Rc<dyn Upstream>;
    async fn with<S, F>(self, make: F) -> Rc<dyn Upstream>
    where
        S: Session + 'static,
        F: Fn(Arc<Endpoint>) -> S + 'static,
    {
        Rc::new(Pool::new(self.pool, self.calls, self.timeout, move || {
            make(self.ep.clone())
        }))
    }
}

/// The pooled sessions of one upstream on one I/O thread.
trait Upstream {
    fn call<'a>(
        &'a self,
        tool: usize,
        arguments: Option<&'a [u8]>,
        progress: Option<ProgressRelay>,
        client: Revision,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Proxied, ProxyError>> + 'a>>;
    fn close(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>>;
    /// Opens a session now (within the call timeout), so the first call does not wait for it.
    fn warm(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>>;
}

/// A pooled session with its call timer (made once with it, not a timer entry per call).
struct Kept<S> {
    session: S,
    watchdog: Watchdog,
}

struct Pool<S, F> {
    /// Boxed: a session is large (its buffers' state), and a call moves it out and back.
    idle: RefCell<Vec<Box<Kept<S>>>>,
    made: Cell<usize>,
    max: usize,
    freed: Notify,
    make: F,
    /// Per tool of the gateway: its call spec on this upstream.
    calls: Vec<CallSpec>,
    timeout: Duration,
}

impl<S: Session, F: Fn() -> S> Pool<S, F> {
    fn new(max: usize, calls: Vec<CallSpec>, timeout: Duration, make: F) -> Self {
        Pool {
            idle: RefCell::new(Vec::new()),
            made: Cell::new(0),
            max,
            freed: Notify::new(),
            make,
            calls,
            timeout,
        }
    }

    async fn checkout(&self) -> Box<Kept<S>> {
        loop {
            if let Some(s) = self.idle.borrow_mut().pop() {
                return s;
            }
            if self.made.get() < self.max {
                self.made.set(self.made.get() + 1);
                return Box::new(Kept {
                    session: (self.make)(),
                    watchdog: Watchdog::new(),
                });
            }
            self.freed.notified().await;
        }
    }

    fn checkin(&self, s: Box<Kept<S>>) {
        self.idle.borrow_mut().push(s);
        self.freed.notify_one();
    }

    /// One call on session `s`: opened first if needed; sent once more on a reopened session
    /// when the upstream had forgotten it.
    async fn exchange(
        &self,
        s: &mut S,
        tool: usize,
        arguments: Option<&[u8]>,
        (progress, client): (bool, Revision),
    ) -> Result<(Bytes, bool), ProxyError> {
        let spec = &self.calls[tool];
        let name = spec.name.as_deref().unwrap_or_default();
        for attempt in 0..2 {
            if !s.is_open() {
                // A shared connection is opened by one caller; the others wait for it.
                let outcome = match claim_or_wait(s).await {
                    Opening::Mine => s.open().await.outcome,
                    Opening::Waited => Outcome::Ok,
                };
                if outcome != Outcome::Ok || !s.is_open() {
                    return Err(ProxyError::Unavailable {
                        detail: format!("opening a session: {}", describe(outcome)),
                    });
                }
            }
            let rev = s.revision().unwrap_or(Revision::LATEST_HANDSHAKE);
            let reply = s
                .call(spec, |out, id| {
                    mcp::write_tools_call(out, id, rev, name, arguments, progress)
                })
                .await;
            if reply.session_expired && attempt == 0 {
                s.reset();
                continue;
            }
            return match reply.outcome {
                // The session's decode read `isError`: no search of the result for it.
                Outcome::Ok => result_of(s.last_message(), rev, client).map(|r| (r, false)),
                Outcome::ToolError => result_of(s.last_message(), rev, client).map(|r| (r, true)),
                Outcome::RpcError(code) => Err(ProxyError::Rpc {
                    code,
                    detail: failure_text(s.last_message()).unwrap_or_default(),
                }),
                Outcome::Timeout => Err(ProxyError::Timeout),
                o => {
                    if !matches!(o, Outcome::InputRequired) {
                        s.reset();
                    }
                    Err(ProxyError::Unavailable {
                        detail: describe(o),
                    })
                }
            };
        }
        Err(ProxyError::Unavailable {
            detail: "the upstream forgot the session twice".into(),
        })
    }
}

impl<S: Session, F: Fn() -> S> Upstream for Pool<S, F> {
    fn call<'a>(
        &'a self,
        tool: usize,
        arguments: Option<&'a [u8]>,
        progress: Option<ProgressRelay>,
        client: Revision,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Proxied, ProxyError>> + 'a>> {
        Box::pin(async move {
            let mut kept = self.checkout().await;
            let Kept {
                session: s,
                watchdog,
            } = &mut *kept;
            let sent = Instant::now();
            let asks = progress.is_some();
            if let Some(relay) = progress {
                s.set_notification_hook(Some(Box::new(move |m: &[u8]| {
                    relay.relay(m);
                })));
            }
            let r = {
                // Pinned where it is made, and bounded by the session's own timer.
                let exchange = pin!(self.exchange(s, tool, arguments, (asks, client)));
                let at = tokio::time::Instant::from_std(sent) + self.timeout;
                watchdog.bounded(at, exchange).await
            };
            let r = match r {
                Some(r) => r,
                None => {
                    // What the upstream still owes on this session would answer nobody.
                    let _ = tokio::time::timeout(Duration::from_secs(1), s.cancel_last()).await;
                    Err(ProxyError::Timeout)
                }
            };
            if asks {
                s.set_notification_hook(None);
            }
            self.checkin(kept);
            r.map(|(result, is_error)| Proxied {
                result,
                is_error,
                upstream: Some(sent.elapsed()),
            })
        })
    }

    fn warm(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async move {
            let mut kept = self.checkout().await;
            let s = &mut kept.session;
            // As a call opens it (exchange): a shared connection by one caller only.
            let open = async {
                if !s.is_open() && claim_or_wait(s).await == Opening::Mine {
                    s.open().await;
                }
            };
            let _ = tokio::time::timeout(self.timeout, open).await;
            self.checkin(kept);
        })
    }

    fn close(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async move {
            let sessions: Vec<Box<Kept<S>>> = self.idle.borrow_mut().drain(..).collect();
            for mut kept in sessions {
                let _ = tokio::time::timeout(Duration::from_secs(2), kept.session.close()).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_specs_parse() {
        let t = Duration::from_secs(5);
        let s =
            UpstreamSpec::parse("ref=http://127.0.0.1:9/mcp", t, &UpstreamTls::default()).unwrap();
        assert_eq!(s.name, "ref");
        assert_eq!(s.endpoint.kind, TransportKind::StreamableHttp);
        assert_eq!(s.endpoint.path, "/mcp");
        let s = UpstreamSpec::parse("old=sse+http://127.0.0.1:9/sse", t, &UpstreamTls::default())
            .unwrap();
        assert_eq!(s.endpoint.kind, TransportKind::LegacySse);
        assert_eq!(s.endpoint.protocol, Revision::V2024_11_05);
        let s = UpstreamSpec::parse("w=ws://127.0.0.1:9/ws", t, &UpstreamTls::default()).unwrap();
        assert_eq!(s.endpoint.kind, TransportKind::WebSocket);
        let s = UpstreamSpec::parse("py=stdio:python3 server.py --x", t, &UpstreamTls::default())
            .unwrap();
        assert_eq!(s.endpoint.kind, TransportKind::Stdio);
        assert_eq!(s.endpoint.command.unwrap().args, ["server.py", "--x"]);
        for bad in [
            "noequals",
            "a__b=http://x/",
            "=http://x/",
            "a=ftp://x",
            "a=stdio:",
        ] {
            assert!(
                UpstreamSpec::parse(bad, t, &UpstreamTls::default()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn operator_headers_are_checked_and_reach_only_their_upstream() {
        let t = Duration::from_secs(5);
        let tls = UpstreamTls::default();
        let mut specs = vec![
            UpstreamSpec::parse("ref=http://127.0.0.1:9/mcp", t, &tls).unwrap(),
            UpstreamSpec::parse("other=ws://127.0.0.1:9/ws", t, &tls).unwrap(),
            UpstreamSpec::parse("py=stdio:python3 s.py", t, &tls).unwrap(),
        ];
        let env = |v: &str| (v == "REF_TOKEN").then(|| "s3cret".to_string());
        add_headers(
            &mut specs,
            &["ref=Authorization: Bearer ${REF_TOKEN}".into()],
            &env,
        )
        .unwrap();
        assert_eq!(
            specs[0].endpoint.headers,
            [("Authorization".to_string(), "Bearer s3cret".to_string())]
        );
        assert!(specs[1].endpoint.headers.is_empty());
        for (bad, says) in [
            ("ref=X-Key: a\r\nX-Injected: 1", "control character"),
            ("ref=X-Key: a\u{1b}[31m", "control character"),
            ("ref=Bad Name: a", "not a header name"),
            ("ref=Mcp-Session-Id: a", "set by the gateway"),
            ("ref=X-Key: ${NOPE}", "NOPE"),
            ("ref=no colon", "NAME=Header: value"),
            ("nobody=X-Key: a", "names no --upstream"),
            ("py=X-Key: a", "stdio upstream"),
        ] {
            let e = add_headers(&mut specs, &[bad.into()], &env)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains("s3cret"));
        }
        assert_eq!(specs[0].endpoint.headers.len(), 1, "nothing half-added");
    }

    #[test]
    fn tool_names_with_control_characters_are_unusable() {
        for ok in ["echo", "get-invoice", "a.b_c/d", "名前"] {
            assert!(usable_tool_name(ok), "{ok}");
        }
        for bad in [
            "",
            "a\r\nb",
            "a b",
            "a\tb",
            "esc\u{1b}",
            "del\u{7f}",
            "nbsp\u{a0}",
        ] {
            assert!(!usable_tool_name(bad), "{bad:?}");
        }
    }
}
