//! The handshake: a session opened within the endpoint's timeout (initialize, or
//! `server/discover` for 2026-07-28; `auto` probes the newest and falls back), what the server
//! offers ([`Preflight`]), and why none opened (`failure`, `unreachable`).

use std::sync::Arc;

use serde_json::Value;

use super::failure::{PreflightError, refusal};
use super::listing::list_tools;
use super::sessions::{OnSession, on_session};
use super::unreachable;
use crate::metrics::outcome::Outcome;
use crate::protocol::version::ProtocolChoice;
use crate::protocol::version::Revision;
use crate::transport::{Endpoint, Session};

/// What the preflight learned.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub revision: Revision,
    /// Tools the target lists (all pages): name and definition (`inputSchema`, `outputSchema`,
    /// annotations… as the target wrote them).
    pub tools: Vec<(String, Value)>,
}

/// Opens a session as the plan says (`protocol = "auto"`: probe `server/discover`, then fall
/// back to `initialize` with the newest handshake revision, unless the target could not be
/// reached at all), lists the tools, closes. The endpoint is updated to the revision found.
pub fn connect(
    rt: &tokio::runtime::Runtime,
    choice: ProtocolChoice,
    endpoint: &mut Endpoint,
) -> Result<Preflight, PreflightError> {
    let on = |ep: Endpoint| tokio::task::LocalSet::new().block_on(rt, run(Arc::new(ep)));
    let pre = match (choice, on(endpoint.clone())) {
        (_, Ok(p)) => p,
        (ProtocolChoice::Auto, Err(PreflightError::Open { why: modern, .. })) => {
            endpoint.protocol = Revision::LATEST_HANDSHAKE;
            on(endpoint.clone()).map_err(|legacy| match legacy {
                // Both answered alike: said once.
                PreflightError::Open { why, hint } if why != modern => PreflightError::Open {
                    why: format!("2026-07-28 probe: {modern}; initialize: {why}"),
                    hint,
                },
                other => other,
            })?
        }
        (_, Err(e)) => return Err(e),
    };
    if !pre.revision.has_handshake() {
        endpoint.protocol = pre.revision;
    }
    Ok(pre)
}

/// Opens a session on the endpoint's transport, lists the tools, closes.
pub async fn run(ep: Arc<Endpoint>) -> Result<Preflight, PreflightError> {
    on_session(ep, ListTools).await
}

/// Opens the session within the endpoint's timeout; the revision it speaks.
pub async fn open<S: Session>(s: &mut S, ep: &Endpoint) -> Result<Revision, PreflightError> {
    let outcome = match tokio::time::timeout(ep.timeout, s.open()).await {
        Err(_) => Outcome::Timeout,
        Ok(r) if r.outcome == Outcome::Ok && s.is_open() => {
            return Ok(s.revision().unwrap_or(ep.protocol));
        }
        Ok(r) => r.outcome,
    };
    Err(why_not_open(s, ep, outcome).await)
}

/// Why no session opened, by the actual failure: the command or the connection's own
/// error, else what the server answered.
async fn why_not_open<S: Session>(s: &S, ep: &Endpoint, outcome: Outcome) -> PreflightError {
    let found = match &ep.command {
        Some(spec) => unreachable::stdio(spec, outcome, s.aside().await, ep.timeout),
        None if matches!(outcome, Outcome::Connect | Outcome::Timeout) => {
            unreachable::network(ep, outcome).await
        }
        None => None,
    };
    found.unwrap_or_else(|| refusal(outcome, s.last_message(), s.content_type().as_deref(), ep))
}

struct ListTools;

impl OnSession for ListTools {
    type Output = Result<Preflight, PreflightError>;
    async fn on<S: Session>(self, mut s: S, ep: &Endpoint) -> Self::Output {
        let revision = open(&mut s, ep).await?;
        let tools = list_tools(&mut s, revision, ep.timeout).await;
        s.close().await;
        Ok(Preflight {
            revision,
            tools: tools?,
        })
    }
}
