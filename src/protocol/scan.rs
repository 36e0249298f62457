//! A validating single-pass scanner for JSON-RPC envelopes: the default codec.
//!
//! The generator needs four things from a response (id, result or error, `isError`,
//! `resultType`) and a verdict on whether the bytes are JSON at all. serde_json gets there
//! through its generic visitor machinery (~30 instructions per byte on small responses, see
//! `benches/hotpath.rs`); this scanner walks the bytes once, validating structure, strings,
//! escapes, numbers and nesting, and borrows everything it returns. It gives the same verdict
//! as the serde_json codec on every input (a differential test checks this), including which
//! malformed messages are invalid.

use std::borrow::Cow;
use std::ops::Range;

use super::rpc_message::{DecodeError, IdRef, Incoming};

const MAX_DEPTH: u32 = 128;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

type R<T> = Result<T, DecodeError>;
const BAD: DecodeError = DecodeError::Json;

/// A string as it appears between its quotes.
struct RawStr<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> RawStr<'a> {
    fn cow(&self) -> R<Cow<'a, str>> {
        if !self.escaped {
            // The input was validated as UTF-8 as a whole.
            return std::str::from_utf8(self.raw)
                .map(Cow::Borrowed)
                .map_err(|_| BAD);
        }
        let mut quoted = Vec::with_capacity(self.raw.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(self.raw);
        quoted.push(b'"');
        serde_json::from_slice::<String>(&quoted)
            .map(Cow::Owned)
            .map_err(|_| BAD)
    }

    fn is(&self, key: &str) -> bool {
        if self.escaped {
            self.cow().is_ok_and(|c| c == key)
        } else {
            self.raw == key.as_bytes()
        }
    }
}

/// The index of the first byte at or after `i` that ends a run of plain string characters
/// (a quote, a backslash or a control character), or `b.len()`. Eight bytes at a time.
#[inline]
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let quote = x ^ (ONES * b'"' as u64);
        let backslash = x ^ (ONES * b'\\' as u64);
        let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v;
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        let hit = (zero_byte(quote) | zero_byte(backslash) | control) & HIGHS;
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

impl<'a> Scanner<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied().ok_or(BAD)
    }

    #[inline]
    fn expect(&mut self, c: u8) -> R<()> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            Err(BAD)
        }
    }

    fn string(&mut self) -> R<RawStr<'a>> {
        self.expect(b'"')?;
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let mut escaped = false;
        loop {
            i = skip_plain(b, i);
            let c = *b.get(i).ok_or(BAD)?;
            i += 1;
            match c {
                b'"' => {
                    self.i = i;
                    return Ok(RawStr {
                        raw: &b[start..i - 1],
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    let e = *b.get(i).ok_or(BAD)?;
                    i += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        // Lone surrogates are valid JSON syntax (RFC 8259 §8.2); a string that
                        // must be decoded (an id, a method) rejects them in `RawStr::cow`.
                        b'u' => {
                            let hex = b.get(i..i + 4).ok_or(BAD)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(BAD);
                            }
                            i += 4;
                        }
                        _ => return Err(BAD),
                    }
                }
                _ => return Err(BAD), // a control character
            }
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - s
    }

    /// A number; returns its text and whether it is an integer (no fraction or exponent).
    fn number(&mut self) -> R<(&'a [u8], bool)> {
        self.ws();
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(BAD),
        }
        let mut integer = true;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            integer = false;
            if self.digits() == 0 {
                return Err(BAD);
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            integer = false;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(BAD);
            }
        }
        Ok((&self.b[start..self.i], integer))
    }

    fn literal(&mut self, lit: &[u8]) -> R<()> {
        if self.b.get(self.i..self.i + lit.len()) == Some(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(BAD)
        }
    }

    /// Skips any value, validating it.
    fn skip(&mut self, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(BAD);
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => {
                self.i += 1;
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.string()?;
                    self.expect(b':')?;
                    self.skip(depth + 1)?;
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(BAD),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.peek()? == b']' {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(BAD),
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// Past a member's value (validated unless `checked`); where its bytes are.
    fn member_value(&mut self, checked: Checked) -> R<Range<usize>> {
        self.ws();
        let at = self.i;
        match checked {
            Checked::No => self.skip(1)?,
            Checked::Yes => self.i = skip_valid(self.b, at).ok_or(BAD)?,
        }
        Ok(at..self.i)
    }

    /// Iterates the members of an object, calling `f` with each key; `f` must consume the
    /// value.
    fn object<F: FnMut(&mut Self, RawStr<'a>) -> R<()>>(&mut self, mut f: F) -> R<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(BAD),
            }
        }
    }

    fn id(&mut self) -> R<IdRef<'a>> {
        match self.peek()? {
            b'"' => Ok(IdRef::Str(self.string()?.cow()?)),
            b'n' => self.literal(b"null").map(|_| IdRef::Null),
            b'-' | b'0'..=b'9' => {
                let (text, integer) = self.number()?;
                let s = std::str::from_utf8(text).map_err(|_| BAD)?;
                if !integer {
                    // serde_json rejects floats that overflow to infinity.
                    return match s.parse::<f64>() {
                        Ok(f) if f.is_finite() => Ok(IdRef::Invalid),
                        _ => Err(BAD),
                    };
                }
                // serde_json reads `-0` as the float -0.0, and integers beyond i64/u64 as
                // floats: not an id.
                if s == "-0" {
                    return Ok(IdRef::Invalid);
                }
                Ok(match (s.parse::<u64>(), s.parse::<i64>()) {
                    (Ok(u), _) => IdRef::Num(u as i128),
                    (_, Ok(i)) => IdRef::Num(i as i128),
                    _ => IdRef::Invalid,
                })
            }
            b'{' | b'[' => self.skip(1).map(|_| IdRef::Invalid),
            b't' | b'f' => Err(BAD), // a boolean id: serde_json rejects it too
            _ => Err(BAD),
        }
    }

    fn bool(&mut self) -> R<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|_| true),
            b'f' => self.literal(b"false").map(|_| false),
            b'n' => self.literal(b"null").map(|_| false),
            _ => Err(BAD),
        }
    }

    fn opt_string(&mut self) -> R<Option<Cow<'a, str>>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|_| None);
        }
        Ok(Some(self.string()?.cow()?))
    }

    /// `null`, or what `value` reads.
    fn nullable<T>(&mut self, value: fn(&mut Self) -> R<T>) -> R<Option<T>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|_| None);
        }
        value(self).map(Some)
    }

    /// A result object: `isError` (absent is false) and `resultType`; the rest is skipped.
    fn result(&mut self) -> R<(bool, Option<Cow<'a, str>>)> {
        let mut is_error: Option<bool> = None;
        let mut result_type: Option<Option<Cow<'a, str>>> = None;
        self.object(|s, k| {
            if k.is("isError") {
                once(&mut is_error, || s.bool())
            } else if k.is("resultType") {
                once(&mut result_type, || s.opt_string())
            } else {
                s.skip(2)
            }
        })?;
        Ok((is_error.unwrap_or(false), result_type.flatten()))
    }

    /// An error object's integer `code` (required); the rest is skipped.
    fn error_code(&mut self) -> R<i64> {
        let mut code: Option<i64> = None;
        self.object(|s, k| {
            if k.is("code") {
                once(&mut code, || {
                    let (text, integer) = s.number()?;
                    // serde_json reads `-0` as the float -0.0, which is no i64 (as for ids).
                    if !integer || text == b"-0" {
                        return Err(BAD);
                    }
                    std::str::from_utf8(text)
                        .ok()
                        .and_then(|t| t.parse().ok())
                        .ok_or(BAD)
                })
            } else {
                s.skip(2)
            }
        })?;
        code.ok_or(BAD)
    }
}

