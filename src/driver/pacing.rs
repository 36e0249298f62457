//! When a virtual user starts its next request, per load model: closed loop (now, while the
//! concurrency profile counts it in), open loop (an arrival handed over by the worker's
//! [`Pool`]), timed replay (the recorded times of its session), and `first_call` rounds (the
//! [`Round`] barrier); the request quota; the waits between requests.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::run_context::Ctx;
use crate::scenario::plan::Model;

/// A virtual user's pacing: what its next request waits for.
pub(super) struct Pacing<'d> {
    global: usize,
    /// Open loop: the user has not served an arrival yet (it starts idle).
    first: bool,
    /// Closed loop: counted in for the whole run unless the concurrency profile dips below it.
    always_active: bool,
    /// A timed replay: the recorded session this user plays.
    script: Option<Script<'d>>,
}

/// A recorded session played at its times: `(time, workload entry)` pairs, from `next`, in
/// pass `pass` (a looped replay starts over every `period` seconds).
struct Script<'d> {
    entries: &'d [(f64, usize)],
    period: Option<f64>,
    next: usize,
    pass: u32,
}

impl<'d> Pacing<'d> {
    pub(super) fn new(ctx: &'d Ctx, global: usize) -> Self {
        let always_active = match &ctx.plan.load.model {
            Model::Closed { vus } => (global as f64) < vus.min().round(),
            _ => true,
        };
        let script = ctx.plan.replay.as_ref().map(|r| Script {
            entries: r.scripts.get(global).map_or(&[][..], |s| s.as_slice()),
            period: r.period,
            next: 0,
            pass: 0,
        });
        Pacing {
            global,
            first: true,
            always_active,
            script,
        }
    }

    /// Counted in for the whole run and not a replay: in a closed loop, the next request is
    /// due at once.
    pub(super) fn is_plain(&self) -> bool {
        self.always_active && self.script.is_none()
    }

    pub(super) fn is_replay(&self) -> bool {
        self.script.is_some()
    }

    /// When the next request is meant to start, and now; `None` when the user is done (the
    /// run ended, the quota or the recorded session is used up). Closed loop: both are now.
    pub(super) async fn next(
        &mut self,
        ctx: &Ctx,
        (pool, quota): (Option<&Pool>, &Quota),
        slot: usize,
    ) -> Option<(Instant, Instant)> {
        if let Some(pool) = pool {
            let at = pool.next(slot, std::mem::take(&mut self.first)).await?;
            return Some((at, Instant::now()));
        }
        if !(self.always_active || wait_active(ctx, self.global).await) || !quota.take() {
            return None;
        }
        match &mut self.script {
            None => {
                let now = Instant::now();
                Some((now, now))
            }
            Some(s) => {
                let at = s.next_time()?;
                Some((ctx.start + REPLAY_LEAD + at, Instant::now()))
            }
        }
    }

    /// A timed replay: the workload entry of the request just paced (and on to the next).
    pub(super) fn recorded_entry(&mut self) -> Option<usize> {
        let s = self.script.as_mut()?;
        s.next += 1;
        Some(s.entries[s.next - 1].1)
    }
}

impl Script<'_> {
    /// The recorded time of the next request, from the replay's time zero; `None` at the end
    /// of an unlooped session.
    fn next_time(&mut self) -> Option<Duration> {
        if self.next == self.entries.len() {
            match self.period {
                Some(_) if !self.entries.is_empty() => (self.next, self.pass) = (0, self.pass + 1),
                _ => return None,
            }
        }
        let at = self.entries[self.next].0 + f64::from(self.pass) * self.period.unwrap_or(0.0);
        Some(Duration::from_secs_f64(at))
    }
}

/// Closed loop with a concurrency profile: waits until this virtual user is counted in.
pub(super) async fn wait_active(ctx: &Ctx, global: usize) -> bool {
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

/// Waits `d`, or until the end of the run or an interrupt. (An abort cancels the whole task.)
pub(super) async fn pause(ctx: &Ctx, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep_until((Instant::now() + d).min(ctx.end).into()) => {}
        _ = ctx.drain.cancelled() => {}
    }
}

/// How long before its first request is due a replayed session opens: longer than a session
/// opening takes, short enough not to hold sessions open long before their clients did. The
/// trace's time zero is this far into the run, so that its first sessions are open in time too.
pub(super) const REPLAY_LEAD: Duration = Duration::from_millis(500);

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

/// `first_call` rounds: the virtual users of a worker wait for one another twice a round —
/// every session open (then all first calls go out together), and every call ended (then the
/// sessions close). The last to arrive ends the round; a user that stops leaves, and a wait
/// ends with the run.
pub(super) struct Round {
    parties: Cell<usize>,
    arrived: Cell<usize>,
    generation: Cell<u64>,
    notify: tokio::sync::Notify,
    /// When the last round was released: its first calls were all sent after it.
    pub(super) released: Cell<Option<Instant>>,
}

impl Round {
    pub(super) fn new(parties: usize) -> Self {
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
    pub(super) fn arrive(&self) -> Option<u64> {
        let a = self.arrived.get() + 1;
        if a >= self.parties.get() {
            return None;
        }
        self.arrived.set(a);
        Some(self.generation.get())
    }

    pub(super) fn release(&self) {
        self.released.set(Some(Instant::now()));
        self.arrived.set(0);
        self.generation.set(self.generation.get() + 1);
        self.notify.notify_waiters();
    }

    /// Waits for the round `generation` to be released; false if the run ended first.
    pub(super) async fn wait(&self, generation: u64, ctx: &Ctx) -> bool {
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
    pub(super) async fn meet(&self, ctx: &Ctx) -> bool {
        match self.arrive() {
            None => {
                self.release();
                true
            }
            Some(g) => self.wait(g, ctx).await,
        }
    }

    /// A user that stops: the others no longer wait for it.
    pub(super) fn leave(&self) {
        let p = self.parties.get().saturating_sub(1);
        self.parties.set(p);
        if self.arrived.get() > 0 && self.arrived.get() >= p {
            self.release();
        }
    }
}
