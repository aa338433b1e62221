//! The example grafts written in safe Rust, one source for every technology that runs
//! Rust: compiled into a server (native, the trusted baseline), compiled to WebAssembly
//! (`wasm/` here, run by `wasmi` or ahead of time), and signed. Each function is a
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

/// A graft that never returns — the mistake a key holder may sign: signed code is
/// trusted to be memory safe, not to end, and the server's watchdog stops it (it is
/// built signed only, as the hostile example of that technology).
pub fn spin(_input: &[u8], state: &mut [u8]) -> u64 {
    let mut n = 0u8;
    loop {
        n = n.wrapping_add(1);
        if let Some(b) = state.first_mut() {
            *b = n;
        }
    }
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

/// A log-structured logical disk (VINO §3.3) as a black-box graft: a segment's
/// logical blocks (at most `LD_LOGICAL`) live wherever the log put them last among its
/// physical blocks (at most `LD_PHYSICAL`). Input: word 0 = logical block, word 1 =
/// the segment's blocks, word 2 = 1 for a write. A write takes the next free physical
/// block from the log's head (the old one is free again); a read answers where the
/// block is, or the segment's blocks for one never written. State: head (u32), then
/// `LD_LOGICAL` map entries (u32: physical + 1, 0 unmapped), then a bitmap of the
/// physical blocks in use. Answers `u64::MAX` (refused by the point) for input it
/// cannot take or when no block is free.
pub fn ldisk(input: &[u8], state: &mut [u8]) -> u64 {
    let (l, blocks, write) = (word(input, 0), word(input, 8), word(input, 16) != 0);
    // A fixed-size view, and bounds the compiler can see: this graft cannot panic (the
    // signed build links only grafts with no path to a panic).
    let Some(state) = state.get_mut(..LD_STATE).and_then(|s| <&mut [u8; LD_STATE]>::try_from(s).ok()) else {
        return u64::MAX;
    };
    if input.len() < 24 || l >= LD_LOGICAL as u64 || blocks > LD_PHYSICAL as u64 {
        return u64::MAX;
    }
    let Some(p) = core::num::NonZeroUsize::new(blocks as usize) else { return u64::MAX };
    let at = 4 + 4 * (l as usize % LD_LOGICAL);
    let mapped = u32::from_le_bytes([state[at], state[at + 1], state[at + 2], state[at + 3]]) as usize;
    if !write {
        return if mapped == 0 || mapped > p.get() { blocks } else { (mapped - 1) as u64 };
    }
    const BITMAP: usize = 4 + 4 * LD_LOGICAL;
    let bit = |b: usize| (BITMAP + (b % LD_PHYSICAL) / 8, 1u8 << (b % 8));
    let used = |s: &[u8; LD_STATE], b: usize| {
        let (i, m) = bit(b);
        s[i] & m != 0
    };
    let head = u32::from_le_bytes([state[0], state[1], state[2], state[3]]) as usize % p;
    let Some(free) = (0..p.get()).map(|k| (head + k) % p).find(|b| !used(state, *b)) else { return u64::MAX };
    if mapped != 0 && mapped <= p.get() {
        let (i, m) = bit(mapped - 1);
        state[i] &= !m;
    }
    let (i, m) = bit(free);
    state[i] |= m;
    state[at..at + 4].copy_from_slice(&(free as u32 + 1).to_le_bytes());
    state[..4].copy_from_slice(&(((free + 1) % p) as u32).to_le_bytes());
    free as u64
}

/// The logical-disk graft's capacity: logical blocks, physical blocks.
pub const LD_LOGICAL: usize = 512;
pub const LD_PHYSICAL: usize = 1024;
/// Bytes of its state: head, map, bitmap.
pub const LD_STATE: usize = 4 + 4 * LD_LOGICAL + LD_PHYSICAL / 8;

/// MD5 (RFC 1321) as a stream graft (VINO §3.2, the fingerprint). `state`: A, B, C, D
/// (four little-endian u32; all zero: a new stream) and the bytes hashed so far (u64).
/// Input of 64 bytes or more must be whole 64-byte blocks (the stream point hands
/// whole disk blocks); shorter input (empty too) ends the stream: the tail, the
/// padding and the length are hashed and the digest is left in `state[0..16]`. The
/// answer is 0, or 1 (refused by the point) for input it cannot take.
pub fn md5(input: &[u8], state: &mut [u8]) -> u64 {
    if state.len() < MD5_STATE {
        return 1;
    }
    let mut h = [0u32; 4];
    for (k, x) in h.iter_mut().enumerate() {
        *x = u32::from_le_bytes([state[4 * k], state[4 * k + 1], state[4 * k + 2], state[4 * k + 3]]);
    }
    if h == [0; 4] {
        h = MD5_INIT;
    }
    let mut total = word(state, 16);
    if input.len() >= 64 {
        if !input.len().is_multiple_of(64) {
            return 1;
        }
        for b in input.chunks_exact(64) {
            if let Ok(b) = b.try_into() {
                md5_block(&mut h, b);
            }
        }
        total = total.wrapping_add(input.len() as u64);
    } else {
        total = total.wrapping_add(input.len() as u64);
        let mut tail = [0u8; 128];
        tail[..input.len()].copy_from_slice(input);
        tail[input.len()] = 0x80;
        let n = if input.len() < 56 { 64 } else { 128 };
        tail[n - 8..n].copy_from_slice(&total.wrapping_mul(8).to_le_bytes());
        for b in tail[..n].chunks_exact(64) {
            if let Ok(b) = b.try_into() {
                md5_block(&mut h, b);
            }
        }
    }
    for (k, x) in h.iter().enumerate() {
        state[4 * k..4 * k + 4].copy_from_slice(&x.to_le_bytes());
    }
    state[16..24].copy_from_slice(&total.to_le_bytes());
    0
}

/// Bytes of the MD5 graft's state.
pub const MD5_STATE: usize = 24;
const MD5_INIT: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

/// One 64-byte block into the chaining value (RFC 1321's MD5Transform), its 64 steps
/// written out as the RFC does (a loop with a `match` per step cost six times as much).
/// (The block as an array, not a slice: its length known, so that no bounds check is left
/// where the compiler does not inline this into its caller.) Inlined into each of its
/// two calls: as a call of its own, the native build — whose functions keep a frame pointer,
/// as the servers' all do — paid its frame's set-up 16 times a KiB and was no longer the
/// fastest code. (Not in WebAssembly, where a call is cheap and compiled WebAssembly's
/// frames are bounded: inlined, its one frame outgrew the bound.)
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
fn md5_block(h: &mut [u32; 4], block: &[u8; 64]) {
    let mut x = [0u32; 16];
    for (k, w) in x.iter_mut().enumerate() {
        *w = u32::from_le_bytes([block[4 * k], block[4 * k + 1], block[4 * k + 2], block[4 * k + 3]]);
    }
    let [mut a, mut b, mut c, mut d] = *h;
    let f = |b: u32, c: u32, d: u32| (b & c) | (!b & d);
    let g = |b: u32, c: u32, d: u32| (d & b) | (!d & c);
    let hh = |b: u32, c: u32, d: u32| b ^ c ^ d;
    let i = |b: u32, c: u32, d: u32| c ^ (b | !d);
    macro_rules! step {
        (f, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr, $k:expr) => {
            $a = $b.wrapping_add($a.wrapping_add(f($b, $c, $d)).wrapping_add(x[$x]).wrapping_add($k).rotate_left($s))
        };
        (g, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr, $k:expr) => {
            $a = $b.wrapping_add($a.wrapping_add(g($b, $c, $d)).wrapping_add(x[$x]).wrapping_add($k).rotate_left($s))
        };
        (h, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr, $k:expr) => {
            $a = $b.wrapping_add($a.wrapping_add(hh($b, $c, $d)).wrapping_add(x[$x]).wrapping_add($k).rotate_left($s))
        };
        (i, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr, $k:expr) => {
            $a = $b.wrapping_add($a.wrapping_add(i($b, $c, $d)).wrapping_add(x[$x]).wrapping_add($k).rotate_left($s))
        };
    }
    step!(f, a, b, c, d, 0, 7, 0xd76aa478);
    step!(f, d, a, b, c, 1, 12, 0xe8c7b756);
    step!(f, c, d, a, b, 2, 17, 0x242070db);
    step!(f, b, c, d, a, 3, 22, 0xc1bdceee);
    step!(f, a, b, c, d, 4, 7, 0xf57c0faf);
    step!(f, d, a, b, c, 5, 12, 0x4787c62a);
    step!(f, c, d, a, b, 6, 17, 0xa8304613);
    step!(f, b, c, d, a, 7, 22, 0xfd469501);
    step!(f, a, b, c, d, 8, 7, 0x698098d8);
    step!(f, d, a, b, c, 9, 12, 0x8b44f7af);
    step!(f, c, d, a, b, 10, 17, 0xffff5bb1);
    step!(f, b, c, d, a, 11, 22, 0x895cd7be);
    step!(f, a, b, c, d, 12, 7, 0x6b901122);
    step!(f, d, a, b, c, 13, 12, 0xfd987193);
    step!(f, c, d, a, b, 14, 17, 0xa679438e);
    step!(f, b, c, d, a, 15, 22, 0x49b40821);
    step!(g, a, b, c, d, 1, 5, 0xf61e2562);
    step!(g, d, a, b, c, 6, 9, 0xc040b340);
    step!(g, c, d, a, b, 11, 14, 0x265e5a51);
    step!(g, b, c, d, a, 0, 20, 0xe9b6c7aa);
    step!(g, a, b, c, d, 5, 5, 0xd62f105d);
    step!(g, d, a, b, c, 10, 9, 0x02441453);
    step!(g, c, d, a, b, 15, 14, 0xd8a1e681);
    step!(g, b, c, d, a, 4, 20, 0xe7d3fbc8);
    step!(g, a, b, c, d, 9, 5, 0x21e1cde6);
    step!(g, d, a, b, c, 14, 9, 0xc33707d6);
    step!(g, c, d, a, b, 3, 14, 0xf4d50d87);
    step!(g, b, c, d, a, 8, 20, 0x455a14ed);
    step!(g, a, b, c, d, 13, 5, 0xa9e3e905);
    step!(g, d, a, b, c, 2, 9, 0xfcefa3f8);
    step!(g, c, d, a, b, 7, 14, 0x676f02d9);
    step!(g, b, c, d, a, 12, 20, 0x8d2a4c8a);
    step!(h, a, b, c, d, 5, 4, 0xfffa3942);
    step!(h, d, a, b, c, 8, 11, 0x8771f681);
    step!(h, c, d, a, b, 11, 16, 0x6d9d6122);
    step!(h, b, c, d, a, 14, 23, 0xfde5380c);
    step!(h, a, b, c, d, 1, 4, 0xa4beea44);
    step!(h, d, a, b, c, 4, 11, 0x4bdecfa9);
    step!(h, c, d, a, b, 7, 16, 0xf6bb4b60);
    step!(h, b, c, d, a, 10, 23, 0xbebfbc70);
    step!(h, a, b, c, d, 13, 4, 0x289b7ec6);
    step!(h, d, a, b, c, 0, 11, 0xeaa127fa);
    step!(h, c, d, a, b, 3, 16, 0xd4ef3085);
    step!(h, b, c, d, a, 6, 23, 0x04881d05);
    step!(h, a, b, c, d, 9, 4, 0xd9d4d039);
    step!(h, d, a, b, c, 12, 11, 0xe6db99e5);
    step!(h, c, d, a, b, 15, 16, 0x1fa27cf8);
    step!(h, b, c, d, a, 2, 23, 0xc4ac5665);
    step!(i, a, b, c, d, 0, 6, 0xf4292244);
    step!(i, d, a, b, c, 7, 10, 0x432aff97);
    step!(i, c, d, a, b, 14, 15, 0xab9423a7);
    step!(i, b, c, d, a, 5, 21, 0xfc93a039);
    step!(i, a, b, c, d, 12, 6, 0x655b59c3);
    step!(i, d, a, b, c, 3, 10, 0x8f0ccc92);
    step!(i, c, d, a, b, 10, 15, 0xffeff47d);
    step!(i, b, c, d, a, 1, 21, 0x85845dd1);
    step!(i, a, b, c, d, 8, 6, 0x6fa87e4f);
    step!(i, d, a, b, c, 15, 10, 0xfe2ce6e0);
    step!(i, c, d, a, b, 6, 15, 0xa3014314);
    step!(i, b, c, d, a, 13, 21, 0x4e0811a1);
    step!(i, a, b, c, d, 4, 6, 0xf7537e82);
    step!(i, d, a, b, c, 11, 10, 0xbd3af235);
    step!(i, c, d, a, b, 2, 15, 0x2ad7d2bb);
    step!(i, b, c, d, a, 9, 21, 0xeb86d391);
    h[0] = h[0].wrapping_add(a);
    h[1] = h[1].wrapping_add(b);
    h[2] = h[2].wrapping_add(c);
    h[3] = h[3].wrapping_add(d);
}

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

    fn md5_of(data: &[u8]) -> [u8; 16] {
        let mut st = [0u8; MD5_STATE];
        let whole = data.len() / 64 * 64;
        for chunk in data[..whole].chunks(1024) {
            assert_eq!(md5(chunk, &mut st), 0);
        }
        assert_eq!(md5(&data[whole..], &mut st), 0);
        st[..16].try_into().unwrap()
    }

    fn hex(d: [u8; 16]) -> alloc_free::Hex {
        alloc_free::Hex(d)
    }

    mod alloc_free {
        pub struct Hex(pub [u8; 16]);
        impl core::fmt::Display for Hex {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                for b in self.0 {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }

    #[test]
    fn md5_matches_rfc1321s_test_suite() {
        extern crate std;
        use std::format;
        let cases: [(&[u8], &str); 7] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"a", "0cc175b9c0f1b6a831c399e269772661"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (b"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (data, want) in cases {
            assert_eq!(format!("{}", hex(md5_of(data))), want, "{:?}", core::str::from_utf8(data));
        }
    }

    #[test]
    fn md5_refuses_ragged_input_and_a_short_state() {
        let mut st = [0u8; MD5_STATE];
        assert_eq!(md5(&[0u8; 65], &mut st), 1);
        assert_eq!(st, [0u8; MD5_STATE], "nothing hashed");
        assert_eq!(md5(&[0u8; 64], &mut [0u8; 10]), 1);
        // Lengths around the padding's edge.
        for n in [55usize, 56, 63, 64, 119, 120, 1000, 4096] {
            let d: [u8; 4096] = core::array::from_fn(|i| (i * 7 + n) as u8);
            let _ = md5_of(&d[..n]);
        }
    }

    fn ld(state: &mut [u8], l: u64, blocks: u64, write: bool) -> u64 {
        let mut i = [0u8; 24];
        i[..8].copy_from_slice(&l.to_le_bytes());
        i[8..16].copy_from_slice(&blocks.to_le_bytes());
        i[16] = write as u8;
        ldisk(&i, state)
    }

    #[test]
    fn ldisk_logs_writes_and_finds_them_again() {
        extern crate std;
        let mut st = std::vec![0u8; LD_STATE];
        assert_eq!(ld(&mut st, 5, 100, false), 100, "never written: the segment's size");
        assert_eq!(ld(&mut st, 5, 100, true), 0, "the first write goes to the log's head");
        assert_eq!(ld(&mut st, 9, 100, true), 1);
        assert_eq!(ld(&mut st, 5, 100, true), 2, "a rewrite goes to a new block");
        assert_eq!((ld(&mut st, 5, 100, false), ld(&mut st, 9, 100, false)), (2, 1));
        // A model: random writes over 64 logical blocks of a 96-block segment; every
        // logical block is where the graft says, no two share a physical block.
        let mut model = std::collections::BTreeMap::new();
        let mut x = 7u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let l = x % 64;
            let p = ld(&mut st, l, 96, true);
            assert!(p < 96);
            model.insert(l, p);
            let mut seen = std::collections::BTreeSet::new();
            for (l, p) in &model {
                assert_eq!(ld(&mut st, *l, 96, false), *p);
                assert!(seen.insert(*p), "two logical blocks in one physical block");
            }
        }
    }

    #[test]
    fn ldisk_refuses_what_it_cannot_map() {
        extern crate std;
        let mut st = std::vec![0u8; LD_STATE];
        assert_eq!(ld(&mut st, LD_LOGICAL as u64, 100, true), u64::MAX);
        assert_eq!(ld(&mut st, 0, LD_PHYSICAL as u64 + 1, true), u64::MAX);
        assert_eq!(ld(&mut st, 0, 0, true), u64::MAX);
        assert_eq!(ldisk(&[0u8; 16], &mut st), u64::MAX, "short input");
        // A full segment: two physical blocks, three logical ones written.
        assert_eq!((ld(&mut st, 0, 2, true), ld(&mut st, 1, 2, true)), (0, 1));
        assert_eq!(ld(&mut st, 2, 2, true), u64::MAX, "no free block");
        assert_eq!(ld(&mut st, 0, 2, true), u64::MAX, "a rewrite needs a free block first");
    }
}
