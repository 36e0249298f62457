//! The hot-path HTTP/1.1 client: the chunked decoder against httparse (strict) and a lenient
//! decoder written from its documented grammar; whole responses (heads, bodies, pipelined
//! responses) against httparse's verdict on the head.

use std::ops::ControlFlow;

use crate::transport::http1_client::{Captured, ChunkStatus, Chunked, Http1Conn, HttpError};

/// Bound on a response head (`http1::MAX_HEAD`).
const MAX_HEAD: usize = 64 * 1024;

/// How a chunked body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// The last chunk and the trailers, in this many bytes; what follows is the next response.
    Done(usize),
    /// The input ended first.
    NeedMore,
    Error,
}

/// `chunked_with` with cut points derived from the data.
pub fn chunked(data: &[u8]) {
    chunked_with(data, &super::cuts_from(data));
}

/// Decodes `data` as a chunked body, whole, cut at `cuts` and byte by byte (short inputs):
/// the same body and end every time, the same as the lenient reference's; and where httparse
/// reads a complete, strictly valid body, the same body and length.
pub fn chunked_with(data: &[u8], cuts: &[usize]) {
    let want = lenient(data);
    let mut chunkings = vec![Vec::new(), cuts.to_vec()];
    if data.len() <= 2048 {
        chunkings.push(super::bytewise(data));
    }
    for c in chunkings {
        assert_eq!(
            decode(data, &c),
            want,
            "chunked decoder (cut at {c:?}) differs from the reference on {}",
            super::show(data)
        );
    }
    if let Some((body, End::Done(n))) = strict(data) {
        assert_eq!(
            (body, End::Done(n)),
            want,
            "chunked decoder rejects or misreads a valid body: {}",
            super::show(data)
        );
    }
}

fn decode(data: &[u8], cuts: &[usize]) -> (Vec<u8>, End) {
    let mut d = Chunked::default();
    let mut body = Vec::new();
    let mut used = 0;
    for piece in super::split(data, cuts) {
        let r = d.decode(piece, &mut |b: &[u8]| {
            body.extend_from_slice(b);
            ControlFlow::Continue(())
        });
        match r {
            Err(_) => return (body, End::Error),
            Ok((n, ChunkStatus::Done)) => return (body, End::Done(used + n)),
            Ok((n, status)) => {
                assert_eq!(status, ChunkStatus::NeedMore);
                assert_eq!(n, piece.len(), "unfinished body left input unread");
                used += n;
            }
        }
    }
    (body, End::NeedMore)
}

