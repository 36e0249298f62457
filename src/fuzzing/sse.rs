//! The SSE decoder against the WHATWG event-stream rules written out plainly (HTML Living
//! Standard, "Interpreting an event stream"), over the whole input at once.

use std::ops::ControlFlow;

use crate::transport::sse_decoder::{SseDecoder, SseError};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    event: Vec<u8>,
    data: Vec<u8>,
    id: Vec<u8>,
}

/// Everything a decoder reports about a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decoded {
    events: Vec<Event>,
    retry_ms: Option<u64>,
    last_id: Vec<u8>,
    comments: u64,
    /// The stream broke the bound (a line, or an event's data, longer than `max`).
    too_large: bool,
}

/// `sse_with` with the bound picked by the first byte and cut points derived from the data.
pub fn sse(data: &[u8]) {
    let Some((&knob, stream)) = data.split_first() else {
        return;
    };
    let max = match knob % 4 {
        0 => 1 << 20,
        k => usize::from(k) * 24,
    };
    sse_with(stream, max, &super::cuts_from(stream));
}

/// Decodes `stream` with a decoder bounded at `max`: whole, cut at `cuts`, and byte by byte
/// (short streams), each giving exactly what the reference gives; no buffer ever longer than
/// `max`.
pub fn sse_with(stream: &[u8], max: usize, cuts: &[usize]) {
    let want = reference(stream, max);
    let mut chunkings = vec![Vec::new(), cuts.to_vec()];
    if stream.len() <= 2048 {
        chunkings.push(super::bytewise(stream));
    }
    for c in chunkings {
        let got = decode(stream, max, &c);
        assert_eq!(
            got,
            want,
            "SSE decoder (max {max}, cut at {c:?}) differs from the WHATWG rules on {}",
            super::show(stream)
        );
    }
}

fn decode(stream: &[u8], max: usize, cuts: &[usize]) -> Decoded {
    let mut d = SseDecoder::new(max);
    let mut events = Vec::new();
    let mut too_large = false;
    for piece in super::split(stream, cuts) {
        let fed = d.feed(piece, |e| {
            events.push(Event {
                event: e.event.to_vec(),
                data: e.data.to_vec(),
                id: e.id.to_vec(),
            });
            ControlFlow::Continue(())
        });
        assert!(
            d.largest_buffer() <= max,
            "SSE decoder buffers {} bytes, over its bound {max}",
            d.largest_buffer()
        );
        match fed {
            Ok(flow) => assert!(flow.is_continue()),
            Err(SseError::TooLarge(n)) => {
                assert_eq!(n, max);
                too_large = true;
                break;
            }
        }
    }
    Decoded {
        events,
        retry_ms: d.retry_ms(),
        last_id: d.last_id().to_vec(),
        comments: d.comments(),
        too_large,
    }
}

/// The stream processed line by line as the standard says, with the decoder's documented
/// bound: a line longer than `max` bytes (a leading BOM counted), or data that would grow past
/// `max` (its line feeds counted), stops the stream.
fn reference(stream: &[u8], max: usize) -> Decoded {
    let mut out = Decoded {
        events: Vec::new(),
        retry_ms: None,
        last_id: Vec::new(),
        comments: 0,
        too_large: false,
    };
    let (mut data, mut event) = (Vec::new(), Vec::new());
    let mut rest = stream;
    let mut first = true;
    loop {
        // A line ends at CRLF, LF or CR; bytes after the last line end are no line at all.
        let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
            out.too_large = rest.len() > max;
            return out;
        };
        let mut line = &rest[..end];
        let after = if rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n') {
            end + 2
        } else {
            end + 1
        };
        rest = &rest[after..];
        if line.len() > max {
            out.too_large = true;
            return out;
        }
        // The UTF-8 decode step strips one BOM at the start of the stream.
        if std::mem::take(&mut first) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            // Dispatch: nothing if the data buffer is empty; else drop its last LF.
            if !data.is_empty() {
                data.pop();
                out.events.push(Event {
                    event: std::mem::take(&mut event),
                    data: std::mem::take(&mut data),
                    id: out.last_id.clone(),
                });
            }
            event.clear();
            continue;
        }
        if line[0] == b':' {
            out.comments += 1;
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if data.len() + value.len() + 1 > max {
                    out.too_large = true;
                    return out;
                }
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"event" => event = value.to_vec(),
            b"id" if !value.contains(&0) => out.last_id = value.to_vec(),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // "Interpret the field value as an integer in base ten": saturated.
                let n = value.iter().fold(0u64, |n, &d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                out.retry_ms = Some(n);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_reads_the_standard_s_examples() {
        // From the standard: "data: YHOO\ndata: +2\ndata: 10\n\n" is one event.
        let d = reference(b"data: YHOO\ndata: +2\ndata: 10\n\n", 1 << 20);
        assert_eq!(d.events.len(), 1);
        assert_eq!(d.events[0].data, b"YHOO\n+2\n10");
        // "data\n\ndata\ndata\n\ndata:" is two events, "" and "\n"; the last line is incomplete.
        let d = reference(b"data\n\ndata\ndata\n\ndata:", 1 << 20);
        let data: Vec<&[u8]> = d.events.iter().map(|e| &e.data[..]).collect();
        assert_eq!(data, [&b""[..], b"\n"]);
    }
}
