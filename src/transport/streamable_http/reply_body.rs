//! A Streamable HTTP response once its head is read: the head's verdict, where the body is read
//! from (the session's HTTP/1.1 connection, an HTTP/2 stream, a resumed stream), and the
//! readers of plain bodies (a JSON reply, a refusal's first bytes).

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::time::Instant;

use super::Conn;
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::protocol::jsonrpc;
use crate::protocol::reply_memo::ReplyMemo;
use crate::protocol::scan;
use crate::transport::http1_client::{ContentKind, Http1Conn, HttpError};
use crate::transport::net::Stream;
use crate::transport::{Reply, classify};

/// How much of a non-200 response body is kept (to say what the server said).
const SAID: usize = 512;

/// What a response head says.
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) content: ContentKind,
}

/// Where a response body is read from, before it is read: the session's HTTP/1.1 connection
/// (borrowed only while reading, so the session stays usable between reads) or an HTTP/2
/// stream.
pub(super) enum BodySource {
    H1,
    H2(h2::RecvStream),
}

impl BodySource {
    /// The body, borrowing the session's connection for HTTP/1.1.
    #[inline]
    pub(super) fn open(self, conn: &mut Option<Conn>) -> Body<'_> {
        match (self, conn) {
            (BodySource::H2(stream), _) => Body::H2(stream),
            (BodySource::H1, Some(Conn::H1(c))) => Body::H1(c),
            // Not reached: an HTTP/1.1 head was read on the connection still in place.
            (BodySource::H1, _) => Body::Empty,
        }
    }
}

/// Where the response body comes from.
pub(super) enum Body<'a> {
    H1(&'a mut Http1Conn<Stream>),
    H2(h2::RecvStream),
    /// No body: an HTTP/1.1 one whose connection is gone (not reached, see
    /// [`BodySource::open`]).
    Empty,
}

impl Body<'_> {
    /// Feeds the body to `sink` until it ends or `sink` breaks.
    pub(super) async fn read<F: FnMut(&[u8]) -> ControlFlow<()>>(
        &mut self,
        mut sink: F,
    ) -> Result<ControlFlow<()>, HttpError> {
        match self {
            Body::H1(c) => c.read_body(sink).await,
            Body::H2(b) => {
                while let Some(data) = b.data().await {
                    let data = data.map_err(|e| HttpError::Io(std::io::Error::other(e)))?;
                    // Read: the peer may send that much more (flow control).
                    let _ = b.flow_control().release_capacity(data.len());
                    if sink(&data).is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(ControlFlow::Continue(()))
            }
            Body::Empty => Ok(ControlFlow::Continue(())),
        }
    }
}

/// The outcome of a failed HTTP exchange.
pub(super) fn http_failure(e: &HttpError) -> Outcome {
    match e {
        HttpError::Io(_) | HttpError::Closed => Outcome::Io,
        HttpError::Malformed(_) | HttpError::HeadTooLarge => {
            Outcome::Protocol(ProtocolKind::BadHttp)
        }
    }
}

/// A notification's answer: 202 (or 200/204 with no JSON-RPC content) means accepted; the body
/// is read to its end.
pub(super) async fn notification_outcome(status: u16, mut body: Body<'_>) -> Outcome {
    let ok = matches!(status, 200 | 202 | 204);
    let drained = body.read(|_| ControlFlow::Continue(())).await;
    match (ok, drained) {
        (true, Ok(_)) => Outcome::Ok,
        (false, _) => Outcome::Http(status),
        (true, Err(e)) => http_failure(&e),
    }
}

