//! A worker's event loop, the way wrk drives its connections: for a closed loop over
//! Streamable HTTP/1.1 keep-alive with nothing to wait for between requests, one task per worker
//! sends every virtual user's next request as soon as its answer is in, on the user's own
//! connection, without a task, a future or a timer per request. The users' plain TCP
//! connections are lent to an epoll of the loop's own (`Stream::Polled`): while every user is in
//! the loop, the worker waits on that epoll itself — Tokio's reactor does no work per event — and
//! gives Tokio a turn every 10 ms, or when nothing happens; while some users are in tasks, Tokio
//! watches the epoll's descriptor. Connections Tokio must keep (TLS) are read through it, each
//! user's waker (made once) marking it ready. One timer watches the oldest request's deadline.
//!
//! The loop takes the plain case only: an answer with status 200 and a JSON body of known
//! length, on a connection kept alive (`transport::streamable_http::plain`). Anything else —
//! an SSE stream, a refusal, a chunked body, a closed or reset connection, a timeout, a session
//! to open or reopen — hands the user over, where it stands, to the task pipeline every other
//! run uses (`User::run`): the same code judges, records and recovers it. After its next
//! request the user comes back, at most [`RETURNS`] times; after that the target evidently
//! answers it in shapes the loop does not take, and it stays in its task. With no user left
//! in it, the loop only polls those tasks (no epoll, no timer): an always-SSE target costs what
//! it costs under `engine = "tasks"`.
//!
//! Every figure is recorded as the task pipeline records it (`User::settle`); the loop changes
//! what a request costs the generator, not what is measured.

use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::task::AtomicWaker;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::run_context::Ctx;
use super::user::{Drive, Resume, Turn, User, Waiting};
use crate::scenario::Sessions;
use crate::scenario::plan::{Engine, Model, Pattern};
use crate::transport::TransportKind;
use crate::transport::streamable_http::HttpSession;

/// How many times a virtual user taken over by a task comes back to the loop.
pub(super) const RETURNS: u8 = 16;

/// Whether this worker's virtual users run in the event loop: a closed loop over Streamable
/// HTTP/1.1, steady sessions (own or shared, not per request), no think time, rounds, replay,
/// opening storm, OAuth or hang check — unless the scenario asks for a task per user
/// (`engine = "tasks"`).
pub(super) fn fits(ctx: &Ctx) -> bool {
    let load = &ctx.plan.load;
    ctx.endpoint.kind == TransportKind::StreamableHttp
        && !ctx.endpoint.http2
        && matches!(load.model, Model::Closed { .. })
        && load.pattern == Pattern::Steady
        && load.sessions != Sessions::PerRequest
        && load.think.is_none()
        && load.hang_after.is_none()
        && load.open_rate.is_none()
        && ctx.plan.replay.is_none()
        && ctx.oauth.is_none()
        && load.engine == Engine::Auto
}

/// Runs this worker's virtual users, one session each, to the end of the run.
pub(super) async fn run(drive: Rc<Drive>, sessions: Vec<HttpSession>) {
    let ctx = &*drive.ctx;
    tokio::select! {
        _ = tokio::time::sleep_until(ctx.start.into()) => {}
        _ = ctx.drain.cancelled() => {}
    }
    drive.handovers.set(Some(0));
    let mut l = Loop::new(&drive, sessions);
    poll_fn(|cx| l.poll(cx)).await;
}

/// The loop's own epoll: the users' plain TCP connections are lent to it (`Stream::Polled`), so
/// that Tokio's reactor does no work per event for them. While every user is in the loop, the
/// worker waits on it directly; while some are in tasks, Tokio watches its descriptor.
struct OwnPoll {
    watched: AsyncFd<mio::Poll>,
    events: mio::Events,
}

/// How long the worker waits on the loop's epoll at most before Tokio gets a turn (its timers:
/// the interval hand-over, a drain or abort from another thread).
const OWN_WAIT: Duration = Duration::from_millis(10);

impl OwnPoll {
    fn new() -> Option<Self> {
        let poll = mio::Poll::new().ok()?;
        // Deprecated for descriptors it does not own (tokio#8587); it owns this epoll for its
        // whole life, and the sound replacement is `unsafe` (forbidden in this crate).
        #[allow(deprecated)]
        let watched = AsyncFd::with_interest(poll, Interest::READABLE).ok()?;
        Some(OwnPoll {
            watched,
            events: mio::Events::with_capacity(256),
        })
    }

    fn registry(&self) -> &mio::Registry {
        self.watched.get_ref().registry()
    }

    /// The users whose connections have news, waiting up to `timeout`; false if none.
    fn wait(&mut self, timeout: Duration, due: &mut Vec<usize>) -> bool {
        news(self.watched.get_mut(), &mut self.events, timeout, due)
    }

