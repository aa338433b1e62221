//! eBPF interpreted by `rbpf` (VINO's interpreted byte code, in today's in-kernel
//! form). rbpf's own verifier refuses little (only a jump to itself), its interpreter
//! has no instruction budget, and it panics on what it does not expect (`unreachable!`
//! for an opcode it lacks, a byte swap of an odd width). (0.3 also computed addresses
//! with `ptr::offset`, undefined behaviour for a hostile address; 0.4.1 wraps, which is
//! why Scion needs 0.4.1.) So every program passes Scion's verifier first
//! ([`verify`]): exactly the opcodes the interpreter implements, an acyclic graph (a
//! call runs each instruction at most once: no budget needed), and pointers that never
//! leave the registers and the stack.
//!
//! The program's memory, in `r1`: word 0 = input bytes, word 1 = state bytes, then
//! the point's input area (`max_input` bytes), then the state. rbpf checks every load
//! and store against it and the program's 512-byte stack. (The host tests: `bpf/tests.rs`.)

#[cfg(feature = "jit")]
pub mod jit;
pub mod verify;

use alloc::vec;
use alloc::vec::Vec;

use super::{Abort, Engine};
use crate::format::GraftFile;
use crate::LoadError;

pub use verify::MAX_INSNS;
/// Where the input starts in the program's memory.
pub const INPUT: usize = 16;

/// The program and rbpf's VM, which borrows it for its whole life. Building a VM per
/// call costs a scan of the whole program (rbpf's stack-usage pass) and allocations:
/// an unrolled hot list of 10,000 instructions cost 1.6 M instructions a call that
/// way; so the VM is built once, beside the program it borrows (`self_cell`).
type Vm<'a> = rbpf::EbpfVmRaw<'a>;

self_cell::self_cell!(
    struct Loaded {
        owner: Vec<u8>,
        #[covariant]
        dependent: Vm,
    }
);

pub struct Ebpf {
    vm: Loaded,
    mem: Vec<u8>,
    state_at: usize,
}

impl Ebpf {
    pub fn load(f: &GraftFile<'_>) -> Result<Ebpf, LoadError> {
        let state_at = INPUT + f.point.max_input();
        verify::verify(f.code, state_at + f.state_len)?;
        let mut mem = vec![0u8; state_at + f.state_len];
        mem[8..16].copy_from_slice(&(f.state_len as u64).to_le_bytes());
        let vm = Loaded::try_new(f.code.to_vec(), |prog| {
            let mut vm = rbpf::EbpfVmRaw::new(None)?;
            // The program was verified above; rbpf's own check adds nothing to ours.
            vm.set_verifier(|_| Ok(()))?;
            vm.set_program(prog)?;
            Ok::<_, rbpf::lib::Error>(vm)
        })
        .map_err(|_| LoadError::Refused("eBPF: the VM refused it"))?;
        Ok(Ebpf { vm, mem, state_at })
    }
}

impl Engine for Ebpf {
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
        // The only errors the interpreter returns for a verified program are loads
        // and stores outside its memory and stack.
        vm.execute_program(&mut self.mem).map_err(|_| Abort::Memory)
    }

    fn reset(&mut self) -> Result<(), Abort> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
