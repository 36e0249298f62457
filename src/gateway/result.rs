//! A proxied call's result, taken from the upstream's response as the client reads it.

use bytes::Bytes;

use crate::protocol::version::Revision;
use crate::server::proxy::{OLDER_CLIENT_DROPS, ProxyError, adapt};

/// The `result` of a response message the session decoded as a whole (so valid JSON), from an
/// upstream of revision `upstream`, as a client of revision `client` reads it ([`adapt`]).
pub(super) fn result_of(
    message: &[u8],
    upstream: Revision,
    client: Revision,
) -> Result<Bytes, ProxyError> {
    // The scanner, not serde's visitors: a few instructions a byte instead of ~30. A reply the
    // session counted as a result was decoded as a whole: valid JSON, not checked again.
    let checked = crate::protocol::scan::Checked::Yes;
    let result = if !upstream.has_handshake() && client.has_handshake() {
        // What an older client does not know goes, in the same walk that finds the result.
        crate::protocol::scan::member_without(message, "result", &OLDER_CLIENT_DROPS)
            .filter(|r| r != b"null")
            .map(Bytes::from)
    } else {
        crate::protocol::scan::member(message, "result", checked)
            .filter(|r| *r != b"null")
            .map(|r| Bytes::from(adapt(r, !upstream.has_handshake(), client).into_owned()))
    };
    result.ok_or_else(|| ProxyError::Unavailable {
        detail: "the upstream's response has no result".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_taken_raw() {
        let (old, new) = (Revision::V2025_11_25, Revision::V2026_07_28);
        let same = |m: &[u8]| result_of(m, old, old);
        let r =
            same(br#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":false}}"#).unwrap();
        assert_eq!(&r[..], br#"{"content":[],"isError":false}"#);
        assert!(same(br#"{"jsonrpc":"2.0","id":3,"error":{"code":1}}"#).is_err());
        let spaced = br#" { "id" : 3 , "result" : { "a" : [ 1 , "\"}" ] } , "jsonrpc" : "2.0" } "#;
        assert_eq!(&same(spaced).unwrap()[..], br#"{ "a" : [ 1 , "\"}" ] }"#);
        // A newer upstream's result for an older client: what it does not know goes, in the
        // walk that finds the result; the rest stays as written.
        let modern = br#"{"id":3,"result":{"content":[],"resultType":"complete","_meta":{"a":1}, "isError" : false}}"#;
        assert_eq!(
            &result_of(modern, new, old).unwrap()[..],
            br#"{"content":[],"isError":false}"#
        );
        assert_eq!(
            &result_of(modern, new, new).unwrap()[..],
            br#"{"content":[],"resultType":"complete","_meta":{"a":1}, "isError" : false}"#
        );
        for bad in [
            &br#"{"result":{},"result":{}}"#[..],
            br#"{"result":null}"#,
            br#"{"result":{}"#,
            br#"{"result":{}} x"#,
            br#"[{"result":{}}]"#,
        ] {
            let text = String::from_utf8_lossy(bad);
            assert!(same(bad).is_err(), "{text}");
            assert!(result_of(bad, new, old).is_err(), "{text} (older client)");
        }
        // Bytes that are not UTF-8 never get here: the session's decode (the scanner, the
        // gateway's codec) refused them, so `result_of` does not check them again.
        let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"\xff\"}";
        assert!(crate::protocol::scan::decode(not_utf8).is_err());
    }
}
