//! Requests in flight per session, in both directions.
//!
//! Client requests, so `notifications/cancelled` can stop them: only `tools/call` is
//! registered, since every other request is answered before the next message of the session is
//! read, so a cancel for it is always late (and late cancels are ignored). A registration is a
//! [`Ticket`]; dropping it (the request finished, was cancelled, or its task was dropped)
//! removes the entry, so the map never outlives the work it describes.
//!
//! A session runs at most `max` registered requests at once (`Config::max_in_flight`): the
//! check is a comparison under the lock registration takes anyway.
//!
//! Server requests (`sampling/createMessage`, `elicitation/create` from the conformance
//! fixtures), so the client's response — which arrives as a message of its own — reaches the
//! call waiting for it: a [`Question`] is registered the same way and unregisters on drop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// A request id, normalised so that `"a"` and `"\u0061"` name the same request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IdKey {
    Num(i128),
    Str(String),
}

impl IdKey {
    /// The key of a raw JSON id (`7`, `"abc"`); `None` for anything that is not a valid id.
    pub(crate) fn parse(raw: &str) -> Option<IdKey> {
        let raw = raw.trim();
        if raw.starts_with('"') {
            serde_json::from_str::<String>(raw).ok().map(IdKey::Str)
        } else {
            raw.parse::<i128>().ok().map(IdKey::Num)
        }
    }
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<IdKey, (u64, CancellationToken)>,
    /// Requests that cannot be named by id (a duplicate took the id, or the id is odd); kept
    /// so that ending the session still stops them.
    unnamed: HashMap<u64, CancellationToken>,
    running: usize,
    next: u64,
    closed: bool,
    /// Server requests waiting for the client's response, by the id the server gave them.
    asked: HashMap<u64, oneshot::Sender<Bytes>>,
    next_ask: u64,
}

/// The cancellable requests of one session (an HTTP session, a stdio or WebSocket connection).
///
/// One short lock per registration and one per completion; tokens are independent (no parent
/// token whose lock every request would share).
#[derive(Debug)]
pub(crate) struct InFlight {
    entries: Mutex<Entries>,
    idle: Notify,
    /// Requests registered at once, at most.
    max: usize,
}

/// One registered request. Its token fires on cancel; dropping it unregisters the request.
#[derive(Debug)]
pub(crate) struct Ticket {
    owner: Arc<InFlight>,
    key: Option<IdKey>,
    seq: u64,
    token: CancellationToken,
}

impl Ticket {
    /// Completes when the request is cancelled.
    pub(crate) async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    #[cfg(test)]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The session's table this request is registered in.
    pub(crate) fn session(&self) -> &Arc<InFlight> {
        &self.owner
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut e = self.owner.lock();
        // One lookup in the common case (the id is still this request's).
        let mine = match self.key.take() {
            Some(key) => match e.by_id.remove_entry(&key) {
                Some((_, (seq, _))) if seq == self.seq => true,
                Some((key, entry)) => {
                    e.by_id.insert(key, entry);
                    false
                }
                None => false,
            },
            None => false,
        };
        if !mine {
            e.unnamed.remove(&self.seq);
        }
        e.running -= 1;
        if e.running == 0 {
            self.owner.idle.notify_waiters();
        }
    }
}

/// A server request waiting for the client's response; dropping it unregisters the request.
#[derive(Debug)]
pub(crate) struct Question {
    owner: Arc<InFlight>,
    seq: u64,
    rx: oneshot::Receiver<Bytes>,
}

impl Question {
    /// The request's id as raw JSON (a string, so it cannot collide with client ids in logs).
    pub(crate) fn id(&self) -> String {
        format!("\"mcpbench-{}\"", self.seq)
    }

