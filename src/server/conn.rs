//! One MCP session over an ordered stream of messages: stdio, a WebSocket, or a legacy
//! HTTP+SSE session. The transport hands each received frame to [`Conn::receive`] and writes
//! what comes back, plus everything sent on the connection's [`Sink`] (responses of calls that
//! ran on their own task, and progress notifications), through a single writer.
//!
//! Lifecycle is the handshake era's (`initialize` first, `ping` allowed before it); a request
//! whose `_meta` carries `io.modelcontextprotocol/protocolVersion` is handled statelessly as
//! 2026-07-28 instead, whatever the connection negotiated. `tools/call` runs on a task of its
//! own, registered so `notifications/cancelled` can stop it; everything else is answered at
//! once, in order.
//!
//! A connection has at most `Config::max_in_flight` calls at once, each counted from the
//! frame until its response is queued for the writer: a client that stops reading its output
//! cannot pile up finished calls waiting for room either. The one beyond gets `-32029`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::State;
use super::cancel::InFlight;
use super::context::{Io, Peer, Sink};
use super::dispatch::{Pending, on_notification, on_response, too_many_in_flight};
use super::peer::ClientState;
use super::wire::{
    Kind, MODERN, Params, check_modern, error_body, is_batch, parse, rejection_body, write_array,
};
use crate::protocol::jsonrpc::code;
use crate::protocol::version::Revision;

/// What to do with a received frame.
#[derive(Debug)]
pub(crate) enum Received {
    /// Nothing to write now (a notification, or a call running on its own task).
    Nothing,
    /// Write this response.
    Reply(Bytes),
    /// The frame is not a JSON-RPC message this server can handle: write this error response
    /// (an HTTP transport may answer 400 with it instead).
    Invalid(Bytes),
}

/// The session of one connection.
#[derive(Debug)]
pub(crate) struct Conn {
    state: Arc<State>,
    out: Sink,
    revision: OnceLock<Revision>,
    initialized: AtomicBool,
    inflight: Arc<InFlight>,
    client: ClientState,
    /// The tenant the connection authenticated as (under a policy).
    tenant: Option<u16>,
    /// Calls admitted and not yet answered (see the module doc).
    calls: AtomicUsize,
}

/// Calls of a connection counted until dropped (their responses queued).
struct Admitted {
    conn: Arc<Conn>,
    n: usize,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.conn.calls.fetch_sub(self.n, Ordering::Relaxed);
    }
}

impl Conn {
    /// A session of `tenant` whose asynchronous output goes to `out`.
    pub(crate) fn new(state: Arc<State>, out: Sink, tenant: Option<u16>) -> Arc<Self> {
        Arc::new(Conn {
            state,
            out,
            revision: OnceLock::new(),
            initialized: AtomicBool::new(false),
            // The connection counts its calls itself, through to their responses (admit).
            inflight: InFlight::new(usize::MAX),
            client: ClientState::default(),
            tenant,
            calls: AtomicUsize::new(0),
        })
    }

    /// Counts `n` more calls, unless that would take the connection past its limit.
    fn admit(self: &Arc<Self>, n: usize) -> Option<Admitted> {
        let max = self.state.config.max_in_flight;
        if self.calls.fetch_add(n, Ordering::Relaxed) + n > max {
            self.calls.fetch_sub(n, Ordering::Relaxed);
            return None;
        }
        Some(Admitted {
            conn: self.clone(),
            n,
        })
    }

    /// The tenant the connection authenticated as.
    pub(crate) fn tenant(&self) -> Option<u16> {
        self.tenant
    }

    /// The session's number in audit lines and traces.
    pub(crate) fn number(&self) -> u64 {
        let rev = self.revision().unwrap_or(Revision::V2024_11_05);
        self.state.session_number(Some(&self.peer(rev)))
    }

    /// The writer's channel.
    pub(crate) fn sink(&self) -> &Sink {
        &self.out
    }

    /// The revision `initialize` negotiated.
    pub(crate) fn revision(&self) -> Option<Revision> {
        self.revision.get().copied()
    }

    /// The session's cancellable calls (cancel them all when the output is gone).
    pub(crate) fn inflight(&self) -> &Arc<InFlight> {
        &self.inflight
    }

    /// Calls running on their own tasks.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Completes once no call is running.
    pub(crate) async fn idle(&self) {
        self.inflight.idle().await;
    }

    /// The connection is gone: stop every call (their responses would have nowhere to go).
    pub(crate) fn close(&self) {
        self.inflight.cancel_all();
    }

