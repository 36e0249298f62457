//! Worker threads and virtual users: the one generic runner.
//!
//! Each worker thread runs a current-thread Tokio runtime with its share of the virtual users,
//! all recording into one thread-local [`Recorder`] (in a `RefCell`: no lock, no atomic). The
//! shard goes to the collector when its interval ends (see `Shards`): every event lands in
//! the interval of the [`Grid`](crate::metrics::grid::Grid) its time falls in.
//!
//! One loop serves both load models. Closed loop: a virtual user starts its next request when
//! the previous one ended (after an optional think time), while the concurrency profile counts
//! it in. Open loop: a dispatcher releases arrivals at their intended start times (computed by
//! `schedule`, never stamped at wake-up) to idle virtual users; an arrival that finds all of
//! them busy (`max_in_flight`) is dropped and counted; latency runs from the intended start,
//! service time from the actual send. The loop is generic over [`Session`]; one `match` on the
//! transport picks the session type.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::event_loop;
use super::pacing::{Pool, Quota, Round};
pub use super::run_context::{Ctx, redact};
use super::schedule::{Arrivals, DispatchClock};
use super::shards::{InFlight, Shards, Slots, thread_cpu};
use super::user::{Drive, virtual_user};
use crate::client::sessions::{Sharing, WithSessions, http_sessions, with_sessions};
use crate::metrics::collector::{ShardMsg, WorkerEnd};
use crate::metrics::outcome::Outcome;
use crate::metrics::recorder::Recorder;
use crate::scenario::Sessions;
use crate::scenario::plan::{Model, Pattern};
use crate::transport::{Endpoint, Session};

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
            handovers: Cell::new(None),
            round: (ctx.plan.load.pattern == Pattern::FirstCall).then(|| Round::new(vus.len())),
        });
        let dispatcher =
            pool.map(|pool| tokio::task::spawn_local(dispatch(drive.clone(), pool, index)));
        run_users(&drive, vus.len()).await;
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
        shards.finish(cpu, drive.handovers.get());
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

/// This worker's virtual users, on sessions of the target's transport: each its own, or one
/// shared by the worker's users (a shared multiplexed connection is shut down at the end).
async fn run_users(drive: &Rc<Drive>, n: usize) {
    let ctx = &drive.ctx;
    // `expect` rules and divergence checks read the answers: keep them.
    let keep = ctx.checks.iter().any(Option::is_some)
        || ctx
            .plan
            .workload
            .iter()
            .any(|w| w.deterministic || w.digest.is_some());
    // Shared sessions carry no per-user credentials (the scenario refuses both).
    let sharing = match ctx.plan.load.sessions {
        Sessions::Shared => Sharing::Shared { users: n },
        _ => Sharing::Own,
    };
    if event_loop::fits(ctx) {
        let make = http_sessions(&ctx.endpoint, &sharing);
        let sessions = (0..n)
            .map(|slot| make(ctx.endpoint_of(drive.global[slot]).0))
            .collect();
        let handle = tokio::task::spawn_local(event_loop::run(drive.clone(), sessions));
        return await_users(drive, vec![handle]).await;
    }
    let users = Users { drive, n };
    let (_, shared) = with_sessions(&ctx.endpoint, sharing, keep, users).await;
    if !ctx.aborted.load(Ordering::Relaxed)
        && let Some(st) = shared
            .shutdown(ctx.timeout.min(Duration::from_secs(2)))
            .await
    {
        drive.shards.now().sessions.add_transport(st);
    }
}

/// A worker's virtual users, for the session factory.
struct Users<'a> {
    drive: &'a Rc<Drive>,
    n: usize,
}

impl WithSessions for Users<'_> {
    type Output = ();
    async fn with<S, F>(self, make: F)
    where
        S: Session + 'static,
        F: Fn(Arc<Endpoint>) -> S + 'static,
    {
        run_vus(self.drive, self.n, make).await
    }
}

/// Spawns the virtual users and waits for them.
async fn run_vus<S: Session + 'static, F: Fn(Arc<Endpoint>) -> S>(
    drive: &Rc<Drive>,
    n: usize,
    make: F,
) {
    let handles = (0..n)
        .map(|slot| {
            let (ep, _) = drive.ctx.endpoint_of(drive.global[slot]);
            tokio::task::spawn_local(virtual_user(drive.clone(), slot, make(ep)))
        })
        .collect();
    await_users(drive, handles).await;
}

/// Waits for the tasks of the virtual users (or the abort), and counts what an abort cut.
async fn await_users(drive: &Rc<Drive>, mut handles: Vec<tokio::task::JoinHandle<()>>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::pacing::{Pool, Quota};

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
