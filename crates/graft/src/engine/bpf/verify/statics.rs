//! The static checks (opcodes, fields, jumps, the graph, the two dataflows), done a
//! slice at a time as the path search is: each pass over the program goes on from where
//! the last slice left it, so that no request of a loader's holds its server for the
//! whole program (20,000 instructions took 13 ms of the cache's one thread at once).

use super::*;

use alloc::vec;
use alloc::vec::Vec;

/// Where the static checks are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    /// Each instruction decoded and its fields checked.
    Decode,
    /// Each instruction's successors.
    Succs,
    /// The places worth a look back.
    Targets,
    /// Predecessors counted, summed, filled in (`Preds`).
    Count,
    Sum,
    Fill,
    /// The two dataflows.
    Live,
    Rel,
}

/// The static checks under way: what they know so far, and where they are.
pub(super) struct Statics {
    n: usize,
    pass: Pass,
    /// The next instruction of the pass.
    i: usize,
    insns: Vec<Insn>,
    /// The second halves of `lddw`: no jump may land on one, none runs on its own.
    tail: Vec<bool>,
    succs: Vec<([usize; 2], usize)>,
    target: Vec<u8>,
    preds: Preds,
    /// `Fill`'s next free place of each instruction's predecessors.
    fill: Vec<u32>,
    flow: Option<Backward>,
    live: Vec<u16>,
}

impl Statics {
    /// Checks for a program of `prog.len()` bytes, none made yet: only its length is
    /// refused here.
    pub(super) fn new(prog: &[u8]) -> Result<Statics, LoadError> {
        if prog.is_empty() || !prog.len().is_multiple_of(8) {
            return Err(refuse("eBPF: not a whole number of instructions"));
        }
        let n = prog.len() / 8;
        if n > MAX_INSNS {
            return Err(refuse("eBPF: more than 32767 instructions"));
        }
        Ok(Statics {
            n,
            pass: Pass::Decode,
            i: 0,
            insns: Vec::with_capacity(n),
            tail: vec![false; n],
            succs: Vec::new(),
            target: Vec::new(),
            preds: Preds { from: Vec::new(), preds: Vec::new() },
            fill: Vec::new(),
            flow: None,
            live: Vec::new(),
        })
    }

    /// Go on for at most `budget` instructions (each pass's look at one instruction is
    /// one; `work` counts them) over `prog` (the same bytes as `new`'s): `Ok(None)`
    /// while there is more to do, the search ready to start once every check passed.
    /// `at` is the instruction a refusal is about.
    pub(super) fn run(
        &mut self,
        prog: &[u8],
        mem_len: usize,
        limits: Limits,
        budget: u64,
        work: &mut usize,
        at: &mut usize,
    ) -> Result<Option<Explorer>, LoadError> {
        assert_eq!(prog.len(), 8 * self.n, "the bytes the checks were made for");
        let n = self.n;
        let mut left = budget.max(1);
        loop {
            if left == 0 {
                return Ok(None);
            }
            // One instruction of the pass (or the pass's end).
            let i = self.i;
            let end = match self.pass {
                Pass::Live | Pass::Rel => false,
                _ => i >= n,
            };
            if end {
                self.next_pass();
                continue;
            }
            *at = i;
            match self.pass {
                Pass::Decode => self.decode(prog, i)?,
                Pass::Succs => self.succ(i)?,
                Pass::Targets => {
                    let x = self.insns[i];
                    if x.is_jump() && !self.tail[i] {
                        let t = (i as i64 + 1 + x.off as i64) as usize;
                        self.target[t] = self.target[t].max(if x.off < 0 { 2 } else { 1 });
                    }
                    self.i += 1;
                }
                Pass::Count => {
                    let (s, k) = self.succs[i];
                    for &t in &s[..k] {
                        self.preds.from[t + 1] += 1;
                    }
                    self.i += 1;
                }
                Pass::Sum => {
                    self.preds.from[i + 1] += self.preds.from[i];
                    self.i += 1;
                }
                Pass::Fill => {
                    let (s, k) = self.succs[i];
                    for &t in &s[..k] {
                        self.preds.preds[self.fill[t] as usize] = i as u32;
                        self.fill[t] += 1;
                    }
                    self.i += 1;
                }
                Pass::Live | Pass::Rel => {
                    let flow = self.flow.as_mut().expect("a dataflow under way");
                    let before = *work;
                    let done = flow.run(&self.insns, &self.succs, &self.preds, left, work);
                    left -= (*work - before) as u64;
                    if !done {
                        return Ok(None);
                    }
                    let set = self.flow.take().expect("a dataflow under way").set;
                    if self.pass == Pass::Live {
                        self.live = set;
                        self.pass = Pass::Rel;
                        self.flow = Some(Backward::new(&self.tail, relevance));
                        continue;
                    }
                    return Ok(Some(Explorer::new(
                        core::mem::take(&mut self.insns),
                        core::mem::take(&mut self.target),
                        core::mem::take(&mut self.live),
                        set,
                        core::mem::take(&mut self.succs),
                        mem_len,
                        limits,
                    )));
                }
            }
            *work += 1;
            left -= 1;
        }
    }