/// The grammar the decoder documents by its code, written over the whole input: a size line of
/// 1 to 15 hex digits, optionally followed by `;`, space or tab and anything up to the line
/// end; line ends CRLF or a bare LF; chunk data followed by CRLF or LF; after the last chunk,
/// trailer lines (CRs ignored) up to an empty one. A byte that cannot continue the grammar is
/// an error as soon as it is seen.
fn lenient(data: &[u8]) -> (Vec<u8>, End) {
    let mut body = Vec::new();
    let mut i = 0;
    let at = |i: usize| data.get(i).copied();
    // A line end at `i`: the index after it, `None` if the input ends first, `Err` if it is not
    // one.
    let eol = |i: usize| -> Result<Option<usize>, ()> {
        match (at(i), at(i + 1)) {
            (Some(b'\n'), _) => Ok(Some(i + 1)),
            (Some(b'\r'), Some(b'\n')) => Ok(Some(i + 2)),
            (Some(b'\r'), None) | (None, _) => Ok(None),
            _ => Err(()),
        }
    };
    loop {
        let digits = data[i..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if digits > 15 {
            return (body, End::Error);
        }
        let mut j = i + digits;
        match at(j) {
            None => return (body, End::NeedMore),
            Some(_) if digits == 0 => return (body, End::Error),
            Some(b';' | b' ' | b'\t') => {
                j += data[j..]
                    .iter()
                    .take_while(|&&b| b != b'\r' && b != b'\n')
                    .count();
            }
            Some(_) => {}
        }
        let size = u64::from_str_radix(std::str::from_utf8(&data[i..i + digits]).unwrap(), 16)
            .expect("15 hex digits fit");
        i = match eol(j) {
            Ok(Some(next)) => next,
            Ok(None) => return (body, End::NeedMore),
            Err(()) => return (body, End::Error),
        };
        if size == 0 {
            let mut line_start = true;
            for (k, &b) in data.iter().enumerate().skip(i) {
                match b {
                    b'\n' if line_start => return (body, End::Done(k + 1)),
                    b'\n' => line_start = true,
                    b'\r' => {}
                    _ => line_start = false,
                }
            }
            return (body, End::NeedMore);
        }
        let take = (size as usize).min(data.len() - i);
        body.extend_from_slice(&data[i..i + take]);
        if take < size as usize {
            return (body, End::NeedMore);
        }
        i = match eol(i + take) {
            Ok(Some(next)) => next,
            Ok(None) => return (body, End::NeedMore),
            Err(()) => return (body, End::Error),
        };
    }
}

/// RFC 9112 §7.1 through httparse: size lines by `parse_chunk_size`, CRLF after each chunk's
/// data, the trailer section by `parse_headers`. `None` where httparse is laxer than the RFC
/// (an empty size, a bare LF inside an extension) or reads more than the decoder supports (16
/// hex digits).
fn strict(data: &[u8]) -> Option<(Vec<u8>, End)> {
    let mut body = Vec::new();
    let mut i = 0;
    loop {
        let digits = data[i..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if digits == 0 || digits > 15 {
            return None;
        }
        let (used, size) = match httparse::parse_chunk_size(&data[i..]) {
            Ok(httparse::Status::Complete(r)) => r,
            Ok(httparse::Status::Partial) => return Some((body, End::NeedMore)),
            Err(_) => return Some((body, End::Error)),
        };
        if data[i..i + used - 2].contains(&b'\n') {
            return None;
        }
        i += used;
        if size == 0 {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            return Some(match httparse::parse_headers(&data[i..], &mut headers) {
                Ok(httparse::Status::Complete((n, _))) => (body, End::Done(i + n)),
                Ok(httparse::Status::Partial) => (body, End::NeedMore),
                Err(_) => (body, End::Error),
            });
        }
        let end = i.checked_add(usize::try_from(size).ok()?)?;
        if end + 2 > data.len() {
            return Some((body, End::NeedMore));
        }
        body.extend_from_slice(&data[i..end]);
        if &data[end..end + 2] != b"\r\n" {
            return Some((body, End::Error));
        }
        i = end + 2;
    }
}

/// What reading one response gave.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Response {
    /// The head as the client read it (`ResponseHead` is not `PartialEq`), or the error.
    head: Result<String, String>,
    session_id: Option<Vec<u8>>,
    body: Vec<u8>,
    body_error: Option<String>,
}

/// `http1_response_with` with cut points derived from the data.
pub fn http1_response(data: &[u8]) {
    http1_response_with(data, &super::cuts_from(data));
}

/// Reads up to four pipelined responses from `data` (then EOF) with `Http1Conn`: whole, cut
/// at `cuts` and byte by byte (short inputs), the same heads, bodies and errors every time.
/// The first head's verdict is httparse's (malformed, incomplete, or the same status after
/// interim 1xx heads), and a head that never ends stops the read within its 64 KiB bound.
pub fn http1_response_with(data: &[u8], cuts: &[usize]) {
    let (want, delivered) = read_responses(data, &[]);
    let mut chunkings = vec![cuts.to_vec()];
    if data.len() <= 2048 {
        chunkings.push(super::bytewise(data));
    }
    for c in chunkings {
        let (got, _) = read_responses(data, &c);
        assert_eq!(
            got,
            want,
            "HTTP/1.1 client (cut at {c:?}) differs from reading the input whole: {}",
            super::show(data)
        );
    }
    let first = &want[0].head;
    let refused = first.as_ref().is_err_and(|e| e.starts_with("Malformed"));
    // A head httparse reads may still be refused for a bad Content-Length, interim ones too.
    let bad_length = first.as_ref().is_err_and(|e| e.contains("content-length"));
    let (head, interim) = first_head(data);
    match head {
        Head::Malformed => assert!(
            refused,
            "httparse rejects the head, the client read {first:?}: {}",
            super::show(data)
        ),
        Head::Partial => assert!(
            matches!(first, Err(e) if e == "Closed" || e == "HeadTooLarge")
                || interim && bad_length,
            "httparse finds the head incomplete, the client read {first:?}: {}",
            super::show(data)
        ),
        Head::Complete(status) => assert!(
            bad_length
                || matches!(first, Ok(h) if h.starts_with(&format!("ResponseHead {{ status: {status},"))),
            "httparse reads status {status}, the client read {first:?}: {}",
            super::show(data)
        ),
    }
    if first.as_ref().is_err_and(|e| e == "HeadTooLarge") {
        // The buffer doubles as it fills, so the last read can bring it to twice the bound.
        assert!(
            delivered <= 2 * MAX_HEAD,
            "read {delivered} bytes of an endless head"
        );
    }
}

fn read_responses(data: &[u8], cuts: &[usize]) -> (Vec<Response>, usize) {
    super::block_on(async {
        let mut conn = Http1Conn::new(super::Script::new(data, cuts));
        let mut captured = Captured::default();
        let mut out = Vec::new();
        for _ in 0..4 {
            let head = conn
                .read_head(&mut captured)
                .await
                .map(|h| format!("{h:?}"))
                .map_err(|e| short(&e));
            let mut r = Response {
                head,
                session_id: captured.session_id().map(<[u8]>::to_vec),
                body: Vec::new(),
                body_error: None,
            };
            if r.head.is_ok() {
                let mut body = Vec::new();
                r.body_error = conn
                    .read_body(|b| {
                        body.extend_from_slice(b);
                        ControlFlow::Continue(())
                    })
                    .await
                    .err()
                    .map(|e| short(&e));
                r.body = body;
            }
            let stop = r.head.is_err() || r.body_error.is_some() || !conn.is_reusable();
            out.push(r);
            if stop {
                break;
            }
        }
        (out, conn.into_inner().delivered)
    })
}

/// An error's kind (and static message), without the I/O error's text.
fn short(e: &HttpError) -> String {
    match e {
        HttpError::Io(e) => format!("Io({:?})", e.kind()),
        other => format!("{other:?}"),
    }
}

enum Head {
    Malformed,
    Partial,
    Complete(u16),
}

/// The first final head by httparse (64 header slots, like the client), interim 1xx heads
/// other than 101 skipped; and whether there were any.
fn first_head(mut data: &[u8]) -> (Head, bool) {
    let mut interim = false;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(data) {
            Err(_) => Head::Malformed,
            Ok(httparse::Status::Partial) => Head::Partial,
            Ok(httparse::Status::Complete(n)) => {
                let status = resp.code.expect("a complete head has a status");
                if (100..200).contains(&status) && status != 101 {
                    data = &data[n..];
                    interim = true;
                    continue;
                }
                Head::Complete(status)
            }
        };
        return (head, interim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_references_read_a_plain_body() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        let want = (b"hello, world".to_vec(), End::Done(body.len() - 4));
        assert_eq!(lenient(body), want);
        assert_eq!(strict(body), Some(want));
        assert_eq!(
            lenient(b"5\nhello\n0\n\n"),
            (b"hello".to_vec(), End::Done(11))
        );
        assert_eq!(strict(b"5\nhello\n0\n\n"), Some((Vec::new(), End::Error)));
    }
}
