//! The transfer function: one instruction's effect on a state (`step`), and a
//! conditional jump's states on either way (`branch`).

use super::*;

pub(super) fn usable(t: Ty) -> Result<Ty, LoadError> {
    match t {
        Ty::Mixed => Err(refuse("eBPF: what is left of a partly overwritten pointer is used")),
        Ty::Uninit => Err(refuse("eBPF: a register read before it is written")),
        t => Ok(t),
    }
}

/// The stack slots bytes `lo .. hi` (offsets from `r10`, inside the stack) lie in.
pub(super) fn slots(lo: i64, hi: i64) -> core::ops::Range<usize> {
    let (lo, hi) = ((lo + STACK as i64) as usize, (hi + STACK as i64) as usize);
    lo / 8..hi.div_ceil(8)
}

/// The offsets an access of `size` bytes at `off` from a pointer at offsets `o` covers,
/// if it lies inside `0 .. len` (`len` bytes from the base; the stack: `-512 .. 0`).
pub(super) fn inside(o: Off, off: i16, size: usize, lo: i64, hi: i64) -> Result<(i64, i64), LoadError> {
    let Some((a, b)) = o else {
        return Err(refuse("eBPF: memory reached through a pointer moved by an unbounded number"));
    };
    let (a, b) = (a as i64 + off as i64, b as i64 + off as i64 + size as i64);
    if a < lo || b > hi {
        return Err(refuse("eBPF: a memory access the verifier cannot prove inside the program's memory or stack"));
    }
    Ok((a, b))
}

