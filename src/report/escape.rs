//! Text made safe for HTML, SVG and XML: the one escaping helper of every markup renderer.

/// Text made safe for HTML, SVG and XML (content and attribute values).
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
