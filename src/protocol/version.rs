//! MCP protocol revisions and the rules that differ between them.

use std::fmt;
use std::str::FromStr;

/// A dated MCP protocol revision.
///
/// Ordered by date, so `rev >= Revision::V2025_06_18` reads as "this rule applies from
/// 2025-06-18 on".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];

    /// The newest revision of the handshake (`initialize`) era.
    pub const LATEST_HANDSHAKE: Revision = Revision::V2025_11_25;

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// Handshake era: sessions are made by `initialize` (2024-11-05 … 2025-11-25).
    pub fn has_handshake(self) -> bool {
        self <= Revision::V2025_11_25
    }

    /// `MCP-Protocol-Version` is sent on every HTTP request after initialization (2025-06-18+).
    pub fn sends_version_header(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// `structuredContent` exists in tool results (2025-06-18+).
    pub fn has_structured_content(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// Tool `annotations` exist (2025-03-26+).
    pub fn has_tool_annotations(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Tool `title` exists (2025-06-18+).
    pub fn has_tool_title(self) -> bool {
        self >= Revision::V2025_06_18
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not a revision this build knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown MCP protocol revision `{0}` (known: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)"
)]
pub struct UnknownRevision(pub String);

impl FromStr for Revision {
    type Err = UnknownRevision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRevision(s.to_string()))
    }
}

/// Which protocol revision to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// Offer (handshake era) or use (2026-07-28) this revision.
    Fixed(Revision),
    /// Probe `server/discover`; fall back to `initialize` with the newest handshake revision.
    Auto,
}

impl ProtocolChoice {
    /// The revision a client offers first: the fixed one, or for `auto` 2026-07-28 (probed
    /// with `server/discover`; the handshake era is the fallback).
    pub fn offered(self) -> Revision {
        match self {
            ProtocolChoice::Fixed(r) => r,
            ProtocolChoice::Auto => Revision::V2026_07_28,
        }
    }
}

impl std::fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolChoice::Fixed(r) => r.fmt(f),
            ProtocolChoice::Auto => f.write_str("auto"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders() {
        for r in Revision::ALL {
            assert_eq!(r.as_str().parse::<Revision>().unwrap(), r);
        }
        assert!(Revision::V2024_11_05 < Revision::V2026_07_28);
        assert!(Revision::V2025_11_25.has_handshake());
        assert!(!Revision::V2026_07_28.has_handshake());
        assert!(!Revision::V2025_03_26.sends_version_header());
        assert!(Revision::V2025_06_18.sends_version_header());
        assert!("2025-01-01".parse::<Revision>().is_err());
    }
}
