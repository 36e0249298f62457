//! One virtual user as a pipeline: pace (when the next request starts) → credentials (an
//! OAuth token) → session (opened, timed) → pick (which workload entry) → send (within the
//! watchdog's deadline, hang check) → judge (`expect` rules, divergence) → settle (recorded,
//! notes) → lifecycle (cancel, back-off, rounds, per-request sessions) → think.
//!
//! Generic over [`Session`]: no `dyn`, and nothing allocated per request.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::divergence;
use super::pacing::{Pacing, Pool, Quota, REPLAY_LEAD, Round, pause};
use super::run_context::{Ctx, redact};
use super::shards::{InFlight, Shards, Slots};
use crate::client::request::RequestTemplate;
use crate::client::sessions::{Opening, claim_or_wait};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::Phase;
use crate::scenario::Sessions;
use crate::scenario::plan::{OP_COLD_START, OP_CONNECT, OP_INITIALIZE, Pattern};
use crate::transport::streamable_http::{Begun, HttpSession};
use crate::transport::{CallSpec, Reply, Session, TransportKind};

/// What drives a worker's virtual users.
pub(super) struct Drive {
    pub(super) ctx: Arc<Ctx>,
    pub(super) shards: Rc<Shards>,
    pub(super) slots: Slots,
    pub(super) quota: Quota,
    /// Open loop only.
    pub(super) pool: Option<Rc<Pool>>,
    /// Closed loop: global index of each local virtual user (for the concurrency profile).
    pub(super) global: Vec<usize>,
    /// When the latest-sent request of this worker that the target answered was sent
    /// (`hang_after`: a request still waiting when a later one was answered is stuck — not
    /// queued behind others, and not a target that answers nothing).
    pub(super) answered_sent: Cell<Option<Instant>>,
    /// `pattern = "first_call"`: the barrier of this worker's virtual users.
    pub(super) round: Option<Round>,
    /// In the event loop: how many times it handed a virtual user to a task.
    pub(super) handovers: Cell<Option<u64>>,
}

/// What a step says the loop does next.
enum Step {
    /// Go on to the next step.
    Go,
    /// Start over with the next request (this one failed, or waited).
    Again,
}

/// When the request at hand starts.
#[derive(Clone, Copy)]
pub(super) struct Times {
    /// When it is meant to start: its arrival (open loop), its recorded time (replay), or
    /// when it was sent (closed loop).
    intended: Instant,
    /// Now, as of the last step.
    now: Instant,
    phase: Phase,
}

/// A virtual user's state between requests.
pub(super) struct User<'d, S> {
    drive: &'d Drive,
    ctx: &'d Ctx,
    shards: &'d Shards,
    slot: usize,
    /// Its number in the whole run (credentials, streams, profiles, replayed sessions).
    global: usize,
    tenant: Option<usize>,
    /// The requests of the revision this user speaks.
    templates: &'d [RequestTemplate],
    specs: &'d [CallSpec],
    session: S,
    rng: SmallRng,
    backoff: Backoff,
    /// OAuth: when this user needs a (new) token; `None` until it has one.
    token_due: Option<Instant>,
    watchdog: Watchdog,
    pacing: Pacing<'d>,
    /// Cold start: when this request's session started opening.
    opened_at: Option<Instant>,
}

/// Runs one virtual user to the end of the run.
pub(super) async fn virtual_user<S: Session>(drive: Rc<Drive>, slot: usize, session: S) {
    let u = User::new(&drive, slot, session);
    // Everyone starts together, when the clock of the run starts (which may be a while ahead:
    // a start agreed between shards) — in an opening storm, each at its turn — unless the run
    // is interrupted first.
    let start = u.ctx.start + u.ctx.plan.load.start_offset(u.global);
    tokio::select! {
        _ = tokio::time::sleep_until(start.into()) => {}
        _ = u.ctx.drain.cancelled() => {}
    }
    u.run(None, false).await;
}

/// Where a virtual user taken over from the worker's event loop goes on.
pub(super) enum Resume {
    /// Its request is paced: on from its credentials.
    Paced(Times),
    /// Its request is recorded: on from the lifecycle.
    Settled(Outcome),
}

/// How far a request got from its pacing.
enum Flow {
    Done(Outcome),
    /// Start over with the next request.
    Again,
    /// The user stops.
    Stop,
}

