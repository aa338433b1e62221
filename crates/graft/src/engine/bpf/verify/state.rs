//! A path's state (`State`: registers and stack slots), and the compact form the
//! verifier keeps states in while they wait or to prune by (`Packed`).

use super::*;

use alloc::vec::Vec;

pub(super) const SLOTS: usize = STACK / 8;

#[derive(Clone, PartialEq, Eq)]
pub(super) struct State {
    pub(super) regs: [Ty; 11],
    pub(super) slots: [Ty; SLOTS],
    /// The stack's bytes written so far, a bit each.
    pub(super) init: [u8; SLOTS],
}

impl State {
    pub(super) fn entry() -> State {
        let mut regs = [Ty::Uninit; 11];
        regs[1] = Ty::Mem(Some((0, 0)));
        regs[10] = Ty::Stack(Some((0, 0)));
        State { regs, slots: [Ty::Uninit; SLOTS], init: [0; SLOTS] }
    }

    /// Are the stack's bytes `lo .. hi` (offsets from `r10`) all written?
    pub(super) fn written(&self, lo: i64, hi: i64) -> bool {
        (lo..hi).all(|b| {
            let b = (b + STACK as i64) as usize;
            self.init[b / 8] & 1 << (b % 8) != 0
        })
    }

    pub(super) fn write(&mut self, lo: i64, hi: i64) {
        for b in lo..hi {
            let b = (b + STACK as i64) as usize;
            self.init[b / 8] |= 1 << (b % 8);
        }
    }

    /// The state kept small (`Packed`): its registers, and the slots ever written.
    pub(super) fn pack(&self) -> Packed {
        let mut b = Vec::with_capacity(64);
        for t in &self.regs {
            put_ty(&mut b, *t);
        }
        for k in 0..SLOTS {
            if self.init[k] != 0 || self.slots[k] != Ty::Uninit {
                b.push(k as u8);
                b.push(self.init[k]);
                put_ty(&mut b, self.slots[k]);
            }
        }
        Packed(b.into_boxed_slice())
    }
}

/// A value's encoding in a [`Packed`] state: a tag, then what it needs (most values
/// are a kind, a known number or a pointer: a byte or nine, where `Ty` takes 40).
pub(super) const T_UNINIT: u8 = 0;
pub(super) const T_MIXED: u8 = 1;
pub(super) const T_ANY: u8 = 2;
pub(super) const T_KNOWN: u8 = 3;
/// Unsigned bounds; the signed ones are those [`Range::u`] derives.
pub(super) const T_UNSIGNED: u8 = 4;
pub(super) const T_RANGE: u8 = 5;
pub(super) const T_MEM: u8 = 6;
pub(super) const T_STACK: u8 = 7;
/// A pointer of unknown offset: its kind's tag and this bit.
pub(super) const T_NO_OFF: u8 = 8;

pub(super) fn put_ty(b: &mut Vec<u8>, t: Ty) {
    match t {
        Ty::Uninit => b.push(T_UNINIT),
        Ty::Mixed => b.push(T_MIXED),
        Ty::Num(r) if r == ANY => b.push(T_ANY),
        Ty::Num(r) if r.known().is_some() && r == Range::exactly(r.lo) => {
            b.push(T_KNOWN);
            b.extend_from_slice(&r.lo.to_le_bytes());
        }
        Ty::Num(r) if r == Range::u(r.lo, r.hi) => {
            b.push(T_UNSIGNED);
            b.extend_from_slice(&r.lo.to_le_bytes());
            b.extend_from_slice(&r.hi.to_le_bytes());
        }
        Ty::Num(r) => {
            b.push(T_RANGE);
            for w in [r.lo, r.hi, r.slo as u64, r.shi as u64] {
                b.extend_from_slice(&w.to_le_bytes());
            }
        }
        Ty::Mem(o) | Ty::Stack(o) => {
            let tag = if matches!(t, Ty::Mem(_)) { T_MEM } else { T_STACK };
            match o {
                None => b.push(tag | T_NO_OFF),
                Some((lo, hi)) => {
                    b.push(tag);
                    b.extend_from_slice(&lo.to_le_bytes());
                    b.extend_from_slice(&hi.to_le_bytes());
                }
            }
        }
    }
}

