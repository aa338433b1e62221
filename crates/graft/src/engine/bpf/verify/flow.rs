//! Static facts of each instruction, by backward dataflow: the registers live there and
//! those whose bounds may decide something (what states are compared by).

use super::*;

use alloc::vec;
use alloc::vec::Vec;

/// A bit for the stack's numbers in [`relevance`]'s sets (bits 0..=10: registers).
pub(super) const STACK_BIT: u16 = 1 << 11;

/// A backward dataflow to its fixed point: each instruction's set (a bit each) from the
/// union of its successors' by `f` (sets only grow: each instruction is seen again only
/// when a successor's grew, at most 12 times).
pub(super) fn backward(
    insns: &[Insn],
    tail: &[bool],
    succs: &[([usize; 2], usize)],
    f: fn(&Insn, u16) -> u16,
) -> Vec<u16> {
    let n = insns.len();
    // Each instruction's predecessors, in one array (`preds[from[t]..from[t + 1]]` are
    // t's): two allocations, not one per instruction — in a server's arena, whose
    // allocator searches its free blocks first-fit, thousands of small ones are slow.
    let mut from = vec![0u32; n + 1];
    for (s, k) in succs {
        for &t in &s[..*k] {
            from[t + 1] += 1;
        }
    }
    for i in 0..n {
        from[i + 1] += from[i];
    }
    let mut fill = from.clone();
    let mut preds = vec![0u32; from[n] as usize];
    for (i, (s, k)) in succs.iter().enumerate() {
        for &t in &s[..*k] {
            preds[fill[t] as usize] = i as u32;
            fill[t] += 1;
        }
    }
    let mut set = vec![0u16; n];
    let mut queued = vec![true; n];
    let mut todo: Vec<usize> = (0..n).filter(|&i| !tail[i]).collect();
    while let Some(i) = todo.pop() {
        queued[i] = false;
        let (s, k) = succs[i];
        let out = s[..k].iter().fold(0u16, |a, &t| a | set[t]);
        let v = f(&insns[i], out);
        if v != set[i] {
            set[i] = v;
            for &p in &preds[from[i] as usize..from[i + 1] as usize] {
                if !queued[p as usize] {
                    queued[p as usize] = true;
                    todo.push(p as usize);
                }
            }
        }
    }
    set
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
