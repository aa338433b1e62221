//! Scion's eBPF verifier: what it accepts is exactly what the engine executes safely,
//! and nothing a program may learn from the server.
//!
//! 1. **Opcodes by allow-list** ([`OPCODES`]): the 8-bit opcodes rbpf 0.4.1's
//!    interpreter implements (its `match` on the opcode ends in `unreachable!()`, so an
//!    opcode it lacks — NEG or JA with the source bit, `0x8c`, `0x8f`, `0x0d` — panics
//!    the server), less those Scion refuses: legacy packet loads, atomics, helper and
//!    tail calls. Each field an implemented opcode reads is checked too: registers
//!    0..=10, `r10` never written, byte swaps of 16, 32 or 64 bits, `lddw` whole.
//! 2. **Control flow**: every jump lands on an instruction (never the second half of an
//!    `lddw`), no path runs off the end, and **every path ends**: the verifier follows
//!    each path the program may take, as Linux's does — loops one iteration after the
//!    other, with the bounds each iteration's tests prove — until every one reaches its
//!    `exit`, within `MAX_PROCESSED` instructions followed in all (so no call runs
//!    longer). A path that comes back to a loop's head in a state no narrower than the
//!    one it had there may loop for ever and is refused; a path that reaches a place in a
//!    state inside one already followed to its end from there is not followed again.
//! 3. **Pointers stay secret** (as Linux's verifier does for unprivileged programs): on
//!    every path each register and each 8-byte stack slot has a type
//!    — a number, a pointer into the program's memory (`r1`'s region), a pointer into
//!    its stack (`r10`), or unknown where paths that disagree meet. Memory is reached
//!    only through pointers; a pointer may be moved by adding or subtracting a number,
//!    subtracted from one of its kind (a number), copied and kept whole in a stack slot
//!    — and nothing else: no other arithmetic, no comparison, no store anywhere but the
//!    stack, no partial read of a kept pointer, no return. So no bit of a server
//!    address reaches the graft's state, its answer or its control flow, and every run
//!    computes the same thing wherever the server's memory lies (the differential test
//!    runs each program with its memory at two places).
//!
//! The decoded program ([`Insn`]) is what an engine executes.
//!
//! Why one file of about 1,000 lines: the verifier is one abstract interpreter — the
//! decoder, the abstract values and the transfer function of each instruction call each
//! other at every step, and its soundness is read as a whole. It is being rewritten
//! with state pruning (so that counted loops up to the 1 M-instruction bound verify);
//! split it then, by the value domain and the walk.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use crate::LoadError;

/// The longest program (so that rbpf's 16-bit jump arithmetic cannot overflow).
pub const MAX_INSNS: usize = 32767;
/// Bytes of stack below `r10` (rbpf's).
pub const STACK: usize = 512;
/// Instructions the verifier follows in all, on every path: the most one call can run
/// (Linux's bound). A program that needs more is refused as too complex.
pub const MAX_PROCESSED: usize = 1_000_000;
/// Paths and places waiting at once (a bound on the verifier's own memory: each keeps a
/// state of a few hundred bytes).
pub const MAX_LIVE: usize = 8192;
/// A place is kept (a node, a state to prune by) at a loop's head, and at any other
/// jump target only when the path ran at least this many instructions since its last
/// (Linux's heuristic: fewer states kept, little pruning lost).
const NODE_EVERY: usize = 8;
/// States kept of places followed to the end (for pruning), in all and per place (a
/// place keeps its newest).
const MAX_DONE: usize = 4096;
const MAX_DONE_AT: usize = 8;
/// How far up a path the verifier looks for the state it had at a loop's head.
const LOOP_LOOKBACK: usize = 64;

/// Instruction classes (the low three bits).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const ALU64: u8 = 0x07;

/// ALU operations (the high four bits).
const ADD: u8 = 0x00;
const SUB: u8 = 0x10;
const MOV: u8 = 0xb0;
const NEG: u8 = 0x80;
const END: u8 = 0xd0;
/// The source bit: the operand is a register, not the immediate.
const X: u8 = 0x08;