/// The value encoded at `b[*at..]` ([`put_ty`]), `*at` moved past it.
pub(super) fn get_ty(b: &[u8], at: &mut usize) -> Ty {
    let w = |at: &mut usize| {
        let v = u64::from_le_bytes(b[*at..*at + 8].try_into().expect("eight bytes"));
        *at += 8;
        v
    };
    let tag = b[*at];
    *at += 1;
    match tag {
        T_UNINIT => Ty::Uninit,
        T_MIXED => Ty::Mixed,
        T_ANY => Ty::NUM,
        T_KNOWN => Ty::Num(Range::exactly(w(at))),
        T_UNSIGNED => {
            let lo = w(at);
            Ty::Num(Range::u(lo, w(at)))
        }
        T_RANGE => {
            let (lo, hi, slo, shi) = (w(at), w(at), w(at) as i64, w(at) as i64);
            Ty::Num(Range { lo, hi, slo, shi })
        }
        _ => {
            let off = if tag & T_NO_OFF != 0 {
                None
            } else {
                let v = w(at);
                Some((v as u32 as i32, (v >> 32) as u32 as i32))
            };
            if tag & !T_NO_OFF == T_MEM {
                Ty::Mem(off)
            } else {
                Ty::Stack(off)
            }
        }
    }
}

/// A state as the verifier keeps it while it waits or to prune by: its values encoded
/// one after the other ([`put_ty`]), the registers', then `(slot, written bits, value)`
/// of each stack slot ever written (a few hundred bytes at most, tens for most).
#[derive(Clone)]
pub(super) struct Packed(alloc::boxed::Box<[u8]>);

impl Packed {
    /// Is `st` inside this kept state, for the registers in `live` (a bit each; the
    /// others are written before they are read on every path from here, so their values
    /// do not matter)? Of those, only the kind of the ones not in `rel` (nor the stack's
    /// numbers without [`STACK_BIT`]) is compared: their bounds decide nothing on any
    /// path from here. A byte written there and read after must be written in `st` too.
    pub(super) fn holds(&self, st: &State, live: u16, rel: u16) -> bool {
        let b = &self.0;
        let mut at = 0;
        for (r, a) in st.regs.iter().enumerate() {
            let t = get_ty(b, &mut at);
            if live & 1 << r != 0 && !(if rel & 1 << r != 0 { a.within(t) } else { a.like(t) }) {
                return false;
            }
        }
        let stack = rel & STACK_BIT != 0;
        // Slots it does not list are unwritten there (anything fits them).
        while at < b.len() {
            let (k, i) = (b[at] as usize, b[at + 1]);
            at += 2;
            let t = get_ty(b, &mut at);
            let a = st.slots[k];
            if !(if stack { a.within(t) } else { a.like(t) }) || st.init[k] & i != i {
                return false;
            }
        }
        true
    }

    /// Bytes it holds (the verifier's memory is counted in these: the allocator's
    /// header and rounding counted too).
    pub(super) fn cost(&self) -> usize {
        core::mem::size_of::<Packed>() + self.0.len().next_multiple_of(16) + 16
    }

    pub(super) fn unpack(&self) -> State {
        let b = &self.0;
        let mut st = State { regs: [Ty::Uninit; 11], slots: [Ty::Uninit; SLOTS], init: [0; SLOTS] };
        let mut at = 0;
        for r in &mut st.regs {
            *r = get_ty(b, &mut at);
        }
        while at < b.len() {
            let (k, i) = (b[at] as usize, b[at + 1]);
            at += 2;
            st.slots[k] = get_ty(b, &mut at);
            st.init[k] = i;
        }
        st
    }
}
