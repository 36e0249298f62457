//! What a received JSON-RPC message is (`Incoming`, its `IdRef`) or why it is none
//! (`DecodeError`): the types every codec returns, below both `jsonrpc` (the codec choice and
//! the serde codecs) and `scan` (the default codec).

use std::borrow::Cow;

/// A JSON-RPC id as received. Requests we send always carry non-negative integer ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdRef<'a> {
    Num(i128),
    Str(Cow<'a, str>),
    Null,
    /// A float, object or array: never a valid id.
    Invalid,
}

impl IdRef<'_> {
    /// True when this id is exactly the integer `expected`.
    pub fn is(&self, expected: u64) -> bool {
        matches!(self, IdRef::Num(n) if *n == expected as i128)
    }
}

/// What a received message is.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A response carrying `result`.
    Result {
        id: IdRef<'a>,
        /// `isError: true` in a tool result (a tool failure, not a protocol failure).
        is_error: bool,
        /// `resultType` (2026-07-28); `None` means complete.
        result_type: Option<Cow<'a, str>>,
    },
    /// A response carrying `error`; the id may be missing or null when the peer could not read
    /// the request's id.
    Error { id: IdRef<'a>, code: i64 },
    /// A request from the peer (it expects an answer).
    Request { id: IdRef<'a>, method: Cow<'a, str> },
    /// A notification (no id).
    Notification { method: Cow<'a, str> },
}

/// The bytes were not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not valid JSON")]
    Json,
    #[error("a JSON-RPC batch (array), which this revision does not allow")]
    Batch,
    #[error("not a JSON-RPC message: neither result, error nor method")]
    Shape,
}