    /// Without waiting, once Tokio says the epoll is readable (`cx` woken when it becomes so).
    fn poll_news(&mut self, cx: &mut Context<'_>, due: &mut Vec<usize>) -> bool {
        let Poll::Ready(Ok(mut ready)) = self.watched.poll_read_ready_mut(cx) else {
            return false;
        };
        if news(ready.get_inner_mut(), &mut self.events, Duration::ZERO, due) {
            return true;
        }
        ready.clear_ready();
        // Registers the waker for the next news.
        let _ = self.watched.poll_read_ready_mut(cx);
        false
    }
}

/// One wait on `poll`: the users due, false if none.
fn news(
    poll: &mut mio::Poll,
    events: &mut mio::Events,
    timeout: Duration,
    due: &mut Vec<usize>,
) -> bool {
    if poll.poll(events, Some(timeout)).is_err() {
        return false;
    }
    due.extend(events.iter().map(|e| e.token().0));
    !events.is_empty()
}

/// A task running a virtual user the loop handed over; it ends with the user, if it comes back.
type Handed<'d> = Pin<Box<dyn Future<Output = (usize, Option<User<'d, HttpSession>>)> + 'd>>;

struct Loop<'d> {
    ctx: &'d Ctx,
    drive: &'d Drive,
    /// The users in the loop (`None`: handed over, or done).
    users: Vec<Option<User<'d, HttpSession>>>,
    /// The call each user waits on.
    waiting: Vec<Option<Waiting>>,
    returns: Vec<u8>,
    wakers: Vec<Waker>,
    marks: Arc<Marks>,
    /// Users to poll now.
    due: Vec<usize>,
    handed: FuturesUnordered<Handed<'d>>,
    /// Users not done yet.
    live: usize,
    /// Set at the oldest waiting request's deadline (or later: a deadline is never earlier
    /// than one set before it).
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The timer was polled since it was last set.
    armed: bool,
    /// A handed-over task was added since `handed` was last polled.
    pushed: Cell<bool>,
    /// `None` where an epoll cannot be made: Tokio watches every connection.
    own: Option<OwnPoll>,
    /// Per user: its connection is lent to `own`.
    lent: Vec<bool>,
    /// Users in the loop whose connections are not lent (Tokio watches them).
    unlent: usize,
    /// When the worker, waiting on the loop's epoll, lets Tokio run next.
    yield_at: Instant,
}

