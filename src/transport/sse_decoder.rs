//! The one Server-Sent Events decoder, shared by every SSE path (Streamable HTTP responses,
//! the legacy HTTP+SSE stream, GET streams).
//!
//! It follows the WHATWG event-stream rules: CRLF, LF or CR line ends (also split across
//! chunks), `data` lines joined with `\n`, comments (keep-alives) ignored, one optional space
//! after the colon stripped, `id` without NUL kept as the last event id, digit-only `retry`,
//! a leading BOM dropped, and an incomplete event at end of stream never dispatched. Events
//! with an empty data buffer are not dispatched; events whose data is the empty string (MCP
//! 2025-11-25 priming events) are dispatched with empty `data` so callers can record the id.
//! Buffers are reused: after warm-up, decoding allocates nothing.

use std::ops::ControlFlow;

/// The stream broke the decoder's bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("SSE line or event larger than {0} bytes")]
    TooLarge(usize),
}

/// One dispatched event. `data` is mutable so JSON can be decoded in place (simd-json).
#[derive(Debug)]
pub struct SseEvent<'a> {
    /// The event type; empty means the default, `message`.
    pub event: &'a [u8],
    pub data: &'a mut [u8],
    /// The last event id seen on this stream (ids persist across events).
    pub id: &'a [u8],
}

impl SseEvent<'_> {
    /// `message` events carry JSON-RPC; other types (e.g. `endpoint`) carry other things.
    pub fn is_message(&self) -> bool {
        self.event.is_empty() || self.event == b"message"
    }
}

/// Incremental SSE decoder.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    event: Vec<u8>,
    last_id: Vec<u8>,
    retry_ms: Option<u64>,
    pending_cr: bool,
    first_line: bool,
    comments: u64,
    max: usize,
    /// What a caller's break left of a chunk: decoded first by the next call.
    unread: Vec<u8>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(16 * 1024 * 1024)
    }
}

