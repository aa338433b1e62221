//! The verifier's values: a number's bounds (`Range`), what a register or stack slot
//! holds (`Ty`), and the engine's arithmetic on known numbers.

use super::*;

/// A number's bounds, unsigned and signed (`lo <= hi`, `slo <= shi`): every value it
/// may hold lies within both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Range {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) slo: i64,
    pub(super) shi: i64,
}

pub(super) const ANY: Range = Range { lo: 0, hi: u64::MAX, slo: i64::MIN, shi: i64::MAX };
pub(super) const U32: u64 = u32::MAX as u64;
pub(super) const SIGN: u64 = 1 << 63;

impl Range {
    pub(super) const fn exactly(v: u64) -> Range {
        Range { lo: v, hi: v, slo: v as i64, shi: v as i64 }
    }

    /// Unsigned bounds; the signed ones follow from them where they can.
    pub(super) fn u(lo: u64, hi: u64) -> Range {
        Range { lo, hi, slo: i64::MIN, shi: i64::MAX }.sync().unwrap_or(ANY)
    }

    /// Signed bounds; the unsigned ones follow from them where they can.
    pub(super) fn s(slo: i64, shi: i64) -> Range {
        Range { lo: 0, hi: u64::MAX, slo, shi }.sync().unwrap_or(ANY)
    }

    pub(super) fn upto(hi: u64) -> Range {
        Range::u(0, hi)
    }

    pub(super) fn known(self) -> Option<u64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Each pair of bounds narrowed by what the other says (`None`: no value fits both).
    pub(super) fn sync(self) -> Option<Range> {
        let mut r = self;
        for _ in 0..2 {
            // Signed bounds on one side of zero are unsigned bounds too, and unsigned
            // bounds in one half are signed bounds.
            if r.slo >= 0 || r.shi < 0 {
                r.lo = r.lo.max(r.slo as u64);
                r.hi = r.hi.min(r.shi as u64);
            }
            if r.lo > r.hi {
                return None;
            }
            if (r.lo ^ r.hi) & SIGN == 0 {
                r.slo = r.slo.max(r.lo as i64);
                r.shi = r.shi.min(r.hi as i64);
            }
            if r.slo > r.shi {
                return None;
            }
        }
        Some(r)
    }

    /// The values in both (`None`: none).
    pub(super) fn meet(self, o: Range) -> Option<Range> {
        Range { lo: self.lo.max(o.lo), hi: self.hi.min(o.hi), slo: self.slo.max(o.slo), shi: self.shi.min(o.shi) }
            .sync()
    }

    /// The lower 32 bits' bounds.
    pub(super) fn low32(self) -> Range {
        if self.hi <= U32 {
            self
        } else {
            Range::upto(U32)
        }
    }

    /// Do the lower 32 bits, read as a signed 32-bit number, equal the whole register
    /// read as a signed 64-bit one?
    pub(super) fn in_i32(self) -> bool {
        self.slo >= i32::MIN as i64 && self.shi <= i32::MAX as i64
    }

    /// Every value of a width of `bits` whose top bit is that of `hi`.
    pub(super) fn bits_upto(hi: u64) -> u64 {
        if hi == 0 {
            0
        } else {
            u64::MAX >> hi.leading_zeros()
        }
    }

    /// The result of ALU operation `code` on `self` and `b` at 64 bits (`w64`) or 32:
    /// computed exactly when both are known (as the engine computes it), else bounded.
    pub(super) fn alu(self, code: u8, b: Range, w64: bool, imm: i32, from_reg: bool, to_big: bool) -> Range {
        if let (Some(a), Some(v)) = (self.known(), b.known()) {
            return Range::exactly(eval_alu(code, a, v, w64, imm, to_big));
        }
        let u = self.alu_u(code, b, w64, imm, from_reg);
        if !w64 {
            // Zero-extended: the signed bounds follow from the unsigned ones.
            return u;
        }
        let s = match code {
            0x00 => self.slo.checked_add(b.slo).zip(self.shi.checked_add(b.shi)),
            0x10 => self.slo.checked_sub(b.shi).zip(self.shi.checked_sub(b.slo)),
            0xb0 => return b,
            _ => None,
        };
        match s {
            Some((slo, shi)) => u.meet(Range::s(slo, shi)).unwrap_or(u),
            None => u,
        }
    }

