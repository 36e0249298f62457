//! Requests multiplexed on one connection (stdio, WebSocket, legacy HTTP+SSE), matched by id.
//!
//! Everything here lives on one worker thread (`Rc`, `Cell`, `RefCell`): completing a request
//! is a slot write and a waker wake — no lock, no channel message. Writes are combined: the
//! first caller to find the writer idle writes everything pending (its own message and any
//! appended meanwhile by others), so an uncontended write costs one syscall and no task hop.
//! A reader task per connection reads incoming messages and routes responses to their slots,
//! progress notifications to the request that asked for them, and answers server requests.
//! Request ids (and so progress tokens) start at a random value per connection, so traffic a
//! gateway wrongly copies from other sessions matches nothing here.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use std::sync::Arc;
use std::time::Duration;

use super::{CallSpec, Endpoint, Reply, Session};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::jsonrpc::{self, Codec, DecodeError, IdRef, Incoming};
use crate::protocol::mcp;
use crate::protocol::version::Revision;

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
        }
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
        let response = match jsonrpc::decode(self.codec, msg) {
            Ok(Incoming::Result {
                id: IdRef::Num(n),
                is_error,
                result_type,
            }) => Some((n, super::result_outcome(is_error, result_type.as_deref()))),
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
                if let Some(t) = jsonrpc::progress_token(msg) {
                    self.progress(t);
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

/// Frames messages for a byte stream.
pub trait Framer {
    fn frame(&mut self, msg: &[u8], out: &mut Vec<u8>);
}

/// Newline-delimited JSON (stdio).
#[derive(Debug, Default)]
pub struct Lines;

impl Framer for Lines {
    fn frame(&mut self, msg: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(msg);
        out.push(b'\n');
    }
}

struct WriterState<W, F> {
    io: Option<W>,
    framer: F,
    pending: Vec<u8>,
    spare: Vec<u8>,
    broken: bool,
}

/// The combining writer (see the module docs).
pub struct Writer<W, F> {
    state: RefCell<WriterState<W, F>>,
}

impl<W, F> std::fmt::Debug for Writer<W, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

impl<W: AsyncWrite + Unpin, F: Framer> Writer<W, F> {
    pub fn new(io: W, framer: F) -> Self {
        Writer {
            state: RefCell::new(WriterState {
                io: Some(io),
                framer,
                pending: Vec::with_capacity(4096),
                spare: Vec::with_capacity(4096),
                broken: false,
            }),
        }
    }

    /// Queues `msg` and makes sure it is written. If another caller's write is in progress,
    /// that caller writes this message too before it returns.
    pub async fn send(&self, msg: &[u8]) -> Result<(), ()> {
        {
            let mut st = self.state.borrow_mut();
            if st.broken {
                return Err(());
            }
            let WriterState {
                framer, pending, ..
            } = &mut *st;
            framer.frame(msg, pending);
        }
        self.flush_pending().await
    }

    /// Queues bytes that are already framed (e.g. a WebSocket pong) and writes them.
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<(), ()> {
        {
            let mut st = self.state.borrow_mut();
            if st.broken {
                return Err(());
            }
            st.pending.extend_from_slice(bytes);
        }
        self.flush_pending().await
    }

    /// Applies `f` to the framer (e.g. to frame a control message with its state).
    pub fn with_framer<T>(&self, f: impl FnOnce(&mut F) -> T) -> T {
        f(&mut self.state.borrow_mut().framer)
    }

    async fn flush_pending(&self) -> Result<(), ()> {
        loop {
            let (mut io, mut buf) = {
                let mut st = self.state.borrow_mut();
                if st.pending.is_empty() {
                    return Ok(());
                }
                // Someone else is writing; they will write ours too before they return.
                let Some(io) = st.io.take() else {
                    return Ok(());
                };
                let spare = std::mem::take(&mut st.spare);
                (io, std::mem::replace(&mut st.pending, spare))
            };
            // If this future is dropped mid-write the stream is corrupt: mark it broken.
            struct Poison<'a, W, F>(&'a Writer<W, F>, bool);
            impl<W, F> Drop for Poison<'_, W, F> {
                fn drop(&mut self) {
                    if !self.1 {
                        self.0.state.borrow_mut().broken = true;
                    }
                }
            }
            let mut poison = Poison(self, false);
            let r = match io.write_all(&buf).await {
                Ok(()) => io.flush().await,
                Err(e) => Err(e),
            };
            poison.1 = true;
            buf.clear();
            let mut st = self.state.borrow_mut();
            st.io = Some(io);
            st.spare = buf;
            if r.is_err() {
                st.broken = true;
                return Err(());
            }
        }
    }

    /// Gives the stream back (to close it), if no write is in progress.
    pub fn take(&self) -> Option<W> {
        self.state.borrow_mut().io.take()
    }
}

