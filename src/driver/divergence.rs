//! Divergence: the same deterministic call answered differently. A workload entry with
//! `deterministic = true` keeps the first answer (its digest, [`crate::trace::digest`]) to each
//! distinct set of arguments, whoever got it, and every later answer is held to it — across
//! sessions, virtual users, workers, and the targets of an A/B run (one `Seen` for all their
//! slices: a gateway must not alter results). A replayed trace's entries are held to their
//! recorded answers instead.
//!
//! Opt-in like `expect`: a checked answer is parsed once more and the table is behind a lock,
//! touched once per checked request. The table holds at most [`MAX_KEYS`] argument sets (the
//! first ones seen); later ones are not checked, so memory stays bounded however long the run.

use std::collections::HashMap;
use std::sync::Mutex;

/// The most distinct (entry, arguments) pairs remembered.
pub const MAX_KEYS: usize = 4096;

/// Who got an answer: shown in the example of a divergence.
#[derive(Debug, Clone)]
pub struct Who {
    /// The A/B target, if the run is a slice of one.
    pub target: Option<String>,
    pub vu: usize,
    /// The session, as a digest of its id, where the transport has one.
    pub session: Option<String>,
}

impl std::fmt::Display for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = &self.target {
            write!(f, "target {t}, ")?;
        }
        write!(f, "virtual user {}", self.vu)?;
        if let Some(s) = &self.session {
            write!(f, ", session {s}")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct First {
    digest: String,
    who: Who,
    /// The start of the answer (redacted by the caller), for the example.
    excerpt: String,
}

/// The first answer to each deterministic call, shared by the workers of a run (and by the
/// slices of an A/B comparison).
#[derive(Debug, Default)]
pub struct Seen {
    first: Mutex<HashMap<(String, u64), First>>,
}

/// How much of an answer an example shows.
const EXCERPT: usize = 160;

/// The first `EXCERPT` bytes of a message, cut at a character boundary.
pub fn excerpt(message: &[u8]) -> String {
    let s = String::from_utf8_lossy(message);
    match s.char_indices().nth(EXCERPT) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.into_owned(),
    }
}

impl Seen {
    /// Holds an answer (`digest`) of operation `op` with arguments `args` (a hash of their
    /// bytes) to the first one seen; `Err` describes a divergence. `excerpt` renders the
    /// answer for the example (called only when needed; it must not hold secrets).
    pub fn check(
        &self,
        op: &str,
        args: u64,
        digest: &str,
        who: Who,
        excerpt: impl FnOnce() -> String,
    ) -> Result<(), String> {
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        let n = first.len();
        let key = (op.to_string(), args);
        match first.get(&key) {
            Some(f) if f.digest == digest => Ok(()),
            Some(f) => Err(format!(
                "the same call answered differently: {digest} ({who}): {} — first {} ({}): {}",
                excerpt(),
                f.digest,
                f.who,
                f.excerpt
            )),
            None if n < MAX_KEYS => {
                first.insert(
                    key,
                    First {
                        digest: digest.to_string(),
                        who,
                        excerpt: excerpt(),
                    },
                );
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// A replayed request's answer against its recorded digest.
pub fn against_recorded(recorded: &str, digest: &str, who: &Who, excerpt: &str) -> Option<String> {
    (recorded != digest)
        .then(|| format!("answered {digest} ({who}), recorded {recorded}: {excerpt}"))
}

/// FNV-1a (64 bits) of the arguments as sent: the key of a call.
pub fn args_key(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(vu: usize) -> Who {
        Who {
            target: None,
            vu,
            session: Some(format!("#{vu:08x}")),
        }
    }

    #[test]
    fn the_first_answer_is_the_reference_per_arguments() {
        let seen = Seen::default();
        let a = args_key(br#"{"x":1}"#);
        let b = args_key(br#"{"x":2}"#);
        assert!(
            seen.check("tools/call:t", a, "d1", who(0), || "one".into())
                .is_ok()
        );
        assert!(
            seen.check("tools/call:t", b, "d2", who(1), || "two".into())
                .is_ok()
        );
        assert!(
            seen.check("tools/call:t", a, "d1", who(2), || "one".into())
                .is_ok()
        );
        let e = seen
            .check("tools/call:t", a, "d3", who(3), || "three".into())
            .unwrap_err();
        assert!(
            e.contains("d3 (virtual user 3, session #00000003): three"),
            "{e}"
        );
        assert!(
            e.contains("first d1 (virtual user 0, session #00000000): one"),
            "{e}"
        );
        // Another tool with the same arguments is another call.
        assert!(
            seen.check("tools/call:u", a, "d3", who(4), || "x".into())
                .is_ok()
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let seen = Seen::default();
        for i in 0..(MAX_KEYS as u64 + 10) {
            assert!(seen.check("op", i, "d", who(0), String::new).is_ok());
        }
        assert_eq!(seen.first.lock().unwrap().len(), MAX_KEYS);
        // Beyond the bound, unchecked.
        assert!(
            seen.check("op", MAX_KEYS as u64 + 5, "other", who(0), String::new)
                .is_ok()
        );
        assert!(seen.check("op", 0, "other", who(0), String::new).is_err());
    }

    #[test]
    fn excerpts_are_cut_at_characters() {
        let long = "é".repeat(400);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT + 1);
        assert!(e.ends_with('…'));
    }
}
