//! Sessions over every transport: the one `match` from an endpoint's transport kind to the
//! session type that speaks it, for one session ([`on_session`]) or for many made by a factory
//! ([`with_sessions`]: each its own, or sharing one connection); and the opening of a session
//! that several users share ([`claim_or_wait`]).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::recorder::TransportCounts;
use crate::transport::legacy_sse_client::SseConnector;
use crate::transport::mux::{Connector, MuxSession, Shared};
use crate::transport::stdio_client::StdioConnector;
use crate::transport::streamable_http::{H2Lanes, HttpSession, HttpShared};
use crate::transport::ws_client::WsConnector;
use crate::transport::{Endpoint, Session, TransportKind};

/// Work done on one session of whatever transport the endpoint uses.
// Sessions live on one thread (current-thread runtimes): no `Send` bound is wanted.
#[allow(async_fn_in_trait)]
pub trait OnSession {
    type Output;
    async fn on<S: Session>(self, s: S, ep: &Endpoint) -> Self::Output;
}

/// Runs `task` on a new session of the endpoint's transport (responses kept, so the task can
/// read them).
pub async fn on_session<T: OnSession>(ep: Arc<Endpoint>, task: T) -> T::Output {
    match ep.kind {
        TransportKind::StreamableHttp => task.on(HttpSession::new(ep.clone()), &ep).await,
        TransportKind::Stdio => {
            task.on(keeping(MuxSession::<StdioConnector>::new(ep.clone())), &ep)
                .await
        }
        TransportKind::WebSocket => {
            task.on(keeping(MuxSession::<WsConnector>::new(ep.clone())), &ep)
                .await
        }
        TransportKind::LegacySse => {
            task.on(keeping(MuxSession::<SseConnector>::new(ep.clone())), &ep)
                .await
        }
    }
}

fn keeping<C: Connector>(mut s: MuxSession<C>) -> MuxSession<C> {
    s.keep_responses();
    s
}

/// Work over many sessions of one endpoint's transport, generic over the session type.
#[allow(async_fn_in_trait)]
pub trait WithSessions {
    type Output;
    /// `make` makes a session for an endpoint (the factory's, or one with a user's headers
    /// added): a session of its own, or a handle on the shared connection.
    async fn with<S, F>(self, make: F) -> Self::Output
    where
        S: Session + 'static,
        F: Fn(Arc<Endpoint>) -> S + 'static;
}

/// How the sessions a factory makes share connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Each session its own (connection, process).
    Own,
    /// One session for all `users` (one MCP session, one connection or process).
    Shared { users: usize },
    /// Multiplexed transports (stdio, WebSocket, HTTP+SSE) share one connection among `users`
    /// sessions; Streamable HTTP sessions stay each their own.
    Multiplexed { users: usize },
}

/// Shuts a shared connection down within a grace; its last counters.
type Shutdown = Box<dyn FnOnce(Duration) -> Pin<Box<dyn Future<Output = Option<TransportCounts>>>>>;

/// What a factory leaves open after its work: the shared connection of a multiplexed
/// transport, to shut down (within a grace) for its last counters.
pub struct SharedLink(Option<Shutdown>);

impl SharedLink {
    /// Shuts the shared connection down (if there is one) within `grace`; what arrived on it
    /// after the last session took the counters.
    pub async fn shutdown(self, grace: Duration) -> Option<TransportCounts> {
        match self.0 {
            Some(f) => f(grace).await,
            None => None,
        }
    }
}

/// Runs `task` with a factory of sessions of the endpoint's transport; `keep_responses`: the
/// sessions keep each answer for the caller to read (`last_message`).
pub async fn with_sessions<T: WithSessions>(
    ep: &Arc<Endpoint>,
    sharing: Sharing,
    keep_responses: bool,
    task: T,
) -> (T::Output, SharedLink) {
    match ep.kind {
        TransportKind::StreamableHttp => {
            let out = task.with(http_sessions(ep, &sharing)).await;
            (out, SharedLink(None))
        }
        TransportKind::Stdio => {
            multiplexed::<StdioConnector, T>(ep, sharing, keep_responses, task).await
        }
        TransportKind::WebSocket => {
            multiplexed::<WsConnector, T>(ep, sharing, keep_responses, task).await
        }
        TransportKind::LegacySse => {
            multiplexed::<SseConnector, T>(ep, sharing, keep_responses, task).await
        }
    }
}

/// A factory of sessions over Streamable HTTP: each user's own, or one shared; over HTTP/2,
/// connections carrying `sessions_per_connection` sessions each.
pub fn http_sessions(
    ep: &Arc<Endpoint>,
    sharing: &Sharing,
) -> impl Fn(Arc<Endpoint>) -> HttpSession + 'static {
    let lanes = (ep.http2 && ep.sessions_per_connection > 1)
        .then(|| H2Lanes::new(ep.sessions_per_connection));
    let shared = matches!(sharing, Sharing::Shared { .. })
        .then(|| (ep.clone(), Rc::new(HttpShared::default())));
    move |ep| {
        let s = match &shared {
            Some((e, sh)) => HttpSession::shared(e.clone(), sh.clone()),
            None => HttpSession::new(ep),
        };
        match &lanes {
            Some(l) => s.on_lane(l.next()),
            None => s,
        }
    }
}

/// Sessions over a multiplexed transport: own connections, or one shared.
async fn multiplexed<C: Connector + 'static, T: WithSessions>(
    ep: &Arc<Endpoint>,
    sharing: Sharing,
    keep: bool,
    task: T,
) -> (T::Output, SharedLink) {
    let kept = move |mut s: MuxSession<C>| {
        if keep {
            s.keep_responses();
        }
        s
    };
    let users = match sharing {
        Sharing::Own => {
            return (
                task.with(move |ep| kept(MuxSession::<C>::new(ep))).await,
                SharedLink(None),
            );
        }
        Sharing::Shared { users } | Sharing::Multiplexed { users } => users,
    };
    let slot = Rc::new(Shared::<C::Out>::default());
    let (s, e) = (slot.clone(), ep.clone());
    let out = task
        .with(move |_| kept(MuxSession::<C>::shared(e.clone(), s.clone(), users)))
        .await;
    let link = SharedLink(Some(Box::new(move |grace| {
        Box::pin(async move {
            let conn = slot.take()?;
            C::shutdown(conn.clone(), grace).await;
            Some(conn.mux.take_stats())
        })
    })));
    (out, link)
}

/// Who opens a session that is not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// This caller: it opens the session now.
    Mine,
    /// Another user of the shared connection opened it (or failed to); this one waited.
    Waited,
}

/// A shared connection is opened by one caller; the others wait for it.
pub async fn claim_or_wait<S: Session>(s: &mut S) -> Opening {
    if s.claim_open() {
        Opening::Mine
    } else {
        s.wait_open().await;
        Opening::Waited
    }
}
