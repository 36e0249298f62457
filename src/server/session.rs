//! Streamable HTTP sessions of the reference server (handshake era).
//!
//! A session is shared by every HTTP request that names it, so its in-flight map (for
//! `notifications/cancelled`) sits behind a lock; everything else is atomics — except what
//! only the conformance fixtures touch (resource subscriptions, parked SSE streams), which is
//! locked too.
//!
//! A session belongs to the tenant that opened it (under a policy): a request of another
//! tenant that names it — POST, GET resumption, DELETE — finds nothing, exactly as if the id
//! were unknown, and does not even keep it alive; the refusal is audited with both tenants and
//! the session's number (never its id). Ids are 128 random bits; a stream's event ids start
//! with 64 random bits of their own, so neither can be guessed or walked. Each session holds a
//! [`Seat`] of its tenant's session cap (every transport counts: [`seat`]).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hyper::Response;
use rand::RngExt;

use super::State;
use super::body::{Body, EventIds, SseStream};
use super::cancel::InFlight;
use super::context::Peer;
use super::peer::ClientState;
use super::policy::{AtCap, Seat};
use super::response::too_many;
use super::wire::error_body;
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

/// One client session, made by `initialize`.
#[derive(Debug)]
pub(crate) struct Session {
    pub id: u128,
    pub revision: Revision,
    /// The tenant that opened it (under a policy); only its requests find it.
    pub tenant: Option<u16>,
    /// Its place under the tenant's session cap, given back when the session goes.
    _seat: Option<Seat>,
    /// `notifications/initialized` was received.
    pub initialized: AtomicBool,
    /// Cancellable requests of this session.
    pub inflight: Arc<InFlight>,
    /// Capabilities, log level and subscriptions of the client.
    pub client: ClientState,
    last_seen_ms: AtomicU64,
    /// Streams whose connection the server closed mid-call (SEP-1699), waiting for the client's
    /// GET with `Last-Event-ID`, and when each was parked.
    parked: Mutex<Vec<(SseStream, Instant)>>,
    /// Something is parked (so reaping looks, and otherwise does not lock).
    has_parked: AtomicBool,
}

/// A stream cannot be resumed from the given event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResumeError {
    /// No parked stream has that number.
    Unknown,
    /// The stream's last event is another one; this server keeps no events to replay.
    Gap,
}

/// How long a parked stream waits for its client.
const PARKED_FOR: Duration = Duration::from_secs(60);

impl Session {
    /// The id as sent in `Mcp-Session-Id`: 32 lowercase hex digits (visible ASCII, unguessable).
    pub(crate) fn header_value(&self) -> String {
        format!("{:032x}", self.id)
    }

    /// What a request of `tenant` (its own credentials) on this session touches.
    pub(crate) fn peer(&self, tenant: Option<u16>) -> Peer<'_> {
        Peer {
            rev: self.revision,
            initialized: &self.initialized,
            inflight: &self.inflight,
            client: &self.client,
            tenant,
        }
    }

    fn parked(&self) -> std::sync::MutexGuard<'_, Vec<(SseStream, Instant)>> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a stream the server parked until the client resumes it (for at most a minute).
    pub(crate) fn park(&self, stream: SseStream) {
        let mut p = self.parked();
        p.retain(|(_, at)| at.elapsed() < PARKED_FOR);
        p.push((stream, Instant::now()));
        self.has_parked.store(true, Ordering::Relaxed);
    }

    /// Drops parked streams nobody resumed in time (their calls end with them).
    fn expire_parked(&self) {
        if self.has_parked.load(Ordering::Relaxed) {
            let mut p = self.parked();
            p.retain(|(_, at)| at.elapsed() < PARKED_FOR);
            self.has_parked.store(!p.is_empty(), Ordering::Relaxed);
        }
    }

    /// Takes the parked stream whose last event is `stream`-`seq` (`Last-Event-ID`).
    pub(crate) fn resume(&self, stream: u64, seq: u64) -> Result<SseStream, ResumeError> {
        let mut p = self.parked();
        let i = p
            .iter()
            .position(|(s, _)| s.last_event().is_some_and(|(n, _)| n == stream))
            .ok_or(ResumeError::Unknown)?;
        if p[i].0.last_event() != Some((stream, seq)) {
            return Err(ResumeError::Gap);
        }
        Ok(p.swap_remove(i).0)
    }

    /// Event ids for a new SSE stream of this session, when its revision has them: 2025-11-25
    /// streams open with a priming event. The stream's number is random (64 bits): an event id
    /// names no other stream, and says nothing about how many there were.
    pub(crate) fn event_ids(&self) -> Option<EventIds> {
        (self.revision == Revision::V2025_11_25).then(|| EventIds::new(rand::rng().random()))
    }
}

