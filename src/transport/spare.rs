//! A worker thread's spare byte buffers: what an idle session lends back.
//!
//! A session that thinks between calls needs none of its request, response
//! and read buffers; holding them would cost every idle session some 20 KiB. A session takes
//! buffers from its thread's spares when an exchange needs them and gives them back when it
//! rests ([`Session::rest`](super::Session::rest)). Memory is then O(sessions busy at once),
//! and a steady run allocates nothing: buffers go round between the spares and the sessions,
//! keeping their capacity. Thread-local (one per worker's current-thread runtime): no lock.

use std::cell::RefCell;

/// Capacity of a fresh byte buffer (a request or a response message).
const FRESH: usize = 1024;

thread_local! {
    /// Buffers of any length, cleared.
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    /// Read buffers, initialised (their length is their size).
    static READS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Makes sure `buf` has storage: a spare one if it has none (empty, capacity kept).
#[inline]
pub(crate) fn ensure(buf: &mut Vec<u8>) {
    if buf.capacity() == 0 {
        *buf = BYTES
            .with_borrow_mut(Vec::pop)
            .unwrap_or_else(|| Vec::with_capacity(FRESH));
    }
}

/// Gives `buf`'s storage back to the spares (it is left empty, with none).
#[inline]
pub(crate) fn give(buf: &mut Vec<u8>) {
    if buf.capacity() > 0 {
        let mut b = std::mem::take(buf);
        b.clear();
        BYTES.with_borrow_mut(|s| s.push(b));
    }
}

/// A read buffer of at least `size` initialised bytes: a spare one, or a new one.
#[inline]
pub(crate) fn take_read(size: usize) -> Vec<u8> {
    match READS.with_borrow_mut(Vec::pop) {
        Some(b) if b.len() >= size => b,
        _ => vec![0; size],
    }
}

/// Gives a read buffer back to the spares (its contents are garbage from now on).
#[inline]
pub(crate) fn give_read(buf: Vec<u8>) {
    if !buf.is_empty() {
        READS.with_borrow_mut(|s| s.push(buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_go_round_with_their_capacity() {
        let mut a = Vec::new();
        ensure(&mut a);
        a.extend_from_slice(&[7; 5000]);
        let cap = a.capacity();
        give(&mut a);
        assert_eq!(a.capacity(), 0, "given back: no storage left");
        let mut b = Vec::new();
        ensure(&mut b);
        assert!(b.is_empty(), "a spare comes cleared");
        assert_eq!(b.capacity(), cap, "the same storage, capacity kept");
        let r = take_read(64);
        assert_eq!(r.len(), 64);
        let p = r.as_ptr();
        give_read(r);
        let again = take_read(64);
        assert_eq!(again.as_ptr(), p, "the read buffer went round");
        give_read(again);
        let bigger = take_read(128);
        assert_eq!(bigger.len(), 128, "a spare too small is not handed out");
    }
}