/// One instruction's effect on the types (not conditional jumps), or why it is refused.
/// `mem_len`: the bytes of the program's memory (`r1`'s region).
pub(super) fn step(x: &Insn, st: &mut State, mem_len: usize) -> Result<(), LoadError> {
    let (d, s) = (x.dst as usize, x.src as usize);
    match x.class() {
        ALU | ALU64 => {
            let w64 = x.class() == ALU64;
            let code = x.op & 0xf0;
            let from_reg = x.op & X != 0 && !matches!(code, NEG | END);
            if code == MOV && w64 && from_reg {
                // A copy keeps the kind (a mixed value stays unusable); nothing unwritten
                // is read, not even to be copied.
                if st.regs[s] == Ty::Uninit {
                    return Err(refuse("eBPF: a register read before it is written"));
                }
                st.regs[d] = st.regs[s];
                return Ok(());
            }
            let imm = if w64 { x.imm as i64 as u64 } else { x.imm as u32 as u64 };
            let src = if from_reg { usable(st.regs[s])? } else { Ty::Num(Range::exactly(imm)) };
            if code == MOV {
                let Ty::Num(r) = src else { return Err(refuse("eBPF: a pointer cut to 32 bits")) };
                st.regs[d] = Ty::Num(if w64 { r } else { r.low32() });
                return Ok(());
            }
            let dst = usable(st.regs[d])?;
            // A pointer moves by a number known to be small, either way.
            let delta = |r: Range, neg: bool| -> Option<(i64, i64)> {
                if !from_reg {
                    let v = x.imm as i64;
                    return Some(if neg { (-v, -v) } else { (v, v) });
                }
                // Its signed bounds: a move back by a negative number is a move forward.
                let m = MAX_MOVE as i64;
                (r.slo >= -m && r.shi <= m).then(|| if neg { (-r.shi, -r.slo) } else { (r.slo, r.shi) })
            };
            st.regs[d] = match (w64, code, dst, src) {
                (_, _, Ty::Num(a), Ty::Num(b)) => Ty::Num(a.alu(code, b, w64, x.imm, from_reg, x.op & X != 0)),
                (true, ADD | SUB, p, Ty::Num(r)) if p.is_ptr() => p.moved(delta(r, code == SUB)),
                (true, ADD, Ty::Num(r), p) if p.is_ptr() => p.moved(delta(r, false)),
                (true, SUB, Ty::Mem(_), Ty::Mem(_)) | (true, SUB, Ty::Stack(_), Ty::Stack(_)) => Ty::NUM,
                _ => return Err(refuse("eBPF: pointer arithmetic other than adding or subtracting a number")),
            };
        }
        LDX => {
            let size = x.size();
            let width = if size == 8 { ANY } else { Range::upto((1u64 << (8 * size)) - 1) };
            st.regs[d] = match usable(st.regs[s])? {
                Ty::Mem(o) => {
                    inside(o, x.off, size, 0, mem_len as i64)?;
                    Ty::Num(width)
                }
                Ty::Stack(o) => {
                    let (a, b) = inside(o, x.off, size, -(STACK as i64), 0)?;
                    if !st.written(a, b) {
                        return Err(refuse("eBPF: stack bytes read before they are written"));
                    }
                    let kinds = &st.slots[slots(a, b)];
                    if kinds.contains(&Ty::Mixed) {
                        return Err(refuse("eBPF: what is left of a partly overwritten pointer is read"));
                    }
                    let whole = size == 8 && a == b - 8 && a.rem_euclid(8) == 0;
                    match kinds {
                        [t] if whole => *t,
                        _ if kinds.iter().any(|t| t.is_ptr()) => {
                            return Err(refuse("eBPF: part of a kept pointer is read"))
                        }
                        [Ty::Num(r)] if a == b - size as i64 && a.rem_euclid(8) == 0 && r.hi <= width.hi => Ty::Num(*r),
                        _ => Ty::Num(width),
                    }
                }
                _ => return Err(refuse("eBPF: memory reached through a number, not a pointer")),
            };
        }
        ST | STX => {
            let val = if x.class() == STX { usable(st.regs[s])? } else { Ty::NUM };
            let size = x.size();
            match usable(st.regs[d])? {
                Ty::Mem(_) if val.is_ptr() => return Err(refuse("eBPF: a pointer may be kept only in the stack")),
                Ty::Mem(o) => {
                    inside(o, x.off, size, 0, mem_len as i64)?;
                }
                Ty::Stack(o) => {
                    let (a, b) = inside(o, x.off, size, -(STACK as i64), 0)?;
                    let r = slots(a, b);
                    // Written for certain only at one known place.
                    let exact = b - a == size as i64;
                    let whole = exact && size == 8 && a.rem_euclid(8) == 0;
                    if whole {
                        st.slots[r.start] = val;
                    } else if val.is_ptr() {
                        return Err(refuse(
                            "eBPF: a pointer may be kept only whole, in an aligned stack slot at a known place",
                        ));
                    } else {
                        for t in &mut st.slots[r] {
                            // The rest of a kept pointer's bytes stay behind; a number
                            // partly overwritten may be anything.
                            *t = if t.is_ptr() || *t == Ty::Mixed { Ty::Mixed } else { Ty::NUM };
                        }
                    }
                    if exact {
                        st.write(a, b);
                    }
                }
                _ => return Err(refuse("eBPF: memory reached through a number, not a pointer")),
            }
        }
        LD => st.regs[d] = Ty::Num(ANY),
        JMP | JMP32 => {
            if x.op == EXIT && !matches!(usable(st.regs[0])?, Ty::Num(_)) {
                return Err(refuse("eBPF: a pointer returned"));
            }
        }
        _ => unreachable!("class is three bits"),
    }
    Ok(())
}

