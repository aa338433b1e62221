//! x87/SSE register images for `fpu_test` and `fpu_peer`: FXSAVE/FXRSTOR of the
//! calling thread's registers, a pattern per seed, and what a clean thread holds.

use core::arch::asm;

/// fpu_peer's requests (one word: a seed); each is answered with 1 (yes) or 0.
pub mod peer {
    /// Answer whether the registers were still clean, then load `pattern(seed)`.
    pub const SET: u64 = 1;
    /// Answer whether the registers hold `pattern(seed)`.
    pub const CHECK: u64 = 2;
    /// Exit.
    pub const QUIT: u64 = 3;
}

/// The FXSAVE image: FCW at 0, FSW at 2, abridged tag at 4, MXCSR at 24, ST0..7 at
/// 32 + 16 i (10 bytes each), XMM0..15 at 160 + 16 i.
#[repr(C, align(16))]
pub struct Fx(pub [u8; 512]);

/// This thread's x87/SSE registers.
pub fn save() -> Fx {
    let mut a = Fx([0; 512]);
    // SAFETY: FXSAVE64 writes the 512 bytes of `a`, which is 16-byte aligned.
    unsafe { asm!("fxsave64 [{}]", in(reg) a.0.as_mut_ptr(), options(nostack, preserves_flags)) };
    a
}

/// Load this thread's x87/SSE registers from `a` (an image from [`pattern`]).
pub fn load(a: &Fx) {
    // SAFETY: `a` is 512 aligned bytes whose MXCSR has no reserved bit set, so
    // FXRSTOR64 cannot fault; it changes only x87/SSE registers, which no Rust code of
    // this (soft-float) program uses.
    unsafe { asm!("fxrstor64 [{}]", in(reg) a.0.as_ptr(), options(nostack, preserves_flags, readonly)) };
}

fn mix(seed: u64, i: u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x.wrapping_mul(0x94d0_49bb_1331_11eb) | 1
}

/// A full register image that belongs to `seed` alone: all eight x87 registers valid
/// with seed-made values, all sixteen XMM registers, a rounding mode in MXCSR.
pub fn pattern(seed: u64) -> Fx {
    let mut a = Fx([0; 512]);
    a.0[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    a.0[4] = 0xff; // every x87 register valid
    let mxcsr = 0x1f80u32 | (((seed & 3) as u32) << 13);
    a.0[24..28].copy_from_slice(&mxcsr.to_le_bytes());
    for i in 0..8 {
        let o = 32 + 16 * i;
        // A normal extended-precision number: explicit integer bit, biased exponent.
        let mant = mix(seed, i as u64) | (1 << 63);
        a.0[o..o + 8].copy_from_slice(&mant.to_le_bytes());
        a.0[o + 8..o + 10].copy_from_slice(&(0x3fffu16 + i as u16).to_le_bytes());
    }
    for i in 0..16 {
        let o = 160 + 16 * i;
        a.0[o..o + 8].copy_from_slice(&mix(seed, 100 + i as u64).to_le_bytes());
        a.0[o + 8..o + 16].copy_from_slice(&mix(seed, 200 + i as u64).to_le_bytes());
    }
    a
}

/// The parts of two images that are program state (control, status, tags, MXCSR, the
/// eight x87 registers, the sixteen XMM registers) are equal.
pub fn same_state(a: &Fx, b: &Fx) -> bool {
    let regs = |x: &Fx| {
        let mut v = [0u8; 2 + 2 + 1 + 4 + 80 + 256];
        v[0..2].copy_from_slice(&x.0[0..2]);
        v[2..4].copy_from_slice(&x.0[2..4]);
        v[4] = x.0[4];
        v[5..9].copy_from_slice(&x.0[24..28]);
        for i in 0..8 {
            v[9 + 10 * i..19 + 10 * i].copy_from_slice(&x.0[32 + 16 * i..42 + 16 * i]);
        }
        v[89..].copy_from_slice(&x.0[160..416]);
        v
    };
    regs(a) == regs(b)
}

/// What a thread that never touched x87/SSE must see: FNINIT's control word, nothing
/// valid, MXCSR at reset, and every data register zero (nothing left by another thread).
pub fn is_clean(a: &Fx) -> bool {
    let mut clean = Fx([0; 512]);
    clean.0[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    clean.0[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    same_state(a, &clean)
}

/// Four single-precision additions in XMM registers (SSE must be enabled).
pub fn sse_add(x: f32, y: f32) -> [f32; 4] {
    let a = [x.to_bits(); 4];
    let b = [y.to_bits(); 4];
    let mut out = [0u32; 4];
    // SAFETY: reads 16 bytes from `a` and `b` and writes 16 to `out`, all live arrays.
    // xmm0 and xmm1 change: this program is built soft-float, so the compiler keeps
    // nothing in XMM registers (and cannot name them as operands).
    unsafe {
        asm!(
            "movups xmm0, [{a}]",
            "movups xmm1, [{b}]",
            "addps xmm0, xmm1",
            "movups [{o}], xmm0",
            a = in(reg) a.as_ptr(), b = in(reg) b.as_ptr(), o = in(reg) out.as_mut_ptr(),
            options(nostack, preserves_flags),
        )
    };
    out.map(f32::from_bits)
}