/// Why a request cannot use the session it names.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    /// No such session (or not a session id at all).
    Unknown,
    /// Another tenant's session: answered as [`Unknown`](Self::Unknown), audited apart.
    Foreign(Arc<Session>),
}

/// The store is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many open sessions")]
pub(crate) struct Full;

/// Shards of the session table (a power of two): a shard's lock covers 1/64 of the sessions, so
/// creating, ending and reaping sessions of one shard never stall requests of the others.
const SHARDS: usize = 64;

type Table = HashMap<u128, Arc<Session>, BuildHasherDefault<IdHash>>;
type Shard = RwLock<Table>;

/// Hashes a session id by its upper half: ids are drawn from a CSPRNG, so those bits are
/// already uniform (the shard is picked by the lower ones), and a lookup costs no SipHash.
/// Only the server makes ids, so no client can crowd a bucket.
#[derive(Default)]
struct IdHash(u64);

impl std::hash::Hasher for IdHash {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u128` keys are hashed here; anything else still hashes, by its bytes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, id: u128) {
        self.0 = (id >> 64) as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// All open sessions, in [`SHARDS`] shards by id. Lookups take a shard's read lock; creation
/// and deletion its write lock; reaping scans one shard at a time under its read lock and takes
/// the write lock only to remove what expired — so walking 100 000 sessions never holds a lock
/// for more than a few hundred of them.
#[derive(Debug)]
pub(crate) struct Sessions {
    shards: Box<[Shard]>,
    /// Sessions in the table (reserved before an insert, so the cap holds under races).
    open: AtomicUsize,
    /// Sessions ended by the reaper for being idle, since start.
    expired: AtomicU64,
    max: usize,
    idle: Duration,
    /// Requests in flight per session, at most.
    max_in_flight: usize,
    epoch: Instant,
}

impl Sessions {
    /// At most `max` sessions, each ended after `idle` unused (by [`reap`](Self::reap)), each
    /// running at most `max_in_flight` calls.
    pub(crate) fn new(max: usize, idle: Duration, max_in_flight: usize) -> Self {
        Sessions {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            open: AtomicUsize::new(0),
            expired: AtomicU64::new(0),
            max,
            idle,
            max_in_flight,
            epoch: Instant::now(),
        }
    }

    fn shard(&self, id: u128) -> &Shard {
        &self.shards[id as usize & (SHARDS - 1)]
    }

    /// The most sessions open at once.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Sessions ended for being idle since the server started.
    pub(crate) fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    /// How often [`reap`](Self::reap) should run: twice per idle limit, at most every 10 s and
    /// at least every 10 ms. Also the `Retry-After` of a refused `initialize`: by then idle
    /// sessions may have made room.
    pub(crate) fn reap_every(&self) -> Duration {
        (self.idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(10))
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A new session of `tenant`, holding `seat` (its place under the tenant's cap).
    pub(crate) fn create(
        &self,
        revision: Revision,
        tenant: Option<u16>,
        seat: Option<Seat>,
    ) -> Result<Arc<Session>, Full> {
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(Full);
        }
        let id: u128 = rand::rng().random();
        let s = Arc::new(Session {
            id,
            revision,
            tenant,
            _seat: seat,
            initialized: AtomicBool::new(false),
            inflight: InFlight::new(self.max_in_flight),
            client: ClientState::default(),
            last_seen_ms: AtomicU64::new(self.now_ms()),
            parked: Mutex::new(Vec::new()),
            has_parked: AtomicBool::new(false),
        });
        write(self.shard(id)).insert(id, s.clone());
        Ok(s)
    }

    /// Finds `tenant`'s session by its header value and marks it used (another tenant's is
    /// not touched).
    pub(crate) fn get(&self, header: &[u8], tenant: Option<u16>) -> Result<Arc<Session>, Lookup> {
        let id = parse_id(header).ok_or(Lookup::Unknown)?;
        let s = read(self.shard(id))
            .get(&id)
            .cloned()
            .ok_or(Lookup::Unknown)?;
        if s.tenant != tenant {
            return Err(Lookup::Foreign(s));
        }
        s.last_seen_ms.store(self.now_ms(), Ordering::Relaxed);
        Ok(s)
    }

    /// Ends `tenant`'s session; its requests in flight are cancelled. Another tenant's stays.
    pub(crate) fn remove(&self, header: &[u8], tenant: Option<u16>) -> Result<(), Lookup> {
        let id = parse_id(header).ok_or(Lookup::Unknown)?;
        let mut map = write(self.shard(id));
        match map.get(&id) {
            None => Err(Lookup::Unknown),
            Some(s) if s.tenant != tenant => Err(Lookup::Foreign(s.clone())),
            Some(_) => {
                if let Some(s) = map.remove(&id) {
                    drop(map);
                    self.open.fetch_sub(1, Ordering::Relaxed);
                    s.inflight.cancel_all();
                }
                Ok(())
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Ends every session (server shutdown): their calls are cancelled, parked streams dropped.
    pub(crate) fn clear(&self) {
        for shard in &self.shards {
            let all = std::mem::take(&mut *write(shard));
            self.open.fetch_sub(all.len(), Ordering::Relaxed);
            for s in all.values() {
                s.inflight.cancel_all();
                s.parked().clear();
            }
        }
    }

    /// Drops sessions idle for longer than the idle limit (counted in
    /// [`expired`](Self::expired)), and streams parked for too long; returns how many sessions.
    pub(crate) fn reap(&self) -> usize {
        let cutoff = self.now_ms().saturating_sub(self.idle.as_millis() as u64);
        let idle = |s: &Session| s.last_seen_ms.load(Ordering::Relaxed) < cutoff;
        let mut ended = 0;
        let mut stale = Vec::new();
        for shard in &self.shards {
            stale.clear();
            for (id, s) in read(shard).iter() {
                if idle(s) {
                    stale.push(*id);
                } else {
                    s.expire_parked();
                }
            }
            if stale.is_empty() {
                continue;
            }
            let mut map = write(shard);
            // Named again since the scan: kept.
            let gone: Vec<Arc<Session>> = stale
                .iter()
                .filter_map(|id| match map.get(id) {
                    Some(s) if idle(s) => map.remove(id),
                    _ => None,
                })
                .collect();
            drop(map);
            self.open.fetch_sub(gone.len(), Ordering::Relaxed);
            for s in &gone {
                s.inflight.cancel_all();
                s.parked().clear();
            }
            ended += gone.len();
        }
        self.expired.fetch_add(ended as u64, Ordering::Relaxed);
        ended
    }
}

fn read(shard: &Shard) -> std::sync::RwLockReadGuard<'_, Table> {
    shard.read().unwrap_or_else(|e| e.into_inner())
}

fn write(shard: &Shard) -> std::sync::RwLockWriteGuard<'_, Table> {
    shard.write().unwrap_or_else(|e| e.into_inner())
}

/// A place for a new session of `tenant` under its cap (every transport asks before opening
/// one), or the `429` to answer, audited. Without a policy there is no cap.
pub(crate) fn seat(
    state: &State,
    tenant: Option<u16>,
) -> Result<Option<Seat>, Box<Response<Body>>> {
    let (Some(policy), Some(t)) = (&state.config.policy, tenant) else {
        return Ok(None);
    };
    let AtCap { max } = match policy.seat(t, state.config.max_sessions) {
        Ok(seat) => return Ok(Some(seat)),
        Err(at) => at,
    };
    let message = format!(
        "Too Many Requests: this tenant has {max} sessions open, its cap; end one (DELETE) or retry later"
    );
    if let Some(a) = &state.config.audit {
        a.error("session_cap", state.tenant_name(tenant), &message);
    }
    let body = error_body(None, code::INVALID_REQUEST, &message);
    Err(Box::new(too_many(body, state.sessions.reap_every())))
}

/// Audits a request that named `session` of another tenant (it was answered as unknown):
/// who asked, whose session it is, its number, and what was tried.
pub(crate) fn audit_foreign(state: &State, tenant: Option<u16>, session: &Session, request: &str) {
    if let Some(a) = &state.config.audit {
        let number = state.session_number(Some(&session.peer(session.tenant)));
        let owner = state.tenant_name(session.tenant);
        a.foreign_session(state.tenant_name(tenant), owner, number, request);
    }
}

/// A session id: exactly 32 hex digits (either case). Decoded by hand: every request in a
/// session does this, and `from_str_radix` costs ~5 times as many instructions (it also takes a
/// leading `+`, which no id this server makes has).
fn parse_id(header: &[u8]) -> Option<u128> {
    if header.len() != 32 {
        return None;
    }
    header.iter().try_fold(0u128, |id, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        Some(id << 4 | u128::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_exactly_32_hex_digits() {
        let id = "0123456789abcdef0123456789ABCDEF";
        assert_eq!(parse_id(id.as_bytes()), u128::from_str_radix(id, 16).ok());
        assert_eq!(parse_id(&[b'f'; 32]), Some(u128::MAX));
        for bad in [
            "+123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            " 123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(parse_id(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn create_get_remove_reap_and_cap() {
        let s = Sessions::new(2, Duration::ZERO, 8);
        let a = s.create(Revision::V2025_11_25, Some(0), None).unwrap();
        let id = a.header_value();
        assert_eq!(id.len(), 32);
        assert_eq!(s.get(id.as_bytes(), Some(0)).unwrap().id, a.id);
        assert!(matches!(s.get(b"nope", Some(0)), Err(Lookup::Unknown)));
        s.create(Revision::V2025_06_18, None, None).unwrap();
        assert_eq!(
            s.create(Revision::V2025_06_18, None, None).unwrap_err(),
            Full
        );
        // Another tenant (or none) neither finds nor ends it.
        for other in [Some(1), None] {
            assert!(matches!(
                s.get(id.as_bytes(), other),
                Err(Lookup::Foreign(_))
            ));
            assert!(matches!(
                s.remove(id.as_bytes(), other),
                Err(Lookup::Foreign(_))
            ));
        }
        assert!(s.remove(id.as_bytes(), Some(0)).is_ok());
        assert!(matches!(
            s.remove(id.as_bytes(), Some(0)),
            Err(Lookup::Unknown)
        ));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.reap(), 1);
        assert_eq!(s.len(), 0);
        assert_eq!(
            s.expired(),
            1,
            "a reaped session is counted, a deleted one is not"
        );
    }

    #[tokio::test]
    async fn parked_streams_resume_once_from_their_last_event() {
        let s = Sessions::new(4, Duration::from_secs(60), 8);
        let a = s.create(Revision::V2025_11_25, None, None).unwrap();
        let mut ids = a.event_ids().unwrap();
        let mut priming = Vec::new();
        ids.priming(&mut priming);
        let (_tx, rx) = tokio::sync::mpsc::channel(1);
        a.park(SseStream::new(rx).ids(Some(ids)));
        let n = ids.stream();
        assert_eq!(a.resume(n + 1, 0).unwrap_err(), ResumeError::Unknown);
        assert_eq!(a.resume(n, 1).unwrap_err(), ResumeError::Gap);
        assert_eq!(a.resume(n, 0).unwrap().last_event(), Some((n, 0)));
        assert_eq!(
            a.resume(n, 0).unwrap_err(),
            ResumeError::Unknown,
            "only once"
        );
        // Another session of the same client resumes none of this one's streams.
        let b = s.create(Revision::V2025_11_25, None, None).unwrap();
        a.park(SseStream::new(tokio::sync::mpsc::channel(1).1).ids(Some(ids)));
        assert_eq!(b.resume(n, 0).unwrap_err(), ResumeError::Unknown);
        // Stream numbers are random: a thousand streams, a thousand numbers, not a run.
        let mut numbers: Vec<u64> = (0..1000).map(|_| a.event_ids().unwrap().stream()).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), 1000);
        assert!(numbers[999] - numbers[0] > 1 << 60, "spread over 64 bits");
        s.clear();
        assert!(
            s.len() == 0 && a.parked().is_empty(),
            "shutdown drops parked streams"
        );
    }
}