/// A conditional jump: the states on the way taken and the way through, with the bounds
/// the test proves (`None`: no value goes that way).
pub(super) fn branch(x: &Insn, st: State) -> Result<(Option<State>, Option<State>), LoadError> {
    let (d, s) = (x.dst as usize, x.src as usize);
    let w64 = x.class() == JMP;
    let from_reg = x.op & X != 0;
    let a = usable(st.regs[d])?;
    // The immediate as the engine reads it: sign-extended (an unsigned 64-bit compare
    // with a negative one is refused before), its lower 32 bits in a 32-bit compare.
    let b = if from_reg { usable(st.regs[s])? } else { Ty::Num(Range::exactly(x.imm as i64 as u64)) };
    let (Ty::Num(ra), Ty::Num(rb)) = (a, b) else { return Err(refuse("eBPF: a pointer compared")) };
    let code = x.op & 0xf0;
    if let (Some(va), Some(vb)) = (ra.known(), rb.known()) {
        return Ok(if eval_jump(code, va, vb, w64) { (Some(st), None) } else { (None, Some(st)) });
    }
    // a OP b on the way taken; its negation on the way through.
    let (t, f) = match code {
        0x10 => (Some(Cmp::Eq), Some(Cmp::Ne)),
        0x50 => (Some(Cmp::Ne), Some(Cmp::Eq)),
        0x20 | 0x60 => (Some(Cmp::Gt), Some(Cmp::Le)),
        0x30 | 0x70 => (Some(Cmp::Ge), Some(Cmp::Lt)),
        0xa0 | 0xc0 => (Some(Cmp::Lt), Some(Cmp::Ge)),
        0xb0 | 0xd0 => (Some(Cmp::Le), Some(Cmp::Gt)),
        _ => (None, None),
    };
    let signed = matches!(code, 0x60 | 0x70 | 0xc0 | 0xd0);
    let equality = matches!(code, 0x10 | 0x50);
    // Bounds are kept on the whole register: a 32-bit unsigned test says something of
    // it only when both sides fit in 32 bits, a 32-bit signed one when both are the
    // sign extension of their lower halves (then it compares the same numbers).
    let rb_u = if from_reg || w64 { rb } else { Range::exactly(x.imm as u32 as u64) };
    let by_u = (equality || !signed) && (w64 || (ra.hi <= U32 && rb_u.hi <= U32));
    let by_s = (equality || signed) && (w64 || (ra.in_i32() && rb.in_i32()));
    let apply = |st: &mut State, c: Option<Cmp>| -> bool {
        let Some(c) = c else { return true };
        let (mut na, mut nb) = (ra, rb);
        if by_u {
            let Some(((alo, ahi), (blo, bhi))) = c.refine((na.lo, na.hi), (rb_u.lo, rb_u.hi)) else { return false };
            let Some(a) = na.meet(Range::u(alo, ahi)) else { return false };
            na = a;
            if from_reg {
                let Some(b) = nb.meet(Range::u(blo, bhi)) else { return false };
                nb = b;
            }
        }
        if by_s {
            // Signed order is unsigned order with the sign bit flipped.
            let flip = |r: Range| (r.slo as u64 ^ SIGN, r.shi as u64 ^ SIGN);
            let Some(((alo, ahi), (blo, bhi))) = c.refine(flip(na), flip(nb)) else { return false };
            let Some(a) = na.meet(Range::s((alo ^ SIGN) as i64, (ahi ^ SIGN) as i64)) else { return false };
            na = a;
            if from_reg {
                let Some(b) = nb.meet(Range::s((blo ^ SIGN) as i64, (bhi ^ SIGN) as i64)) else { return false };
                nb = b;
            }
        }
        st.regs[d] = Ty::Num(na);
        if from_reg {
            st.regs[s] = Ty::Num(nb);
        }
        true
    };
    let mut fall = st.clone();
    let mut taken = st;
    let (t_ok, f_ok) = (apply(&mut taken, t), apply(&mut fall, f));
    Ok((t_ok.then_some(taken), f_ok.then_some(fall)))
}

#[derive(Clone, Copy)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    /// The bounds (`lo`, `hi`) of `a` and `b` given `a CMP b` (`None`: impossible).
    #[allow(clippy::type_complexity)]
    pub(super) fn refine(self, a: (u64, u64), b: (u64, u64)) -> Option<((u64, u64), (u64, u64))> {
        let (mut a, mut b) = (a, b);
        match self {
            Cmp::Eq => {
                let r = (a.0.max(b.0), a.1.min(b.1));
                a = r;
                b = r;
            }
            // Only a constant at either end of the other's bounds says something.
            Cmp::Ne => {
                if b.0 == b.1 {
                    if a.0 == b.0 {
                        a.0 = a.0.checked_add(1)?;
                    } else if a.1 == b.0 {
                        a.1 = a.1.checked_sub(1)?;
                    }
                }
                if a.0 == a.1 {
                    if b.0 == a.0 {
                        b.0 = b.0.checked_add(1)?;
                    } else if b.1 == a.0 {
                        b.1 = b.1.checked_sub(1)?;
                    }
                }
            }
            Cmp::Gt => {
                a.0 = a.0.max(b.0.checked_add(1)?);
                b.1 = b.1.min(a.1.checked_sub(1)?);
            }
            Cmp::Ge => {
                a.0 = a.0.max(b.0);
                b.1 = b.1.min(a.1);
            }
            Cmp::Lt => {
                a.1 = a.1.min(b.1.checked_sub(1)?);
                b.0 = b.0.max(a.0.checked_add(1)?);
            }
            Cmp::Le => {
                a.1 = a.1.min(b.1);
                b.0 = b.0.max(a.0);
            }
        }
        (a.0 <= a.1 && b.0 <= b.1).then_some((a, b))
    }
}
