//! Replies read before, recognised by a compare instead of a scan.
//!
//! A closed-loop run against a tool gets the same reply body again and again, only its id
//! differs. Scanning the body (validating every byte) is the largest part of the generator's
//! own work per request; comparing it with one seen before is a `memcmp`. A [`ReplyMemo`]
//! keeps a few bodies whose top-level `id` was the request's id, split around that id's
//! digits, with what each meant. A new body that is one of them but for the id digits, which
//! are the new request's id in canonical decimal, means the same: the scanner would meet the
//! same tokens but one integer (the bytes around the digits are ASCII punctuation or space,
//! so UTF-8 validity is unchanged), and that integer matches the request again. Any other
//! body is scanned, and learnt.
//!
//! The memo lives per thread, not per session: a hundred thousand resting sessions hold
//! nothing, and users of one tool share what one of them learnt.

use std::ops::Range;

/// How many bodies are kept (replaced in turn): enough for a workload's few operations.
const SLOTS: usize = 8;
/// Larger bodies are not kept (a slot's memory is bounded; a compare of a large body that
/// differs early is still cheap, but keeping it is not).
const MAX_BODY: usize = 16 * 1024;

/// Bodies read before and what they meant (`T`, e.g. an outcome).
#[derive(Debug)]
pub struct ReplyMemo<T> {
    slots: Vec<Slot<T>>,
    next: usize,
}

#[derive(Debug)]
struct Slot<T> {
    body: Vec<u8>,
    id_at: Range<usize>,
    meaning: T,
}

impl<T: Copy> Default for ReplyMemo<T> {
    fn default() -> Self {
        ReplyMemo {
            slots: Vec::with_capacity(SLOTS),
            next: 0,
        }
    }
}

impl<T: Copy> ReplyMemo<T> {
    /// What `body`, the answer to request `id`, means, if a body equal to it but for the id
    /// digits was learnt.
    pub fn recall(&self, body: &[u8], id: u64) -> Option<T> {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        self.slots.iter().find_map(|s| {
            let (pre, post) = (&s.body[..s.id_at.start], &s.body[s.id_at.end..]);
            let fits = body.len() == pre.len() + digits.len() + post.len()
                && body[pre.len()..pre.len() + digits.len()] == *digits
                && body.starts_with(pre)
                && body.ends_with(post);
            fits.then_some(s.meaning)
        })
    }

    /// Keeps `body` and its `meaning` when its top-level id, at `id_at`, is request `id`
    /// written in canonical decimal (as mcpbench writes ids); else keeps nothing.
    pub fn learn(&mut self, body: &[u8], id_at: Option<Range<usize>>, id: u64, meaning: T) {
        let Some(id_at) = id_at else { return };
        let mut digits = itoa::Buffer::new();
        if body.len() > MAX_BODY || body.get(id_at.clone()) != Some(digits.format(id).as_bytes()) {
            return;
        }
        // The digits must be a whole token: a scan that stopped inside a number (`01`, where
        // JSON allows no leading zero) left digits or a fraction after them, and another id's
        // digits in their place could make a different, valid number.
        let before = id_at.start.checked_sub(1).and_then(|i| body.get(i));
        let after = body.get(id_at.end);
        let bounds = |b: Option<&u8>, ok: &[u8]| b.is_some_and(|b| ok.contains(b));
        if !bounds(before, b": \t\r\n") || !bounds(after, b",} \t\r\n") {
            return;
        }
        let slot = Slot {
            body: body.to_vec(),
            id_at,
            meaning,
        };
        if self.slots.len() < SLOTS {
            self.slots.push(slot);
        } else {
            let old = &mut self.slots[self.next];
            old.body.clear();
            old.body.extend_from_slice(body);
            old.id_at = slot.id_at;
            old.meaning = meaning;
            self.next = (self.next + 1) % SLOTS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(body: &str, digits: &str) -> Option<Range<usize>> {
        let i = body.find(&format!("\"id\":{digits}"))? + 5;
        Some(i..i + digits.len())
    }

    #[test]
    fn a_body_but_for_its_id_is_recalled() {
        let mut m = ReplyMemo::default();
        let b7 = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        m.learn(b7.as_bytes(), at(b7, "7"), 7, 'a');
        assert_eq!(m.recall(b7.as_bytes(), 7), Some('a'));
        let b1234 = r#"{"jsonrpc":"2.0","id":1234,"result":{}}"#;
        assert_eq!(m.recall(b1234.as_bytes(), 1234), Some('a'));
        // The id of another request, a changed byte, a longer body: not this reply.
        assert_eq!(m.recall(b1234.as_bytes(), 1235), None);
        let changed = r#"{"jsonrpc":"2.0","id":1234,"result":[]}"#;
        assert_eq!(m.recall(changed.as_bytes(), 1234), None);
        let longer = r#"{"jsonrpc":"2.0","id":1234,"result":{}} "#;
        assert_eq!(m.recall(longer.as_bytes(), 1234), None);
    }

    #[test]
    fn only_canonical_ids_of_the_request_are_learnt() {
        let mut m = ReplyMemo::default();
        let other = r#"{"id":8,"result":{}}"#;
        m.learn(other.as_bytes(), at(other, "8"), 7, 'x');
        let none = r#"{"result":{}}"#;
        m.learn(none.as_bytes(), None, 7, 'x');
        let big = format!(r#"{{"id":7,"result":"{}"}}"#, "x".repeat(MAX_BODY));
        m.learn(big.as_bytes(), at(&big, "7"), 7, 'x');
        // Digits that are not the whole number: `07` (a scan stops after the 0), `0.5`.
        for partial in [r#"{"id":07,"result":{}}"#, r#"{"id":0.5,"result":{}}"#] {
            m.learn(partial.as_bytes(), at(partial, "0"), 0, 'x');
        }
        assert!(m.slots.is_empty());
    }

    #[test]
    fn slots_are_replaced_in_turn() {
        let mut m = ReplyMemo::default();
        let body = |k: usize| format!(r#"{{"id":1,"result":{{"k":{k}}}}}"#);
        for k in 0..SLOTS + 1 {
            let b = body(k);
            m.learn(b.as_bytes(), at(&b, "1"), 1, k);
        }
        assert_eq!(m.recall(body(0).as_bytes(), 1), None);
        for k in 1..SLOTS + 1 {
            assert_eq!(m.recall(body(k).as_bytes(), 1), Some(k));
        }
    }
}
