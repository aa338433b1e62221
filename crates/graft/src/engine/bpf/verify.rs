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

use alloc::vec::Vec;

use crate::LoadError;

/// The longest program (so that rbpf's 16-bit jump arithmetic cannot overflow).
pub const MAX_INSNS: usize = 32767;
/// Bytes of stack below `r10` (rbpf's).
pub const STACK: usize = 512;
/// Instructions the verifier follows in all, on every path: the most one call can run
/// (Linux's bound). A program that needs more is refused as too complex.
pub const MAX_PROCESSED: usize = 1_000_000;
/// Paths waiting at once (Linux's bound on a sequence of jumps: a loop whose every
/// round leaves a test's other way waiting is followed this many rounds at most).
pub const MAX_PENDING: usize = 8192;
/// Bytes of states the verifier holds at once (its memory: each state is tens of bytes,
/// a few hundred with a stack in use): past it a program is refused as too complex. The
/// verifier runs in the loading graft's arena (`table::HEAP_LIMIT`, 4 MiB), which it
/// leaves empty before the engine is built: half of it.
pub const MAX_BYTES: usize = 2 << 20;
/// A place is kept (a node, a state to prune by) at a loop's head, and at any other
/// jump target only when the path ran at least this many instructions since its last
/// (Linux's heuristic: fewer states kept, little pruning lost).
const NODE_EVERY: usize = 4;
/// States kept of a place followed to the end, for pruning (its newest).
const MAX_DONE_AT: usize = 32;
/// How far up a path the verifier looks for the state it had at a loop's head.
const LOOP_LOOKBACK: usize = 16;

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

mod flow;
mod state;
mod statics;
mod step;
mod value;
mod walk;

use flow::*;
use state::*;
use statics::*;
use step::*;
use value::*;
use walk::*;

fn refuse(why: &'static str) -> LoadError {
    LoadError::Refused(why)
}

/// Check `prog` (raw instructions) for a memory (`r1`'s region) of `mem_len` bytes: the
/// decoded program, or why it is refused. (A program the table has just verified in
/// slices, `crate::vouch` — these very bytes, for this memory — is only decoded: its
/// checks, static and followed, passed.)
pub fn verify(prog: &[u8], mem_len: usize) -> Result<Vec<Insn>, LoadError> {
    if crate::vouch::vouched(crate::vouch::Kind::Verified, prog, &[mem_len]) {
        return Ok((0..prog.len() / 8).map(|i| Insn::at(prog, i)).collect());
    }
    check(prog, mem_len).map_err(|(_, e)| e)
}

/// As [`check`], within `limits`, with the work it did (refused or not): what a server
/// bounds and reports a load by.
pub fn check_with(prog: &[u8], mem_len: usize, limits: Limits) -> (Result<Vec<Insn>, (usize, LoadError)>, Work) {
    match Verifier::new(prog, mem_len, limits) {
        Err(e) => (Err(e), Work::default()),
        Ok(mut v) => {
            let r = v.run(prog, u64::MAX).unwrap_or(Err((0, too_complex())));
            (r, v.work())
        }
    }
}

/// As [`verify`], with the instruction a refusal is about (for the graft's author:
/// `cargo xtask build` prints it).
pub fn check(prog: &[u8], mem_len: usize) -> Result<Vec<Insn>, (usize, LoadError)> {
    check_with(prog, mem_len, Limits::default()).0
}

/// Units of work in one slice of a server's verification ([`Verifier::run`]): an
/// instruction followed or a state compared each, a few hundred machine instructions
/// (so a slice is a fraction of a millisecond, about what a server takes for a small
/// request). A load waits for its verification slice after slice, one a request of
/// its loader's, the server answering others in between (`graft::table`).
pub const SLICE: u64 = 1024;

/// A verification under way, to be done in slices of bounded work ([`Verifier::run`]),
/// so that a server answers other requests between them: the static checks first
/// (`statics`), then the path search. It holds what the checks found and the search's
/// states (at most `Limits::bytes` of them), in the memory it was made in.
pub struct Verifier {
    stage: Stage,
    mem_len: usize,
    limits: Limits,
    /// The work of the static checks, and the instruction they are at.
    checked: usize,
    at: usize,
    /// The search's work, once it has ended.
    done_work: Work,
}

enum Stage {
    Static(Statics),
    Search(Explorer),
    Done,
}

impl Verifier {
    /// A verification of `prog` for a memory of `mem_len` bytes: refused at once only
    /// for its length; every other check is made by [`Verifier::run`].
    pub fn new(prog: &[u8], mem_len: usize, limits: Limits) -> Result<Verifier, (usize, LoadError)> {
        let s = Statics::new(prog).map_err(|e| (0, e))?;
        Ok(Verifier { stage: Stage::Static(s), mem_len, limits, checked: 0, at: 0, done_work: Work::default() })
    }

    /// Go on for about `budget` units of work (each `SLICE` of them about the same
    /// time) over `prog`, the bytes given to `new`: `None` while there is more to do,
    /// else the decoded program or why it is refused (once: after that, `None` only
    /// with an empty program).
    #[allow(clippy::type_complexity)]
    pub fn run(&mut self, prog: &[u8], budget: u64) -> Option<Result<Vec<Insn>, (usize, LoadError)>> {
        let budget = budget.max(1);
        let r = match &mut self.stage {
            Stage::Done => return None,
            Stage::Static(s) => {
                let before = self.checked;
                match s.run(prog, self.mem_len, self.limits, budget, &mut self.checked, &mut self.at) {
                    Ok(None) => return None,
                    Err(e) => Err((self.at, e)),
                    Ok(Some(ex)) => {
                        // The rest of the slice goes to the search.
                        let left = budget - (self.checked - before) as u64;
                        self.stage = Stage::Search(ex);
                        if left == 0 {
                            return None;
                        }
                        return self.run(prog, left);
                    }
                }
            }
            Stage::Search(ex) => {
                let r = match ex.run(budget) {
                    Ok(false) => return None,
                    Ok(true) => Ok(core::mem::take(&mut ex.insns)),
                    Err(e) => Err((ex.at, e)),
                };
                self.done_work = ex.stats;
                r
            }
        };
        self.stage = Stage::Done;
        Some(r)
    }

    /// The work done so far.
    pub fn work(&self) -> Work {
        let mut w = match &self.stage {
            Stage::Search(ex) => ex.stats,
            _ => self.done_work,
        };
        w.checked = self.checked;
        w
    }
}

fn too_complex() -> LoadError {
    refuse("eBPF: more instructions to follow than a call may run (too complex)")
}

/// What the verifier did, for a server to bound and report: instructions looked at by
/// the static checks, instructions followed, states compared, and the most bytes of
/// states it held at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Instructions looked at by the static checks (each pass's look one).
    pub checked: usize,
    pub processed: usize,
    pub compared: usize,
    pub peak_bytes: usize,
}

/// How much the verifier may do: instructions followed in all (the most one call may
/// run: Linux's 1 M), and bytes of states held at once (its memory).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub processed: usize,
    pub bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { processed: MAX_PROCESSED, bytes: MAX_BYTES }
    }
}
