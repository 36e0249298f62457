//! Worker threads and virtual users: the one generic runner.
//!
//! Each worker thread runs a current-thread Tokio runtime with its share of the virtual users,
//! all recording into one thread-local [`Recorder`] (in a `RefCell`: no lock, no atomic). The
//! shard goes to the collector when its interval ends (see `Shards`): every event lands in
//! the interval of the [`Grid`] its time falls in.
//!
//! One loop serves both load models. Closed loop: a virtual user starts its next request when
//! the previous one ended (after an optional think time), while the concurrency profile counts
//! it in. Open loop: a dispatcher releases arrivals at their intended start times (computed by
//! `schedule`, never stamped at wake-up) to idle virtual users; an arrival that finds all of
//! them busy (`max_in_flight`) is dropped and counted; latency runs from the intended start,
//! service time from the actual send. The loop is generic over [`Session`]; one `match` on the
//! transport picks the session type.

use std::cell::{Cell, RefCell, RefMut};
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::preflight;
use super::schedule::{Arrivals, DispatchClock};
use super::templates::{Mix, RequestTemplate};
use crate::metrics::collector::{ShardMsg, WorkerEnd};
use crate::metrics::grid::Grid;
use crate::metrics::outcome::Outcome;
use crate::metrics::recorder::{Phase, Recorder};
use crate::scenario::plan::{Model, OP_COLD_START, OP_CONNECT, OP_INITIALIZE, Pattern};
use crate::scenario::{Plan, Sessions};
use crate::transport::legacy_sse_client::SseConnector;
use crate::transport::mux::{Connector, MuxSession, Shared};
use crate::transport::stdio_client::StdioConnector;
use crate::transport::streamable_http::{HttpSession, HttpShared};
use crate::transport::ws_client::WsConnector;
use crate::transport::{CallSpec, Endpoint, Reply, Session, TransportKind};

/// Read-only context shared by every worker.
#[derive(Debug)]
pub struct Ctx {
    pub plan: Arc<Plan>,
    pub endpoint: Arc<Endpoint>,
    /// Per-virtual-user credentials: virtual user `i` uses `endpoints[i % n]` (its headers
    /// added) and counts for its tenant; empty: everyone uses `endpoint`.
    pub endpoints: Vec<(Arc<Endpoint>, usize)>,
    /// The credentials' tenants, by index.
    pub tenants: Vec<String>,
    /// Every header value that may be a secret, redacted from failure messages.
    pub secrets: Vec<(String, String)>,
    /// Per revision the users speak (the preflight's first): each workload entry's request
    /// template and call spec.
    pub requests: Vec<(
        crate::protocol::version::Revision,
        Vec<RequestTemplate>,
        Vec<CallSpec>,
    )>,
    /// Per workload entry: its `expect` rules, if it has any.
    pub checks: Vec<Option<super::expect::Check>>,
    /// `[target.oauth]`: the token endpoint, and the operation that times it.
    pub oauth: Option<(super::oauth::TokenEndpoint, usize)>,
    pub mix: Mix,
    pub start: Instant,
    pub warmup_end: Instant,
    pub end: Instant,
    pub timeout: Duration,
    /// The interval grid (anchored at the start, the end of warm-up and the end).
    pub grid: Grid,
    /// Cancels in-flight requests (Ctrl-C, or the drain deadline passed). Workers wait on it
    /// once; requests don't (a per-request wait would take the token's lock every time).
    pub abort: CancellationToken,
    /// Mirrors `abort` as a plain flag.
    pub aborted: AtomicBool,
    /// Ends the waits between requests (think time, back-off, arrivals) when the run is
    /// interrupted: requests in flight drain, no new one starts.
    pub drain: CancellationToken,
    /// No new requests (an interrupt, or an abort): the per-request stop check.
    pub stop: AtomicBool,
    pub seed: u64,
    pub workers: usize,
    /// The first answer to each deterministic call (shared by an A/B run's slices).
    pub seen: Arc<super::divergence::Seen>,
    /// The A/B target this run is a slice of.
    pub ab_target: Option<String>,
}

impl Ctx {
    /// The endpoint and tenant of the virtual user with this global index.
    fn endpoint_of(&self, global: usize) -> (Arc<Endpoint>, Option<usize>) {
        match self.endpoints.len() {
            0 => (self.endpoint.clone(), None),
            n => {
                let (ep, tenant) = &self.endpoints[global % n];
                (ep.clone(), Some(*tenant))
            }
        }
    }

    fn phase(&self, t: Instant) -> Phase {
        if t < self.warmup_end {
            Phase::Warmup
        } else {
            Phase::Measured
        }
    }

    fn stopping(&self, now: Instant) -> bool {
        now >= self.end || self.stop.load(Ordering::Relaxed)
    }
}

/// A request in flight, so that one cut short by an abort is still counted.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    op: usize,
    phase: Phase,
    t0: Instant,
    /// The virtual user's tenant, for workload requests.
    tenant: Option<usize>,
}

type Slots = Rc<RefCell<Vec<Option<InFlight>>>>;

/// The requests this worker may still start (`requests = N` split across workers).
#[derive(Debug)]
pub(crate) struct Quota(pub(crate) Cell<Option<u64>>);

impl Quota {
    pub(crate) fn take(&self) -> bool {
        match self.0.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.0.set(Some(n - 1));
                true
            }
        }
    }
}

/// Open loop: arrivals waiting for a virtual user, and virtual users waiting for arrivals.
///
/// An arrival goes to an idle virtual user at once; when all are busy (`max_in_flight`
/// requests in flight) it waits in a bounded backlog, its latency still running from its
/// intended start — so queueing in the generator shows up in the numbers, as it would for a
/// real client (coordinated-omission correction). Arrivals beyond the backlog are dropped and
/// counted.
#[derive(Debug)]
pub(crate) struct Pool {
    idle: RefCell<Vec<usize>>,
    tickets: RefCell<Vec<(Option<Instant>, Option<Waker>)>>,
    backlog: RefCell<std::collections::VecDeque<Instant>>,
    max_backlog: usize,
    closed: Cell<bool>,
}