impl<'d> Loop<'d> {
    fn new(drive: &'d Drive, sessions: Vec<HttpSession>) -> Self {
        let n = sessions.len();
        let marks = Arc::new(Marks {
            words: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            task: AtomicWaker::new(),
        });
        let wakers = (0..n)
            .map(|slot| {
                Waker::from(Arc::new(Mark {
                    slot,
                    marks: marks.clone(),
                }))
            })
            .collect();
        let ctx = &*drive.ctx;
        Loop {
            ctx,
            drive,
            users: sessions
                .into_iter()
                .enumerate()
                .map(|(slot, s)| Some(User::new(drive, slot, s)))
                .collect(),
            waiting: (0..n).map(|_| None).collect(),
            returns: vec![0; n],
            wakers,
            marks,
            due: (0..n).rev().collect(),
            handed: FuturesUnordered::new(),
            live: n,
            timer: Box::pin(tokio::time::sleep_until(
                (Instant::now() + ctx.timeout).into(),
            )),
            armed: false,
            pushed: Cell::new(false),
            own: OwnPoll::new(),
            lent: vec![false; n],
            unlent: n,
            yield_at: Instant::now() + OWN_WAIT,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.marks.task.register(cx.waker());
        loop {
            let mut again = false;
            while !self.handed.is_empty()
                && let Poll::Ready(Some((slot, back))) = self.handed.poll_next_unpin(cx)
            {
                match back {
                    Some(u) => {
                        self.users[slot] = Some(u);
                        self.unlent += 1;
                        self.due.push(slot);
                    }
                    None => self.live -= 1,
                }
            }
            if self.handed.len() == self.live {
                // Every user is in a task (the target answers in shapes the loop does not
                // take): nothing for the loop to watch until one comes back.
                return if self.live == 0 {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                };
            }
            self.pushed.set(false);
            self.marks.take(&mut self.due);
            while let Some(slot) = self.due.pop() {
                self.step(slot);
            }
            // Polled once after each reset (to register it), then only once it has fired.
            if !self.armed || self.timer.is_elapsed() {
                if self.timer.as_mut().poll(cx).is_ready() {
                    self.expire();
                    again = true;
                } else {
                    self.armed = true;
                }
            }
            if self.live == 0 {
                return Poll::Ready(());
            }
            if again || self.pushed.get() {
                continue;
            }
            if !self.wait(cx) {
                return Poll::Pending;
            }
        }
    }

    /// Waits for news of the lent connections: on the loop's epoll itself while every user is
    /// in the loop (up to [`OWN_WAIT`], or the oldest request's deadline), else through Tokio.
    /// True if users are due now; false to let Tokio run (and wake this task).
    fn wait(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(own) = self.own.as_mut() else {
            return false;
        };
        if !self.handed.is_empty() || self.unlent > 0 {
            return own.poll_news(cx, &mut self.due);
        }
        let now = Instant::now();
        if now >= self.yield_at {
            // Busy for a while: Tokio's turn (an abort, its timers), then this task again.
            self.yield_at = now + OWN_WAIT;
            cx.waker().wake_by_ref();
            return false;
        }
        let deadline = self.timer.deadline().into_std();
        if deadline <= now {
            self.expire();
            return true;
        }
        if own.wait((deadline - now).min(OWN_WAIT), &mut self.due) {
            return true;
        }
        // Quiet: Tokio waits, and wakes this task when the epoll has news or the timer fires.
        own.poll_news(cx, &mut self.due)
    }

    /// A user leaves the loop (its connection taken back).
    fn leaves(&mut self, slot: usize) {
        if std::mem::take(&mut self.lent[slot]) {
            return;
        }
        self.unlent -= 1;
    }

    /// A user's answer, if it is in, and its next requests while answers come at once.
    fn step(&mut self, slot: usize) {
        for _ in 0..16 {
            let Some(u) = self.users[slot].as_mut() else {
                return;
            };
            if let Some(w) = self.waiting[slot].as_mut() {
                let mut cx = Context::from_waker(&self.wakers[slot]);
                match u.poll_answer(&mut cx, w) {
                    Poll::Pending => return,
                    Poll::Ready(None) => {
                        let w = self.waiting[slot].take();
                        return self.hand_over(slot, w, None);
                    }
                    Poll::Ready(Some(outcome)) => {
                        self.waiting[slot] = None;
                        if !u.plain_lifecycle(outcome) {
                            return self.hand_over(slot, None, Some(Resume::Settled(outcome)));
                        }
                    }
                }
            }
            if let Some(own) = &self.own {
                let lent = u.lend(own.registry(), mio::Token(slot));
                if self.lent[slot] != lent {
                    self.lent[slot] = lent;
                    if lent {
                        self.unlent -= 1;
                    } else {
                        self.unlent += 1;
                    }
                }
            }
            match u.turn() {
                Turn::Sent(w) => self.waiting[slot] = Some(w),
                Turn::Handoff(resume) => return self.hand_over(slot, None, resume),
                Turn::Stop => return self.stop(slot),
            }
        }
        self.due.push(slot);
    }

    /// Hands a user over to a task: to finish the call `w` it waits on, or to go on from
    /// `resume`; it comes back after its next request while it has returns left.
    fn hand_over(&mut self, slot: usize, w: Option<Waiting>, resume: Option<Resume>) {
        let Some(mut u) = self.users[slot].take() else {
            return;
        };
        if let Some(own) = &self.own {
            u.take_back(own.registry());
        }
        self.leaves(slot);
        let back = self.returns[slot] < RETURNS;
        let h = &self.drive.handovers;
        h.set(h.get().map(|n| n + 1));
        self.returns[slot] = self.returns[slot].saturating_add(1);
        self.handed.push(Box::pin(async move {
            let resume = match w {
                Some(w) => Some(Resume::Settled(u.finish_waiting(w).await)),
                None => resume,
            };
            (slot, u.run(resume, back).await)
        }));
        self.pushed.set(true);
    }

    /// The user is done: its session closed and counters handed over, in a task.
    fn stop(&mut self, slot: usize) {
        let Some(mut u) = self.users[slot].take() else {
            return;
        };
        if let Some(own) = &self.own {
            u.take_back(own.registry());
        }
        self.leaves(slot);
        self.handed.push(Box::pin(async move {
            u.finish().await;
            (slot, None)
        }));
        self.pushed.set(true);
    }

    /// Requests past their deadline time out (and their users go to a task, which cancels
    /// them); the timer is set for the oldest one left.
    fn expire(&mut self) {
        let now = Instant::now();
        let timeout = self.ctx.timeout;
        let mut next = now + timeout;
        for slot in 0..self.waiting.len() {
            let Some(deadline) = self.waiting[slot].as_ref().map(|w| w.deadline(timeout)) else {
                continue;
            };
            if deadline > now {
                next = next.min(deadline);
                continue;
            }
            let Some(w) = self.waiting[slot].take() else {
                continue;
            };
            if let Some(u) = self.users[slot].as_mut() {
                let outcome = u.time_out(&w, now);
                self.hand_over(slot, None, Some(Resume::Settled(outcome)));
            }
        }
        self.timer.as_mut().reset(next.into());
        self.armed = false;
    }
}

/// Which users' connections have something for them: one bit each, set by their wakers.
struct Marks {
    words: Vec<AtomicU64>,
    task: AtomicWaker,
}

impl Marks {
    /// Moves the marked users to `due`, unmarking them.
    fn take(&self, due: &mut Vec<usize>) {
        for (k, word) in self.words.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                due.push(k * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    }
}

/// One user's waker: marks the user and wakes the loop.
struct Mark {
    slot: usize,
    marks: Arc<Marks>,
}

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.marks.words[self.slot / 64].fetch_or(1 << (self.slot % 64), Ordering::Release);
        self.marks.task.wake();
    }
}
