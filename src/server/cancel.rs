//! Requests in flight per session, so `notifications/cancelled` can stop them.
//!
//! Only `tools/call` is registered: every other request is answered before the next message of
//! the session is read, so a cancel for it is always late (and late cancels are ignored). A
//! registration is a [`Ticket`]; dropping it (the request finished, was cancelled, or its task
//! was dropped) removes the entry, so the map never outlives the work it describes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A request id, normalised so that `"a"` and `"\u0061"` name the same request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IdKey {
    Num(i128),
    Str(String),
}

impl IdKey {
    /// The key of a raw JSON id (`7`, `"abc"`); `None` for anything that is not a valid id.
    pub fn parse(raw: &str) -> Option<IdKey> {
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
}

/// The cancellable requests of one session (an HTTP session, a stdio or WebSocket connection).
///
/// One short lock per registration and one per completion; tokens are independent (no parent
/// token whose lock every request would share).
#[derive(Debug, Default)]
pub struct InFlight {
    entries: Mutex<Entries>,
    idle: Notify,
}

/// One registered request. Its token fires on cancel; dropping it unregisters the request.
#[derive(Debug)]
pub struct Ticket {
    owner: Arc<InFlight>,
    key: Option<IdKey>,
    seq: u64,
    token: CancellationToken,
}

impl Ticket {
    /// Completes when the request is cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut e = self.owner.lock();
        match self.key.take() {
            Some(key) if e.by_id.get(&key).is_some_and(|(seq, _)| *seq == self.seq) => {
                e.by_id.remove(&key);
            }
            _ => {
                e.unnamed.remove(&self.seq);
            }
        }
        e.running -= 1;
        if e.running == 0 {
            self.owner.idle.notify_waiters();
        }
    }
}

impl InFlight {
    pub fn new() -> Arc<Self> {
        Arc::new(InFlight::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the request with raw JSON id `id`. A second request with the same id while
    /// the first runs takes over the id (the first can then only be stopped with the session).
    pub fn register(self: &Arc<Self>, id: &str) -> Ticket {
        let key = IdKey::parse(id);
        let token = CancellationToken::new();
        let mut e = self.lock();
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
        Ticket {
            owner: self.clone(),
            key,
            seq,
            token,
        }
    }

    /// Cancels the request with raw JSON id `id`; false (and nothing happens) if none runs.
    pub fn cancel(&self, id: &str) -> bool {
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

    /// Cancels everything running now and everything registered later (the session ended).
    pub fn cancel_all(&self) {
        let mut e = self.lock();
        e.closed = true;
        for (_, t) in e.by_id.values() {
            t.cancel();
        }
        for t in e.unnamed.values() {
            t.cancel();
        }
    }

    /// Requests registered and not yet finished.
    pub fn len(&self) -> usize {
        self.lock().running
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completes once no request is in flight.
    pub async fn idle(&self) {
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

    #[tokio::test]
    async fn cancel_stops_one_and_tickets_unregister() {
        let f = InFlight::new();
        let a = f.register("1");
        let b = f.register("\"x\"");
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
        let c = f.register("4");
        let dup = f.register("4");
        let odd = f.register("{}");
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
            f.register("3").is_cancelled(),
            "a closed session cancels at once"
        );
        drop((c, dup, odd));
        assert_eq!(f.len(), 0);
    }
}
