//! The in-flight table of one multiplexed connection (slots by id, answers routed to their
//! waiters, stray answers counted), and one request's life in it: registered, sent, awaited,
//! abandoned when dropped.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use super::combining_writer::Outbound;
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::jsonrpc::{self, Codec, DecodeError, IdRef, Incoming};
use crate::protocol::mcp;
use crate::transport::{NotificationHook, Reply};

/// A caller's notification hook, shared with the connection while its request is in flight.
pub type SharedHook = Rc<RefCell<NotificationHook>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Free,
    Waiting,
    Done,
}

#[derive(Debug, Default)]
struct Slot {
    id: u64,
    state: State,
    waker: Option<Waker>,
    outcome: Option<Outcome>,
    done: Option<Instant>,
    first_event: Option<Instant>,
    events: u32,
    /// The response, while responses are kept: each request's own, however many are in
    /// flight on the connection (shared sessions).
    message: Option<Vec<u8>>,
}

/// The in-flight table of one connection.
#[derive(Debug)]
pub struct Mux {
    slots: RefCell<Vec<Slot>>,
    mask: u64,
    /// The first id of this connection (see [`first_id`]).
    first_id: u64,
    next_id: Cell<u64>,
    /// Set once the connection is gone: every waiter ends with this outcome.
    closed: Cell<Option<Outcome>>,
    codec: Codec,
    stats: Cell<TransportCounts>,
    /// Keep a copy of each response (preflight reads tools/list results; `expect` rules and
    /// divergence checks read answers): `last` is the one of the request whose wait ended
    /// last.
    keep: Cell<bool>,
    last: RefCell<Vec<u8>>,
    /// The last ids given up on (timed out), so that an answer to one is told apart from a
    /// duplicate answer (written on timeouts only, read on unmatched answers only).
    abandoned: RefCell<[u64; ABANDONED]>,
    abandoned_next: Cell<usize>,
    /// Requests whose progress notifications go to a hook (a gateway relaying progress):
    /// rare, so a list searched by id; empty under load, where nothing is copied.
    hooks: HookList,
}

#[derive(Default)]
struct HookList(RefCell<Vec<(u64, SharedHook)>>);

impl std::fmt::Debug for HookList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} hooked", self.0.borrow().len())
    }
}

/// Ids remembered as abandoned, per connection.
const ABANDONED: usize = 64;

impl Mux {
    /// `capacity` bounds the requests in flight (rounded up to a power of two); ids start
    /// above `id_base` (the shard's range).
    pub fn new(capacity: usize, codec: Codec, id_base: u64) -> Self {
        let n = capacity.max(2).next_power_of_two();
        let first = id_base + first_id();
        Mux {
            slots: RefCell::new((0..n).map(|_| Slot::default()).collect()),
            mask: (n - 1) as u64,
            first_id: first,
            next_id: Cell::new(first),
            closed: Cell::new(None),
            codec,
            stats: Cell::new(TransportCounts::default()),
            keep: Cell::new(false),
            last: RefCell::new(Vec::new()),
            abandoned: RefCell::new([0; ABANDONED]),
            abandoned_next: Cell::new(0),
            hooks: HookList::default(),
        }
    }

    /// Hands the progress notifications of request `id` to `hook` until [`unhook`](Self::unhook).
    pub fn hook(&self, id: u64, hook: SharedHook) {
        self.hooks.0.borrow_mut().push((id, hook));
    }

    /// Stops handing request `id`'s notifications to its hook.
    pub fn unhook(&self, id: u64) {
        self.hooks.0.borrow_mut().retain(|(i, _)| *i != id);
    }

    pub fn stats(&self) -> TransportCounts {
        self.stats.get()
    }

    /// The counters since the last take (each count is reported once).
    pub fn take_stats(&self) -> TransportCounts {
        self.stats.take()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get().is_some()
    }

    /// The outcome every waiter ends with once the connection is gone.
    #[inline]
    pub fn closed_outcome(&self) -> Option<Outcome> {
        self.closed.get()
    }

    pub fn keep_responses(&self, keep: bool) {
        self.keep.set(keep);
    }

