//! Requests multiplexed on one connection (stdio, WebSocket, legacy HTTP+SSE), matched by id.
//!
//! Everything here lives on one worker thread (`Rc`, `Cell`, `RefCell`): completing a request
//! is a slot write and a waker wake — no lock, no channel message. Writes are combined: the
//! first caller to find the writer idle writes everything pending (its own message and any
//! appended meanwhile by others), so an uncontended write costs one syscall and no task hop.
//! A reader task per connection reads incoming messages and routes responses to their slots,
//! progress notifications to the request that asked for them, and answers server requests.
//! Request ids (and so progress tokens) start at a random value per connection, so traffic a
//! gateway wrongly copies from other sessions matches nothing here.
//!
//! Here the parts: the in-flight table and a request's life in it (`in_flight`), the combining
//! writer and its framers (`combining_writer`), the connection and the session on it
//! (`mux_session`).

mod combining_writer;
mod in_flight;
mod mux_session;

pub use combining_writer::{Framer, Lines, Outbound, Writer};
pub use in_flight::{Mux, call, exchange};
pub use mux_session::{Connector, MuxConn, MuxSession, OpenLatch, Shared, SharedSlot};
