//! The MCP client every part uses: an [`Endpoint`](crate::transport::Endpoint) built one way
//! from a target (endpoint), a session over every transport (sessions: the one `match` on the
//! transport kind), the handshake (initialize or discover), what went wrong in a person's words
//! (failure) and why a target could not be reached (unreachable), `tools/list` walked to the
//! end (listing), the bytes of a workload call (request),
//! and a workload held to what a server lists (workload_fit).
//!
//! The driver's preflight and virtual users, the gateway's upstream pools, `probe`, `init` and
//! `record` all open sessions through here; none of them reaches into the driver for it.

pub mod endpoint;
pub mod failure;
pub mod handshake;
pub mod listing;
pub mod request;
pub mod sessions;
pub mod unreachable;
pub mod workload_fit;

pub use endpoint::{ClientError, MAX_BODY, net_target};
pub use failure::{PreflightError, describe, failure_text, refusal, unexpected_type};
pub use handshake::{Preflight, connect};
pub use listing::list_tools;
pub use sessions::{OnSession, Opening, claim_or_wait, on_session};

/// A current-thread runtime for a client's one-off work (a preflight, a probe, `init`).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
}
