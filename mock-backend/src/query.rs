//! Query-string decoding: `application/x-www-form-urlencoded` style, just enough for
//! `?q=...&limit=...` without pulling in a URL crate.

use std::borrow::Cow;

/// Decodes `%XX` escapes and `+` (as a space).
///
/// Malformed escapes are kept literally and invalid UTF-8 is replaced, because a mock backend
/// should answer odd input rather than reject it. Borrows when there is nothing to decode, which
/// is the common case on the hot path.
pub fn percent_decode(input: &str) -> Cow<'_, str> {
    if !input.bytes().any(|b| b == b'%' || b == b'+') {
        return Cow::Borrowed(input);
    }
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Returns the decoded value of the first `name` parameter in `query` (the part after `?`).
///
/// A parameter without `=` has the empty value, as browsers treat `?flag`.
pub fn param<'a>(query: Option<&'a str>, name: &str) -> Option<Cow<'a, str>> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(percent_decode("Leanne+Graham"), "Leanne Graham");
        assert_eq!(percent_decode("a%20b%2Bc"), "a b+c");
        assert_eq!(percent_decode("%C3%A9t%c3%a9"), "été");
    }

    #[test]
    fn borrows_when_nothing_to_decode() {
        assert!(matches!(percent_decode("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn keeps_malformed_escapes_literally() {
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%"), "%");
    }

    #[test]
    fn replaces_invalid_utf8() {
        assert_eq!(percent_decode("%FFok"), "\u{FFFD}ok");
    }

    #[test]
    fn finds_parameters() {
        let q = Some("q=leanne+graham&limit=5&flag&na%6De=x");
        assert_eq!(param(q, "q").as_deref(), Some("leanne graham"));
        assert_eq!(param(q, "limit").as_deref(), Some("5"));
        assert_eq!(param(q, "flag").as_deref(), Some(""));
        assert_eq!(param(q, "name").as_deref(), Some("x"));
        assert_eq!(param(q, "missing"), None);
        assert_eq!(param(None, "q"), None);
    }
}
