//! What a handshake-era session knows about its client beyond the revision: the capabilities it
//! declared in `initialize`, the log level it asked for (`logging/setLevel`), and the resources
//! it subscribed to; and the session's number in audit lines and recorded traces. Held by value
//! in every session (HTTP and connection-based), so keeping it costs no allocation; only the
//! conformance fixtures read or write the rest.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;
use serde_json::value::RawValue;

/// Client capabilities the server may rely on (declared in `initialize`, or per request in
/// 2026-07-28 `_meta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ClientCaps(u8);

impl ClientCaps {
    pub(crate) const SAMPLING: ClientCaps = ClientCaps(1);
    pub(crate) const ELICITATION: ClientCaps = ClientCaps(2);
    pub(crate) const ROOTS: ClientCaps = ClientCaps(4);

    pub(crate) fn contains(self, other: ClientCaps) -> bool {
        self.0 & other.0 == other.0
    }

    /// Reads a `capabilities` object (raw JSON); anything that is not an object declares nothing.
    pub(crate) fn parse(raw: &str) -> ClientCaps {
        #[derive(Deserialize)]
        struct Caps<'a> {
            #[serde(borrow, default)]
            sampling: Option<&'a RawValue>,
            #[serde(borrow, default)]
            elicitation: Option<&'a RawValue>,
            #[serde(borrow, default)]
            roots: Option<&'a RawValue>,
        }
        // (serde would also read a struct from an array)
        if !raw.trim_start().starts_with('{') {
            return ClientCaps::default();
        }
        let Ok(c) = serde_json::from_str::<Caps<'_>>(raw) else {
            return ClientCaps::default();
        };
        let declared = |v: Option<&RawValue>, bit: ClientCaps| {
            // `"sampling": null` is not a declaration.
            if v.is_some_and(|v| v.get() != "null") {
                bit.0
            } else {
                0
            }
        };
        ClientCaps(
            declared(c.sampling, Self::SAMPLING)
                | declared(c.elicitation, Self::ELICITATION)
                | declared(c.roots, Self::ROOTS),
        )
    }
}

/// Log levels (RFC 5424 severities, as MCP names them), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<LogLevel> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// See the module doc.
#[derive(Debug)]
pub(crate) struct ClientState {
    caps: AtomicU8,
    /// The least severe level the client wants (`LogLevel as u8`); debug until it says.
    log_level: AtomicU8,
    subscriptions: Mutex<HashSet<String>>,
    /// The session's number, given when an audit line or a trace first names it.
    number: OnceLock<u64>,
}

impl Default for ClientState {
    fn default() -> Self {
        ClientState {
            caps: AtomicU8::new(0),
            log_level: AtomicU8::new(LogLevel::Debug as u8),
            subscriptions: Mutex::new(HashSet::new()),
            number: OnceLock::new(),
        }
    }
}

impl ClientState {
    /// The session's number: `next()` the first time (once, even when asked concurrently).
    pub(crate) fn number(&self, next: impl FnOnce() -> u64) -> u64 {
        *self.number.get_or_init(next)
    }

    pub(crate) fn set_caps(&self, caps: ClientCaps) {
        self.caps.store(caps.0, Ordering::Relaxed);
    }

    pub(crate) fn caps(&self) -> ClientCaps {
        ClientCaps(self.caps.load(Ordering::Relaxed))
    }

    pub(crate) fn set_log_level(&self, level: LogLevel) {
        self.log_level.store(level as u8, Ordering::Relaxed);
    }

    pub(crate) fn log_level(&self) -> LogLevel {
        let n = self.log_level.load(Ordering::Relaxed) as usize;
        LogLevel::ALL.get(n).copied().unwrap_or(LogLevel::Debug)
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a subscription (`resources/subscribe`).
    pub(crate) fn subscribe(&self, uri: &str) {
        self.subscriptions().insert(uri.to_string());
    }

    /// Forgets a subscription; false if there was none.
    pub(crate) fn unsubscribe(&self, uri: &str) -> bool {
        self.subscriptions().remove(uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_levels_and_subscriptions() {
        let c = ClientCaps::parse(r#"{"sampling":{},"elicitation":{"form":{}},"roots":null}"#);
        assert!(c.contains(ClientCaps::SAMPLING) && c.contains(ClientCaps::ELICITATION));
        assert!(!c.contains(ClientCaps::ROOTS));
        assert_eq!(ClientCaps::parse("[1]"), ClientCaps::default());
        assert_eq!(LogLevel::parse("warning"), Some(LogLevel::Warning));
        assert!(LogLevel::parse("loud").is_none());
        assert!(LogLevel::Info < LogLevel::Error);
        let s = ClientState::default();
        assert_eq!(s.log_level(), LogLevel::Debug);
        s.set_log_level(LogLevel::Alert);
        assert_eq!(s.log_level(), LogLevel::Alert);
        s.set_caps(c);
        assert_eq!(s.caps(), c);
        s.subscribe("test://x");
        assert!(s.unsubscribe("test://x") && !s.unsubscribe("test://x"));
    }
}