impl Pool {
    /// Every virtual user starts idle (so an arrival at time zero finds them).
    pub(crate) fn new(vus: usize, max_backlog: usize) -> Self {
        let mut idle = Vec::with_capacity(vus);
        idle.extend((0..vus).rev());
        Pool {
            idle: RefCell::new(idle),
            tickets: RefCell::new(vec![(None, None); vus]),
            backlog: RefCell::new(std::collections::VecDeque::with_capacity(max_backlog)),
            max_backlog,
            closed: Cell::new(false),
        }
    }

    /// Hands an arrival to an idle virtual user, or queues it; false if it had to be dropped.
    pub(crate) fn release(&self, intended: Instant) -> bool {
        let Some(vu) = self.idle.borrow_mut().pop() else {
            let mut q = self.backlog.borrow_mut();
            if q.len() >= self.max_backlog {
                return false;
            }
            q.push_back(intended);
            return true;
        };
        let mut t = self.tickets.borrow_mut();
        t[vu].0 = Some(intended);
        if let Some(w) = t[vu].1.take() {
            w.wake();
        }
        true
    }

    /// No more arrivals: idle virtual users end (queued arrivals are still served).
    pub(crate) fn close(&self) {
        self.closed.set(true);
        for (_, w) in self.tickets.borrow_mut().iter_mut() {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
    }

    /// The run was interrupted: arrivals still queued will not be sent; their intended starts.
    pub(crate) fn clear_backlog(&self) -> Vec<Instant> {
        self.backlog.borrow_mut().drain(..).collect()
    }

    /// Waits for the next arrival for virtual user `vu` (`first`: it starts idle and has not
    /// served anything yet); `None` once the run is over.
    pub(crate) async fn next(&self, vu: usize, first: bool) -> Option<Instant> {
        if !first {
            if let Some(at) = self.backlog.borrow_mut().pop_front() {
                return Some(at);
            }
            self.idle.borrow_mut().push(vu);
        }
        poll_fn(|cx| {
            let mut t = self.tickets.borrow_mut();
            if let Some(at) = t[vu].0.take() {
                return Poll::Ready(Some(at));
            }
            if self.closed.get() {
                return Poll::Ready(None);
            }
            match &t[vu].1 {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => t[vu].1 = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

/// This worker's shard of the current interval.
///
/// Every event is recorded into the interval its time falls in: an event at or past the
/// interval's end hands the interval to the collector first (one message per interval, never
/// per request). So a request that ends just after a boundary is not counted before it,
/// however late the ticker wakes; the ticker hands over the intervals of a worker that has
/// nothing to record.
struct Shards {
    current: RefCell<Recorder>,
    /// The current interval and when it ends.
    index: Cell<u64>,
    ends: Cell<Instant>,
    start: Instant,
    grid: Grid,
    worker: usize,
    n_ops: usize,
    tx: UnboundedSender<ShardMsg>,
    recycle: Receiver<Recorder>,
    /// Requests in flight, for the gauge sent with each shard.
    slots: Slots,
    /// The thread's CPU time when the current interval's shard began.
    cpu_mark: Cell<Option<Duration>>,
}

impl Shards {
    /// The shard for an event at `t`.
    #[inline]
    fn at(&self, t: Instant) -> RefMut<'_, Recorder> {
        if t >= self.ends.get() {
            self.rotate(t);
        }
        self.current.borrow_mut()
    }

    /// The current shard, for counters whose interval does not matter to the millisecond
    /// (sessions opened, connections).
    fn now(&self) -> RefMut<'_, Recorder> {
        self.current.borrow_mut()
    }

    /// Hands over every interval that ended by `t`.
    fn rotate(&self, t: Instant) {
        while t >= self.ends.get() {
            let k = self.index.get();
            let fresh = self
                .recycle
                .try_recv()
                .unwrap_or_else(|_| Recorder::new(self.n_ops));
            let mut shard = std::mem::replace(&mut *self.current.borrow_mut(), fresh);
            shard.in_flight = self.slots.borrow().iter().filter(|s| s.is_some()).count() as u64;
            shard.cpu = self.cpu_since_mark();
            let _ = self.tx.send(ShardMsg {
                worker: self.worker,
                index: k,
                shard,
                last: None,
            });
            self.index.set(k + 1);
            self.ends.set(self.start + self.grid.end(k + 1));
        }
    }

    /// Hands over every interval as it ends (for a worker with nothing to record).
    async fn tick(&self) {
        loop {
            tokio::time::sleep_until(self.ends.get().into()).await;
            self.rotate(Instant::now());
        }
    }

    /// CPU time since the last mark (zero where the platform does not report it); moves the
    /// mark. One procfs read, once per interval.
    fn cpu_since_mark(&self) -> Duration {
        let now = thread_cpu();
        let since = match (self.cpu_mark.get(), now) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        self.cpu_mark.set(now);
        since
    }

    /// The worker's last message: what is left, and its CPU time.
    fn finish(&self, cpu: Option<Duration>) {
        let mut shard = std::mem::replace(&mut *self.current.borrow_mut(), Recorder::new(0));
        shard.cpu = self.cpu_since_mark();
        let _ = self.tx.send(ShardMsg {
            worker: self.worker,
            index: self.index.get(),
            shard,
            last: Some(WorkerEnd { cpu }),
        });
    }
}

/// What drives a worker's virtual users.
struct Drive {
    ctx: Arc<Ctx>,
    shards: Rc<Shards>,
    slots: Slots,
    quota: Quota,
    /// Open loop only.
    pool: Option<Rc<Pool>>,
    /// Closed loop: global index of each local virtual user (for the concurrency profile).
    global: Vec<usize>,
    /// When the latest-sent request of this worker that the target answered was sent
    /// (`hang_after`: a request still waiting when a later one was answered is stuck — not
    /// queued behind others, and not a target that answers nothing).
    answered_sent: Cell<Option<Instant>>,
    /// `pattern = "first_call"`: the barrier of this worker's virtual users.
    round: Option<Round>,
}

/// `first_call` rounds: the virtual users of a worker wait for one another twice a round —
/// every session open (then all first calls go out together), and every call ended (then the
/// sessions close). The last to arrive ends the round; a user that stops leaves, and a wait
/// ends with the run.
struct Round {
    parties: Cell<usize>,
    arrived: Cell<usize>,
    generation: Cell<u64>,
    notify: tokio::sync::Notify,
    /// When the last round was released: its first calls were all sent after it.
    released: Cell<Option<Instant>>,
}

impl Round {
    fn new(parties: usize) -> Self {
        Round {
            parties: Cell::new(parties),
            arrived: Cell::new(0),
            generation: Cell::new(0),
            notify: tokio::sync::Notify::new(),
            released: Cell::new(None),
        }
    }

    /// Arrives; `None` for the last of the round (which calls [`Round::release`] when it has
    /// done what ends the round), else the generation to wait on.
    fn arrive(&self) -> Option<u64> {
        let a = self.arrived.get() + 1;
        if a >= self.parties.get() {
            return None;
        }
        self.arrived.set(a);
        Some(self.generation.get())
    }

    fn release(&self) {
        self.released.set(Some(Instant::now()));
        self.arrived.set(0);
        self.generation.set(self.generation.get() + 1);
        self.notify.notify_waiters();
    }

    /// Waits for the round `generation` to be released; false if the run ended first.
    async fn wait(&self, generation: u64, ctx: &Ctx) -> bool {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.generation.get() != generation {
                return true;
            }
            tokio::select! {
                _ = notified => {}
                // A release at the same moment wins: the round goes ahead as one.
                _ = tokio::time::sleep_until(ctx.end.into()) => {
                    return self.generation.get() != generation;
                }
                _ = ctx.drain.cancelled() => return self.generation.get() != generation,
            }
        }
    }

    /// Arrives and waits for the others; false if the run ended first.
    async fn meet(&self, ctx: &Ctx) -> bool {
        match self.arrive() {
            None => {
                self.release();
                true
            }
            Some(g) => self.wait(g, ctx).await,
        }
    }

    /// A user that stops: the others no longer wait for it.
    fn leave(&self) {
        let p = self.parties.get().saturating_sub(1);
        self.parties.set(p);
        if self.arrived.get() > 0 && self.arrived.get() >= p {
            self.release();
        }
    }
}

/// Runs one worker thread's virtual users to the end; sends its shards to the collector.
pub fn worker(
    index: usize,
    ctx: Arc<Ctx>,
    vus: Vec<usize>,
    tx: UnboundedSender<ShardMsg>,
    recycle: Receiver<Recorder>,
) {
    // I/O and timers only: the process/signal drivers would add work to every park. (Child
    // processes of stdio targets are reaped by the shared orphan queue.)
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "worker {index}: cannot build a runtime");
            let _ = tx.send(ShardMsg {
                worker: index,
                index: 0,
                shard: Recorder::new(ctx.plan.ops.len()),
                last: Some(WorkerEnd::default()),
            });
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let cpu_start = thread_cpu();
    // The body runs as a task of its own: `block_on`'s future is polled on every wake-up of
    // any task in the set, so it should be as cheap as a join handle.
    let body = local.spawn_local(async move {
        let slots: Slots = Rc::new(RefCell::new(vec![None; vus.len()]));
        let shards = Rc::new(Shards {
            current: RefCell::new(Recorder::new(ctx.plan.ops.len())),
            index: Cell::new(0),
            ends: Cell::new(ctx.start + ctx.grid.end(0)),
            start: ctx.start,
            grid: ctx.grid,
            worker: index,
            n_ops: ctx.plan.ops.len(),
            tx,
            recycle,
            slots: slots.clone(),
            cpu_mark: Cell::new(cpu_start),
        });
        let ticker = {
            let shards = shards.clone();
            tokio::task::spawn_local(async move { shards.tick().await })
        };
        let quota = match ctx.plan.load.requests {
            None => None,
            Some(n) => {
                let w = ctx.workers as u64;
                Some(n / w + u64::from((index as u64) < n % w))
            }
        };
        let pool = matches!(ctx.plan.load.model, Model::Open { .. }).then(|| {
            Rc::new(Pool::new(
                vus.len(),
                ctx.plan.load.max_queued / ctx.workers.max(1),
            ))
        });
        let drive = Rc::new(Drive {
            ctx: ctx.clone(),
            shards: shards.clone(),
            slots,
            quota: Quota(Cell::new(quota)),
            pool: pool.clone(),
            global: vus.clone(),
            answered_sent: Cell::new(None),
            round: (ctx.plan.load.pattern == Pattern::FirstCall).then(|| Round::new(vus.len())),
        });
        let dispatcher =
            pool.map(|pool| tokio::task::spawn_local(dispatch(drive.clone(), pool, index)));
        let ep = ctx.endpoint.clone();
        let sessions = ctx.plan.load.sessions;
        let n = vus.len();
        match ep.kind {
            TransportKind::StreamableHttp if sessions == Sessions::Shared => {
                let shared = Rc::new(HttpShared::default());
                // Shared sessions carry no per-user credentials (the scenario refuses both).
                run_vus(&drive, n, |_| {
                    HttpSession::shared(ep.clone(), shared.clone())
                })
                .await
            }
            TransportKind::StreamableHttp => run_vus(&drive, n, HttpSession::new).await,
            TransportKind::Stdio => run_mux::<StdioConnector>(&drive, n).await,
            TransportKind::WebSocket => run_mux::<WsConnector>(&drive, n).await,
            TransportKind::LegacySse => run_mux::<SseConnector>(&drive, n).await,
        }
        if let Some(d) = dispatcher {
            d.abort();
            let _ = d.await;
        }
        ticker.abort();
        let _ = ticker.await;
        let cpu = match (cpu_start, thread_cpu()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        shards.finish(cpu);
    });
    let _ = local.block_on(&rt, body);
}

/// Open loop: releases this worker's arrivals at their intended start times, on the precise
/// dispatch clock. Due arrivals are released together per wake-up; each one's lateness is
/// recorded.
async fn dispatch(drive: Rc<Drive>, pool: Rc<Pool>, worker: usize) {
    let ctx = &drive.ctx;
    let Model::Open {
        rate,
        arrival,
        release,
    } = &ctx.plan.load.model
    else {
        return;
    };
    let (lane, lanes) = ctx.plan.load.shard.lane(worker, ctx.workers);
    let mut arrivals = Arrivals::new(rate, *arrival, lane, lanes, ctx.seed);
    let mut clock = DispatchClock::precise(*release);
    let on_release = |intended: Instant, now: Instant, released: bool| {
        let phase = ctx.phase(intended);
        let mut rec = drive.shards.at(now);
        rec.late(phase, now.saturating_duration_since(intended));
        if !released {
            rec.drop_arrival(phase);
        }
    };
    let release = release_arrivals(
        &mut arrivals,
        &mut clock,
        ctx.start,
        ctx.end,
        &pool,
        &drive.quota,
        &on_release,
        &ctx.stop,
    );
    tokio::select! {
        _ = release => {}
        _ = ctx.drain.cancelled() => {
            // Interrupted: arrivals still queued are not sent; they count as dropped.
            let now = Instant::now();
            let mut rec = drive.shards.at(now);
            for intended in pool.clear_backlog() {
                rec.drop_arrival(ctx.phase(intended));
            }
        }
    }
    pool.close();
}

/// The dispatch loop itself: sleeps until the next arrival, then releases all that are due.
/// (Times come from tokio's clock, so that paused-clock tests drive it with `DispatchClock::Tokio`.)
#[allow(clippy::too_many_arguments)]
pub(crate) async fn release_arrivals(
    arrivals: &mut Arrivals,
    clock: &mut DispatchClock,
    start: Instant,
    end: Instant,
    pool: &Pool,
    quota: &Quota,
    on_release: &dyn Fn(Instant, Instant, bool),
    stop: &AtomicBool,
) {
    let mut next = arrivals.next_at();
    while let Some(t) = next {
        let intended = start + Duration::from_secs_f64(t);
        if intended >= end || stop.load(Ordering::Relaxed) {
            return;
        }
        clock.sleep_until(intended).await;
        let now = tokio::time::Instant::now().into_std();
        let mut due = Some(t);
        next = None;
        while let Some(t) = due {
            let intended = start + Duration::from_secs_f64(t);
            if intended > now {
                next = Some(t);
                break;
            }
            if intended >= end || !quota.take() {
                return;
            }
            on_release(intended, now, pool.release(intended));
            due = arrivals.next_at();
        }
    }
}

/// Virtual users over a multiplexed transport: own connections, or one shared per worker.
async fn run_mux<C: Connector + 'static>(drive: &Rc<Drive>, n: usize) {
    let ep = drive.ctx.endpoint.clone();
    // `expect` rules and divergence checks read the answers: keep them.
    let keep = drive.ctx.checks.iter().any(Option::is_some)
        || drive
            .ctx
            .plan
            .workload
            .iter()
            .any(|w| w.deterministic || w.digest.is_some());
    let kept = move |mut s: MuxSession<C>| {
        if keep {
            s.keep_responses();
        }
        s
    };
    if drive.ctx.plan.load.sessions == Sessions::Shared {
        let slot = Rc::new(Shared::<C::Out>::default());
        let s = slot.clone();
        run_vus(drive, n, move |_| {
            kept(MuxSession::<C>::shared(ep.clone(), s.clone(), n))
        })
        .await;
        if let Some(conn) = slot.take()
            && !drive.ctx.aborted.load(Ordering::Relaxed)
        {
            C::shutdown(conn.clone(), drive.ctx.timeout.min(Duration::from_secs(2))).await;
            // What arrived after the last virtual user took the counters.
            let st = conn.mux.take_stats();
            drive.shards.now().sessions.add_transport(st);
        }
    } else {
        run_vus(drive, n, move |ep| kept(MuxSession::<C>::new(ep))).await;
    }
}

/// Spawns the virtual users, waits for them (or the abort), and counts what an abort cut.
async fn run_vus<S: Session + 'static, F: Fn(Arc<Endpoint>) -> S>(
    drive: &Rc<Drive>,
    n: usize,
    make: F,
) {
    let mut handles: Vec<_> = (0..n)
        .map(|slot| {
            let (ep, _) = drive.ctx.endpoint_of(drive.global[slot]);
            tokio::task::spawn_local(virtual_user(drive.clone(), slot, make(ep)))
        })
        .collect();
    let all = async {
        for h in handles.iter_mut() {
            if let Err(e) = h.await {
                tracing::error!(error = %e, "virtual user task failed");
            }
        }
    };
    tokio::select! {
        _ = all => {}
        _ = drive.ctx.abort.cancelled() => {
            if let Some(p) = &drive.pool {
                p.close();
            }
            for h in &handles {
                h.abort();
            }
            for h in handles.iter_mut() {
                let _ = h.await;
            }
            // Requests cut short are counted, never lost.
            let now = Instant::now();
            let cut: Vec<InFlight> = drive.slots.borrow_mut().iter_mut().filter_map(Option::take).collect();
            let mut rec = drive.shards.at(now);
            for f in cut {
                let latency = now.saturating_duration_since(f.t0);
                rec.record(f.op, f.phase, Outcome::Cancelled, latency);
                if let Some(t) = f.tenant {
                    rec.record_tenant(t, f.phase, Outcome::Cancelled, latency);
                }
            }
        }
    }
}

/// Waits `d`, or until the end of the run or an interrupt. (An abort cancels the whole task.)
async fn pause(ctx: &Ctx, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep_until((Instant::now() + d).min(ctx.end).into()) => {}
        _ = ctx.drain.cancelled() => {}
    }
}

