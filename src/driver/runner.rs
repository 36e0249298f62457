//! Worker threads and virtual users: the one generic runner.
//!
//! Each worker thread runs a current-thread Tokio runtime with its share of the virtual users,
//! all recording into one thread-local [`Recorder`] (an `Rc<RefCell<_>>`: no lock, no atomic).
//! A ticker on the same thread hands the shard to the collector once per interval. Stop
//! conditions (end of duration, abort) are checked per request; warm-up is decided by each
//! request's start time. The virtual-user loop is generic over [`Session`]; one `match` on the
//! transport picks the session type.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::workload::{Mix, RequestTemplate};
use crate::metrics::collector::{ShardMsg, WorkerEnd};
use crate::metrics::outcome::Outcome;
use crate::metrics::recorder::{Phase, Recorder};
use crate::scenario::plan::OP_INITIALIZE;
use crate::scenario::{Plan, Sessions};
use crate::transport::mux::{Connector, MuxSession, Shared};
use crate::transport::sse_legacy::SseConnector;
use crate::transport::stdio::StdioConnector;
use crate::transport::streamable_http::HttpSession;
use crate::transport::websocket::WsConnector;
use crate::transport::{CallSpec, Endpoint, Reply, Session, TransportKind};

/// Read-only context shared by every worker.
#[derive(Debug)]
pub struct Ctx {
    pub plan: Arc<Plan>,
    pub endpoint: Arc<Endpoint>,
    pub templates: Vec<RequestTemplate>,
    pub specs: Vec<CallSpec>,
    pub mix: Mix,
    pub start: Instant,
    pub warmup_end: Instant,
    pub end: Instant,
    pub timeout: Duration,
    pub interval: Duration,
    /// Cancels in-flight requests (Ctrl-C, or the drain deadline passed). Workers wait on it
    /// once; requests don't (a per-request wait would take the token's lock every time).
    pub abort: CancellationToken,
    /// Mirrors `abort` as a plain flag for the per-request stop check.
    pub aborted: AtomicBool,
    pub seed: u64,
}

impl Ctx {
    fn phase(&self, t: Instant) -> Phase {
        if t < self.warmup_end {
            Phase::Warmup
        } else {
            Phase::Measured
        }
    }

    fn stopping(&self, now: Instant) -> bool {
        now >= self.end || self.aborted.load(Ordering::Relaxed)
    }
}

type Rec = Rc<RefCell<Recorder>>;

/// A request in flight, so that one cut short by an abort is still counted.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    op: usize,
    phase: Phase,
    t0: Instant,
}

type Slots = Rc<RefCell<Vec<Option<InFlight>>>>;

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
        let n_ops = ctx.plan.ops.len();
        let rec: Rec = Rc::new(RefCell::new(Recorder::new(n_ops)));
        let interval_index = Rc::new(Cell::new(0u64));
        let ticker = {
            let (ctx, rec, idx, tx) =
                (ctx.clone(), rec.clone(), interval_index.clone(), tx.clone());
            tokio::task::spawn_local(async move {
                loop {
                    let k = idx.get();
                    tokio::time::sleep_until((ctx.start + ctx.interval * (k as u32 + 1)).into())
                        .await;
                    let fresh = recycle.try_recv().unwrap_or_else(|_| Recorder::new(n_ops));
                    let shard = std::mem::replace(&mut *rec.borrow_mut(), fresh);
                    let _ = tx.send(ShardMsg {
                        worker: index,
                        index: k,
                        shard,
                        last: None,
                    });
                    idx.set(k + 1);
                }
            })
        };
        let ep = ctx.endpoint.clone();
        let shared = ctx.plan.load.sessions == Sessions::Shared;
        match ep.kind {
            TransportKind::StreamableHttp => {
                run_vus(&ctx, &rec, &vus, || HttpSession::new(ep.clone())).await
            }
            TransportKind::Stdio => run_mux::<StdioConnector>(&ctx, &rec, &vus, shared).await,
            TransportKind::WebSocket => run_mux::<WsConnector>(&ctx, &rec, &vus, shared).await,
            TransportKind::LegacySse => run_mux::<SseConnector>(&ctx, &rec, &vus, shared).await,
        }
        ticker.abort();
        let _ = ticker.await;
        let shard = std::mem::replace(&mut *rec.borrow_mut(), Recorder::new(0));
        let cpu = match (cpu_start, thread_cpu()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let _ = tx.send(ShardMsg {
            worker: index,
            index: interval_index.get(),
            shard,
            last: Some(WorkerEnd { cpu }),
        });
    });
    let _ = local.block_on(&rt, body);
}

/// Virtual users over a multiplexed transport: own connections, or one shared per worker.
async fn run_mux<C: Connector + 'static>(ctx: &Arc<Ctx>, rec: &Rec, vus: &[usize], shared: bool) {
    let ep = ctx.endpoint.clone();
    if shared {
        let slot = Rc::new(Shared::<C::Out>::default());
        let n = vus.len();
        let s = slot.clone();
        run_vus(ctx, rec, vus, move || {
            MuxSession::<C>::shared(ep.clone(), s.clone(), n)
        })
        .await;
        if let Some(conn) = slot.take()
            && !ctx.aborted.load(Ordering::Relaxed)
        {
            C::shutdown(conn, ctx.timeout.min(Duration::from_secs(2))).await;
        }
    } else {
        run_vus(ctx, rec, vus, move || MuxSession::<C>::new(ep.clone())).await;
    }
}

