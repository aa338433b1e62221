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
            md5_block(&mut h, b);
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
            md5_block(&mut h, b);
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
const MD5_S: [u32; 16] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
const MD5_K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// One 64-byte block into the chaining value (RFC 1321's MD5Transform).
fn md5_block(h: &mut [u32; 4], block: &[u8]) {
    let mut x = [0u32; 16];
    for (k, w) in x.iter_mut().enumerate() {
        *w = u32::from_le_bytes([block[4 * k], block[4 * k + 1], block[4 * k + 2], block[4 * k + 3]]);
    }
    let [mut a, mut b, mut c, mut d] = *h;
    for i in 0..64 {
        let (f, g) = match i / 16 {
            0 => ((b & c) | (!b & d), i),
            1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
            2 => (b ^ c ^ d, (3 * i + 5) % 16),
            _ => (c ^ (b | !d), (7 * i) % 16),
        };
        let t = a.wrapping_add(f).wrapping_add(MD5_K[i]).wrapping_add(x[g]).rotate_left(MD5_S[(i / 16) * 4 + i % 4]);
        a = d;
        d = c;
        c = b;
        b = b.wrapping_add(t);
    }
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
            (b"12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
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
}