/// How long before its first request is due a replayed session opens: longer than a session
/// opening takes, short enough not to hold sessions open long before their clients did. The
/// trace's time zero is this far into the run, so that its first sessions are open in time too.
const REPLAY_LEAD: Duration = Duration::from_millis(500);

/// Exponential back-off after failures that would otherwise spin (refused connections).
struct Backoff(u32);

impl Backoff {
    fn delay(&mut self) -> Duration {
        let d = Duration::from_millis(10u64 << self.0.min(7));
        self.0 += 1;
        d
    }
}

enum Ended {
    Reply(Reply),
    /// Ended without a reply (timeout), at that time.
    Timeout(Instant),
    /// Ended without a reply after `hang_after` while other requests were answered.
    Hang(Instant),
}

/// A virtual user's request timer: one tokio `Sleep`, re-armed lazily.
///
/// `tokio::time::timeout` per request would insert into and remove from the timer wheel (under
/// the driver's lock) for every request. Here the timer is armed for some earlier request's
/// deadline and left alone; when it fires, the request then in flight is checked against its
/// own deadline and the timer re-armed for it. Deadlines only move forward, so that is about
/// once per timeout period per virtual user, and a timeout is still detected on time.
struct Watchdog {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Watchdog {
    fn new() -> Self {
        Watchdog {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
        }
    }