    /// [`Range::alu`]'s unsigned bounds.
    pub(super) fn alu_u(self, code: u8, b: Range, w64: bool, imm: i32, from_reg: bool) -> Range {
        // Adding a negative immediate is a subtraction (and the other way round): its
        // bounds do not wrap when the register's do not go below zero.
        if !from_reg && imm < 0 && matches!(code, 0x00 | 0x10) {
            let c = Range::exactly(imm.unsigned_abs() as u64);
            return self.alu_u(code ^ 0x10, c, w64, 0, true);
        }
        let (a, b) = if w64 { (self, b) } else { (self.low32(), b.low32()) };
        let mask = if w64 { 63 } else { 31 };
        let r = match code {
            0x00 => match (a.lo.checked_add(b.lo), a.hi.checked_add(b.hi)) {
                (Some(lo), Some(hi)) => Range::u(lo, hi),
                _ => ANY,
            },
            0x10 if a.lo >= b.hi => Range::u(a.lo - b.hi, a.hi - b.lo),
            0x20 => match (a.lo.checked_mul(b.lo), a.hi.checked_mul(b.hi)) {
                (Some(lo), Some(hi)) => Range::u(lo, hi),
                _ => ANY,
            },
            0x30 if b.lo > 0 => Range::u(a.lo / b.hi, a.hi / b.lo),
            0x30 => Range::upto(a.hi),
            // A modulo by zero leaves the register whole (all of it: rbpf).
            0x90 if b.lo > 0 => Range::upto(a.hi.min(b.hi - 1)),
            0x90 => Range::upto(self.hi),
            0x50 => Range::upto(a.hi.min(b.hi)),
            0x40 => Range::u(a.lo.max(b.lo), Range::bits_upto(a.hi | b.hi)),
            0xa0 => Range::upto(Range::bits_upto(a.hi | b.hi)),
            0x60 if b.hi <= mask && a.hi.leading_zeros() as u64 >= b.hi + (63 - mask) => {
                Range::u(a.lo << b.lo, a.hi << b.hi)
            }
            0x70 if b.hi <= mask => Range::u(a.lo >> b.hi, a.hi >> b.lo),
            0x70 => Range::upto(a.hi),
            0xc0 if w64 && a.hi < 1 << 63 && b.hi <= mask => Range::u(a.lo >> b.hi, a.hi >> b.lo),
            0xc0 if !w64 && a.hi < 1 << 31 && b.hi <= mask => Range::u(a.lo >> b.hi, a.hi >> b.lo),
            0xb0 => b,
            0xd0 => match imm {
                16 => Range::upto(0xffff),
                32 => Range::upto(U32),
                _ => ANY,
            },
            _ => ANY,
        };
        if w64 || code == 0xd0 || (code == 0x90 && b.lo == 0) || r.hi <= U32 {
            r
        } else {
            Range::upto(U32)
        }
    }
}

/// ALU operation `code` on known values, exactly as the engine computes it (`b`: the
/// source register, or the immediate sign-extended; `to_big`: a byte swap's source
/// bit).
pub(super) fn eval_alu(code: u8, a: u64, b: u64, w64: bool, imm: i32, to_big: bool) -> u64 {
    let (x, y) = if w64 { (a, b) } else { (a & U32, b & U32) };
    let mask = if w64 { 63 } else { 31 };
    let v = match code {
        0x00 => x.wrapping_add(y),
        0x10 => x.wrapping_sub(y),
        0x20 => x.wrapping_mul(y),
        0x30 => x.checked_div(y).unwrap_or(0),
        0x40 => x | y,
        0x50 => x & y,
        0x60 => x << (y & mask),
        0x70 => x >> (y & mask),
        NEG => x.wrapping_neg(),
        0x90 if y == 0 => return a,
        0x90 => x % y,
        0xa0 => x ^ y,
        0xb0 => y,
        0xc0 if w64 => ((x as i64) >> (y & 63)) as u64,
        0xc0 => ((x as u32 as i32) >> (y & 31)) as u32 as u64,
        END => {
            return match (to_big, imm) {
                (false, 16) => a as u16 as u64,
                (false, 32) => a as u32 as u64,
                (false, _) => a,
                (true, 16) => (a as u16).swap_bytes() as u64,
                (true, 32) => (a as u32).swap_bytes() as u64,
                (true, _) => a.swap_bytes(),
            }
        }
        _ => return a,
    };
    if w64 {
        v
    } else {
        v & U32
    }
}

