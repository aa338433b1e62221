//! Static facts of each instruction, by backward dataflow: the registers live there and
//! those whose bounds may decide something (what states are compared by).

use super::*;

use alloc::vec;
use alloc::vec::Vec;

/// A bit for the stack's numbers in [`relevance`]'s sets (bits 0..=10: registers).
pub(super) const STACK_BIT: u16 = 1 << 11;

/// Each instruction's predecessors, in one array (`preds[from[t]..from[t + 1]]` are
/// t's): two allocations, not one per instruction — in a server's arena, whose
/// allocator searches its free blocks first-fit, thousands of small ones are slow.
/// Made once, for both dataflows.
pub(super) struct Preds {
    pub(super) from: Vec<u32>,
    pub(super) preds: Vec<u32>,
}

impl Preds {
    fn of(&self, i: usize) -> &[u32] {
        &self.preds[self.from[i] as usize..self.from[i + 1] as usize]
    }
}

/// A backward dataflow to its fixed point, in slices of bounded work
/// ([`Backward::run`]): each instruction's set (a bit each) from the union of its
/// successors' by `f` (sets only grow: each instruction is seen again only when a
/// successor's grew, at most 12 times).
pub(super) struct Backward {
    f: fn(&Insn, u16) -> u16,
    pub(super) set: Vec<u16>,
    queued: Vec<bool>,
    /// Instructions whose successors' sets grew, to see again (on top).
    todo: Vec<u32>,
    /// Instructions below this one not seen yet (the first round, from the end: every
    /// instruction once, beneath the work the round makes).
    seed: usize,
}

impl Backward {
    pub(super) fn new(tail: &[bool], f: fn(&Insn, u16) -> u16) -> Backward {
        let n = tail.len();
        Backward { f, set: vec![0u16; n], queued: tail.iter().map(|t| !t).collect(), todo: Vec::new(), seed: n }
    }

    /// Go on for at most `budget` instructions seen: `Ok(true)` at the fixed point.
    /// `work` counts them.
    pub(super) fn run(
        &mut self,
        insns: &[Insn],
        succs: &[([usize; 2], usize)],
        preds: &Preds,
        budget: u64,
        work: &mut usize,
    ) -> bool {
        let mut spent = 0u64;
        loop {
            if self.todo.is_empty() {
                // The next instruction of the first round still queued (it may have
                // been seen already, through `todo`, and not queued again).
                while self.seed > 0 && !self.queued[self.seed - 1] {
                    self.seed -= 1;
                }
                if self.seed == 0 {
                    return true;
                }
            }
            if spent >= budget {
                return false;
            }
            let i = match self.todo.pop() {
                Some(i) => i as usize,
                None => {
                    self.seed -= 1;
                    self.seed
                }
            };
            spent += 1;
            *work += 1;
            self.queued[i] = false;
            let (s, k) = succs[i];
            let out = s[..k].iter().fold(0u16, |a, &t| a | self.set[t]);
            let v = (self.f)(&insns[i], out);
            if v != self.set[i] {
                self.set[i] = v;
                for &p in preds.of(i) {
                    if !self.queued[p as usize] {
                        self.queued[p as usize] = true;
                        self.todo.push(p);
                    }
                }
            }
        }
    }
}

/// The registers read on some path from an instruction before they are written (the
/// frame pointer always): what states at a place are compared by.
pub(super) fn liveness(x: &Insn, out: u16) -> u16 {
    let (d, s) = (1u16 << x.dst, 1u16 << x.src);
    let from_reg = x.op & X != 0;
    let (uses, defs) = match x.class() {
        ALU | ALU64 => {
            let code = x.op & 0xf0;
            let src = if from_reg && !matches!(code, NEG | END) { s } else { 0 };
            let dst = if code == MOV { 0 } else { d };
            (src | dst, d)
        }
        LD => (0, d),
        LDX => (s, d),
        ST => (d, 0),
        STX => (d | s, 0),
        _ if x.op == EXIT => (1, 0),
        _ if x.op == JA => (0, 0),
        _ => (d | if from_reg { s } else { 0 }, 0),
    };
    uses | (out & !defs) | 1 << 10
}

/// The registers (and [`STACK_BIT`]: the numbers kept in the stack) whose bounds may
/// decide something on some path from an instruction — a test, where a load or store
/// lands — directly or through what is computed from them: a static form of Linux's
/// precision marks. Of a register outside the set only its kind matters (number,
/// pointer into the memory or the stack), so states that differ only in such bounds
/// (a sum, a checksum, a count returned) are one for pruning, and a program of many
/// tests that each change such a value is followed in little work.
pub(super) fn relevance(x: &Insn, out: u16) -> u16 {
    let (d, s) = (1u16 << x.dst, 1u16 << x.src);
    let from_reg = x.op & X != 0;
    match x.class() {
        ALU | ALU64 => {
            let code = x.op & 0xf0;
            let src = if from_reg && !matches!(code, NEG | END) { s } else { 0 };
            if out & d == 0 {
                out
            } else if code == MOV {
                (out & !d) | src
            } else {
                out | d | src
            }
        }
        LD => out & !d,
        // Where a load lands matters; what it reads matters if the register does after
        // (it may come from the stack).
        LDX => (out & !d) | s | if out & d != 0 { STACK_BIT } else { 0 },
        ST => out | d,
        STX => out | d | if out & STACK_BIT != 0 { s } else { 0 },
        // The answer's kind is checked (a number), never its value.
        _ if x.op == EXIT => 0,
        _ if x.op == JA => out,
        _ => out | d | if from_reg { s } else { 0 },
    }
}