/// Reads a key's value into its slot once: a repeated key is an error, as serde_json makes it.
fn once<T>(slot: &mut Option<T>, value: impl FnOnce() -> R<T>) -> R<()> {
    if slot.is_some() {
        return Err(BAD);
    }
    *slot = Some(value()?);
    Ok(())
}

/// Decodes an envelope; same contract as `jsonrpc::decode`.
pub fn decode(buf: &[u8]) -> Result<Incoming<'_>, DecodeError> {
    decode_spanned(buf).0
}

/// [`decode`], and where the top-level `id` value's bytes are (when the scan got that far).
pub fn decode_spanned(buf: &[u8]) -> (Result<Incoming<'_>, DecodeError>, Option<Range<usize>>) {
    let mut id_at = None;
    let m = envelope(buf, &mut id_at);
    (m, id_at)
}

/// How much of the JSON in `buf` is still to be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Nothing yet: every byte is validated (the verdict serde_json gives).
    No,
    /// `buf` is (part of) a message a codec decoded as a whole, so valid JSON: values are
    /// stepped over by matching brackets and skipping strings, not checked again (a gateway
    /// takes an upstream's `result` this way: 61 % of the checking walk's instructions on the
    /// reference server's `echo` reply). Bytes that are not valid after all give a wrong span
    /// or `None`, never a panic.
    Yes,
}

/// Past the value at `i` of valid JSON (see [`Checked::Yes`]): strings skipped, brackets
/// counted, nothing else looked at. `None` when the bytes end first.
fn skip_valid(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *b.get(i)? {
            b'"' => {
                i = end_of_string(b, i + 1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            // What ends a number or a literal at the top: the enclosing object's or array's
            // punctuation, or whitespace.
            b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t' if depth == 0 => return Some(i),
            _ => i += 1,
        }
    }
}

/// Past the closing quote of the string whose contents start at `i` (valid JSON).
#[inline]
fn end_of_string(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i = skip_plain(b, i);
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1, // a control character (not in valid JSON): stepped over
        }
    }
}

