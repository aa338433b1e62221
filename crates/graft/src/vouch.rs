//! What the table has just checked in slices (`prep`), so that the engine built from the
//! very same bytes does not check it again in one go: an eBPF program verified for a
//! memory length, a WebAssembly module validated, a signature checked with a key. The
//! table vouches while it builds the engine from the buffer it checked and changes
//! nothing in, and stops vouching right after; an engine asks `vouched` with the bytes
//! it was given (their place and length, and what else the check was for), so anything
//! else — another buffer, another length, another key — is checked in full as before.

use core::sync::atomic::{AtomicUsize, Ordering};

/// Words of a vouch: what was checked (`Kind`), the bytes' place and length, and up to
/// eight more words the check was for (a memory's length, a signature's place, a key).
const WORDS: usize = 11;

/// The vouch in force (all zero: none). Written only by the table's thread while it
/// builds an engine; the first word last, so a half-written vouch matches nothing.
static VOUCHED: [AtomicUsize; WORDS] = [const { AtomicUsize::new(0) }; WORDS];

/// What a vouch says was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Kind {
    /// An eBPF program, proven by the verifier (`with`: the memory's length).
    Verified = 1,
    /// A WebAssembly module, validated with wasmi's features.
    Validated = 2,
    /// A graft file's signature, checked (`with`: the signature's place and the key).
    Signed = 3,
}

fn words(kind: Kind, bytes: &[u8], with: &[usize]) -> Option<[usize; WORDS]> {
    let mut w = [0; WORDS];
    if with.len() > WORDS - 3 || bytes.is_empty() {
        return None;
    }
    w[0] = kind as usize;
    w[1] = bytes.as_ptr() as usize;
    w[2] = bytes.len();
    w[3..3 + with.len()].copy_from_slice(with);
    Some(w)
}

/// Vouch for `bytes` (exactly these, where they are) checked as `kind` for `with`, or
/// (`None`) for nothing.
pub fn vouch(what: Option<(Kind, &[u8], &[usize])>) {
    let w = what.and_then(|(k, b, with)| words(k, b, with)).unwrap_or([0; WORDS]);
    VOUCHED[0].store(0, Ordering::SeqCst);
    for (v, x) in VOUCHED.iter().zip(w).skip(1) {
        v.store(x, Ordering::SeqCst);
    }
    VOUCHED[0].store(w[0], Ordering::SeqCst);
}

/// Has the table just checked `bytes` as `kind` for `with`?
pub fn vouched(kind: Kind, bytes: &[u8], with: &[usize]) -> bool {
    words(kind, bytes, with).is_some_and(|w| VOUCHED.iter().zip(w).all(|(v, x)| v.load(Ordering::SeqCst) == x))
}

/// The words of a 32-byte key, for `with`.
pub fn key_words(key: &[u8; 32]) -> [usize; 4] {
    let mut w = [0; 4];
    for (i, c) in key.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        w[i] = u64::from_le_bytes(b) as usize;
    }
    w
}
