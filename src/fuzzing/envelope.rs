//! The envelope scanner against serde_json. (The mutation test in `protocol::jsonrpc` starts
//! from valid messages; this takes any bytes.)

use crate::protocol::jsonrpc::{self, Codec, DecodeError};

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
}