    /// The client's response message, or `None` if the session ended first.
    pub(crate) async fn answer(&mut self) -> Option<Bytes> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for Question {
    fn drop(&mut self) {
        self.owner.lock().asked.remove(&self.seq);
    }
}

impl InFlight {
    /// A table that registers at most `max` requests at once.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(InFlight {
            entries: Mutex::default(),
            idle: Notify::new(),
            max,
        })
    }

    /// The most requests registered at once.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the request with raw JSON id `id`; `None` if the session already has `max`
    /// requests in flight. A second request with the same id while the first runs takes over
    /// the id (the first can then only be stopped with the session).
    pub(crate) fn register(self: &Arc<Self>, id: &str) -> Option<Ticket> {
        let key = IdKey::parse(id);
        let token = CancellationToken::new();
        let mut e = self.lock();
        if e.running >= self.max {
            return None;
        }
        if e.closed {
            token.cancel();
        }
        e.next += 1;
        let seq = e.next;
        e.running += 1;
        let displaced = match &key {
            Some(k) => e.by_id.insert(k.clone(), (seq, token.clone())),
            None => Some((seq, token.clone())),
        };
        if let Some((old_seq, old_token)) = displaced {
            e.unnamed.insert(old_seq, old_token);
        }
        drop(e);
        Some(Ticket {
            owner: self.clone(),
            key,
            seq,
            token,
        })
    }

    /// Cancels the request with raw JSON id `id`; false (and nothing happens) if none runs.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let Some(key) = IdKey::parse(id) else {
            return false;
        };
        let found = self.lock().by_id.remove(&key);
        match found {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Registers a server request; `None` once the session has ended.
    pub(crate) fn ask(self: &Arc<Self>) -> Option<Question> {
        let (tx, rx) = oneshot::channel();
        let mut e = self.lock();
        if e.closed {
            return None;
        }
        e.next_ask += 1;
        let seq = e.next_ask;
        e.asked.insert(seq, tx);
        drop(e);
        Some(Question {
            owner: self.clone(),
            seq,
            rx,
        })
    }

    /// Hands a client response (raw JSON id, whole message) to the server request it answers;
    /// false if none waits for it (unknown, late, or not one of ours).
    pub(crate) fn answer(&self, id: &str, message: Bytes) -> bool {
        let seq = match IdKey::parse(id) {
            Some(IdKey::Str(s)) => s.strip_prefix("mcpbench-").and_then(|n| n.parse().ok()),
            _ => None,
        };
        let Some(tx) = seq.and_then(|seq| self.lock().asked.remove(&seq)) else {
            return false;
        };
        tx.send(message).is_ok()
    }

    /// Cancels everything running now and everything registered later (the session ended);
    /// server requests waiting for an answer give up.
    pub(crate) fn cancel_all(&self) {
        let mut e = self.lock();
        e.closed = true;
        e.asked.clear();
        for (_, t) in e.by_id.values() {
            t.cancel();
        }
        for t in e.unnamed.values() {
            t.cancel();
        }
    }

    /// Requests registered and not yet finished.
    pub(crate) fn len(&self) -> usize {
        self.lock().running
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completes once no request is in flight.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_empty() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_normalise_ids() {
        assert_eq!(IdKey::parse("7"), Some(IdKey::Num(7)));
        assert_eq!(IdKey::parse("\"a\""), IdKey::parse("\"\\u0061\""));
        assert_eq!(IdKey::parse("1.5"), None);
        assert_eq!(IdKey::parse("null"), None);
    }

    #[test]
    fn at_most_max_requests_are_registered() {
        let f = InFlight::new(2);
        let a = f.register("1").unwrap();
        let _b = f.register("2").unwrap();
        assert!(f.register("3").is_none(), "the third is refused");
        drop(a);
        assert!(
            f.register("3").is_some(),
            "a finished request frees its place"
        );
    }

    #[tokio::test]
    async fn cancel_stops_one_and_tickets_unregister() {
        let f = InFlight::new(usize::MAX);
        let a = f.register("1").unwrap();
        let b = f.register("\"x\"").unwrap();
        assert_eq!(f.len(), 2);
        assert!(!f.cancel("2"), "unknown ids are ignored");
        assert!(f.cancel("1"));
        assert!(a.is_cancelled() && !b.is_cancelled());
        assert!(!f.cancel("1"), "a second cancel is late");
        drop(a);
        assert_eq!(f.len(), 1);
        let idle = tokio::spawn({
            let f = f.clone();
            async move { f.idle().await }
        });
        drop(b);
        idle.await.unwrap();
        assert!(f.is_empty());
        let c = f.register("4").unwrap();
        let dup = f.register("4").unwrap();
        let odd = f.register("{}").unwrap();
        assert!(
            f.cancel("4") && dup.is_cancelled() && !c.is_cancelled(),
            "the newest takes the id"
        );
        f.cancel_all();
        assert!(
            c.is_cancelled() && odd.is_cancelled(),
            "ending the session stops everything"
        );
        assert!(
            f.register("3").unwrap().is_cancelled(),
            "a closed session cancels at once"
        );
        drop((c, dup, odd));
        assert_eq!(f.len(), 0);
    }

    #[tokio::test]
    async fn server_requests_get_their_answers() {
        let f = InFlight::new(usize::MAX);
        let mut q = f.ask().unwrap();
        let id = q.id();
        assert!(
            !f.answer("\"mcpbench-99\"", Bytes::new()),
            "unknown ids are ignored"
        );
        assert!(
            !f.answer("7", Bytes::new()),
            "client-style ids are not ours"
        );
        assert!(f.answer(&id, Bytes::from_static(b"{}")));
        assert_eq!(q.answer().await.unwrap(), "{}");
        assert!(!f.answer(&id, Bytes::new()), "a second answer is late");
        let q2 = f.ask().unwrap();
        let id2 = q2.id();
        drop(q2);
        assert!(
            !f.answer(&id2, Bytes::new()),
            "dropping a question unregisters it"
        );
        let mut q3 = f.ask().unwrap();
        f.cancel_all();
        assert!(
            q3.answer().await.is_none(),
            "ending the session ends the wait"
        );
        assert!(f.ask().is_none());
    }
}