impl<'d, S: Session> User<'d, S> {
    pub(super) fn new(drive: &'d Drive, slot: usize, session: S) -> Self {
        let ctx = &*drive.ctx;
        let global = drive.global[slot];
        let (endpoint, tenant) = ctx.endpoint_of(global);
        // The requests of the revision this user speaks (mixed revisions), else the preflight's.
        let (_, templates, specs) = ctx
            .requests
            .iter()
            .find(|(r, _, _)| *r == endpoint.protocol)
            .unwrap_or(&ctx.requests[0]);
        User {
            drive,
            ctx,
            shards: &drive.shards,
            slot,
            global,
            tenant,
            templates,
            specs,
            session,
            rng: SmallRng::seed_from_u64(
                ctx.seed ^ (global as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            backoff: Backoff(0),
            token_due: None,
            watchdog: Watchdog::new(),
            pacing: Pacing::new(ctx, global),
            opened_at: None,
        }
    }

    /// Requests until the user stops (`None`: its session is closed and its counters handed
    /// over), from the top or from where `resume` says; with `back`, only until its first
    /// request is over (`Some`: it may go back to the event loop).
    pub(super) async fn run(mut self, mut resume: Option<Resume>, back: bool) -> Option<Self> {
        loop {
            let flow = match resume.take() {
                Some(Resume::Settled(outcome)) => Flow::Done(outcome),
                Some(Resume::Paced(at)) => self.paced(at).await,
                None => match self.pace().await {
                    Some(at) => self.paced(at).await,
                    None => Flow::Stop,
                },
            };
            let outcome = match flow {
                Flow::Done(outcome) => outcome,
                Flow::Again => continue,
                Flow::Stop => break,
            };
            if !self.lifecycle(outcome).await {
                break;
            }
            self.think().await;
            if back {
                return Some(self);
            }
        }
        self.finish().await;
        None
    }

    /// A paced request: credentials, session, pick, request.
    async fn paced(&mut self, mut at: Times) -> Flow {
        if let Step::Again = self.credentials(&mut at).await {
            return Flow::Again;
        }
        if let Step::Again = self.open_session(&mut at).await {
            return Flow::Again;
        }
        match self.pick(&mut at).await {
            Some(item) => Flow::Done(self.request(item, at).await),
            None => Flow::Stop,
        }
    }

    fn open_loop(&self) -> bool {
        self.drive.pool.is_some()
    }

    fn track(&self, op: usize, phase: Phase, t0: Instant, tenant: Option<usize>) {
        self.drive.slots.borrow_mut()[self.slot] = Some(InFlight {
            op,
            phase,
            t0,
            tenant,
        });
    }

    /// A workload request starts: counted in the shard of its send, tracked in flight.
    fn started(&self, op: usize, phase: Phase, sent: Instant, intended: Instant) {
        self.shards.at(sent).started(op, phase);
        self.track(op, phase, intended, self.tenant);
    }

    fn untrack(&self) {
        self.drive.slots.borrow_mut()[self.slot] = None;
    }

    /// Pace: when the next request is meant to start, and whether the user goes on at all.
    async fn pace(&mut self) -> Option<Times> {
        let drive = self.drive;
        let limits = (drive.pool.as_deref(), &drive.quota);
        let (intended, mut now) = self.pacing.next(self.ctx, limits, self.slot).await?;
        // A replayed session opens shortly before its request is due (as its client did), so
        // that the request can go out on time.
        if self.pacing.is_replay() && !self.session.is_open() && intended > now + REPLAY_LEAD {
            pause(self.ctx, intended - REPLAY_LEAD - now).await;
            now = Instant::now();
        }
        if self.ctx.stopping(now) {
            return None;
        }
        Some(Times {
            intended,
            now,
            phase: self.ctx.phase(intended),
        })
    }

    /// Credentials: this user's OAuth token, fetched (and timed) when it has none or it is due.
    async fn credentials(&mut self, at: &mut Times) -> Step {
        let Some((endpoint, op)) = &self.ctx.oauth else {
            return Step::Go;
        };
        if self.token_due.is_some_and(|due| Instant::now() < due) {
            return Step::Go;
        }
        let (op, phase) = (*op, at.phase);
        let t0 = Instant::now();
        self.shards.at(t0).started(op, phase);
        self.track(op, phase, t0, None);
        let got = match tokio::time::timeout(self.ctx.timeout, endpoint.fetch()).await {
            Ok(r) => r,
            Err(_) => Err(Outcome::Timeout),
        };
        self.untrack();
        let done = Instant::now();
        let outcome = got.as_ref().err().copied().unwrap_or(Outcome::Ok);
        self.shards
            .at(done)
            .record(op, phase, outcome, done.saturating_duration_since(t0));
        match got {
            Ok(token) => {
                self.session.set_bearer(Some(&token.access_token));
                self.token_due = Some(token.refresh_at);
                at.now = Instant::now();
                Step::Go
            }
            Err(failed) => {
                self.failed_before_sending(failed, at.intended, at.phase)
                    .await
            }
        }
    }

    /// A request that cannot be sent (no token, no session): closed loop, the user backs off
    /// and tries again; open loop, this arrival fails at once rather than waiting.
    async fn failed_before_sending(
        &mut self,
        outcome: Outcome,
        intended: Instant,
        phase: Phase,
    ) -> Step {
        if !self.open_loop() {
            pause(self.ctx, self.backoff.delay()).await;
            return Step::Again;
        }
        let op = self.ctx.plan.workload[self.ctx.mix.pick(&mut self.rng)].op;
        let failed = Instant::now();
        let mut rb = self.shards.at(failed);
        rb.started(op, phase);
        let latency = failed.saturating_duration_since(intended);
        rb.record(op, phase, outcome, latency);
        if let Some(t) = self.tenant {
            rb.record_tenant(t, phase, outcome, latency);
        }
        Step::Again
    }

    /// Session: opened (and timed as `initialize`) if it is not open; a shared one by one user
    /// while the others wait.
    async fn open_session(&mut self, at: &mut Times) -> Step {
        if self.session.is_open() {
            return Step::Go;
        }
        if claim_or_wait(&mut self.session).await == Opening::Mine {
            self.timed_open(at.phase).await;
        }
        if !self.session.is_open() {
            self.session.reset();
            let (intended, phase) = (at.intended, at.phase);
            return self
                .failed_before_sending(Outcome::Connect, intended, phase)
                .await;
        }
        at.now = Instant::now();
        Step::Go
    }

    /// Opens the session within the endpoint's timeout, recorded as `initialize` (and, in a
    /// cold start or an opening storm, the connection on its own as `connect`).
    async fn timed_open(&mut self, phase: Phase) {
        let t0 = Instant::now();
        self.shards.at(t0).started(OP_INITIALIZE, phase);
        self.track(OP_INITIALIZE, phase, t0, None);
        let r = {
            let open = std::pin::pin!(self.session.open());
            self.watchdog
                .bounded(t0 + self.ctx.endpoint.timeout, open)
                .await
        };
        self.untrack();
        if self.ctx.plan.load.pattern == Pattern::ColdStart {
            self.opened_at = Some(t0);
        }
        if self.ctx.plan.load.times_connect() {
            self.record_connect(&r, t0, phase);
        }
        let (outcome, connected) = finish(self.shards, OP_INITIALIZE, None, phase, t0, t0, r);
        if outcome == Outcome::Http(401) {
            self.token_due = None;
        }
        {
            let mut rb = self.shards.now();
            rb.sessions.connections += u64::from(connected);
            rb.sessions.opened += u64::from(outcome == Outcome::Ok);
        }
        if outcome == Outcome::Ok {
            self.backoff = Backoff(0);
        }
    }

    /// Cold start, opening storm: the connection (or process) on its own, as `connect`.
    fn record_connect(&self, r: &Ended, t0: Instant, phase: Phase) {
        let Ended::Reply(reply) = r else {
            return;
        };
        let connect = match reply.connect {
            Some(d) => Some((Outcome::Ok, d)),
            None if matches!(reply.outcome, Outcome::Connect | Outcome::Local(_)) => {
                Some((reply.outcome, reply.done.saturating_duration_since(t0)))
            }
            None => None,
        };
        if let Some((outcome, d)) = connect {
            let op = self.ctx.op_index(OP_CONNECT);
            let mut rb = self.shards.at(t0 + d);
            rb.started(op, phase);
            rb.record(op, phase, outcome, d);
        }
    }

    /// Pick: which workload entry goes out — the recorded one (replay, at its time), the
    /// user's share of a round (first calls together), or one drawn from the weighted mix.
    async fn pick(&mut self, at: &mut Times) -> Option<usize> {
        if let Some(entry) = self.pacing.recorded_entry() {
            // The recorded time, not before (the session may have opened ahead of it).
            if at.intended > at.now {
                pause(self.ctx, at.intended - at.now).await;
                at.now = Instant::now();
                if self.ctx.stopping(at.now) {
                    return None;
                }
            }
            return Some(entry);
        }
        if let Some(round) = &self.drive.round {
            // Every session open: the first calls go out together (none after the end).
            if !round.meet(self.ctx).await {
                return None;
            }
            at.now = Instant::now();
            if self.ctx.stopping(at.now) {
                return None;
            }
            return Some(self.global % self.ctx.plan.workload.len());
        }
        Some(self.ctx.mix.pick(&mut self.rng))
    }

    /// Send, judge and settle one workload request; its outcome.
    async fn request(&mut self, index: usize, at: Times) -> Outcome {
        let item = &self.ctx.plan.workload[index];
        let sent = at.now;
        // Closed loop: the request is meant to start now (after any session opening); a
        // replayed one when it was recorded (a late start counts in its latency).
        let intended = if self.open_loop() || self.pacing.is_replay() {
            at.intended
        } else {
            sent
        };
        let tracked = item.deterministic || item.digest.is_some();
        let args_key = Cell::new(0u64);
        self.started(item.op, at.phase, sent, intended);
        let mut r = self.send(index, sent, tracked.then_some(&args_key)).await;
        self.untrack();
        let broke = self.judge(index, &mut r, tracked.then_some(args_key.get()));
        self.settle(
            index,
            Sent {
                intended,
                sent,
                phase: at.phase,
            },
            r,
            broke,
        )
    }

    /// Send: the call, within the watchdog's deadline (the timeout, or with `hang_after` the
    /// hang check first).
    async fn send(&mut self, index: usize, sent: Instant, args_key: Option<&Cell<u64>>) -> Ended {
        let (ctx, drive) = (self.ctx, self.drive);
        let write = render(ctx, self.templates, index, &mut self.rng, args_key);
        let mut call = std::pin::pin!(self.session.call(&self.specs[index], write));
        let Some(h) = ctx.plan.load.hang_after else {
            return self.watchdog.bounded(sent + ctx.timeout, call).await;
        };
        // Unanswered after hang_after: stuck if a request sent after it was answered, else it
        // waits on for the timeout (the target as a whole may be slow or down), and is stuck
        // at the end if a later one was answered by then. First calls go out together: any of
        // the round's answered is progress.
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
        match self.watchdog.bounded(sent + h, call.as_mut()).await {
            Ended::Timeout(at) if progressed() => Ended::Hang(at),
            Ended::Timeout(_) => match self.watchdog.bounded(sent + ctx.timeout, call).await {
                Ended::Timeout(at) if progressed() => Ended::Hang(at),
                r => r,
            },
            r => r,
        }
    }

    /// Judge: an answer that breaks the entry's `expect` rules is an assertion; a
    /// deterministic call answered differently is a divergence. The reason, if either.
    fn judge(&self, index: usize, r: &mut Ended, args_key: Option<u64>) -> Option<String> {
        let Ended::Reply(reply) = r else {
            return None;
        };
        if !matches!(reply.outcome, Outcome::Ok | Outcome::ToolError) {
            return None;
        }
        if let Some(check) = &self.ctx.checks[index]
            && let Err(why) = check.check(self.session.last_message(), self.tenant)
        {
            reply.outcome = Outcome::Assertion;
            return Some(why);
        }
        let why = self.diverged(index, args_key?)?;
        reply.outcome = Outcome::Divergence;
        Some(why)
    }

    /// A deterministic call's answer held to the first one seen (or the recorded digest).
    fn diverged(&self, index: usize, args_key: u64) -> Option<String> {
        let ctx = self.ctx;
        let item = &ctx.plan.workload[index];
        let digest = crate::trace::digest_of_response(self.session.last_message())?;
        let who = divergence::Who {
            target: ctx.ab_target.clone(),
            vu: self.global,
            session: self.session.session_id().map(|id| fingerprint(&id)),
        };
        let excerpt = || {
            let m = self.session.last_message();
            let at = m
                .windows(9)
                .position(|w| w == br#""result":"#)
                .map_or(0, |i| i + 9);
            redact(&divergence::excerpt(&m[at..]), &ctx.secrets)
        };
        match &item.digest {
            Some(recorded) => divergence::against_recorded(recorded, &digest, &who, &excerpt()),
            None => ctx
                .seen
                .check(&ctx.plan.ops[item.op], args_key, &digest, who, excerpt)
                .err(),
        }
    }

    /// Settle: the request recorded (and the cold start it ended), what went wrong noted, the
    /// session's state kept; its outcome.
    fn settle(&mut self, index: usize, s: Sent, r: Ended, broke: Option<String>) -> Outcome {
        let (ctx, shards) = (self.ctx, self.shards);
        let op = ctx.plan.workload[index].op;
        let expired = matches!(&r, Ended::Reply(reply) if reply.session_expired);
        let hung = matches!(r, Ended::Hang(_));
        let ended_at = match &r {
            Ended::Reply(reply) => reply.done,
            Ended::Timeout(at) | Ended::Hang(at) => *at,
        };
        let (outcome, connected) = finish(shards, op, self.tenant, s.phase, s.intended, s.sent, r);
        if let Some(t0) = self.opened_at.take() {
            // Cold start: from spawning (or connecting) to the first call's end.
            let cold = ctx.op_index(OP_COLD_START);
            let mut rb = shards.at(ended_at);
            rb.started(cold, s.phase);
            rb.record(
                cold,
                s.phase,
                outcome,
                ended_at.saturating_duration_since(t0),
            );
        }
        if ctx.plan.load.hang_after.is_some() && outcome.class().is_completed() {
            let latest = self
                .drive
                .answered_sent
                .get()
                .map_or(s.sent, |t| t.max(s.sent));
            self.drive.answered_sent.set(Some(latest));
        }
        self.note(op, outcome, hung, broke);
        shards.now().sessions.connections += u64::from(connected);
        if outcome == Outcome::Http(401) {
            // The token was refused (revoked, expired early): the next request gets a new one.
            self.token_due = None;
        }
        if expired {
            shards.now().sessions.expired += 1;
            self.session.reset();
        }
        outcome
    }

    /// Notes what went wrong with a request, for the report's failure samples.
    fn note(&self, op: usize, outcome: Outcome, hung: bool, broke: Option<String>) {
        let (ctx, session) = (self.ctx, &self.session);
        if hung && let Some(h) = ctx.plan.load.hang_after {
            self.shards.now().note_failure(op, outcome, || {
                Some(format!(
                    "no answer after {} while the target answered requests sent after it \
                     (virtual user {}{})",
                    mcpbench_knobs::format_duration(h),
                    self.global,
                    session.session_id().map_or(String::new(), |id| format!(
                        ", session {}",
                        fingerprint(&id)
                    ))
                ))
            });
        }
        if let Some(why) = broke {
            self.shards
                .now()
                .note_failure(op, outcome, || Some(redact(&why, &ctx.secrets)));
        }
        if matches!(outcome, Outcome::ToolError | Outcome::RpcError(_)) {
            self.shards.now().note_failure(op, outcome, || {
                crate::client::failure_text(session.last_message())
                    .map(|m| redact(&m, &ctx.secrets))
            });
        }
        if outcome == Outcome::Protocol(ProtocolKind::BadContentType)
            && ctx.endpoint.kind == TransportKind::StreamableHttp
        {
            // Only Streamable HTTP answers requests with a type of their own.
            self.shards.now().note_failure(op, outcome, || {
                Some(crate::client::unexpected_type(
                    session.content_type().as_deref(),
                ))
            });
        }
    }

    /// Lifecycle after a request: cancel what timed out, back off after failures that would
    /// spin, close a round's or a per-request session. False when the user stops.
    async fn lifecycle(&mut self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Timeout | Outcome::Hang => {
                // Tell the server to stop working on it (not timed: the request already ended).
                if self.session.cancel_last().await {
                    self.shards.now().sessions.cancels_sent += 1;
                }
            }
            Outcome::Connect | Outcome::Io if !self.open_loop() => {
                pause(self.ctx, self.backoff.delay()).await
            }
            _ => self.backoff = Backoff(0),
        }
        if self.drive.round.is_some() && !self.end_round().await {
            return false;
        }
        if self.ctx.plan.load.sessions == Sessions::PerRequest && self.session.is_open() {
            self.session.close().await;
            self.session.reset();
        }
        true
    }

    /// Every call of the round ended: the round's sessions close, and the next round opens
    /// new ones (a shared one is let go of by the last to arrive, before anyone reopens it).
    /// False if the run ended while waiting.
    async fn end_round(&mut self) -> bool {
        let Some(round) = &self.drive.round else {
            return true;
        };
        let shared = self.ctx.plan.load.sessions == Sessions::Shared;
        match round.arrive() {
            None => {
                if shared {
                    self.session.reset();
                }
                round.release();
            }
            Some(g) => {
                if !round.wait(g, self.ctx).await {
                    return false;
                }
            }
        }
        if !shared {
            self.session.close().await;
            self.session.reset();
        }
        true
    }

    /// Think time between requests (closed loop), during which the user's session rests.
    async fn think(&mut self) {
        if self.ctx.plan.load.think.is_some() {
            self.session.rest();
        }
        if let Some((lo, hi)) = self.ctx.plan.load.think {
            let d = if hi > lo {
                self.rng.random_range(lo..=hi)
            } else {
                lo
            };
            pause(self.ctx, d).await;
        }
    }

    /// The user stops: leaves its round, closes its session, hands over its counters.
    pub(super) async fn finish(mut self) {
        if let Some(round) = &self.drive.round {
            round.leave();
        }
        if !self.ctx.aborted.load(Ordering::Relaxed) {
            self.session.close().await;
        }
        let st = self.session.take_stats();
        self.shards.now().sessions.add_transport(st);
    }
}

/// A call the worker's event loop waits on.
pub(super) struct Waiting {
    index: usize,
    sent: Sent,
    begun: Begun,
    /// Deterministic calls: the arguments' key, for the divergence check.
    args_key: Option<u64>,
}

impl Waiting {
    /// When it must be answered by.
    pub(super) fn deadline(&self, timeout: Duration) -> Instant {
        self.sent.sent + timeout
    }
}

/// What a virtual user of the event loop does next.
pub(super) enum Turn {
    /// A request is out, waited on by the loop.
    Sent(Waiting),
    /// The next step needs a task: resume there.
    Handoff(Option<Resume>),
    /// The user is done.
    Stop,
}

/// The steps of the pipeline that the worker's event loop (`event_loop`) takes without a task
/// of the user's own, for a closed loop over Streamable HTTP/1.1 with nothing to wait for
/// between requests. The rest is [`User::run`]'s.
impl User<'_, HttpSession> {
    /// Pace, pick and send, if the next request can go out at once on the plain path.
    pub(super) fn turn(&mut self) -> Turn {
        if !self.pacing.is_plain() {
            return Turn::Handoff(None);
        }
        if !self.drive.quota.take() {
            return Turn::Stop;
        }
        let now = Instant::now();
        if self.ctx.stopping(now) {
            return Turn::Stop;
        }
        let phase = self.ctx.phase(now);
        if !self.session.can_begin(now) {
            let at = Times {
                intended: now,
                now,
                phase,
            };
            return Turn::Handoff(Some(Resume::Paced(at)));
        }
        let ctx = self.ctx;
        let index = ctx.mix.pick(&mut self.rng);
        let item = &ctx.plan.workload[index];
        self.started(item.op, phase, now, now);
        let tracked = item.deterministic || item.digest.is_some();
        let key = Cell::new(0u64);
        let write = render(
            ctx,
            self.templates,
            index,
            &mut self.rng,
            tracked.then_some(&key),
        );
        let begun = self.session.begin_call(&self.specs[index], write);
        Turn::Sent(Waiting {
            index,
            sent: Sent {
                intended: now,
                sent: now,
                phase,
            },
            begun,
            args_key: tracked.then_some(key.get()),
        })
    }

    /// The answer to the call waited on, if it came in the plain shape: judged and recorded.
    /// `Ready(None)`: it needs [`User::finish_waiting`].
    pub(super) fn poll_answer(
        &mut self,
        cx: &mut Context<'_>,
        w: &mut Waiting,
    ) -> Poll<Option<Outcome>> {
        let reply = ready!(self.session.poll_call(cx, &mut w.begun));
        Poll::Ready(reply.map(|r| self.conclude(w, Ended::Reply(r))))
    }

    /// The call waited on, finished as `Session::call` would (within its deadline), judged
    /// and recorded.
    pub(super) async fn finish_waiting(&mut self, w: Waiting) -> Outcome {
        let specs = self.specs;
        let deadline = w.deadline(self.ctx.timeout);
        let r = {
            let call = std::pin::pin!(self.session.finish_call(&specs[w.index], w.begun));
            self.watchdog.bounded(deadline, call).await
        };
        self.conclude(&w, r)
    }

    /// The call waited on, unanswered at its deadline.
    pub(super) fn time_out(&mut self, w: &Waiting, at: Instant) -> Outcome {
        self.conclude(w, Ended::Timeout(at))
    }

    /// Whether the lifecycle after `outcome` has nothing to do but go on (no cancel, back-off,
    /// round or per-request session, no think time); if so, done.
    pub(super) fn plain_lifecycle(&mut self, outcome: Outcome) -> bool {
        let load = &self.ctx.plan.load;
        let plain = !matches!(
            outcome,
            Outcome::Timeout | Outcome::Hang | Outcome::Connect | Outcome::Io
        ) && self.drive.round.is_none()
            && load.sessions != Sessions::PerRequest
            && load.think.is_none();
        if plain {
            self.backoff = Backoff(0);
        }
        plain
    }

    /// Lends the session's connection to the loop's own epoll (see `HttpSession::lend`):
    /// whether it is lent now.
    pub(super) fn lend(&mut self, registry: &mio::Registry, token: mio::Token) -> bool {
        self.session.lend(registry, token)
    }

    /// Takes the session's connection back for Tokio, before a task uses the session.
    pub(super) fn take_back(&mut self, registry: &mio::Registry) {
        self.session.take_back(registry);
    }

    fn conclude(&mut self, w: &Waiting, mut r: Ended) -> Outcome {
        self.untrack();
        let broke = self.judge(w.index, &mut r, w.args_key);
        self.settle(w.index, w.sent, r, broke)
    }
}

/// When a workload request started.
#[derive(Clone, Copy)]
pub(super) struct Sent {
    /// Latency runs from here.
    intended: Instant,
    /// Service time runs from here.
    sent: Instant,
    phase: Phase,
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

/// How an exchange ended.
pub(super) enum Ended {
    Reply(Reply),
    /// Ended without a reply (timeout), at that time.
    Timeout(Instant),
    /// Ended without a reply after `hang_after` while other requests were answered.
    Hang(Instant),
}

/// A virtual user's request timer: the lazy one connections and sessions share (one `Sleep`
/// per user, moved on about once per timeout period instead of a timer entry per request).
struct Watchdog(mock_backend::watchdog::Watchdog);

impl Watchdog {
    fn new() -> Self {
        Watchdog(mock_backend::watchdog::Watchdog::new())
    }

    /// Awaits an exchange that must end by `deadline`. (Pinned by the caller: moving a large
    /// exchange future into this one would cost a copy per request.)
    async fn bounded<F: Future<Output = Reply>>(
        &mut self,
        deadline: Instant,
        f: std::pin::Pin<&mut F>,
    ) -> Ended {
        let at = tokio::time::Instant::from_std(deadline);
        match self.0.bounded(at, f).await {
            Some(reply) => Ended::Reply(reply),
            None => Ended::Timeout(Instant::now()),
        }
    }
}

/// Renders workload entry `index`'s request for an id, keeping the arguments' key in `key` (a
/// deterministic call's, for the divergence check).
fn render<'a>(
    ctx: &'a Ctx,
    templates: &'a [RequestTemplate],
    index: usize,
    rng: &'a mut SmallRng,
    key: Option<&'a Cell<u64>>,
) -> impl FnOnce(&mut Vec<u8>, u64) + 'a {
    let (item, template) = (&ctx.plan.workload[index], &templates[index]);
    move |out, id| {
        let args = template.write(item, out, id, rng);
        if let Some(key) = key {
            key.set(divergence::args_key(&out[args]));
        }
    }
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
