//! An MCP session over a multiplexed connection: the connection (in-flight table, way out,
//! negotiated revision), how a transport opens one (`Connector`), and the session on it, a
//! virtual user's own or shared by a worker's users.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::combining_writer::Outbound;
use super::in_flight::{Mux, SharedHook, call, exchange};
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::TransportCounts;
use crate::protocol::mcp;
use crate::protocol::version::Revision;
use crate::transport::{
    CallSpec, Endpoint, NotificationHook, Reply, Session, discover_supports, negotiated_revision,
};

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
    pub fn new(capacity: usize, ep: &Endpoint, out: O) -> Self {
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
    /// Where this session's progress notifications go (`Session::set_notification_hook`).
    hook: Option<SharedHook>,
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
            hook: None,
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
            hook: None,
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
            let Some(negotiated) = negotiated_revision(&message) else {
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
            if !discover_supports(&message, rev) {
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
            return Reply::new(conn.mux.closed_outcome().unwrap_or(Outcome::Io));
        };
        // Known before the exchange, so a timeout (which drops it) can still cancel it.
        self.last_id = Some(id);
        let _unhook = self
            .hook
            .as_ref()
            .map(|h| Unhook::new(&conn.mux, id, h.clone()));
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

    async fn aside(&self) -> Option<String> {
        let conn = self.current()?;
        conn.out.aside().await
    }

    fn set_notification_hook(&mut self, hook: Option<NotificationHook>) {
        self.hook = hook.map(|h| Rc::new(RefCell::new(h)));
    }
}

/// A request's hook on its connection, taken off when the request ends — answered, failed or
/// dropped by a timeout.
struct Unhook<'a> {
    mux: &'a Mux,
    id: u64,
}

impl<'a> Unhook<'a> {
    fn new(mux: &'a Mux, id: u64, hook: SharedHook) -> Self {
        mux.hook(id, hook);
        Unhook { mux, id }
    }
}

impl Drop for Unhook<'_> {
    fn drop(&mut self) {
        self.mux.unhook(self.id);
    }
}