/// Reads a refusal's body (up to the response bound), keeping its first bytes in `said`: what
/// the server said, for a refusal before load. `Continue` when the body was read to its end.
pub(super) async fn read_refusal(
    mut body: Body<'_>,
    said: &mut Vec<u8>,
    max: usize,
) -> Result<ControlFlow<()>, HttpError> {
    let mut seen = 0usize;
    said.clear();
    body.read(|chunk| {
        let room = SAID.saturating_sub(said.len()).min(chunk.len());
        said.extend_from_slice(&chunk[..room]);
        seen += chunk.len();
        if seen > max {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await
}

/// Reads a JSON reply whole into `resp` (at most `max` bytes) and classifies it as the answer
/// to request `id`.
pub(super) async fn read_json(
    body: &mut Body<'_>,
    resp: &mut Vec<u8>,
    max: usize,
    codec: jsonrpc::Codec,
    id: u64,
) -> Reply {
    resp.clear();
    let mut too_large = false;
    let r = body
        .read(|chunk| {
            if resp.len() + chunk.len() > max {
                too_large = true;
                return ControlFlow::Break(());
            }
            resp.extend_from_slice(chunk);
            ControlFlow::Continue(())
        })
        .await;
    let done = Instant::now();
    let outcome = match r {
        Err(e) => http_failure(&e),
        Ok(_) if too_large => Outcome::Protocol(ProtocolKind::TooLarge),
        Ok(_) => json_outcome(codec, resp, id),
    };
    Reply::at(outcome, done)
}

thread_local! {
    /// Replies this thread scanned before (per thread: resting sessions hold nothing).
    static SEEN: RefCell<ReplyMemo<Outcome>> = RefCell::new(ReplyMemo::default());
}

/// A whole JSON reply's outcome as the answer to request `id`. With the default codec, a reply
/// this thread read before but for its id is recognised without a scan ([`ReplyMemo`]).
pub(super) fn json_outcome(codec: jsonrpc::Codec, resp: &mut [u8], id: u64) -> Outcome {
    let meaning = |m| classify(m, id).unwrap_or(Outcome::Protocol(ProtocolKind::NoResponse));
    if codec != jsonrpc::Codec::Scan {
        return meaning(jsonrpc::decode(codec, resp));
    }
    SEEN.with_borrow_mut(|seen| {
        if let Some(outcome) = seen.recall(resp, id) {
            return outcome;
        }
        let (m, id_at) = scan::decode_spanned(resp);
        let outcome = meaning(m);
        seen.learn(resp, id_at, id, outcome);
        outcome
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo never changes a verdict: every reply, read in turn as the answer to requests
    /// of growing ids (and to the wrong one), means what serde_json's decoder says it means.
    #[test]
    fn recognised_replies_mean_what_a_scan_says() {
        let templates = [
            r#"{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32601,"message":"no"}}"#,
            r#"{ "id" : ID , "result" : { "resultType" : "input_required" } }"#,
            r#"{"id":ID,"result":{"id":ID,"text":"é"}}"#,
            r#"{"id":ID,"id":ID,"result":{}}"#,
            r#"{"id":ID,"result":{}"#,
            r#"{"id":ID,"method":"ping"}"#,
            r#"{"id":"ID","result":{}}"#,
            r#"{"id":ID.0,"result":{}}"#,
            r#"{"id":ID,"result":{},"error":{"code":1}}"#,
        ];
        let ids = [
            1,
            2,
            9,
            10,
            11,
            99,
            100,
            123_456_789,
            u64::MAX - 1,
            u64::MAX,
        ];
        for round in 0..2 {
            for id in ids {
                for t in templates {
                    let body = t.replace("ID", &id.to_string());
                    for asked in [id, id.wrapping_add(round)] {
                        let expected = classify(
                            jsonrpc::decode(
                                jsonrpc::Codec::SerdeJson,
                                &mut body.clone().into_bytes(),
                            ),
                            asked,
                        )
                        .unwrap_or(Outcome::Protocol(ProtocolKind::NoResponse));
                        let got = json_outcome(
                            jsonrpc::Codec::Scan,
                            &mut body.clone().into_bytes(),
                            asked,
                        );
                        assert_eq!(got, expected, "{body} as the answer to {asked}");
                    }
                }
            }
        }
        // And the memo is used: a reply read once is recognised with the next id.
        let body = |id: u64| templates[0].replace("ID", &id.to_string());
        json_outcome(jsonrpc::Codec::Scan, &mut body(5).into_bytes(), 5);
        let recalled = SEEN.with_borrow(|seen| seen.recall(body(6).as_bytes(), 6));
        assert_eq!(recalled, Some(Outcome::Ok));
    }
}
