//! The upcall's two messages (the engine is `graft_api::upcall`, which needs IPC): both
//! register-only, so that the call and its answer take the kernel's fastpath and neither
//! side builds a 64-word message.
//!
//! - The call (server → the graft's thread): label `UPCALL`, one word — the point — and
//!   the input as the message's string (its length is the string's).
//! - The answer: label `ANSWER`, one word — the graft's answer; or label `REFUSED`, one
//!   word — why the thread would not answer (`abi::Error`).
//!
//! Each side takes a message of exactly its shape and nothing else: the graft's thread is
//! the owner's code (hostile for the server), and anybody holding the thread's capability
//! may call it.

use crate::engine::Abort;
use crate::point::Point;
use abi::ipc::{Tag, TAG_STRING};

/// The call's label.
pub const UPCALL: u64 = 0xef;
/// The answer's label.
pub const ANSWER: u64 = 0;
/// The label of a call the graft's thread would not take.
pub const REFUSED: u64 = 1;

/// The call's tag (a string flag, one word: the point).
pub const fn call_tag() -> u64 {
    Tag::new(UPCALL, 1).with_string().0
}

/// The answer's tag: one word, no string, no item.
pub const fn answer_tag() -> u64 {
    Tag::new(ANSWER, 1).0
}

/// The refusal's tag.
pub const fn refused_tag() -> u64 {
    Tag::new(REFUSED, 1).0
}

/// The graft's thread: the point of a call that has exactly the call's shape (label,
/// one word, the string flag and nothing else), `None` for anything else.
pub fn request(tag: u64, w1: u64) -> Option<Point> {
    if tag != call_tag() {
        return None;
    }
    u8::try_from(w1).ok().and_then(Point::from_u8)
}

/// The server: the graft's answer from its reply (tag and first word): only the answer's
/// exact shape is one (a refusal, another label, more words, a string, an item: `Trap`,
/// as a graft that cannot answer).
pub fn answer(tag: u64, w1: u64) -> Result<u64, Abort> {
    if tag == answer_tag() {
        Ok(w1)
    } else {
        Err(Abort::Trap)
    }
}

/// Does a tag carry a string (the received string's length means something)?
pub fn has_string(tag: u64) -> bool {
    tag & TAG_STRING != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call of the right shape is taken for each point; one with another label, more
    /// words, no string, an item, or a point that does not exist is not.
    #[test]
    fn only_a_call_of_the_right_shape_is_taken() {
        for p in Point::ALL {
            assert_eq!(request(call_tag(), p as u64), Some(p));
        }
        assert_eq!(request(call_tag(), 0), None, "no point 0");
        assert_eq!(request(call_tag(), 1 << 8 | 1), None, "a point word past a byte is not truncated");
        assert_eq!(request(Tag::new(UPCALL, 1).0, 1), None, "no string");
        assert_eq!(request(Tag::new(UPCALL, 2).with_string().0, 1), None, "two words");
        assert_eq!(request(Tag::new(UPCALL, 1).with_string().with_items(1).0, 1), None, "an item");
        assert_eq!(request(Tag::new(UPCALL + 1, 1).with_string().0, 1), None, "another label");
        assert!(has_string(call_tag()) && !has_string(answer_tag()));
    }

    /// Only an answer of exactly one word, no string and no item is an answer; a refusal
    /// and anything else is a trap (the default policy answers).
    #[test]
    fn only_an_answer_of_the_right_shape_is_one() {
        assert_eq!(answer(answer_tag(), 7), Ok(7));
        assert_eq!(answer(refused_tag(), 0), Err(Abort::Trap));
        assert_eq!(answer(Tag::new(ANSWER, 2).0, 0), Err(Abort::Trap), "two words");
        assert_eq!(answer(Tag::new(ANSWER, 0).0, 0), Err(Abort::Trap), "no word");
        assert_eq!(answer(Tag::new(ANSWER, 1).with_string().0, 0), Err(Abort::Trap), "a string");
        assert_eq!(answer(Tag::new(ANSWER, 1).with_items(1).0, 0), Err(Abort::Trap), "an item");
        assert_eq!(answer(Tag::new(UPCALL, 1).0, 0), Err(Abort::Trap), "another label");
    }
}