/// Something that carries messages to the server.
pub trait Outbound {
    fn send_message(&self, msg: &[u8]) -> impl Future<Output = Result<(), ()>>;
}

impl<W: AsyncWrite + Unpin, F: Framer> Outbound for Writer<W, F> {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        self.send(msg).await
    }
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
        return (Reply::new(mux.closed.get().unwrap_or(Outcome::Io)), None);
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

/// Shared state for a connection opened by several virtual users (shared session mode): who
/// is opening it, and wakers of those waiting.
#[derive(Debug, Default)]
pub struct OpenLatch {
    opening: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl OpenLatch {
    /// Claims the right to open; false if someone else is opening.
    pub fn claim(&self) -> bool {
        !self.opening.replace(true)
    }

    pub fn release(&self) {
        self.opening.set(false);
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    pub async fn wait(&self) {
        poll_fn(|cx| {
            if !self.opening.get() {
                return Poll::Ready(());
            }
            self.waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// One multiplexed connection: the in-flight table, the way out, and the negotiated session.
pub struct MuxConn<O> {
    pub mux: Mux,
    pub out: O,
    pub revision: Cell<Option<Revision>>,
    /// Reader (and helper) tasks; aborted when the connection is dropped.
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

impl<O> std::fmt::Debug for MuxConn<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MuxConn")
            .field("revision", &self.revision.get())
            .finish()
    }
}

impl<O> Drop for MuxConn<O> {
    fn drop(&mut self) {
        for t in self.tasks.borrow_mut().drain(..) {
            t.abort();
        }
    }
}

impl<O: Outbound> MuxConn<O> {
    pub fn new(capacity: usize, ep: &super::Endpoint, out: O) -> Self {
        MuxConn {
            mux: Mux::new(capacity, ep.codec, ep.id_base),
            out,
            revision: Cell::new(None),
            tasks: RefCell::new(Vec::new()),
        }
    }

    /// Keeps a task alive as long as the connection.
    pub fn hold(&self, task: tokio::task::JoinHandle<()>) {
        self.tasks.borrow_mut().push(task);
    }

    pub async fn call<R: FnOnce(&mut Vec<u8>, u64)>(
        &self,
        buf: &mut Vec<u8>,
        render: R,
    ) -> (Reply, Option<u64>) {
        call(&self.mux, &self.out, buf, render).await
    }

    /// Sends a notification (no answer expected).
    pub async fn notify<R: FnOnce(&mut Vec<u8>)>(
        &self,
        buf: &mut Vec<u8>,
        render: R,
    ) -> Result<(), ()> {
        buf.clear();
        render(buf);
        self.out.send_message(buf).await
    }

    /// Routes one incoming message, answering server requests.
    pub async fn incoming(&self, msg: &mut [u8], answer: &mut Vec<u8>) {
        if self.mux.deliver(msg, answer) {
            let _ = self.out.send_message(answer).await;
        }
    }

    pub fn is_usable(&self) -> bool {
        !self.mux.is_closed()
    }
}

/// How a multiplexed transport connects.
pub trait Connector {
    type Out: Outbound + 'static;
    /// Opens a connection (process, socket, stream) with room for `capacity` requests in
    /// flight, its reader task running.
    fn connect(
        ep: &Arc<Endpoint>,
        capacity: usize,
    ) -> impl Future<Output = Result<Rc<MuxConn<Self::Out>>, Outcome>>;
    /// Ends a connection politely (close stdin and wait, send a close frame…).
    fn shutdown(conn: Rc<MuxConn<Self::Out>>, within: Duration) -> impl Future<Output = ()>;
}

/// The connection shared by the virtual users of one worker (shared session mode), and the
/// latch that lets one of them (re)open it while the others wait.
pub struct Shared<O> {
    conn: RefCell<Option<Rc<MuxConn<O>>>>,
    latch: OpenLatch,
}

impl<O> Default for Shared<O> {
    fn default() -> Self {
        Shared {
            conn: RefCell::new(None),
            latch: OpenLatch::default(),
        }
    }
}

impl<O> Shared<O> {
    /// Takes the connection out (to shut it down at the end).
    pub fn take(&self) -> Option<Rc<MuxConn<O>>> {
        self.conn.borrow_mut().take()
    }
}

pub type SharedSlot<O> = Rc<Shared<O>>;

/// An MCP session over a multiplexed connection: one connection per virtual user, or one per
/// worker thread shared by its virtual users.
pub struct MuxSession<C: Connector> {
    ep: Arc<Endpoint>,
    capacity: usize,
    shared: Option<SharedSlot<C::Out>>,
    conn: Option<Rc<MuxConn<C::Out>>>,
    last_id: Option<u64>,
    keep: bool,
    last: Vec<u8>,
    /// This caller's request buffer (never shared, so rendering never allocates after warm-up).
    buf: Vec<u8>,
    /// Counters of connections this session has let go of, not yet taken.
    retired: TransportCounts,
}

impl<C: Connector> std::fmt::Debug for MuxSession<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MuxSession")
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl<C: Connector> MuxSession<C> {
    /// A session with its own connection.
    pub fn new(ep: Arc<Endpoint>) -> Self {
        MuxSession {
            ep,
            capacity: 4,
            shared: None,
            conn: None,
            last_id: None,
            keep: false,
            last: Vec::new(),
            buf: Vec::with_capacity(1024),
            retired: TransportCounts::default(),
        }
    }

    /// A handle on the connection in `slot`, shared with up to `capacity` callers.
    pub fn shared(ep: Arc<Endpoint>, slot: SharedSlot<C::Out>, capacity: usize) -> Self {
        MuxSession {
            ep,
            capacity: capacity * 2,
            shared: Some(slot),
            conn: None,
            last_id: None,
            keep: false,
            last: Vec::new(),
            buf: Vec::with_capacity(1024),
            retired: TransportCounts::default(),
        }
    }

    /// Keep a copy of each response (for reading results, e.g. tools/list in preflight).
    pub fn keep_responses(&mut self) {
        self.keep = true;
    }

    fn current(&self) -> Option<Rc<MuxConn<C::Out>>> {
        match &self.shared {
            Some(slot) => slot.conn.borrow().clone(),
            None => self.conn.clone(),
        }
    }

    fn set_current(&mut self, c: Option<Rc<MuxConn<C::Out>>>) {
        match &self.shared {
            Some(slot) => *slot.conn.borrow_mut() = c,
            None => self.conn = c,
        }
    }

    async fn handshake(&mut self, conn: &Rc<MuxConn<C::Out>>) -> Reply {
        conn.mux.keep_responses(true);
        let rev = self.ep.protocol;
        let (reply, _) = if rev.has_handshake() {
            conn.call(&mut self.buf, |out, id| mcp::write_initialize(out, id, rev))
                .await
        } else {
            conn.call(&mut self.buf, |out, id| mcp::write_discover(out, id, rev))
                .await
        };
        let message = conn.mux.last_message().clone();
        conn.mux.keep_responses(self.keep);
        if reply.outcome != Outcome::Ok {
            return reply;
        }
        if rev.has_handshake() {
            let Some(negotiated) = super::negotiated_revision(&message) else {
                return Reply {
                    outcome: Outcome::Protocol(ProtocolKind::Handshake),
                    ..reply
                };
            };
            if conn
                .notify(&mut self.buf, mcp::write_initialized)
                .await
                .is_err()
            {
                return Reply {
                    outcome: Outcome::Io,
                    ..reply
                };
            }
            conn.revision.set(Some(negotiated));
        } else {
            if !super::discover_supports(&message, rev) {
                return Reply {
                    outcome: Outcome::Protocol(ProtocolKind::Handshake),
                    ..reply
                };
            }
            conn.revision.set(Some(rev));
        }
        reply
    }
}

/// Releases a shared session's open latch however `open` ends (a timeout drops it).
struct Release<O>(Option<SharedSlot<O>>);

impl<O> Drop for Release<O> {
    fn drop(&mut self) {
        if let Some(slot) = &self.0 {
            slot.latch.release();
        }
    }
}

impl<C: Connector> Session for MuxSession<C> {
    async fn open(&mut self) -> Reply {
        let _release = Release(self.shared.clone());
        async {
            let conn = match self.current().filter(|c| c.is_usable()) {
                Some(c) => c,
                None => {
                    let capacity = self.capacity;
                    let t0 = std::time::Instant::now();
                    match C::connect(&self.ep, capacity).await {
                        Ok(c) => {
                            let connect = t0.elapsed();
                            self.set_current(Some(c.clone()));
                            let mut r = self.handshake(&c).await;
                            r.connected = true;
                            r.connect = Some(connect);
                            return r;
                        }
                        Err(o) => return Reply::new(o),
                    }
                }
            };
            self.handshake(&conn).await
        }
        .await
    }

    fn is_open(&self) -> bool {
        self.current()
            .is_some_and(|c| c.is_usable() && c.revision.get().is_some())
    }

    fn claim_open(&mut self) -> bool {
        match &self.shared {
            Some(slot) => slot.latch.claim(),
            None => true,
        }
    }

    async fn wait_open(&mut self) {
        if let Some(slot) = &self.shared {
            slot.latch.wait().await;
        }
    }

    fn revision(&self) -> Option<Revision> {
        self.current().and_then(|c| c.revision.get())
    }

    async fn call<W: FnOnce(&mut Vec<u8>, u64)>(&mut self, _spec: &CallSpec, write: W) -> Reply {
        let Some(conn) = self.current() else {
            return Reply::new(Outcome::Connect);
        };
        let Some(id) = conn.mux.register() else {
            return Reply::new(conn.mux.closed.get().unwrap_or(Outcome::Io));
        };
        // Known before the exchange, so a timeout (which drops it) can still cancel it.
        self.last_id = Some(id);
        let reply = exchange(&conn.mux, &conn.out, &mut self.buf, id, write).await;
        if self.keep {
            self.last.clear();
            self.last.extend_from_slice(&conn.mux.last_message());
        }
        reply
    }

    async fn cancel_last(&mut self) -> bool {
        let (Some(conn), Some(id)) = (self.current(), self.last_id.take()) else {
            return false;
        };
        if !conn.is_usable() {
            return false;
        }
        conn.mux.abandon(id);
        let timeout = self.ep.timeout;
        let buf = &mut self.buf;
        matches!(
            tokio::time::timeout(
                timeout,
                conn.notify(buf, |out| mcp::write_cancelled(out, id))
            )
            .await,
            Ok(Ok(()))
        )
    }

    async fn close(&mut self) {
        if self.shared.is_some() {
            // The worker closes a shared connection once, after all its users are done.
            return;
        }
        if let Some(c) = self.conn.take() {
            C::shutdown(c.clone(), self.ep.timeout.min(Duration::from_secs(2))).await;
            self.retired.add(c.mux.take_stats());
        }
    }

    fn reset(&mut self) {
        if let Some(c) = self.current() {
            self.retired.add(c.mux.take_stats());
        }
        self.set_current(None);
    }

    fn take_stats(&mut self) -> TransportCounts {
        let mut st = std::mem::take(&mut self.retired);
        if let Some(c) = self.current() {
            st.add(c.mux.take_stats());
        }
        st
    }

    fn last_message(&self) -> &[u8] {
        &self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn combining_writer_writes_everything_in_order() {
        let (client, mut server) = tokio::io::duplex(16);
        let w = Rc::new(Writer::new(client, Lines));
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let mut tasks = Vec::new();
                for i in 0..20 {
                    let w = w.clone();
                    tasks.push(tokio::task::spawn_local(async move {
                        w.send(format!("m{i}").as_bytes()).await
                    }));
                }
                let reader = tokio::spawn(async move {
                    let mut all = Vec::new();
                    let mut buf = [0u8; 64];
                    while all.iter().filter(|&&b| b == b'\n').count() < 20 {
                        let n = tokio::io::AsyncReadExt::read(&mut server, &mut buf)
                            .await
                            .unwrap();
                        all.extend_from_slice(&buf[..n]);
                    }
                    all
                });
                for t in tasks {
                    t.await.unwrap().unwrap();
                }
                let all = reader.await.unwrap();
                let lines: std::collections::HashSet<&[u8]> = all
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .collect();
                assert_eq!(lines.len(), 20);
            })
            .await;
    }
}
