//! Streamable HTTP sessions of the reference server (handshake era).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rand::RngExt;

use crate::protocol::version::Revision;

/// One client session, made by `initialize`.
#[derive(Debug)]
pub struct Session {
    pub id: u128,
    pub revision: Revision,
    /// `notifications/initialized` was received.
    pub initialized: AtomicBool,
    last_seen_ms: AtomicU64,
}

impl Session {
    /// The id as sent in `Mcp-Session-Id`: 32 lowercase hex digits (visible ASCII, unguessable).
    pub fn header_value(&self) -> String {
        format!("{:032x}", self.id)
    }
}

/// The store is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many open sessions")]
pub struct Full;

/// All open sessions. Lookups take a read lock; only creation, deletion and reaping write.
#[derive(Debug)]
pub struct Sessions {
    map: RwLock<HashMap<u128, Arc<Session>>>,
    max: usize,
    idle: Duration,
    epoch: Instant,
}

impl Sessions {
    pub fn new(max: usize, idle: Duration) -> Self {
        Sessions {
            map: RwLock::new(HashMap::new()),
            max,
            idle,
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn create(&self, revision: Revision) -> Result<Arc<Session>, Full> {
        let id: u128 = rand::rng().random();
        let s = Arc::new(Session {
            id,
            revision,
            initialized: AtomicBool::new(false),
            last_seen_ms: AtomicU64::new(self.now_ms()),
        });
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.max {
            return Err(Full);
        }
        map.insert(id, s.clone());
        Ok(s)
    }

    /// Finds a session by its header value and marks it used.
    pub fn get(&self, header: &[u8]) -> Option<Arc<Session>> {
        let id = parse_id(header)?;
        let s = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()?;
        s.last_seen_ms.store(self.now_ms(), Ordering::Relaxed);
        Some(s)
    }

    pub fn remove(&self, header: &[u8]) -> bool {
        parse_id(header).is_some_and(|id| {
            self.map
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id)
                .is_some()
        })
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops sessions idle for longer than the idle limit; returns how many.
    pub fn reap(&self) -> usize {
        let cutoff = self.now_ms().saturating_sub(self.idle.as_millis() as u64);
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, s| s.last_seen_ms.load(Ordering::Relaxed) >= cutoff);
        before - map.len()
    }
}

fn parse_id(header: &[u8]) -> Option<u128> {
    if header.len() != 32 {
        return None;
    }
    u128::from_str_radix(std::str::from_utf8(header).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_get_remove_reap_and_cap() {
        let s = Sessions::new(2, Duration::ZERO);
        let a = s.create(Revision::V2025_11_25).unwrap();
        let id = a.header_value();
        assert_eq!(id.len(), 32);
        assert_eq!(s.get(id.as_bytes()).unwrap().id, a.id);
        assert!(s.get(b"nope").is_none());
        s.create(Revision::V2025_06_18).unwrap();
        assert_eq!(s.create(Revision::V2025_06_18).unwrap_err(), Full);
        assert!(s.remove(id.as_bytes()));
        assert!(!s.remove(id.as_bytes()));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.reap(), 1);
        assert!(s.is_empty());
    }
}