pub const LDDW: u8 = 0x18;
pub const JA: u8 = 0x05;
pub const EXIT: u8 = 0x95;
pub const CALL: u8 = 0x85;
pub const TAIL_CALL: u8 = 0x8d;

/// The ALU operations rbpf implements with an immediate (K) and a register (X) source.
const ALU_OPS: [u8; 12] = [0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x90, 0xa0, 0xb0, 0xc0];
/// The conditional jumps (JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE, JLT, JLE, JSLT, JSLE).
const JCC_OPS: [u8; 11] = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0xa0, 0xb0, 0xc0, 0xd0];

const fn build_opcodes() -> [u8; 111] {
    let mut t = [0u8; 111];
    let mut n = 0;
    let mut i = 0;
    while i < ALU_OPS.len() {
        t[n] = ALU | ALU_OPS[i];
        t[n + 1] = ALU | ALU_OPS[i] | X;
        t[n + 2] = ALU64 | ALU_OPS[i];
        t[n + 3] = ALU64 | ALU_OPS[i] | X;
        n += 4;
        i += 1;
    }
    // NEG has only the K form; the byte swaps (END) only in 32-bit ALU, K = to little,
    // X = to big endian.
    t[n] = ALU | NEG;
    t[n + 1] = ALU64 | NEG;
    t[n + 2] = ALU | END;
    t[n + 3] = ALU | END | X;
    n += 4;
    // Loads and stores of 1, 2, 4, 8 bytes (mode MEM), and the 64-bit immediate.
    let sizes = [0x10u8, 0x08, 0x00, 0x18];
    let mut s = 0;
    while s < 4 {
        t[n] = LDX | 0x60 | sizes[s];
        t[n + 1] = ST | 0x60 | sizes[s];
        t[n + 2] = STX | 0x60 | sizes[s];
        n += 3;
        s += 1;
    }
    t[n] = LDDW;
    n += 1;
    let mut j = 0;
    while j < JCC_OPS.len() {
        t[n] = JMP | JCC_OPS[j];
        t[n + 1] = JMP | JCC_OPS[j] | X;
        t[n + 2] = JMP32 | JCC_OPS[j];
        t[n + 3] = JMP32 | JCC_OPS[j] | X;
        n += 4;
        j += 1;
    }
    t[n] = JA;
    t[n + 1] = EXIT;
    n += 2;
    assert!(n == t.len());
    t
}

/// Every opcode the verifier accepts (111 of 256).
pub const OPCODES: [u8; 111] = build_opcodes();