/// A conditional jump's test (`code`: its high four bits) on known values, as the
/// engine decides it (`b`: the source register, or the immediate sign-extended).
pub(super) fn eval_jump(code: u8, a: u64, b: u64, w64: bool) -> bool {
    let (x, y) = if w64 { (a, b) } else { (a & U32, b & U32) };
    let (sx, sy) = if w64 { (x as i64, y as i64) } else { (x as u32 as i32 as i64, y as u32 as i32 as i64) };
    match code {
        0x10 => x == y,
        0x20 => x > y,
        0x30 => x >= y,
        0x40 => x & y != 0,
        0x50 => x != y,
        0x60 => sx > sy,
        0x70 => sx >= sy,
        0xa0 => x < y,
        0xb0 => x <= y,
        0xc0 => sx < sy,
        _ => sx <= sy,
    }
}

/// What the verifier knows of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    /// A number the program may do anything with, within these bounds.
    Num(Range),
    /// A pointer into the program's memory, at these offsets from its start.
    Mem(Off),
    /// A pointer into the stack, at these offsets from `r10`.
    Stack(Off),
    /// What is left of a kept pointer partly overwritten: it may only be overwritten (or
    /// copied, as itself).
    Mixed,
    /// Never written: not to be read (a compiled program's registers and stack hold
    /// whatever the server left there; the interpreter's hold zeros).
    Uninit,
}

/// A pointer's offsets from its base (`lo <= hi`), or unknown (`None`: any access
/// through it is refused).
pub(super) type Off = Option<(i32, i32)>;

/// How far a pointer may be moved by a number: no pointer offset ever grows past it.
pub(super) const MAX_MOVE: u64 = 1 << 30;

impl Ty {
    pub(super) const NUM: Ty = Ty::Num(ANY);

    /// Is every value `self` may be one `o` may be (so that what was proven of `o` holds
    /// of `self`)? A mixed value in `o` was never used on any path from there: anything
    /// fits it.
    pub(super) fn within(self, o: Ty) -> bool {
        let off = |a: Off, b: Off| match (a, b) {
            (Some(a), Some(b)) => b.0 <= a.0 && a.1 <= b.1,
            (None, None) => true,
            _ => false,
        };
        match (self, o) {
            (_, Ty::Mixed | Ty::Uninit) => true,
            (Ty::Num(a), Ty::Num(b)) => b.lo <= a.lo && a.hi <= b.hi && b.slo <= a.slo && a.shi <= b.shi,
            (Ty::Mem(a), Ty::Mem(b)) | (Ty::Stack(a), Ty::Stack(b)) => off(a, b),
            _ => false,
        }
    }

    /// Is `self` of `o`'s kind (all that matters of a value whose bounds decide nothing
    /// on any path from here: see [`relevance`])?
    pub(super) fn like(self, o: Ty) -> bool {
        matches!(
            (self, o),
            (_, Ty::Mixed | Ty::Uninit)
                | (Ty::Num(_), Ty::Num(_))
                | (Ty::Mem(_), Ty::Mem(_))
                | (Ty::Stack(_), Ty::Stack(_))
        )
    }

    pub(super) fn is_ptr(self) -> bool {
        matches!(self, Ty::Mem(_) | Ty::Stack(_))
    }

    /// The pointer moved by between `d.0` and `d.1` bytes (unknown if it was, or if the
    /// move is not bounded).
    pub(super) fn moved(self, d: Option<(i64, i64)>) -> Ty {
        let m = |o: Off| {
            o.zip(d)
                .map(|(o, d)| (o.0 as i64 + d.0, o.1 as i64 + d.1))
                .filter(|o| o.0.unsigned_abs() <= MAX_MOVE && o.1.unsigned_abs() <= MAX_MOVE)
                .map(|o| (o.0 as i32, o.1 as i32))
        };
        match self {
            Ty::Mem(o) => Ty::Mem(m(o)),
            Ty::Stack(o) => Ty::Stack(m(o)),
            t => t,
        }
    }
}
