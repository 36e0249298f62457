//! What a running request can reach besides its response: the sink its notifications go to,
//! its session's in-flight table (through which server requests get their answers) and what
//! the session knows of its client.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::cancel::InFlight;
use super::peer::ClientState;
use crate::protocol::version::Revision;

/// Where a request's notifications go: the transport frames and writes each message (compact
/// JSON, no newline) before the response it later receives on the same path.
pub(crate) type Sink = mpsc::Sender<Bytes>;

/// Where a running call's output goes besides its response.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Io<'a> {
    /// Notifications (and server requests) before the response.
    pub sink: Option<&'a Sink>,
    /// The session's in-flight table, through which server requests get their answers.
    pub session: Option<&'a Arc<InFlight>>,
    /// The sink is an SSE stream that can be parked and resumed (SEP-1699).
    pub resumable: bool,
}

impl<'a> Io<'a> {
    /// Output to `sink` only.
    pub(crate) fn sink(sink: &'a Sink) -> Self {
        Io {
            sink: Some(sink),
            ..Io::default()
        }
    }
}

/// The per-session state that notifications and batches touch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer<'a> {
    pub rev: Revision,
    pub initialized: &'a AtomicBool,
    pub inflight: &'a Arc<InFlight>,
    pub client: &'a ClientState,
    /// The tenant of the request (under a policy): the connection's, or on Streamable HTTP
    /// the one its own credentials name.
    pub tenant: Option<u16>,
}