impl SseDecoder {
    /// `max` bounds a line and an event's data (rmcp uses 16 MiB too).
    pub fn new(max: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            data: Vec::new(),
            event: Vec::new(),
            last_id: Vec::new(),
            retry_ms: None,
            pending_cr: false,
            first_line: true,
            comments: 0,
            max,
            unread: Vec::new(),
        }
    }

    /// Forgets everything, keeping the buffers' capacity, for the next stream.
    pub fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.event.clear();
        self.last_id.clear();
        self.retry_ms = None;
        self.pending_cr = false;
        self.first_line = true;
        self.comments = 0;
        self.unread.clear();
    }

    /// Whether a break left bytes to decode (feed an empty chunk to get their events).
    pub fn has_unread(&self) -> bool {
        !self.unread.is_empty()
    }

    /// The last `retry:` value seen, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// The last event id seen (empty if none).
    pub fn last_id(&self) -> &[u8] {
        &self.last_id
    }

    /// Comment lines (keep-alives) seen.
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// The longest of the decoder's buffers (partial line, data, event type, last id, bytes
    /// a break left unread), in bytes: never more than `max`. For the property tests and fuzz
    /// targets.
    #[doc(hidden)]
    pub fn largest_buffer(&self) -> usize {
        [
            &self.line,
            &self.data,
            &self.event,
            &self.last_id,
            &self.unread,
        ]
        .iter()
        .map(|b| b.len())
        .max()
        .unwrap_or(0)
    }

    /// Feeds bytes; calls `on_event` for each complete event. When `on_event` breaks, decoding
    /// stops there and the rest of `chunk` is kept: the next call decodes it first (an empty
    /// chunk will do), so a caller can stop at an event without losing those after it.
    pub fn feed<F>(&mut self, chunk: &[u8], mut on_event: F) -> Result<ControlFlow<()>, SseError>
    where
        F: FnMut(SseEvent<'_>) -> ControlFlow<()>,
    {
        if !self.unread.is_empty() {
            let unread = std::mem::take(&mut self.unread);
            let flow = self.feed_chunk(&unread, &mut on_event)?;
            if flow.is_break() {
                self.keep_unread(chunk)?;
                return Ok(flow);
            }
        }
        self.feed_chunk(chunk, &mut on_event)
    }

    /// Keeps bytes a break left unread, within the same bound as a line.
    fn keep_unread(&mut self, rest: &[u8]) -> Result<(), SseError> {
        if self.unread.len() + rest.len() > self.max {
            return Err(SseError::TooLarge(self.max));
        }
        self.unread.extend_from_slice(rest);
        Ok(())
    }

    fn feed_chunk<F>(
        &mut self,
        mut chunk: &[u8],
        on_event: &mut F,
    ) -> Result<ControlFlow<()>, SseError>
    where
        F: FnMut(SseEvent<'_>) -> ControlFlow<()>,
    {
        // An empty chunk must not settle a CR that ended the last one: the LF that may follow
        // it has not arrived yet.
        if self.pending_cr && !chunk.is_empty() {
            self.pending_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') else {
                if self.line.len() + chunk.len() > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                self.line.extend_from_slice(chunk);
                break;
            };
            let flow = if self.line.is_empty() {
                // The same bound as a line split across chunks, so the verdict does not depend
                // on where the stream was cut (and `event`/`id` stay bounded too).
                if end > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                self.line_done(&chunk[..end], on_event)?
            } else {
                if self.line.len() + end > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                self.line.extend_from_slice(&chunk[..end]);
                let line = std::mem::take(&mut self.line);
                let flow = self.line_done(&line, on_event);
                self.line = line;
                self.line.clear();
                flow?
            };
            let mut next = end + 1;
            if chunk[end] == b'\r' {
                match chunk.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            chunk = &chunk[next..];
            if flow.is_break() {
                self.keep_unread(chunk)?;
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// [`SseDecoder::feed`] for use inside a body sink: a bound violation sets `too_large`
    /// and stops the read.
    pub fn feed_bounded<F>(
        &mut self,
        chunk: &[u8],
        too_large: &mut bool,
        on_event: F,
    ) -> ControlFlow<()>
    where
        F: FnMut(SseEvent<'_>) -> ControlFlow<()>,
    {
        self.feed(chunk, on_event).unwrap_or_else(|_| {
            *too_large = true;
            ControlFlow::Break(())
        })
    }

    /// [`SseDecoder::feed_bounded`] that hands out only what carries JSON-RPC: the data of
    /// `message` events (other event types, e.g. `endpoint`, and empty priming events are
    /// skipped).
    pub fn feed_messages<F>(
        &mut self,
        chunk: &[u8],
        too_large: &mut bool,
        mut on_message: F,
    ) -> ControlFlow<()>
    where
        F: FnMut(&mut [u8]) -> ControlFlow<()>,
    {
        self.feed_bounded(chunk, too_large, |ev| {
            if ev.data.is_empty() || !ev.is_message() {
                return ControlFlow::Continue(());
            }
            on_message(ev.data)
        })
    }

    fn line_done<F>(
        &mut self,
        mut line: &[u8],
        on_event: &mut F,
    ) -> Result<ControlFlow<()>, SseError>
    where
        F: FnMut(SseEvent<'_>) -> ControlFlow<()>,
    {
        if self.first_line {
            self.first_line = false;
            if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = rest;
            }
        }
        if line.is_empty() {
            return Ok(self.dispatch(on_event));
        }
        if line[0] == b':' {
            self.comments += 1;
            return Ok(ControlFlow::Continue(()));
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
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.last_id.clear();
                self.last_id.extend_from_slice(value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so parsing fails only on overflow: saturate rather than forget.
                let digits = std::str::from_utf8(value).unwrap_or_default();
                self.retry_ms = Some(digits.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
        Ok(ControlFlow::Continue(()))
    }

    fn dispatch<F>(&mut self, on_event: &mut F) -> ControlFlow<()>
    where
        F: FnMut(SseEvent<'_>) -> ControlFlow<()>,
    {
        if self.data.is_empty() {
            self.event.clear();
            return ControlFlow::Continue(());
        }
        self.data.pop(); // the trailing LF
        let flow = on_event(SseEvent {
            event: &self.event,
            data: &mut self.data,
            id: &self.last_id,
        });
        self.data.clear();
        self.event.clear();
        flow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Ev {
        event: String,
        data: String,
        id: String,
    }

    fn decode_chunked(input: &[u8], cuts: &[usize]) -> (Vec<Ev>, Option<u64>) {
        let mut d = SseDecoder::new(1 << 20);
        let mut out = Vec::new();
        let mut prev = 0;
        let mut points: Vec<usize> = cuts.iter().copied().filter(|&c| c <= input.len()).collect();
        points.sort_unstable();
        points.push(input.len());
        for p in points {
            let _ = d
                .feed(&input[prev..p], |e| {
                    out.push(Ev {
                        event: String::from_utf8_lossy(e.event).into(),
                        data: String::from_utf8_lossy(e.data).into(),
                        id: String::from_utf8_lossy(e.id).into(),
                    });
                    ControlFlow::Continue(())
                })
                .unwrap();
            prev = p;
        }
        (out, d.retry_ms())
    }

    fn ev(event: &str, data: &str, id: &str) -> Ev {
        Ev {
            event: event.into(),
            data: data.into(),
            id: id.into(),
        }
    }

    const CORPUS: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\n\
id: p1\r\ndata:\r\n\r\n\
retry: 3000\n\
event: message\ndata: {\"a\":\ndata:1}\n\n\
data:no space\r\rdata:  two spaces\n\n\
: comment\n\
event: endpoint\ndata: /messages?sessionId=x\n\n\
id: bad\0id\ndata: x\n\n\
data\n\n\
event: ignored-without-data\n\n\
retry: 12a\n\
unknown: field\ndata: last\n\n\
data: incomplete at end";

    fn expected() -> Vec<Ev> {
        vec![
            ev("", "", "p1"),
            ev("message", "{\"a\":\n1}", "p1"),
            ev("", "no space", "p1"),
            ev("", " two spaces", "p1"),
            ev("endpoint", "/messages?sessionId=x", "p1"),
            ev("", "x", "p1"),
            ev("", "", "p1"),
            ev("", "last", "p1"),
        ]
    }

    #[test]
    fn decodes_the_corpus_whole() {
        let (got, retry) = decode_chunked(CORPUS, &[]);
        assert_eq!(got, expected());
        assert_eq!(retry, Some(3000));
    }

    #[test]
    fn every_single_split_point_gives_the_same_events() {
        for cut in 0..=CORPUS.len() {
            let (got, _) = decode_chunked(CORPUS, &[cut]);
            assert_eq!(got, expected(), "split at {cut}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any chunking, 1-byte chunks included, gives the same events.
        #[test]
        fn arbitrary_chunkings_give_the_same_events(
            cuts in proptest::collection::vec(0..=CORPUS.len(), 0..12),
        ) {
            proptest::prop_assert_eq!(decode_chunked(CORPUS, &cuts).0, expected());
        }
    }

    #[test]
    fn byte_by_byte_gives_the_same_events() {
        let bytewise: Vec<usize> = (0..CORPUS.len()).collect();
        assert_eq!(decode_chunked(CORPUS, &bytewise).0, expected());
    }

    #[test]
    fn break_stops_decoding() {
        let mut d = SseDecoder::default();
        let mut n = 0;
        let flow = d
            .feed(b"data: 1\n\ndata: 2\n\n", |_| {
                n += 1;
                ControlFlow::Break(())
            })
            .unwrap();
        assert!(flow.is_break());
        assert_eq!(n, 1);
    }

    #[test]
    fn bounds_lines_and_events() {
        let mut d = SseDecoder::new(8);
        assert_eq!(
            d.feed(b"data: 0123456789", |_| ControlFlow::Continue(())),
            Err(SseError::TooLarge(8))
        );
        let mut d = SseDecoder::new(8);
        let r = d.feed(b"data: 1234\ndata: 5678\n", |_| ControlFlow::Continue(()));
        assert_eq!(r, Err(SseError::TooLarge(8)));
    }
}