    pub fn last_message(&self) -> std::cell::Ref<'_, Vec<u8>> {
        self.last.borrow()
    }

    /// Reserves an id for a new request; `None` if the connection is closed or full.
    pub fn register(&self) -> Option<u64> {
        if self.closed.get().is_some() {
            return None;
        }
        let mut slots = self.slots.borrow_mut();
        for _ in 0..slots.len() {
            let id = self.next_id.get();
            self.next_id.set(id + 1);
            let slot = &mut slots[(id & self.mask) as usize];
            if slot.state == State::Free {
                *slot = Slot {
                    id,
                    state: State::Waiting,
                    ..Slot::default()
                };
                return Some(id);
            }
        }
        None
    }

    /// Gives up on a request (timed out, or never sent): its slot is freed and a late answer
    /// is counted, not delivered.
    pub fn abandon(&self, id: u64) {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[(id & self.mask) as usize];
        if slot.id == id {
            *slot = Slot::default();
            let i = self.abandoned_next.get();
            self.abandoned.borrow_mut()[i % ABANDONED] = id;
            self.abandoned_next.set(i + 1);
        }
    }

    /// Waits for the answer to `id`. Dropping the future abandons the request.
    pub async fn wait(&self, id: u64) -> Reply {
        let guard = Abandon { mux: self, id };
        let reply = poll_fn(|cx| {
            let mut slots = self.slots.borrow_mut();
            let slot = &mut slots[(id & self.mask) as usize];
            if slot.id != id {
                return Poll::Ready(Reply::new(Outcome::Io));
            }
            if slot.state == State::Done {
                if let Some(m) = slot.message.take() {
                    *self.last.borrow_mut() = m;
                }
                let mut r = Reply::new(slot.outcome.unwrap_or(Outcome::Io));
                r.done = slot.done.unwrap_or(r.done);
                r.first_event = slot.first_event;
                r.events = slot.events;
                r.streamed = slot.first_event.is_some();
                *slot = Slot::default();
                return Poll::Ready(r);
            }
            if let Some(o) = self.closed.get() {
                *slot = Slot::default();
                return Poll::Ready(Reply::new(o));
            }
            match &slot.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => slot.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
        guard.disarm();
        reply
    }

    /// Ends the request `id` with `outcome` (and its message, when kept); false if no request
    /// is waiting for it.
    fn complete(&self, id: u64, outcome: Outcome, message: Option<Vec<u8>>) -> bool {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[(id & self.mask) as usize];
        if slot.id == id && slot.state == State::Waiting {
            slot.state = State::Done;
            slot.outcome = Some(outcome);
            slot.message = message;
            slot.done = Some(Instant::now());
            slot.events += 1;
            if let Some(w) = slot.waker.take() {
                w.wake();
            }
            true
        } else {
            // Not waited for: an answer to a request given up on (late), a second answer to
            // one already answered (duplicate), or to an id never sent (unmatched).
            let duplicate = slot.id == id && slot.state == State::Done;
            let mut st = self.stats.get();
            if duplicate {
                st.duplicates += 1;
            } else if id != 0 && self.abandoned.borrow().contains(&id) {
                st.late += 1;
            } else if (self.first_id..self.next_id.get()).contains(&id) {
                st.duplicates += 1;
            } else {
                st.unmatched += 1;
            }
            self.stats.set(st);
            false
        }
    }

    fn progress(&self, id: u64) {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[(id & self.mask) as usize];
        if slot.id == id && slot.state == State::Waiting {
            slot.events += 1;
            slot.first_event.get_or_insert_with(Instant::now);
        }
    }

    /// Ends every waiter with `outcome` (the connection broke).
    pub fn close(&self, outcome: Outcome) {
        if self.closed.get().is_none() {
            self.closed.set(Some(outcome));
        }
        for slot in self.slots.borrow_mut().iter_mut() {
            if let Some(w) = slot.waker.take() {
                w.wake();
            }
        }
    }

    /// Routes one incoming message. Returns the answer to send back for a server request.
    pub fn deliver(&self, msg: &mut [u8], answer: &mut Vec<u8>) -> bool {
        // Copied before decoding: simd-json decodes in place. Only while keeping (the
        // handshake, preflight), never under load.
        let original = self.keep.get().then(|| msg.to_vec());
        // The same for a hook's notification (hooks are rare: a relaying gateway's calls).
        let hooked =
            (original.is_none() && !self.hooks.0.borrow().is_empty()).then(|| msg.to_vec());
        let response = match jsonrpc::decode(self.codec, msg) {
            Ok(Incoming::Result {
                id: IdRef::Num(n),
                is_error,
                result_type,
            }) => Some((
                n,
                crate::transport::result_outcome(is_error, result_type.as_deref()),
            )),
            Ok(Incoming::Error {
                id: IdRef::Num(n),
                code,
            }) => Some((n, Outcome::RpcError(code))),
            Ok(Incoming::Result { .. } | Incoming::Error { .. }) => {
                // A response with a null or foreign id cannot be matched to a request.
                let mut st = self.stats.get();
                st.unmatched += 1;
                self.stats.set(st);
                return false;
            }
            // Only progress notifications are parsed further (their token is a request id).
            Ok(Incoming::Notification { method }) if method == "notifications/progress" => None,
            Ok(Incoming::Notification { .. }) => return false,
            Ok(Incoming::Request { id, method }) => {
                let supported = mcp::answer_server_request(answer, &id, &method);
                let mut st = self.stats.get();
                st.server_requests += 1;
                st.unsupported_requests += u64::from(!supported);
                self.stats.set(st);
                return true;
            }
            Err(DecodeError::Json | DecodeError::Batch | DecodeError::Shape) => {
                // Garbage on a shared stream can't be attributed; the connection is unusable.
                self.close(Outcome::Protocol(ProtocolKind::BadJson));
                return false;
            }
        };
        match response {
            Some((n, outcome)) => {
                // Only a response that completes a request is kept, with that request: a
                // notification, a late answer, another session's traffic or another user's
                // answer on a shared connection must not replace it.
                match u64::try_from(n) {
                    Ok(id) => {
                        self.complete(id, outcome, original);
                    }
                    Err(_) => {
                        let mut st = self.stats.get();
                        st.unmatched += 1;
                        self.stats.set(st);
                    }
                }
            }
            None => {
                let raw = original.as_deref().or(hooked.as_deref());
                if let Some(t) = jsonrpc::progress_token(raw.unwrap_or(msg)) {
                    self.progress(t);
                    let hook = self
                        .hooks
                        .0
                        .borrow()
                        .iter()
                        .find(|(i, _)| *i == t)
                        .map(|(_, h)| h.clone());
                    if let (Some(h), Some(raw)) = (hook, raw) {
                        (h.borrow_mut())(raw);
                    }
                }
            }
        }
        false
    }
}

/// The first request id of a connection: random, so that ids of different connections (and
/// runs) differ. A gateway that sends one session's responses to every session (supergateway's
/// stdio→SSE and stdio→WS bridges do) then shows us ids we never used — counted as unmatched —
/// instead of completing our request with another session's answer. Below 2^39, leaving 2^39
/// requests before a shard's range (2^40) ends; with the shard's base added, ids stay exact in
/// JavaScript numbers (below 2^53).
fn first_id() -> u64 {
    1 + (u64::from(rand::random::<u32>()) << 7)
}

/// One request over a multiplexed connection: register, render into the caller's buffer,
/// send, wait.
pub async fn call<O: Outbound, R: FnOnce(&mut Vec<u8>, u64)>(
    mux: &Mux,
    out: &O,
    buf: &mut Vec<u8>,
    render: R,
) -> (Reply, Option<u64>) {
    let Some(id) = mux.register() else {
        return (
            Reply::new(mux.closed_outcome().unwrap_or(Outcome::Io)),
            None,
        );
    };
    (exchange(mux, out, buf, id, render).await, Some(id))
}

/// Renders, sends and waits for a request whose id is already registered. Dropped at any
/// point, the request is abandoned (its slot freed, a late answer counted).
pub async fn exchange<O: Outbound, R: FnOnce(&mut Vec<u8>, u64)>(
    mux: &Mux,
    out: &O,
    buf: &mut Vec<u8>,
    id: u64,
    render: R,
) -> Reply {
    let guard = Abandon { mux, id };
    buf.clear();
    render(buf, id);
    if out.send_message(buf).await.is_err() {
        mux.close(Outcome::Io);
        return Reply::new(Outcome::Io);
    }
    guard.disarm();
    // From here `wait` abandons the request if it is dropped.
    mux.wait(id).await
}

/// Abandons request `id` when dropped, unless disarmed: a future dropped mid-request (a
/// timeout, an abort) frees its slot, and a late answer is counted instead of delivered.
struct Abandon<'a> {
    mux: &'a Mux,
    id: u64,
}