    /// Awaits an exchange that must end by `deadline`. (Pinned by the caller: moving a large
    /// exchange future into this one would cost a copy per request.)
    async fn bounded<F: Future<Output = Reply>>(
        &mut self,
        deadline: Instant,
        mut f: std::pin::Pin<&mut F>,
    ) -> Ended {
        let deadline = tokio::time::Instant::from_std(deadline);
        if deadline < self.sleep.deadline() {
            self.sleep.as_mut().reset(deadline);
        }
        poll_fn(|cx| {
            if let Poll::Ready(reply) = f.as_mut().poll(cx) {
                return Poll::Ready(Ended::Reply(reply));
            }
            while self.sleep.as_mut().poll(cx).is_ready() {
                if tokio::time::Instant::now() >= deadline {
                    return Poll::Ready(Ended::Timeout(Instant::now()));
                }
                self.sleep.as_mut().reset(deadline);
            }
            Poll::Pending
        })
        .await
    }
}

/// Closed loop with a concurrency profile: waits until this virtual user is counted in.
async fn wait_active(ctx: &Ctx, global: usize) -> bool {
    let Model::Closed { vus } = &ctx.plan.load.model else {
        return true;
    };
    loop {
        let now = Instant::now();
        if ctx.stopping(now) {
            return false;
        }
        let level = vus.at(now.saturating_duration_since(ctx.start).as_secs_f64());
        if (global as f64) < level.round() {
            return true;
        }
        // Profiles change slowly next to this: a cheap periodic check is enough.
        pause(ctx, Duration::from_millis(10)).await;
    }
}

async fn virtual_user<S: Session>(drive: Rc<Drive>, slot: usize, mut session: S) {
    let ctx = drive.ctx.clone();
    let shards = &*drive.shards;
    let global = drive.global[slot];
    let (my_endpoint, tenant) = ctx.endpoint_of(global);
    // The requests of the revision this user speaks (mixed revisions), else the preflight's.
    let (_, templates, specs) = ctx
        .requests
        .iter()
        .find(|(r, _, _)| *r == my_endpoint.protocol)
        .unwrap_or(&ctx.requests[0]);
    let track = |op: usize, phase: Phase, t0: Instant, tenant: Option<usize>| {
        drive.slots.borrow_mut()[slot] = Some(InFlight {
            op,
            phase,
            t0,
            tenant,
        })
    };
    let untrack = || drive.slots.borrow_mut()[slot] = None;
    let mut rng =
        SmallRng::seed_from_u64(ctx.seed ^ (global as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut backoff = Backoff(0);
    // OAuth: when this user needs a (new) token; `None` until it has one.
    let mut token_due: Option<Instant> = None;
    let think = ctx.plan.load.think;
    let per_request = ctx.plan.load.sessions == Sessions::PerRequest;
    let mut watchdog = Watchdog::new();
    // Closed loop: counted in for the whole run unless the concurrency profile dips below it.
    let always_active = match &ctx.plan.load.model {
        Model::Closed { vus } => (global as f64) < vus.min().round(),
        _ => true,
    };
    let mut first = true;
    // A timed replay: this user plays recorded session `global`, from its `next` request,
    // in pass `pass`.
    let script = ctx.plan.replay.as_ref().map(|r| {
        (
            r.scripts.get(global).map_or(&[][..], |s| s.as_slice()),
            r.period,
        )
    });
    let (mut next, mut pass) = (0usize, 0u32);
    let cold = ctx.plan.load.pattern == Pattern::ColdStart;
    let op_of = |name: &str| ctx.plan.ops.iter().position(|o| o == name).unwrap_or(0);
    let (op_connect, op_cold) = (op_of(OP_CONNECT), op_of(OP_COLD_START));
    // Cold start: when this request's session started opening.
    let mut opened_at: Option<Instant> = None;
    // Everyone starts together, when the clock of the run starts (which may be a while ahead:
    // a start agreed between shards), unless the run is interrupted first.
    tokio::select! {
        _ = tokio::time::sleep_until(ctx.start.into()) => {}
        _ = ctx.drain.cancelled() => {}
    }
    loop {
        // When this request is meant to start: now (closed loop) or its arrival (open loop).
        let intended = match &drive.pool {
            Some(pool) => match pool.next(slot, std::mem::take(&mut first)).await {
                Some(at) => at,
                None => break,
            },
            None => {
                if !(always_active || wait_active(&ctx, global).await) || !drive.quota.take() {
                    break;
                }
                match script {
                    None => Instant::now(),
                    Some((s, period)) => {
                        if next == s.len() {
                            match period {
                                Some(_) if !s.is_empty() => (next, pass) = (0, pass + 1),
                                _ => break,
                            }
                        }
                        let at = s[next].0 + f64::from(pass) * period.unwrap_or(0.0);
                        ctx.start + REPLAY_LEAD + Duration::from_secs_f64(at)
                    }
                }
            }
        };
        // Closed loop: `intended` is now; open loop: the arrival (released just now or earlier);
        // a timed replay: the recorded time (now, or ahead).
        let mut now = if drive.pool.is_some() || script.is_some() {
            Instant::now()
        } else {
            intended
        };
        // A replayed session opens shortly before its request is due (as its client did), so
        // that the request can go out on time.
        if script.is_some() && !session.is_open() && intended > now + REPLAY_LEAD {
            pause(&ctx, intended - REPLAY_LEAD - now).await;
            now = Instant::now();
        }
        if ctx.stopping(now) {
            break;
        }
        let phase = ctx.phase(intended);
        // OAuth: this user's token, fetched (and timed) when it has none or it is due.
        if let Some((endpoint, op)) = &ctx.oauth
            && token_due.is_none_or(|at| Instant::now() >= at)
        {
            let t0 = Instant::now();
            shards.at(t0).started(*op, phase);
            track(*op, phase, t0, None);
            let got = match tokio::time::timeout(ctx.timeout, endpoint.fetch()).await {
                Ok(r) => r,
                Err(_) => Err(Outcome::Timeout),
            };
            untrack();
            let done = Instant::now();
            let outcome = got.as_ref().err().copied().unwrap_or(Outcome::Ok);
            shards
                .at(done)
                .record(*op, phase, outcome, done.saturating_duration_since(t0));
            match got {
                Ok(token) => {
                    session.set_bearer(Some(&token.access_token));
                    token_due = Some(token.refresh_at);
                }
                Err(failed) => {
                    if drive.pool.is_none() {
                        pause(&ctx, backoff.delay()).await;
                        continue;
                    }
                    // Open loop: this arrival fails at once, for want of a token.
                    let op = ctx.plan.workload[ctx.mix.pick(&mut rng)].op;
                    let mut rb = shards.at(done);
                    rb.started(op, phase);
                    let latency = done.saturating_duration_since(intended);
                    rb.record(op, phase, failed, latency);
                    if let Some(t) = tenant {
                        rb.record_tenant(t, phase, failed, latency);
                    }
                    continue;
                }
            }
            now = Instant::now();
        }
        if !session.is_open() {
            if !session.claim_open() {
                // Another virtual user is opening the shared session.
                session.wait_open().await;
            } else {
                let t0 = Instant::now();
                shards.at(t0).started(OP_INITIALIZE, phase);
                track(OP_INITIALIZE, phase, t0, None);
                let r = {
                    let open = std::pin::pin!(session.open());
                    watchdog.bounded(t0 + ctx.endpoint.timeout, open).await
                };
                untrack();
                if cold {
                    // The connection (or process) on its own, then the whole from here.
                    opened_at = Some(t0);
                    let connect = match &r {
                        Ended::Reply(reply) => match reply.connect {
                            Some(d) => Some((Outcome::Ok, d)),
                            None if matches!(
                                reply.outcome,
                                Outcome::Connect | Outcome::Local(_)
                            ) =>
                            {
                                Some((reply.outcome, reply.done.saturating_duration_since(t0)))
                            }
                            None => None,
                        },
                        _ => None,
                    };
                    if let Some((outcome, d)) = connect {
                        let mut rb = shards.at(t0 + d);
                        rb.started(op_connect, phase);
                        rb.record(op_connect, phase, outcome, d);
                    }
                }
                let (outcome, connected) = finish(shards, OP_INITIALIZE, None, phase, t0, t0, r);
                if outcome == Outcome::Http(401) {
                    token_due = None;
                }
                {
                    let mut rb = shards.now();
                    rb.sessions.connections += u64::from(connected);
                    rb.sessions.opened += u64::from(outcome == Outcome::Ok);
                }
                if outcome == Outcome::Ok {
                    backoff = Backoff(0);
                }
            }
            if !session.is_open() {
                session.reset();
                if drive.pool.is_none() {
                    pause(&ctx, backoff.delay()).await;
                    continue;
                }
                // Open loop: this arrival fails at once rather than waiting for a session.
                let op = ctx.plan.workload[ctx.mix.pick(&mut rng)].op;
                let failed = Instant::now();
                let mut rb = shards.at(failed);
                rb.started(op, phase);
                let latency = failed.saturating_duration_since(intended);
                rb.record(op, phase, Outcome::Connect, latency);
                if let Some(t) = tenant {
                    rb.record_tenant(t, phase, Outcome::Connect, latency);
                }
                continue;
            }
            now = Instant::now();
        }
        let item_index = if let Some((s, _)) = script {
            // The recorded time, not before (the session may have opened ahead of it).
            if intended > now {
                pause(&ctx, intended - now).await;
                now = Instant::now();
                if ctx.stopping(now) {
                    break;
                }
            }
            next += 1;
            s[next - 1].1
        } else if let Some(round) = &drive.round {
            // Every session open: the first calls go out together (none after the end).
            if !round.meet(&ctx).await {
                break;
            }
            now = Instant::now();
            if ctx.stopping(now) {
                break;
            }
            global % ctx.plan.workload.len()
        } else {
            ctx.mix.pick(&mut rng)
        };
        let item = &ctx.plan.workload[item_index];
        let template = &templates[item_index];
        let sent = now;
        // Closed loop: the request is meant to start now (after any session opening); a
        // replayed one when it was recorded (a late start counts in its latency).
        let intended = if drive.pool.is_some() || script.is_some() {
            intended
        } else {
            sent
        };
        let tracked = item.deterministic || item.digest.is_some();
        let args_key = Cell::new(0u64);
        shards.at(sent).started(item.op, phase);
        track(item.op, phase, intended, tenant);
        let mut r = {
            let mut call = std::pin::pin!(session.call(&specs[item_index], |out, id| {
                let args = template.write(item, out, id, &mut rng);
                if tracked {
                    args_key.set(super::divergence::args_key(&out[args]));
                }
            }));
            match ctx.plan.load.hang_after {
                None => watchdog.bounded(sent + ctx.timeout, call).await,
                // Unanswered after hang_after: stuck if a request sent after it was answered,
                // else it waits on for the timeout (the target as a whole may be slow or
                // down), and is stuck at the end if a later one was answered by then.
                Some(h) => {
                    // First calls go out together: any of the round's answered is progress.
                    let since = drive
                        .round
                        .as_ref()
                        .and_then(|r| r.released.get())
                        .filter(|r| *r <= sent);
                    let progressed = || {
                        drive.answered_sent.get().is_some_and(|t| match since {
                            Some(r) => t >= r,
                            None => t > sent,
                        })
                    };
                    match watchdog.bounded(sent + h, call.as_mut()).await {
                        Ended::Timeout(at) if progressed() => Ended::Hang(at),
                        Ended::Timeout(_) => match watchdog.bounded(sent + ctx.timeout, call).await
                        {
                            Ended::Timeout(at) if progressed() => Ended::Hang(at),
                            r => r,
                        },
                        r => r,
                    }
                }
            }
        };
        untrack();
        // An answer that breaks the entry's `expect` rules is an assertion outcome.
        let mut broke = None;
        if let (Some(check), Ended::Reply(reply)) = (&ctx.checks[item_index], &mut r)
            && matches!(reply.outcome, Outcome::Ok | Outcome::ToolError)
            && let Err(why) = check.check(session.last_message(), tenant)
        {
            reply.outcome = Outcome::Assertion;
            broke = Some(why);
        }
        // A deterministic call answered differently is a divergence.
        if tracked
            && broke.is_none()
            && let Ended::Reply(reply) = &mut r
            && matches!(reply.outcome, Outcome::Ok | Outcome::ToolError)
            && let Some(digest) = crate::trace::digest_of_response(session.last_message())
        {
            let who = super::divergence::Who {
                target: ctx.ab_target.clone(),
                vu: global,
                session: session.session_id().map(|id| fingerprint(&id)),
            };
            let excerpt = || {
                let m = session.last_message();
                let at = m
                    .windows(9)
                    .position(|w| w == br#""result":"#)
                    .map_or(0, |i| i + 9);
                redact(&super::divergence::excerpt(&m[at..]), &ctx.secrets)
            };
            let diverged = match &item.digest {
                Some(recorded) => {
                    super::divergence::against_recorded(recorded, &digest, &who, &excerpt())
                }
                None => ctx
                    .seen
                    .check(
                        &ctx.plan.ops[item.op],
                        args_key.get(),
                        &digest,
                        who,
                        excerpt,
                    )
                    .err(),
            };
            if let Some(why) = diverged {
                reply.outcome = Outcome::Divergence;
                broke = Some(why);
            }
        }
        let expired = matches!(&r, Ended::Reply(reply) if reply.session_expired);
        let hung = matches!(r, Ended::Hang(_));
        let ended_at = match &r {
            Ended::Reply(reply) => reply.done,
            Ended::Timeout(at) | Ended::Hang(at) => *at,
        };
        let (outcome, connected) = finish(shards, item.op, tenant, phase, intended, sent, r);
        if let Some(t0) = opened_at.take() {
            // Cold start: from spawning (or connecting) to the first call's end.
            let mut rb = shards.at(ended_at);
            rb.started(op_cold, phase);
            rb.record(
                op_cold,
                phase,
                outcome,
                ended_at.saturating_duration_since(t0),
            );
        }
        if ctx.plan.load.hang_after.is_some() && outcome.class().is_completed() {
            let latest = drive.answered_sent.get().map_or(sent, |t| t.max(sent));
            drive.answered_sent.set(Some(latest));
        }
        if hung && let Some(h) = ctx.plan.load.hang_after {
            shards.now().note_failure(item.op, outcome, || {
                Some(format!(
                    "no answer after {} while the target answered requests sent after it \
                     (virtual user {global}{})",
                    mcpbench_knobs::format_duration(h),
                    session.session_id().map_or(String::new(), |id| format!(
                        ", session {}",
                        fingerprint(&id)
                    ))
                ))
            });
        }
        if let Some(why) = broke {
            shards
                .now()
                .note_failure(item.op, outcome, || Some(redact(&why, &ctx.secrets)));
        }
        if matches!(outcome, Outcome::ToolError | Outcome::RpcError(_)) {
            shards.now().note_failure(item.op, outcome, || {
                preflight::failure_text(session.last_message()).map(|m| redact(&m, &ctx.secrets))
            });
        }
        shards.now().sessions.connections += u64::from(connected);
        if outcome == Outcome::Http(401) {
            // The token was refused (revoked, expired early): the next request gets a new one.
            token_due = None;
        }
        if expired {
            shards.now().sessions.expired += 1;
            session.reset();
        }
        match outcome {
            Outcome::Timeout | Outcome::Hang => {
                // Tell the server to stop working on it (not timed: the request already ended).
                if session.cancel_last().await {
                    shards.now().sessions.cancels_sent += 1;
                }
            }
            Outcome::Connect | Outcome::Io if drive.pool.is_none() => {
                pause(&ctx, backoff.delay()).await
            }
            _ => backoff = Backoff(0),
        }
        if let Some(round) = &drive.round {
            // Every call ended: the round's sessions close, and the next round opens new ones
            // (a shared one is let go of by the last to arrive, before anyone reopens it).
            let shared = ctx.plan.load.sessions == Sessions::Shared;
            match round.arrive() {
                None => {
                    if shared {
                        session.reset();
                    }
                    round.release();
                }
                Some(g) => {
                    if !round.wait(g, &ctx).await {
                        break;
                    }
                }
            }
            if !shared {
                session.close().await;
                session.reset();
            }
        }
        if per_request && session.is_open() {
            session.close().await;
            session.reset();
        }
        if let Some((lo, hi)) = think {
            let d = if hi > lo {
                rng.random_range(lo..=hi)
            } else {
                lo
            };
            pause(&ctx, d).await;
        }
    }
    if let Some(round) = &drive.round {
        round.leave();
    }
    if !ctx.aborted.load(Ordering::Relaxed) {
        session.close().await;
    }
    let st = session.take_stats();
    shards.now().sessions.add_transport(st);
}

/// A session id as notes show it: a digest (FNV-1a, 32 bits) that tells sessions apart without
/// writing the id itself, which a server may treat as a credential.
fn fingerprint(id: &str) -> String {
    let h = id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("#{h:08x}")
}

/// Records the end of one request (into the interval of its end); returns its outcome and
/// whether it opened a connection. Latency runs from `intended` (the arrival, open loop) and
/// service time from `sent`.
fn finish(
    shards: &Shards,
    op: usize,
    tenant: Option<usize>,
    phase: Phase,
    intended: Instant,
    sent: Instant,
    r: Ended,
) -> (Outcome, bool) {
    let (reply, done, unanswered) = match r {
        Ended::Reply(reply) => (Some(reply), reply.done, Outcome::Timeout),
        Ended::Timeout(at) => (None, at, Outcome::Timeout),
        Ended::Hang(at) => (None, at, Outcome::Hang),
    };
    let mut rec = shards.at(done);
    let (outcome, connected) = match reply {
        Some(reply) => {
            if reply.streamed {
                let first = reply.first_event.map(|f| f.saturating_duration_since(sent));
                rec.stream(op, phase, first, reply.events);
            }
            if reply.lingered {
                rec.sessions.lingering_streams += 1;
            }
            if let Some(u) = reply.upstream {
                rec.upstream(op, phase, u);
            }
            if let (Outcome::Http(429), Some(after)) = (reply.outcome, reply.retry_after) {
                rec.retry_after(phase, after);
            }
            (reply.outcome, reply.connected)
        }
        None => (unanswered, false),
    };
    let latency = done.saturating_duration_since(intended);
    rec.record(op, phase, outcome, latency);
    if let Some(t) = tenant {
        rec.record_tenant(t, phase, outcome, latency);
    }
    if intended != sent {
        rec.service(op, phase, done.saturating_duration_since(sent));
    }
    (outcome, connected)
}

/// A server's message with the target's header values (credentials) and anything after
/// `Bearer ` blanked out: what it says may be shown and written, secrets may not.
pub fn redact(message: &str, headers: &[(String, String)]) -> String {
    let mut m = message.to_string();
    for (_, value) in headers {
        for secret in std::iter::once(value.as_str()).chain(value.split_whitespace()) {
            if secret.len() >= 6 {
                m = m.replace(secret, "[redacted]");
            }
        }
    }
    let mut out = String::with_capacity(m.len());
    let mut rest = m.as_str();
    while let Some(i) = rest.to_ascii_lowercase().find("bearer ") {
        out.push_str(&rest[..i + 7]);
        out.push_str("[redacted]");
        rest = &rest[i + 7..];
        rest = rest.trim_start_matches(|c: char| !c.is_whitespace() && c != '"' && c != '\'');
    }
    out.push_str(rest);
    out
}

/// CPU time (user + system) of the calling thread, where Linux reports it.
pub fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_lose_credentials() {
        let headers = vec![(
            "Authorization".to_string(),
            "Bearer s3cr3t-token".to_string(),
        )];
        assert_eq!(
            redact("token s3cr3t-token is not valid", &headers),
            "token [redacted] is not valid"
        );
        assert_eq!(
            redact("bad header: Bearer abc.def.ghi, try again", &[]),
            "bad header: Bearer [redacted] try again"
        );
        assert_eq!(redact("no secrets here", &headers), "no secrets here");
    }
    use crate::scenario::plan::{Arrival, Profile};

    /// Runs the dispatcher against `vus` virtual users that each hold an arrival for `service`,
    /// on tokio's paused clock. Returns (released, dropped, (intended, released-at) per arrival
    /// served).
    async fn simulate(
        profile: Profile,
        arrival: Arrival,
        vus: usize,
        backlog: usize,
        service: Duration,
    ) -> (u64, u64, Vec<(f64, f64)>) {
        let start = tokio::time::Instant::now().into_std();
        let end = start + profile.duration();
        let pool = Rc::new(Pool::new(vus, backlog));
        let served = Rc::new(RefCell::new(Vec::new()));
        let local = tokio::task::LocalSet::new();
        let counts = Rc::new(Cell::new((0u64, 0u64)));
        local
            .run_until(async {
                let mut handles = Vec::new();
                for vu in 0..vus {
                    let (pool, served) = (pool.clone(), served.clone());
                    handles.push(tokio::task::spawn_local(async move {
                        let mut first = true;
                        while let Some(intended) = pool.next(vu, std::mem::take(&mut first)).await {
                            let now = tokio::time::Instant::now().into_std();
                            served.borrow_mut().push((
                                intended.duration_since(start).as_secs_f64(),
                                now.duration_since(start).as_secs_f64(),
                            ));
                            tokio::time::sleep(service).await;
                        }
                    }));
                }
                let mut arrivals = Arrivals::new(&profile, arrival, 0, 1, 7);
                let quota = Quota(Cell::new(None));
                let c = counts.clone();
                release_arrivals(
                    &mut arrivals,
                    &mut DispatchClock::Tokio,
                    start,
                    end,
                    &pool,
                    &quota,
                    &|_, _, ok| {
                        let (r, d) = c.get();
                        c.set(if ok { (r + 1, d) } else { (r, d + 1) });
                    },
                    &AtomicBool::new(false),
                )
                .await;
                pool.close();
                for h in handles {
                    h.await.unwrap();
                }
            })
            .await;
        let (released, dropped) = counts.get();
        let s = served.borrow().clone();
        (released, dropped, s)
    }

    #[tokio::test(start_paused = true)]
    async fn arrivals_per_stage_on_the_paused_clock() {
        // 0 → 100/s over 2 s, hold 100/s for 2 s: ~100 then ~200 arrivals, all served (no drops).
        let (released, dropped, served) = simulate(
            Profile::from_secs(0.0, &[(2, 100.0), (2, 100.0)]),
            Arrival::Uniform,
            8,
            0,
            Duration::from_millis(1),
        )
        .await;
        assert_eq!(dropped, 0);
        let first = served.iter().filter(|(i, _)| *i < 2.0).count() as i64;
        let second = served.iter().filter(|(i, _)| *i >= 2.0).count() as i64;
        assert!(
            (first - 100).abs() <= 1 && (second - 200).abs() <= 1,
            "{first} {second}"
        );
        assert_eq!(released as usize, served.len());
        // Released on time: the paused clock fires each timer exactly (a tick may batch some).
        assert!(served.iter().all(|(i, at)| at - i < 0.002), "late releases");
    }

    #[tokio::test(start_paused = true)]
    async fn poisson_arrivals_on_the_paused_clock() {
        let (released, dropped, _) = simulate(
            Profile::from_secs(200.0, &[(20, 200.0)]),
            Arrival::Poisson,
            16,
            0,
            Duration::from_millis(1),
        )
        .await;
        assert_eq!(dropped, 0);
        // N ≈ 4000, σ ≈ 63: within 4σ.
        assert!((released as f64 - 4000.0).abs() < 260.0, "{released}");
    }

    #[tokio::test(start_paused = true)]
    async fn arrivals_over_max_in_flight_queue_then_drop() {
        // 100/s for 2 s; 2 virtual users each busy 50 ms serve 40/s: the backlog of 10 fills,
        // then the excess is dropped. Everything is accounted for.
        let (released, dropped, served) = simulate(
            Profile::from_secs(100.0, &[(2, 100.0)]),
            Arrival::Uniform,
            2,
            10,
            Duration::from_millis(50),
        )
        .await;
        assert_eq!(
            released + dropped,
            200,
            "every arrival (0, 10 ms, … 1.99 s) released or dropped"
        );
        assert_eq!(
            released as usize,
            served.len(),
            "every released arrival served"
        );
        // Capacity 40/s × 2 s = 80, plus the 10 still queued at the end (served after it).
        assert!((85..=95).contains(&released), "released {released}");
        assert!(dropped >= 100, "dropped {dropped}");
        // Queued arrivals start late: their latency (from the intended start) includes the wait.
        let max_wait = served.iter().map(|(i, at)| at - i).fold(0.0, f64::max);
        assert!(
            max_wait > 0.2,
            "queueing shows in the start delay: {max_wait}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_backlog_busy_means_dropped() {
        let (released, dropped, _) = simulate(
            Profile::from_secs(100.0, &[(1, 100.0)]),
            Arrival::Uniform,
            1,
            0,
            Duration::from_millis(25),
        )
        .await;
        assert_eq!(released + dropped, 100);
        assert!(
            (33..=35).contains(&released),
            "one user busy 25 ms per arrival serves every third one: {released}"
        );
    }
}
