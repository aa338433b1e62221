//! The example grafts written in safe Rust, one source for every technology that runs
//! Rust: compiled into a server (native, the trusted baseline), compiled to WebAssembly
//! (`grafts/wasm`, run by `wasmi` or ahead of time), and signed. Each function is a
//! graft point's entry: `input` is what the point hands the graft for this call (read
//! only), `state` the graft's own bytes that persist between calls (the server undoes
//! a call's changes to them when the call is aborted), the result one word.
//!
//! The layouts are the graft points' (`graft::point`); they are repeated here only as
//! the few constants the code needs, so that this crate has no dependencies and builds
//! for any target.
#![no_std]
#![forbid(unsafe_code)]

/// Bytes of a little-endian word at `at`, or 0 past the end (never a panic: a graft
/// compiled from this must not trap on short input).
fn word(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        None => 0,
    }
}

/// The null graft: does nothing, answers 0 (the per-call floor of a technology).
pub fn null(_input: &[u8], _state: &mut [u8]) -> u64 {
    0
}

/// Hot-list eviction (VINO §3.1; the paper's hot list holds 64 pages). `input` is the eviction point's candidates, up to 8
/// block numbers, the least recently used first; `state` is the hot list the program
/// filled: word 0 = entries, then that many block numbers (up to `HOT_MAX`). The
/// answer is the index of the first candidate that is not hot, or 0 (the default
/// policy's choice) when all of them are.
pub fn hotlist(input: &[u8], state: &mut [u8]) -> u64 {
    let n = (input.len() / 8).min(8);
    let hot = (word(state, 0) as usize).min(HOT_MAX).min(state.len().saturating_sub(8) / 8);
    let list = state.get(8..8 + 8 * hot).unwrap_or(&[]);
    for (i, c) in input.chunks_exact(8).take(n).enumerate() {
        let b = word(c, 0);
        if !list.chunks_exact(8).any(|h| word(h, 0) == b) {
            return i as u64;
        }
    }
    0
}

/// The hot list's capacity in blocks (its state is `8 + 8 * HOT_MAX` bytes).
pub const HOT_MAX: usize = 64;
/// Bytes of the hot-list graft's state.
pub const HOT_STATE: usize = 8 + 8 * HOT_MAX;

#[cfg(test)]
mod tests {
    use super::*;

    fn state(hot: &[u64]) -> [u8; HOT_STATE] {
        let mut s = [0u8; HOT_STATE];
        s[..8].copy_from_slice(&(hot.len() as u64).to_le_bytes());
        for (k, b) in hot.iter().enumerate() {
            s[8 + 8 * k..16 + 8 * k].copy_from_slice(&b.to_le_bytes());
        }
        s
    }

    fn cands(c: &[u64]) -> [u8; 64] {
        let mut s = [0u8; 64];
        for (k, b) in c.iter().enumerate() {
            s[8 * k..8 * k + 8].copy_from_slice(&b.to_le_bytes());
        }
        s
    }

    #[test]
    fn hotlist_skips_hot_blocks() {
        let c = cands(&[5, 6, 7, 8]);
        assert_eq!(hotlist(&c[..32], &mut state(&[5, 6])), 2);
        assert_eq!(hotlist(&c[..32], &mut state(&[])), 0);
        assert_eq!(hotlist(&c[..32], &mut state(&[9])), 0);
        assert_eq!(hotlist(&c[..32], &mut state(&[5, 6, 7, 8])), 0, "all hot: the default");
        assert_eq!(hotlist(&c[..8], &mut state(&[6])), 0);
    }

    #[test]
    fn hotlist_bounds_a_hostile_state() {
        let c = cands(&[1, 2]);
        let mut s = state(&[1]);
        s[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(hotlist(&c[..16], &mut s), 1, "the count is capped at HOT_MAX");
        assert_eq!(hotlist(&c[..16], &mut [0u8; 3]), 0, "a short state reads as empty");
        assert_eq!(hotlist(&[], &mut s), 0);
    }
}
