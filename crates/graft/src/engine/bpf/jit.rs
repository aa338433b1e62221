//! eBPF compiled to x86-64 by rbpf's JIT (uBPF's algorithm, as Linux compiles a
//! program its verifier passed), the interpreter's faster sibling: the same verifier
//! first (`verify`: exactly the opcodes rbpf implements, every load and store proven
//! inside the program's memory or its stack, every path ending within `MAX_PROCESSED`
//! instructions), then machine code that checks nothing itself — the proof is what keeps
//! it in its memory, as in Linux. The code goes into executable memory the server gives
//! (`graft-host`: pages of its own, whose write right it takes away once the code is in);
//! a call is a function call. The time a call takes is bounded by the verifier's proof
//! and, as for every compiled graft, by the server's watchdog.
//!
//! This module holds the crate's only `unsafe`: the call into the compiled code.
#![allow(unsafe_code)]

use alloc::vec;
use alloc::vec::Vec;

use super::{verify, INPUT};
use crate::engine::{Abort, Engine};
use crate::format::GraftFile;
use crate::LoadError;

self_cell::self_cell!(
    struct Compiled {
        owner: Vec<u8>,
        #[covariant]
        dependent: Vm,
    }
);

type Vm<'a> = rbpf::EbpfVmRaw<'a>;

/// The most machine code one eBPF instruction becomes (a division by a register: a test
/// for zero, saved registers, the division) — with the prologue, what the executable
/// memory must hold.
pub const BYTES_PER_INSN: usize = 96;
pub const PROLOGUE: usize = 4096;

/// Bytes of executable memory a program of `code_len` bytes needs.
pub fn code_bytes(code_len: usize) -> usize {
    PROLOGUE + code_len / 8 * BYTES_PER_INSN
}

pub struct Jit {
    vm: Compiled,
    mem: Vec<u8>,
    state_at: usize,
}

impl Jit {
    /// Verify and compile `f`'s program into `exec` (at least `code_bytes(f.code.len())`
    /// bytes, page-aligned, writable and executable until the caller takes the write
    /// right away).
    pub fn load(f: &GraftFile<'_>, exec: &'static mut [u8]) -> Result<Jit, LoadError> {
        let state_at = INPUT + f.point.max_input();
        verify::verify(f.code, state_at + f.state_len)?;
        if exec.len() < code_bytes(f.code.len()) {
            return Err(LoadError::Limit("eBPF: no room for the compiled code"));
        }
        let mut mem = vec![0u8; state_at + f.state_len];
        mem[8..16].copy_from_slice(&(f.state_len as u64).to_le_bytes());
        let code =
            for_the_jit(f.code).ok_or(LoadError::Refused("eBPF: too long to compile (the interpreter runs it)"))?;
        if exec.len() < code_bytes(code.len()) {
            return Err(LoadError::Limit("eBPF: no room for the compiled code"));
        }
        let vm = Compiled::try_new(code, |prog| {
            let mut vm = rbpf::EbpfVmRaw::new(None)?;
            // Verified above; rbpf's own check adds nothing to ours.
            vm.set_verifier(|_| Ok(()))?;
            vm.set_program(prog)?;
            vm.set_jit_exec_memory(exec)?;
            vm.jit_compile()?;
            Ok::<_, rbpf::lib::Error>(vm)
        })
        .map_err(|_| LoadError::Refused("eBPF: the compiler refused it"))?;
        Ok(Jit { vm, mem, state_at })
    }
}

/// The program as rbpf's JIT must see it to compute what eBPF says (the differential
/// test found two places where it does not): a 32-bit move between registers, which the
/// JIT compiles as a 64-bit one (the upper half is not cleared), becomes that move and
/// a 32-bit AND with all ones (which clears it); `le16`/`le32`, which it compiles as
/// nothing (x86 is little-endian, but the value must still be cut to its width), become
/// an AND with the width's mask. Jumps are moved to their instructions' new places.
/// `None` when the program grows past what a jump can span.
pub fn for_the_jit(code: &[u8]) -> Option<Vec<u8>> {
    let n = code.len() / 8;
    let insn = |i: usize| verify::Insn::at(code, i);
    let enc = |op: u8, dst: u8, src: u8, off: i16, imm: i32| -> [u8; 8] {
        let (o, m) = (off.to_le_bytes(), imm.to_le_bytes());
        [op, dst | src << 4, o[0], o[1], m[0], m[1], m[2], m[3]]
    };
    const MOV32_REG: u8 = 0xbc;
    const LE: u8 = 0xd4;
    const AND32_IMM: u8 = 0x54;
    const AND64_IMM: u8 = 0x57;
    const MOV64_REG: u8 = 0xbf;
    // Where each instruction lands.
    let mut at = Vec::with_capacity(n + 1);
    let mut k = 0usize;
    for i in 0..n {
        at.push(k);
        let x = insn(i);
        k += if x.op == MOV32_REG && x.dst != x.src { 2 } else { 1 };
    }
    at.push(k);
    if k > verify::MAX_INSNS {
        return None;
    }
    let mut out = Vec::with_capacity(8 * k);
    let mut i = 0;
    while i < n {
        let x = insn(i);
        match x.op {
            MOV32_REG if x.dst != x.src => {
                out.extend_from_slice(&enc(MOV64_REG, x.dst, x.src, 0, 0));
                out.extend_from_slice(&enc(AND32_IMM, x.dst, 0, 0, -1));
            }
            MOV32_REG => out.extend_from_slice(&enc(AND32_IMM, x.dst, 0, 0, -1)),
            LE if x.imm == 16 => out.extend_from_slice(&enc(AND64_IMM, x.dst, 0, 0, 0xffff)),
            LE if x.imm == 32 => out.extend_from_slice(&enc(AND32_IMM, x.dst, 0, 0, -1)),
            op if matches!(op & 7, 5 | 6) && op != verify::EXIT => {
                // A jump (its target was checked by the verifier).
                let t = (i as i64 + 1 + x.off as i64) as usize;
                let off = i16::try_from(at[t] as i64 - (at[i] as i64 + 1)).ok()?;
                out.extend_from_slice(&enc(x.op, x.dst, x.src, off, x.imm));
            }
            _ => out.extend_from_slice(&code[8 * i..8 * i + 8]),
        }
        i += 1;
    }
    Some(out)
}

impl Engine for Jit {
    fn state(&mut self) -> &mut [u8] {
        &mut self.mem[self.state_at..]
    }

    fn call(&mut self, input: &[u8], _budget: u64) -> Result<u64, Abort> {
        if INPUT + input.len() > self.state_at {
            return Err(Abort::Memory);
        }
        self.mem[..8].copy_from_slice(&(input.len() as u64).to_le_bytes());
        self.mem[INPUT..INPUT + input.len()].copy_from_slice(input);
        let vm = self.vm.borrow_dependent();
        // SAFETY: the program passed `verify`: every load and store it can make lies
        // inside `mem` (the memory it was verified for: this length) or inside the 512
        // bytes of stack the compiled code reserves below its frame; it calls nothing;
        // every path ends. The executable memory holds the code rbpf compiled for it,
        // unchanged since (the server took its write right away) and mapped as long as
        // this engine lives.
        unsafe { vm.execute_program_jit(&mut self.mem) }.map_err(|_| Abort::Trap)
    }

    fn reset(&mut self) -> Result<(), Abort> {
        Ok(())
    }

    fn allocates(&self) -> bool {
        false
    }
}