/// Spawns the virtual users, waits for them (or the abort), and counts what an abort cut.
async fn run_vus<S: Session + 'static, F: Fn() -> S>(
    ctx: &Arc<Ctx>,
    rec: &Rec,
    vus: &[usize],
    make: F,
) {
    let slots: Slots = Rc::new(RefCell::new(vec![None; vus.len()]));
    let mut handles: Vec<_> = vus
        .iter()
        .enumerate()
        .map(|(slot, &vu)| {
            tokio::task::spawn_local(virtual_user(
                ctx.clone(),
                rec.clone(),
                slots.clone(),
                slot,
                vu,
                make(),
            ))
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
        _ = ctx.abort.cancelled() => {
            for h in &handles {
                h.abort();
            }
            for h in handles.iter_mut() {
                let _ = h.await;
            }
            // Requests cut short are counted, never lost.
            let now = Instant::now();
            let mut rec = rec.borrow_mut();
            for f in slots.borrow_mut().iter_mut().filter_map(Option::take) {
                rec.record(f.op, f.phase, Outcome::Cancelled, now.saturating_duration_since(f.t0));
            }
        }
    }
}

/// Waits `d`, or until the end of the run. (An abort cancels the whole task.)
async fn pause(ctx: &Ctx, d: Duration) {
    tokio::time::sleep_until((Instant::now() + d).min(ctx.end).into()).await;
}

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
}

/// Awaits an exchange under a timeout.
async fn bounded<F: Future<Output = Reply>>(timeout: Duration, f: F) -> Ended {
    match tokio::time::timeout(timeout, f).await {
        Ok(reply) => Ended::Reply(reply),
        Err(_) => Ended::Timeout(Instant::now()),
    }
}

async fn virtual_user<S: Session>(
    ctx: Arc<Ctx>,
    rec: Rec,
    slots: Slots,
    slot: usize,
    vu: usize,
    mut session: S,
) {
    let track = |op: usize, phase: Phase, t0: Instant| {
        slots.borrow_mut()[slot] = Some(InFlight { op, phase, t0 })
    };
    let untrack = || slots.borrow_mut()[slot] = None;
    let mut rng =
        SmallRng::seed_from_u64(ctx.seed ^ (vu as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut backoff = Backoff(0);
    // Everyone starts together, when the clock of the run starts.
    tokio::time::sleep_until(ctx.start.into()).await;
    loop {
        let t0 = Instant::now();
        if ctx.stopping(t0) {
            break;
        }
        let phase = ctx.phase(t0);
        if !session.is_open() {
            if !session.claim_open() {
                // Another virtual user is opening the shared session.
                session.wait_open().await;
                if !session.is_open() {
                    pause(&ctx, backoff.delay()).await;
                }
                continue;
            }
            rec.borrow_mut().started(OP_INITIALIZE, phase);
            track(OP_INITIALIZE, phase, t0);
            let r = bounded(ctx.endpoint.timeout, session.open()).await;
            untrack();
            let (outcome, connected) = finish(&rec, OP_INITIALIZE, phase, t0, r);
            {
                let mut rb = rec.borrow_mut();
                rb.sessions.connections += u64::from(connected);
                rb.sessions.opened += u64::from(outcome == Outcome::Ok);
            }
            if outcome == Outcome::Ok && session.is_open() {
                backoff = Backoff(0);
                continue;
            }
            session.reset();
            pause(&ctx, backoff.delay()).await;
            continue;
        }
        let item_index = ctx.mix.pick(&mut rng);
        let item = &ctx.plan.workload[item_index];
        let template = &ctx.templates[item_index];
        rec.borrow_mut().started(item.op, phase);
        track(item.op, phase, t0);
        let r = bounded(
            ctx.timeout,
            session.call(&ctx.specs[item_index], |out, id| {
                template.write(item, out, id, &mut rng)
            }),
        )
        .await;
        untrack();
        let expired = matches!(&r, Ended::Reply(reply) if reply.session_expired);
        let (outcome, connected) = finish(&rec, item.op, phase, t0, r);
        rec.borrow_mut().sessions.connections += u64::from(connected);
        if expired {
            rec.borrow_mut().sessions.expired += 1;
            session.reset();
        }
        match outcome {
            Outcome::Timeout => {
                // Tell the server to stop working on it (not timed: the request already ended).
                if session.cancel_last().await {
                    rec.borrow_mut().sessions.cancels_sent += 1;
                }
            }
            Outcome::Connect | Outcome::Io => pause(&ctx, backoff.delay()).await,
            _ => backoff = Backoff(0),
        }
    }
    if !ctx.aborted.load(Ordering::Relaxed) {
        session.close().await;
    }
}

/// Records the end of one request; returns its outcome and whether it opened a connection.
fn finish(rec: &Rec, op: usize, phase: Phase, t0: Instant, r: Ended) -> (Outcome, bool) {
    let mut rec = rec.borrow_mut();
    match r {
        Ended::Reply(reply) => {
            rec.record(
                op,
                phase,
                reply.outcome,
                reply.done.saturating_duration_since(t0),
            );
            if reply.streamed {
                rec.stream(
                    op,
                    phase,
                    reply.first_event.map(|f| f.saturating_duration_since(t0)),
                    reply.events,
                );
            }
            if reply.lingered {
                rec.sessions.lingering_streams += 1;
            }
            (reply.outcome, reply.connected)
        }
        Ended::Timeout(at) => {
            rec.record(
                op,
                phase,
                Outcome::Timeout,
                at.saturating_duration_since(t0),
            );
            (Outcome::Timeout, false)
        }
    }
}

/// CPU time (user + system) of the calling thread, where Linux reports it.
pub fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}