/// Walks the members of the JSON object `buf` (validated as a whole unless `checked`): `f`
/// gets each key and the span of its value. `None` when `buf` is not a JSON object or `f`
/// refuses a member.
fn members<'a>(
    buf: &'a [u8],
    checked: Checked,
    mut f: impl FnMut(&RawStr<'a>, Range<usize>) -> R<()>,
) -> Option<()> {
    if checked == Checked::No {
        std::str::from_utf8(buf).ok()?;
    }
    let mut s = Scanner { b: buf, i: 0 };
    s.object(|s, k| {
        let value = s.member_value(checked)?;
        f(&k, value)
    })
    .ok()?;
    s.ws();
    (s.i == buf.len()).then_some(())
}

/// The bytes of the value of top-level member `key` of the JSON object `buf` (`None` when
/// `buf` is not a JSON object, has no such member or has it twice).
pub fn member<'a>(buf: &'a [u8], key: &str, checked: Checked) -> Option<&'a [u8]> {
    let mut found: Option<Range<usize>> = None;
    members(buf, checked, |k, value| {
        if k.is(key) {
            once(&mut found, || Ok(value))?;
        }
        Ok(())
    })?;
    found.map(|r| &buf[r])
}

/// The JSON object `buf` without its top-level members named in `drop`; the others as written,
/// in their order. `None` when `buf` is not a JSON object.
pub fn without_members(buf: &[u8], drop: &[&str], checked: Checked) -> Option<Vec<u8>> {
    if checked == Checked::No {
        std::str::from_utf8(buf).ok()?;
    }
    let mut s = Scanner { b: buf, i: 0 };
    let mut out = Vec::with_capacity(buf.len());
    copy_without(&mut s, drop, checked, &mut out).ok()?;
    s.ws();
    (s.i == buf.len()).then_some(out)
}

/// [`member`] `key` of valid JSON ([`Checked::Yes`]), and when its value is an object, that
/// object [`without_members`] `drop`: one walk over the value instead of two (a gateway hands
/// an older client a newer upstream's `result` so).
pub fn member_without(buf: &[u8], key: &str, drop: &[&str]) -> Option<Vec<u8>> {
    let mut found: Option<Vec<u8>> = None;
    let mut s = Scanner { b: buf, i: 0 };
    s.object(|s, k| {
        s.ws();
        let at = s.i;
        if !k.is(key) {
            s.i = skip_valid(buf, at).ok_or(BAD)?;
            return Ok(());
        }
        let mut out = Vec::with_capacity(buf.len() - at);
        if buf.get(at) == Some(&b'{') {
            copy_without(s, drop, Checked::Yes, &mut out)?;
        } else {
            s.i = skip_valid(buf, at).ok_or(BAD)?;
            out.extend_from_slice(&buf[at..s.i]);
        }
        once(&mut found, || Ok(out))
    })
    .ok()?;
    s.ws();
    (s.i == buf.len()).then_some(())?;
    found
}

/// Copies the object at `s` to `out` without its members named in `drop`.
fn copy_without(s: &mut Scanner<'_>, drop: &[&str], checked: Checked, out: &mut Vec<u8>) -> R<()> {
    let buf = s.b;
    out.push(b'{');
    let first = out.len();
    s.object(|s, k| {
        let value = s.member_value(checked)?;
        if !drop.iter().any(|d| k.is(d)) {
            if out.len() > first {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(k.raw);
            out.extend_from_slice(b"\":");
            out.extend_from_slice(&buf[value]);
        }
        Ok(())
    })?;
    out.push(b'}');
    Ok(())
}

fn envelope<'a>(buf: &'a [u8], id_at: &mut Option<Range<usize>>) -> R<Incoming<'a>> {
    std::str::from_utf8(buf).map_err(|_| BAD)?;
    let mut s = Scanner { b: buf, i: 0 };
    if s.peek()? == b'[' {
        return Err(DecodeError::Batch);
    }
    let mut id: Option<IdRef<'_>> = None;
    let mut method: Option<Option<Cow<'_, str>>> = None;
    let mut result: Option<Option<(bool, Option<Cow<'_, str>>)>> = None;
    let mut error: Option<Option<i64>> = None;
    s.object(|s, key| {
        if key.is("id") {
            s.ws();
            let at = s.i;
            once(&mut id, || s.id())?;
            *id_at = Some(at..s.i);
            Ok(())
        } else if key.is("method") {
            once(&mut method, || s.opt_string())
        } else if key.is("result") {
            once(&mut result, || s.nullable(Scanner::result))
        } else if key.is("error") {
            once(&mut error, || s.nullable(Scanner::error_code))
        } else {
            s.skip(1)
        }
    })?;
    s.ws();
    if s.i != buf.len() {
        return Err(BAD);
    }
    let id = match id {
        Some(IdRef::Null) | None => None,
        Some(other) => Some(other),
    };
    match (method.flatten(), result.flatten(), error.flatten()) {
        (None, Some((is_error, result_type)), None) => Ok(Incoming::Result {
            id: id.unwrap_or(IdRef::Null),
            is_error,
            result_type,
        }),
        (None, None, Some(code)) => Ok(Incoming::Error {
            id: id.unwrap_or(IdRef::Null),
            code,
        }),
        (Some(method), None, None) => match id {
            Some(id) => Ok(Incoming::Request { id, method }),
            None => Ok(Incoming::Notification { method }),
        },
        _ => Err(DecodeError::Shape),
    }
}
