//! The envelope scanner against serde_json. (The mutation test in `protocol::jsonrpc` starts
//! from valid messages; this takes any bytes.)

use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::jsonrpc::{self, Codec, DecodeError};
use crate::protocol::reply_memo::ReplyMemo;
use crate::protocol::scan::{self, Checked};

/// Decodes `data` with the scanner and with serde_json: the same verdict (accepted or which
/// rejection) and, when accepted, the same message (kind, id, method, `isError`,
/// `resultType`, error code). Bytes that are not UTF-8 are not JSON (RFC 8259 §8.1): the
/// scanner must refuse them, where serde_json, which does not check strings it skips, may not
/// (the fuzz target found `{"x":["\xC0"]}`). simd-json and `progress_token` must merely not
/// panic.
pub fn envelope(data: &[u8]) {
    let scan = jsonrpc::decode(Codec::Scan, &mut data.to_vec()).map(|m| format!("{m:?}"));
    if std::str::from_utf8(data).is_err() {
        assert!(
            matches!(scan, Err(DecodeError::Json | DecodeError::Batch)),
            "the scanner reads bytes that are not UTF-8: {}",
            super::show(data)
        );
    } else {
        let serde = jsonrpc::decode(Codec::SerdeJson, &mut data.to_vec()).map(|m| format!("{m:?}"));
        assert_eq!(
            scan,
            serde,
            "the scanner and serde_json disagree on {}",
            super::show(data)
        );
    }
    let _ = jsonrpc::decode(Codec::SerdeJson, &mut data.to_vec());
    let _ = jsonrpc::decode(Codec::SimdJson, &mut data.to_vec());
    let _ = jsonrpc::progress_token(data);
    memo_agrees(data);
    members_agree(data);
}

/// [`scan::member`] finds a top-level member as serde_json does (a gateway takes an upstream's
/// `result` this way): the same bytes, or nothing for the same inputs (not an object, the key
/// absent or twice; `null` is absent to an `Option`).
fn members_agree(data: &[u8]) {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: Option<&'a serde_json::value::RawValue>,
    }
    let Ok(text) = std::str::from_utf8(data) else {
        assert_eq!(
            scan::member(data, "result", Checked::No),
            None,
            "not UTF-8, not JSON"
        );
        return;
    };
    let serde = serde_json::from_str::<Response<'_>>(text)
        .ok()
        .and_then(|r| r.result)
        .map(|r| r.get().as_bytes());
    let scanned = scan::member(data, "result", Checked::No).filter(|v| *v != b"null");
    assert_eq!(
        scanned,
        serde,
        "scan::member and serde_json disagree on {}",
        super::show(data)
    );
    // Members dropped from an object serde_json reads: the same object without them. (Where
    // serde_json refuses a value it would skip — a lone surrogate, say — only no panic.)
    let dropped = scan::without_members(data, &["id", "result"], Checked::No);
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_str(text) else {
        return;
    };
    // Valid JSON: the walk that trusts it finds the same spans as the one that checks.
    let trusted = scan::member(data, "result", Checked::Yes).filter(|v| *v != b"null");
    assert_eq!(
        trusted,
        serde,
        "Checked::Yes disagrees on {}",
        super::show(data)
    );
    // The fused walk (a gateway's result for an older client): the member, without `drop`
    // when it is an object, as the two walks apart make it.
    let drop = ["id", "isError"];
    let apart = scan::member(data, "result", Checked::Yes)
        .map(|r| scan::without_members(r, &drop, Checked::Yes).unwrap_or_else(|| r.to_vec()));
    assert_eq!(
        scan::member_without(data, "result", &drop),
        apart,
        "scan::member_without disagrees on {}",
        super::show(data)
    );
    let kept = scan::without_members(data, &["id", "result"], Checked::Yes);
    assert_eq!(
        kept,
        dropped,
        "Checked::Yes disagrees on {}",
        super::show(data)
    );
    object.remove("id");
    object.remove("result");
    assert_eq!(
        dropped.and_then(|d| serde_json::from_slice::<serde_json::Value>(&d).ok()),
        Some(serde_json::Value::Object(object)),
        "scan::without_members and serde_json disagree on {}",
        super::show(data)
    );
}

/// What a scan makes of `body` as the answer to request `id`.
fn scanned(body: &[u8], id: u64) -> Outcome {
    crate::transport::classify(scan::decode(body), id)
        .unwrap_or(Outcome::Protocol(ProtocolKind::NoResponse))
}

/// The reply memo: `data`, learnt as the answer to the id it carries, and the same bytes with
/// other ids' digits in that place, asked as the answer to any id, are recalled as exactly
/// what a scan makes of them, or not at all.
fn memo_agrees(data: &[u8]) {
    let (_, Some(at)) = scan::decode_spanned(data) else {
        return;
    };
    let Some(k) = std::str::from_utf8(&data[at.clone()])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return;
    };
    let mut memo = ReplyMemo::default();
    memo.learn(data, Some(at.clone()), k, scanned(data, k));
    for other in [k, k.wrapping_add(1), k / 10, u64::MAX] {
        let mut body = data[..at.start].to_vec();
        body.extend_from_slice(other.to_string().as_bytes());
        body.extend_from_slice(&data[at.end..]);
        for asked in [other, other ^ 1] {
            if let Some(recalled) = memo.recall(&body, asked) {
                assert_eq!(
                    recalled,
                    scanned(&body, asked),
                    "the memo misreads {} as the answer to {asked}",
                    super::show(&body)
                );
            }
        }
    }
}