    /// The pass after this one, with what it needs.
    fn next_pass(&mut self) {
        let n = self.n;
        self.i = 0;
        self.pass = match self.pass {
            Pass::Decode => {
                self.succs = vec![([0; 2], 0); n];
                Pass::Succs
            }
            Pass::Succs => {
                self.target = vec![0u8; n];
                Pass::Targets
            }
            Pass::Targets => {
                self.preds.from = vec![0u32; n + 1];
                Pass::Count
            }
            Pass::Count => Pass::Sum,
            Pass::Sum => {
                self.fill = self.preds.from.clone();
                self.preds.preds = vec![0u32; self.preds.from[n] as usize];
                Pass::Fill
            }
            Pass::Fill => {
                self.fill = Vec::new();
                self.flow = Some(Backward::new(&self.tail, liveness));
                Pass::Live
            }
            Pass::Live | Pass::Rel => unreachable!("a dataflow ends in `run`"),
        };
    }

    /// Decode instruction `i` (the second half of an `lddw` with the first) and check
    /// its fields.
    fn decode(&mut self, prog: &[u8], i: usize) -> Result<(), LoadError> {
        let n = self.n;
        let x = Insn::at(prog, i);
        self.insns.push(x);
        self.i += 1;
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
            if i + 1 >= n {
                return Err(refuse("eBPF: incomplete lddw"));
            }
            let t = Insn::at(prog, i + 1);
            if !(t.op == 0 && t.dst == 0 && t.src == 0 && t.off == 0) {
                return Err(refuse("eBPF: incomplete lddw"));
            }
            self.insns.push(t);
            self.tail[i + 1] = true;
            self.i += 1;
            return Ok(());
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
        Ok(())
    }

    /// Instruction `i`'s successors: a jump's target, and the next instruction unless
    /// it is `ja` or `exit` (never past the end).
    fn succ(&mut self, i: usize) -> Result<(), LoadError> {
        self.i += 1;
        if self.tail[i] {
            return Ok(());
        }
        let x = self.insns[i];
        let (s, k) = &mut self.succs[i];
        if x.is_jump() {
            let t = (i as i64 + 1 + x.off as i64) as usize;
            if self.tail[t] {
                return Err(refuse("eBPF: jump into the middle of lddw"));
            }
            s[*k] = t;
            *k += 1;
        }
        if x.op != EXIT && x.op != JA {
            let next = if x.op == LDDW { i + 2 } else { i + 1 };
            if next >= self.n {
                return Err(refuse("eBPF: runs off the end without exit"));
            }
            s[*k] = next;
            *k += 1;
        }
        Ok(())
    }
}