    fn peer(&self, rev: Revision) -> Peer<'_> {
        Peer {
            rev,
            initialized: &self.initialized,
            inflight: &self.inflight,
            client: &self.client,
            tenant: self.tenant,
        }
    }

    /// Handles one frame (a line, a text frame, a POST body).
    pub(crate) fn receive(self: &Arc<Self>, frame: Bytes) -> Received {
        if is_batch(&frame) {
            return self.batch(frame);
        }
        let msg = match parse(&frame) {
            Ok(m) => m,
            Err(r) => return Received::Invalid(rejection_body(&r).into()),
        };
        let kind = match msg.kind() {
            Ok(k) => k,
            Err(r) => return Received::Invalid(rejection_body(&r).into()),
        };
        let method = msg.method.as_deref().unwrap_or_default();
        let params = Params::parse(msg.params);
        let id = match kind {
            Kind::Response => {
                let rev = self.revision().unwrap_or(Revision::LATEST_HANDSHAKE);
                on_response(&self.peer(rev), &msg, &frame);
                return Received::Nothing;
            }
            Kind::Notification => {
                let rev = self.revision().unwrap_or(Revision::LATEST_HANDSHAKE);
                on_notification(&self.peer(rev), method, params.as_ref());
                return Received::Nothing;
            }
            Kind::Request { id } => id,
        };
        let reply = |b: Vec<u8>| Received::Reply(b.into());
        let modern =
            method != "initialize" && params.as_ref().and_then(Params::modern_version).is_some();
        let rev = if modern {
            if let Err(r) = check_modern(params.as_ref()) {
                return reply(r.body(Some(id)));
            }
            MODERN
        } else if method == "initialize" {
            if self.revision.get().is_some() {
                return reply(error_body(
                    Some(id),
                    code::INVALID_REQUEST,
                    "Invalid Request: the session is already initialized",
                ));
            }
            let (rev, out) = self.state.initialize(id, msg.params);
            if let Some((rev, caps)) = rev {
                // A concurrent initialize cannot happen: frames are handled in order.
                let _ = self.revision.set(rev);
                self.client.set_caps(caps);
            }
            return reply(out);
        } else {
            match self.revision() {
                Some(rev) => rev,
                None if method == "ping" => Revision::LATEST_HANDSHAKE,
                None => {
                    return reply(error_body(
                        Some(id),
                        code::INVALID_REQUEST,
                        "Invalid Request: send initialize first (or a 2026-07-28 request with _meta)",
                    ));
                }
            }
        };
        match self
            .state
            .prepare(&self.peer(rev), rev, &frame, id, method, params.as_ref())
        {
            Pending::Ready(out) | Pending::Limited(out, _) => reply(out),
            call => match self.admit(1) {
                Some(admitted) => {
                    spawn(admitted, vec![call], false);
                    Received::Nothing
                }
                None => reply(too_many_in_flight(id, self.state.config.max_in_flight)),
            },
        }
    }

    /// A JSON-RPC batch: only in a 2025-03-26 session; one array of responses.
    fn batch(self: &Arc<Self>, frame: Bytes) -> Received {
        let Some(rev) = self.revision() else {
            return Received::Invalid(
                error_body(
                    None,
                    code::INVALID_REQUEST,
                    "Invalid Request: JSON-RPC batches are only accepted in 2025-03-26 sessions",
                )
                .into(),
            );
        };
        let mut items = match self.state.prepare_batch(&self.peer(rev), &frame) {
            Ok(items) => items,
            Err(r) => return Received::Invalid(rejection_body(&r).into()),
        };
        if items.is_empty() {
            return Received::Nothing;
        }
        let calls = items
            .iter()
            .filter(|p| matches!(p, Pending::Call { .. }))
            .count();
        if calls > 0 {
            match self.admit(calls) {
                Some(admitted) => {
                    spawn(admitted, items, true);
                    return Received::Nothing;
                }
                None => {
                    // Over the limit: each call of the batch is refused in its place.
                    let max = self.state.config.max_in_flight;
                    for p in &mut items {
                        if let Pending::Call { id, .. } = p {
                            let id = std::str::from_utf8(id).unwrap_or("null");
                            *p = Pending::Ready(too_many_in_flight(id, max));
                        }
                    }
                }
            }
        }
        let ready: Vec<Vec<u8>> = items
            .into_iter()
            .filter_map(|p| match p {
                Pending::Ready(b) | Pending::Limited(b, _) => Some(b),
                Pending::Call { .. } => None,
            })
            .collect();
        Received::Reply(write_array(&ready).into())
    }
}

/// Runs prepared calls of a connection on a task; their output goes to the writer. The calls
/// stay counted until it has taken their response.
fn spawn(admitted: Admitted, items: Vec<Pending>, array: bool) {
    tokio::spawn(async move {
        let conn = &admitted.conn;
        let _busy = conn.state.busy();
        let responses = conn.state.finish_batch(items, Io::sink(&conn.out)).await;
        let out = match (array, responses.len()) {
            (_, 0) => return,
            (false, _) => responses.into_iter().next().unwrap_or_default(),
            (true, _) => write_array(&responses),
        };
        let _ = conn.out.send(Bytes::from(out)).await;
    });
}