impl Abandon<'_> {
    /// The request ended normally: nothing to abandon.
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.mux.abandon(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::outcome::Outcome;
    use crate::protocol::jsonrpc::Codec;

    #[tokio::test]
    async fn routes_responses_progress_and_server_requests() {
        let mux = Mux::new(4, Codec::Scan, 0);
        let a = mux.register().unwrap();
        let b = mux.register().unwrap();
        let mut answer = Vec::new();
        let mut note = format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{b},"progress":1}}}}"#).into_bytes();
        assert!(!mux.deliver(&mut note, &mut answer));
        let mut rb =
            format!(r#"{{"jsonrpc":"2.0","id":{b},"result":{{"isError":true}}}}"#).into_bytes();
        mux.deliver(&mut rb, &mut answer);
        let mut ra =
            format!(r#"{{"jsonrpc":"2.0","id":{a},"error":{{"code":-32601,"message":"x"}}}}"#)
                .into_bytes();
        mux.deliver(&mut ra, &mut answer);
        let rb = mux.wait(b).await;
        assert_eq!(
            (rb.outcome, rb.events, rb.streamed),
            (Outcome::ToolError, 2, true)
        );
        assert_eq!(mux.wait(a).await.outcome, Outcome::RpcError(-32601));
        let mut stray = br#"{"jsonrpc":"2.0","id":999,"result":{}}"#.to_vec();
        mux.deliver(&mut stray, &mut answer);
        assert_eq!(mux.stats().unmatched, 1);
        let mut ping = br#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#.to_vec();
        assert!(mux.deliver(&mut ping, &mut answer));
        assert_eq!(answer, br#"{"jsonrpc":"2.0","id":"p1","result":{}}"#);
        let mut sampling =
            br#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}"#.to_vec();
        assert!(mux.deliver(&mut sampling, &mut answer));
        assert_eq!(
            (
                mux.stats().server_requests,
                mux.stats().unsupported_requests
            ),
            (2, 1)
        );
        // A second answer to `a`, already answered and read: a duplicate, not unmatched.
        let mut again = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{}}}}"#).into_bytes();
        mux.deliver(&mut again, &mut answer);
        // …and one that arrives before the first was read.
        let c = mux.register().unwrap();
        for _ in 0..2 {
            let mut rc = format!(r#"{{"jsonrpc":"2.0","id":{c},"result":{{}}}}"#).into_bytes();
            mux.deliver(&mut rc, &mut answer);
        }
        assert_eq!(mux.wait(c).await.outcome, Outcome::Ok);
        assert_eq!((mux.stats().duplicates, mux.stats().unmatched), (2, 1));
    }

    /// Regression: a notification or another session's response (a gateway broadcasting every
    /// session's traffic) arriving after our response, before the caller reads it, replaced the
    /// kept message — preflight then saw "no tools" or a failed handshake.
    #[tokio::test]
    async fn keeps_only_the_response_that_completes_a_request() {
        for codec in [Codec::Scan, Codec::SerdeJson, Codec::SimdJson] {
            keeps_only_the_response_with(codec).await;
        }
    }

    async fn keeps_only_the_response_with(codec: Codec) {
        let mux = Mux::new(4, codec, 0);
        mux.keep_responses(true);
        let a = mux.register().unwrap();
        let mut answer = Vec::new();
        let response = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{"tools":["x"]}}}}"#);
        mux.deliver(&mut response.clone().into_bytes(), &mut answer);
        let mut note = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_vec();
        mux.deliver(&mut note, &mut answer);
        // Ids of different connections differ, so another session's answer matches nothing.
        let other = Mux::new(4, codec, 0).register().unwrap();
        assert_ne!(other, a, "ids are random per connection");
        let mut foreign = format!(r#"{{"jsonrpc":"2.0","id":{other},"result":{{}}}}"#).into_bytes();
        mux.deliver(&mut foreign, &mut answer);
        assert_eq!(mux.wait(a).await.outcome, Outcome::Ok);
        assert_eq!(&*mux.last_message(), response.as_bytes(), "{codec:?}");
        assert_eq!(mux.stats().unmatched, 1);

        // Two requests in flight on one connection (a shared session), answered before either
        // waiter runs: each waiter reads its own answer, not the last one to arrive.
        let (b, c) = (mux.register().unwrap(), mux.register().unwrap());
        let rb = format!(r#"{{"jsonrpc":"2.0","id":{b},"result":{{"text":"b"}}}}"#);
        let rc = format!(r#"{{"jsonrpc":"2.0","id":{c},"result":{{"text":"c"}}}}"#);
        mux.deliver(&mut rb.clone().into_bytes(), &mut answer);
        mux.deliver(&mut rc.clone().into_bytes(), &mut answer);
        mux.wait(b).await;
        assert_eq!(&*mux.last_message(), rb.as_bytes(), "{codec:?}");
        mux.wait(c).await;
        assert_eq!(&*mux.last_message(), rc.as_bytes(), "{codec:?}");
    }

    #[tokio::test]
    async fn abandoned_and_closed() {
        let mux = Mux::new(2, Codec::Scan, 0);
        let a = mux.register().unwrap();
        // Polled once, then dropped before completion (a timeout): the slot is freed and a late
        // answer is counted, not delivered.
        tokio::select! {
            biased;
            _ = mux.wait(a) => panic!("nothing was delivered"),
            _ = std::future::ready(()) => {}
        }
        let mut late = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{}}}}"#).into_bytes();
        mux.deliver(&mut late, &mut Vec::new());
        assert_eq!(mux.stats().late, 1);
        assert_eq!(mux.stats().duplicates, 0, "late, not a duplicate");
        let b = mux.register().unwrap();
        mux.close(Outcome::Io);
        assert_eq!(mux.wait(b).await.outcome, Outcome::Io);
        assert!(mux.register().is_none());
    }
}