/// Is `op` one the verifier accepts?
pub fn allowed(op: u8) -> bool {
    OPCODES.contains(&op)
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub op: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub fn at(prog: &[u8], i: usize) -> Insn {
        let b = &prog[8 * i..8 * i + 8];
        Insn {
            op: b[0],
            dst: b[1] & 0xf,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub fn class(&self) -> u8 {
        self.op & 7
    }

    fn is_jump(&self) -> bool {
        matches!(self.class(), JMP | JMP32) && self.op != EXIT
    }

    /// Bytes a load or store moves.
    pub fn size(&self) -> usize {
        match self.op & 0x18 {
            0x10 => 1,
            0x08 => 2,
            0x00 => 4,
            _ => 8,
        }
    }
}

/// A number's unsigned bounds (`lo <= hi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
}

const ANY: Range = Range { lo: 0, hi: u64::MAX };
const U32: u64 = u32::MAX as u64;

impl Range {
    const fn exactly(v: u64) -> Range {
        Range { lo: v, hi: v }
    }

    const fn upto(hi: u64) -> Range {
        Range { lo: 0, hi }
    }

    /// The lower 32 bits' bounds.
    fn low32(self) -> Range {
        if self.hi <= U32 {
            self
        } else {
            Range::upto(U32)
        }
    }

    /// Every value of a width of `bits` whose top bit is that of `hi`.
    fn bits_upto(hi: u64) -> u64 {
        if hi == 0 {
            0
        } else {
            u64::MAX >> hi.leading_zeros()
        }
    }

    /// The result of ALU operation `code` on `self` and `b` at 64 bits (`w64`) or 32.
    fn alu(self, code: u8, b: Range, w64: bool, imm: i32, from_reg: bool) -> Range {
        // Adding a negative immediate is a subtraction (and the other way round): its
        // bounds do not wrap when the register's do not go below zero.
        if !from_reg && imm < 0 && matches!(code, 0x00 | 0x10) {
            let c = Range::exactly(imm.unsigned_abs() as u64);
            return self.alu(code ^ 0x10, c, w64, 0, true);
        }
        let (a, b) = if w64 { (self, b) } else { (self.low32(), b.low32()) };
        let mask = if w64 { 63 } else { 31 };
        let r = match code {
            0x00 => match (a.lo.checked_add(b.lo), a.hi.checked_add(b.hi)) {
                (Some(lo), Some(hi)) => Range { lo, hi },
                _ => ANY,
            },
            0x10 if a.lo >= b.hi => Range { lo: a.lo - b.hi, hi: a.hi - b.lo },
            0x20 => match (a.lo.checked_mul(b.lo), a.hi.checked_mul(b.hi)) {
                (Some(lo), Some(hi)) => Range { lo, hi },
                _ => ANY,
            },
            0x30 if b.lo > 0 => Range { lo: a.lo / b.hi, hi: a.hi / b.lo },
            0x30 => Range::upto(a.hi),
            // A modulo by zero leaves the register whole (all of it: rbpf).
            0x90 if b.lo > 0 => Range::upto(a.hi.min(b.hi - 1)),
            0x90 => Range::upto(self.hi),
            0x50 => Range::upto(a.hi.min(b.hi)),
            0x40 => Range { lo: a.lo.max(b.lo), hi: Range::bits_upto(a.hi | b.hi) },
            0xa0 => Range::upto(Range::bits_upto(a.hi | b.hi)),
            0x60 if b.hi <= mask && a.hi.leading_zeros() as u64 >= b.hi + (63 - mask) => {
                Range { lo: a.lo << b.lo, hi: a.hi << b.hi }
            }
            0x70 if b.hi <= mask => Range { lo: a.lo >> b.hi, hi: a.hi >> b.lo },
            0x70 => Range::upto(a.hi),
            0xc0 if w64 && a.hi < 1 << 63 && b.hi <= mask => Range { lo: a.lo >> b.hi, hi: a.hi >> b.lo },
            0xc0 if !w64 && a.hi < 1 << 31 && b.hi <= mask => Range { lo: a.lo >> b.hi, hi: a.hi >> b.lo },
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

/// What the verifier knows of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
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
type Off = Option<(i32, i32)>;

/// How far a pointer may be moved by a number: no pointer offset ever grows past it.
const MAX_MOVE: u64 = 1 << 30;

impl Ty {
    const NUM: Ty = Ty::Num(ANY);

    /// Is every value `self` may be one `o` may be (so that what was proven of `o` holds
    /// of `self`)? A mixed value in `o` was never used on any path from there: anything
    /// fits it.
    fn within(self, o: Ty) -> bool {
        let off = |a: Off, b: Off| match (a, b) {
            (Some(a), Some(b)) => b.0 <= a.0 && a.1 <= b.1,
            (None, None) => true,
            _ => false,
        };
        match (self, o) {
            (_, Ty::Mixed | Ty::Uninit) => true,
            (Ty::Num(a), Ty::Num(b)) => b.lo <= a.lo && a.hi <= b.hi,
            (Ty::Mem(a), Ty::Mem(b)) | (Ty::Stack(a), Ty::Stack(b)) => off(a, b),
            _ => false,
        }
    }

    fn is_ptr(self) -> bool {
        matches!(self, Ty::Mem(_) | Ty::Stack(_))
    }

    /// The pointer moved by between `d.0` and `d.1` bytes (unknown if it was, or if the
    /// move is not bounded).
    fn moved(self, d: Option<(i64, i64)>) -> Ty {
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

const SLOTS: usize = STACK / 8;

#[derive(Clone, PartialEq, Eq)]
struct State {
    regs: [Ty; 11],
    slots: [Ty; SLOTS],
    /// The stack's bytes written so far, a bit each.
    init: [u8; SLOTS],
}

impl State {
    fn entry() -> State {
        let mut regs = [Ty::Uninit; 11];
        regs[1] = Ty::Mem(Some((0, 0)));
        regs[10] = Ty::Stack(Some((0, 0)));
        State { regs, slots: [Ty::Uninit; SLOTS], init: [0; SLOTS] }
    }

    /// Are the stack's bytes `lo .. hi` (offsets from `r10`) all written?
    fn written(&self, lo: i64, hi: i64) -> bool {
        (lo..hi).all(|b| {
            let b = (b + STACK as i64) as usize;
            self.init[b / 8] & 1 << (b % 8) != 0
        })
    }

    fn write(&mut self, lo: i64, hi: i64) {
        for b in lo..hi {
            let b = (b + STACK as i64) as usize;
            self.init[b / 8] |= 1 << (b % 8);
        }
    }

    /// The state kept small: the slots ever written.
    fn pack(&self) -> Packed {
        Packed {
            regs: self.regs,
            slots: (0..SLOTS)
                .filter(|&k| self.init[k] != 0 || self.slots[k] != Ty::Uninit)
                .map(|k| (k as u8, self.slots[k], self.init[k]))
                .collect(),
        }
    }
}

/// A state as the verifier keeps it while it waits.
#[derive(Clone)]
struct Packed {
    regs: [Ty; 11],
    slots: Vec<(u8, Ty, u8)>,
}

impl Packed {
    /// Is `st` inside this kept state, for the registers in `live` (a bit each; the
    /// others are written before they are read on every path from here, so their values
    /// do not matter)? A byte written there and read after must be written in `st` too.
    fn holds(&self, st: &State, live: u16) -> bool {
        if !st.regs.iter().zip(self.regs.iter()).enumerate().all(|(r, (a, b))| live & 1 << r == 0 || a.within(*b)) {
            return false;
        }
        // Slots it does not list are unwritten there (anything fits them).
        self.slots.iter().all(|&(k, t, i)| st.slots[k as usize].within(t) && st.init[k as usize] & i == i)
    }

    fn unpack(&self) -> State {
        let mut st = State { regs: self.regs, slots: [Ty::Uninit; SLOTS], init: [0; SLOTS] };
        for &(k, t, i) in &self.slots {
            st.slots[k as usize] = t;
            st.init[k as usize] = i;
        }
        st
    }
}

fn refuse(why: &'static str) -> LoadError {
    LoadError::Refused(why)
}

/// Check `prog` (raw instructions) for a memory (`r1`'s region) of `mem_len` bytes: the
/// decoded program, or why it is refused.
pub fn verify(prog: &[u8], mem_len: usize) -> Result<Vec<Insn>, LoadError> {
    check(prog, mem_len).map_err(|(_, e)| e)
}

/// As [`verify`], with the instruction a refusal is about (for the graft's author:
/// `cargo xtask build` prints it).
pub fn check(prog: &[u8], mem_len: usize) -> Result<Vec<Insn>, (usize, LoadError)> {
    let at = core::cell::Cell::new(0usize);
    check_at(prog, mem_len, &at).map_err(|e| (at.get(), e))
}

fn check_at(prog: &[u8], mem_len: usize, at: &core::cell::Cell<usize>) -> Result<Vec<Insn>, LoadError> {
    if prog.is_empty() || !prog.len().is_multiple_of(8) {
        return Err(refuse("eBPF: not a whole number of instructions"));
    }
    let n = prog.len() / 8;
    if n > MAX_INSNS {
        return Err(refuse("eBPF: more than 32767 instructions"));
    }
    let insns: Vec<Insn> = (0..n).map(|i| Insn::at(prog, i)).collect();
    // The second halves of `lddw`: no jump may land on one, none runs on its own.
    let mut tail = vec![false; n];
    let mut i = 0;
    while i < n {
        at.set(i);
        let x = insns[i];
        if !allowed(x.op) {
            return Err(refuse(match x.op {
                CALL | TAIL_CALL => "eBPF: helper and tail calls are not allowed",
                op if op & 7 == LD => "eBPF: legacy packet loads are not allowed",
                op if matches!(op & 7, ST | STX) && op & 0xe0 == 0xc0 => "eBPF: atomic operations are not allowed",
                _ => "eBPF: an opcode the engine does not implement",
            }));
        }
        if x.dst > 10 || x.src > 10 {
            return Err(refuse("eBPF: register out of range"));
        }
        let writes_dst = matches!(x.class(), LD | LDX | ALU | ALU64);
        if writes_dst && x.dst == 10 {
            return Err(refuse("eBPF: r10 (the frame pointer) is read-only"));
        }
        if x.class() == ALU && x.op & 0xf0 == END && !matches!(x.imm, 16 | 32 | 64) {
            return Err(refuse("eBPF: byte swap of a width other than 16, 32 or 64"));
        }
        if x.op == LDDW {
            // Linux reads a nonzero source as a pseudo value (a map's address, a map
            // value's, a BTF object's, a function's): not a constant, and nothing here
            // gives one.
            if x.src != 0 || x.off != 0 {
                return Err(refuse(
                    "eBPF: lddw with a nonzero source or offset (a map or other pseudo reference in Linux), not a constant",
                ));
            }
            match insns.get(i + 1) {
                Some(t) if t.op == 0 && t.dst == 0 && t.src == 0 && t.off == 0 => {}
                _ => return Err(refuse("eBPF: incomplete lddw")),
            }
            tail[i + 1] = true;
            i += 2;
            continue;
        }
        // rbpf compares a 64-bit register with an immediate zero-extended for the
        // unsigned and equality tests (eBPF sign-extends it, as clang expects): a
        // negative one would not mean what the program says.
        if x.class() == JMP
            && x.op & X == 0
            && matches!(x.op & 0xf0, 0x10 | 0x20 | 0x30 | 0x50 | 0xa0 | 0xb0)
            && x.imm < 0
        {
            return Err(refuse(
                "eBPF: an unsigned 64-bit compare with a negative immediate (the engine would zero-extend it)",
            ));
        }
        // rbpf leaves the register whole on a 32-bit modulo by zero (eBPF zeroes its
        // upper half); with an immediate that is known at once.
        if x.class() == ALU && x.op == ALU | 0x90 && x.imm == 0 {
            return Err(refuse("eBPF: a 32-bit modulo by the constant zero"));
        }
        if x.is_jump() {
            let t = i as i64 + 1 + x.off as i64;
            if t < 0 || t >= n as i64 {
                return Err(refuse("eBPF: jump outside the program"));
            }
        }
        i += 1;
    }
    // Successors of instruction i: a jump's target, and the next instruction unless it
    // is `ja` or `exit` (never past the end).
    let succ = |i: usize| -> Result<([usize; 2], usize), LoadError> {
        at.set(i);
        let x = insns[i];
        let mut s = [0usize; 2];
        let mut k = 0;
        if x.is_jump() {
            let t = (i as i64 + 1 + x.off as i64) as usize;
            if tail[t] {
                return Err(refuse("eBPF: jump into the middle of lddw"));
            }
            s[k] = t;
            k += 1;
        }
        if x.op != EXIT && x.op != JA {
            let next = if x.op == LDDW { i + 2 } else { i + 1 };
            if next >= n {
                return Err(refuse("eBPF: runs off the end without exit"));
            }
            s[k] = next;
            k += 1;
        }
        Ok((s, k))
    };
    // Places worth a look back (Linux's prune points): jump targets (1), loops' heads,
    // the targets of jumps back (2).
    let mut target = vec![0u8; n];
    for (i, x) in insns.iter().enumerate() {
        if x.is_jump() && !tail[i] {
            let t = (i as i64 + 1 + x.off as i64) as usize;
            target[t] = target[t].max(if x.off < 0 { 2 } else { 1 });
        }
    }
    let live = liveness(&insns, &tail, &succ)?;
    explore(&insns, &target, &live, mem_len, at, &succ)?;
    Ok(insns)
}

/// The registers each instruction reads, and those it writes (a bit each).
fn uses_defs(x: &Insn) -> (u16, u16) {
    let (d, s) = (1u16 << x.dst, 1u16 << x.src);
    let from_reg = x.op & X != 0;
    match x.class() {
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
    }
}

/// For each instruction, the registers read on some path from it before they are
/// written (the frame pointer always): what states at a place are compared by.
fn liveness(
    insns: &[Insn],
    tail: &[bool],
    succ: &dyn Fn(usize) -> Result<([usize; 2], usize), LoadError>,
) -> Result<Vec<u16>, LoadError> {
    let n = insns.len();
    let mut live = vec![0u16; n];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..n).rev() {
            if tail[i] {
                continue;
            }
            let (s, k) = succ(i)?;
            let out = s[..k].iter().fold(0u16, |a, &t| a | live[t]);
            let (u, d) = uses_defs(&insns[i]);
            let v = u | (out & !d) | 1 << 10;
            if v != live[i] {
                live[i] = v;
                changed = true;
            }
        }
    }
    Ok(live)
}

/// A place (a jump target) reached on a path, and the paths from there still under way.
struct Node {
    parent: Option<usize>,
    pc: usize,
    state: Packed,
    pending: u32,
}

/// Follow every path from the entry (see the module's comment).
fn explore(
    insns: &[Insn],
    target: &[u8],
    live: &[u16],
    mem_len: usize,
    at: &core::cell::Cell<usize>,
    succ: &dyn Fn(usize) -> Result<([usize; 2], usize), LoadError>,
) -> Result<(), LoadError> {
    let mut nodes: Vec<Option<Node>> =
        vec![Some(Node { parent: None, pc: 0, state: State::entry().pack(), pending: 1 })];
    let mut free: Vec<usize> = Vec::new();
    let mut done: BTreeMap<usize, Vec<Packed>> = BTreeMap::new();
    let mut kept = 0usize;
    // Paths to follow: where, in what state, under which node.
    let mut work: Vec<(usize, Packed, usize)> = vec![(0, State::entry().pack(), 0)];
    let mut processed = 0usize;
    let too_complex = || refuse("eBPF: too many paths or instructions to follow (too complex)");
    // A path under `node` ended (at an exit, or pruned): nodes whose paths have all
    // ended keep their state as one followed to the end.
    let finish = |nodes: &mut Vec<Option<Node>>,
                  free: &mut Vec<usize>,
                  done: &mut BTreeMap<usize, Vec<Packed>>,
                  kept: &mut usize,
                  mut node: usize| {
        loop {
            let Some(nd) = nodes[node].as_mut() else { return };
            nd.pending -= 1;
            if nd.pending > 0 {
                return;
            }
            let nd = nodes[node].take().expect("just seen");
            free.push(node);
            let at_pc = done.entry(nd.pc).or_default();
            if at_pc.len() >= MAX_DONE_AT {
                at_pc.remove(0);
                at_pc.push(nd.state);
            } else if *kept < MAX_DONE {
                at_pc.push(nd.state);
                *kept += 1;
            }
            match nd.parent {
                Some(p) => node = p,
                None => return,
            }
        }
    };
    while let Some((pc0, packed, node0)) = work.pop() {
        let (mut pc, mut st, mut node) = (pc0, packed.unpack(), node0);
        // The entry's node is the place of its first instruction already.
        let mut first = pc0 == 0 && node0 == 0;
        let mut since = 0usize;
        loop {
            at.set(pc);
            if target[pc] != 0 && !first {
                if done.get(&pc).is_some_and(|ds| ds.iter().any(|d| d.holds(&st, live[pc]))) {
                    finish(&mut nodes, &mut free, &mut done, &mut kept, node);
                    break;
                }
                // Back at a loop's head no narrower than before: it may never end.
                let keep = target[pc] == 2 || since >= NODE_EVERY;
                let mut up = Some(node);
                for _ in 0..LOOP_LOOKBACK {
                    let Some(a) = up.and_then(|a| nodes[a].as_ref()) else { break };
                    if a.pc == pc && a.state.holds(&st, live[pc]) {
                        return Err(refuse("eBPF: a loop the verifier cannot prove ends"));
                    }
                    up = a.parent;
                }
                if keep {
                    let nd = Node { parent: Some(node), pc, state: st.pack(), pending: 1 };
                    // The path moves from its node into the new one, which takes its place
                    // among the node's pending paths.
                    node = match free.pop() {
                        Some(k) => {
                            nodes[k] = Some(nd);
                            k
                        }
                        None => {
                            nodes.push(Some(nd));
                            nodes.len() - 1
                        }
                    };
                    since = 0;
                    if nodes.len() - free.len() + work.len() > MAX_LIVE {
                        return Err(too_complex());
                    }
                }
            }
            first = false;
            since += 1;
            processed += 1;
            if processed > MAX_PROCESSED {
                return Err(too_complex());
            }
            let x = &insns[pc];
            let (s, _) = succ(pc)?;
            if x.op == EXIT {
                step(x, &mut st, mem_len)?;
                finish(&mut nodes, &mut free, &mut done, &mut kept, node);
                break;
            }
            if x.is_jump() && x.op != JA {
                // The way taken is followed now, the other later (a loop's next round
                // is usually the way taken: its exits wait, few at a time).
                let (taken, fall) = branch(x, st)?;
                match (taken, fall) {
                    (Some(t), Some(f)) => {
                        if let Some(nd) = nodes[node].as_mut() {
                            nd.pending += 1;
                        }
                        work.push((s[1], f.pack(), node));
                        if nodes.len() - free.len() + work.len() > MAX_LIVE {
                            return Err(too_complex());
                        }
                        pc = s[0];
                        st = t;
                    }
                    (Some(t), None) => {
                        pc = s[0];
                        st = t;
                    }
                    (None, Some(f)) => {
                        pc = s[1];
                        st = f;
                    }
                    (None, None) => {
                        finish(&mut nodes, &mut free, &mut done, &mut kept, node);
                        break;
                    }
                }
            } else {
                step(x, &mut st, mem_len)?;
                pc = s[0];
            }
        }
    }
    Ok(())
}

fn usable(t: Ty) -> Result<Ty, LoadError> {
    match t {
        Ty::Mixed => Err(refuse("eBPF: what is left of a partly overwritten pointer is used")),
        Ty::Uninit => Err(refuse("eBPF: a register read before it is written")),
        t => Ok(t),
    }
}

/// The stack slots bytes `lo .. hi` (offsets from `r10`, inside the stack) lie in.
fn slots(lo: i64, hi: i64) -> core::ops::Range<usize> {
    let (lo, hi) = ((lo + STACK as i64) as usize, (hi + STACK as i64) as usize);
    lo / 8..hi.div_ceil(8)
}

/// The offsets an access of `size` bytes at `off` from a pointer at offsets `o` covers,
/// if it lies inside `0 .. len` (`len` bytes from the base; the stack: `-512 .. 0`).
fn inside(o: Off, off: i16, size: usize, lo: i64, hi: i64) -> Result<(i64, i64), LoadError> {
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
fn step(x: &Insn, st: &mut State, mem_len: usize) -> Result<(), LoadError> {
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
                (r.hi <= MAX_MOVE)
                    .then(|| if neg { (-(r.hi as i64), -(r.lo as i64)) } else { (r.lo as i64, r.hi as i64) })
            };
            st.regs[d] = match (w64, code, dst, src) {
                (_, _, Ty::Num(a), Ty::Num(b)) => Ty::Num(a.alu(code, b, w64, x.imm, from_reg)),
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
fn branch(x: &Insn, st: State) -> Result<(Option<State>, Option<State>), LoadError> {
    let (d, s) = (x.dst as usize, x.src as usize);
    let w64 = x.class() == JMP;
    let from_reg = x.op & X != 0;
    let a = usable(st.regs[d])?;
    let b = if from_reg {
        usable(st.regs[s])?
    } else {
        Ty::Num(Range::exactly(if w64 { x.imm as i64 as u64 } else { x.imm as u32 as u64 }))
    };
    let (Ty::Num(ra), Ty::Num(rb)) = (a, b) else { return Err(refuse("eBPF: a pointer compared")) };
    let code = x.op & 0xf0;
    // Bounds are kept on the whole register: a 32-bit test says something of it only
    // when both sides fit in 32 bits, a signed test only when both are non-negative.
    let limit = if w64 { u64::MAX } else { U32 };
    let signed = matches!(code, 0x60 | 0x70 | 0xc0 | 0xd0);
    let sign_limit = if w64 { i64::MAX as u64 } else { i32::MAX as u64 };
    let comparable = ra.hi <= limit && rb.hi <= limit && (!signed || (ra.hi <= sign_limit && rb.hi <= sign_limit));
    let mut fall = st.clone();
    let mut taken = st;
    if comparable {
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
        let apply = |st: &mut State, c: Option<Cmp>| -> bool {
            let Some(c) = c else { return true };
            let Some((na, nb)) = c.refine(ra, rb) else { return false };
            st.regs[d] = Ty::Num(na);
            if from_reg {
                st.regs[s] = Ty::Num(nb);
            }
            true
        };
        let (t_ok, f_ok) = (apply(&mut taken, t), apply(&mut fall, f));
        return Ok((t_ok.then_some(taken), f_ok.then_some(fall)));
    }
    Ok((Some(taken), Some(fall)))
}

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    /// The bounds of `a` and `b` given `a CMP b` (`None`: impossible).
    fn refine(self, a: Range, b: Range) -> Option<(Range, Range)> {
        let (mut a, mut b) = (a, b);
        match self {
            Cmp::Eq => {
                let r = Range { lo: a.lo.max(b.lo), hi: a.hi.min(b.hi) };
                a = r;
                b = r;
            }
            // Only a constant at either end of the other's bounds says something.
            Cmp::Ne => {
                if b.lo == b.hi {
                    if a.lo == b.lo {
                        a.lo = a.lo.checked_add(1)?;
                    } else if a.hi == b.lo {
                        a.hi = a.hi.checked_sub(1)?;
                    }
                }
                if a.lo == a.hi {
                    if b.lo == a.lo {
                        b.lo = b.lo.checked_add(1)?;
                    } else if b.hi == a.lo {
                        b.hi = b.hi.checked_sub(1)?;
                    }
                }
            }
            Cmp::Gt => {
                a.lo = a.lo.max(b.lo.checked_add(1)?);
                b.hi = b.hi.min(a.hi.checked_sub(1)?);
            }
            Cmp::Ge => {
                a.lo = a.lo.max(b.lo);
                b.hi = b.hi.min(a.hi);
            }
            Cmp::Lt => {
                a.hi = a.hi.min(b.hi.checked_sub(1)?);
                b.lo = b.lo.max(a.lo.checked_add(1)?);
            }
            Cmp::Le => {
                a.hi = a.hi.min(b.hi);
                b.lo = b.lo.max(a.lo);
            }
        }
        (a.lo <= a.hi && b.lo <= b.hi).then_some((a, b))
    }
}
