//! eBPF interpreted by `rbpf` (VINO's interpreted byte code, in today's in-kernel
//! form). rbpf's own verifier refuses little (only a jump to itself), its interpreter
//! has no instruction budget, and it panics on what it does not expect (`unreachable!`
//! for an unknown opcode, a byte swap of an odd width, running off the end). (0.3
//! also computed addresses with `ptr::offset`, undefined behaviour for a hostile
//! address; 0.4.1 wraps, which is why Scion needs 0.4.1.) So Scion checks every
//! program here first,
//! with the rule that makes a budget unnecessary (Linux's before bounded loops):
//! **the control flow is acyclic**, so a call runs each instruction at most once, at
//! most as many as the program has. (Backward jumps are allowed as long as they close
//! no loop: clang places shared exits behind the code that jumps to them.) Beside
//! that: only the opcodes the interpreter implements safely (no helper calls, tail
//! calls, atomics or legacy packet loads), registers in range and `r10` (the frame
//! pointer) never written, `lddw` whole and never jumped into, and no way to run off
//! the end.
//!
//! The program's memory, in `r1`: word 0 = input bytes, word 1 = state bytes, then
//! the point's input area (`max_input` bytes), then the state. rbpf checks every load
//! and store against it and the program's 512-byte stack.

use alloc::vec;
use alloc::vec::Vec;

use super::{Abort, Engine};
use crate::format::GraftFile;
use crate::LoadError;

/// The longest program (so that rbpf's 16-bit jump arithmetic cannot overflow).
pub const MAX_INSNS: usize = 32767;
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
        verify(f.code)?;
        let state_at = INPUT + f.point.max_input();
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

const CLS_LD: u8 = 0x00;
const CLS_LDX: u8 = 0x01;
const CLS_ST: u8 = 0x02;
const CLS_STX: u8 = 0x03;
const CLS_ALU: u8 = 0x04;
const CLS_JMP: u8 = 0x05;
const CLS_JMP32: u8 = 0x06;
const CLS_ALU64: u8 = 0x07;
const LDDW: u8 = 0x18;
const EXIT: u8 = 0x95;
const CALL: u8 = 0x85;
const BSWAP_LE: u8 = 0xd4;
const BSWAP_BE: u8 = 0xdc;

/// Scion's eBPF verifier (see the module's comment for the rules).
pub fn verify(prog: &[u8]) -> Result<(), LoadError> {
    let r = LoadError::Refused;
    if prog.is_empty() || !prog.len().is_multiple_of(8) {
        return Err(r("eBPF: not a whole number of instructions"));
    }
    let n = prog.len() / 8;
    if n > MAX_INSNS {
        return Err(r("eBPF: more than 32767 instructions"));
    }
    let insn = |i: usize| {
        let b = &prog[8 * i..8 * i + 8];
        (b[0], b[1] & 0xf, b[1] >> 4, i16::from_le_bytes([b[2], b[3]]), i32::from_le_bytes([b[4], b[5], b[6], b[7]]))
    };
    // The second halves of `lddw`: no jump may land on one.
    let mut tail = vec![false; n];
    let mut i = 0;
    while i < n {
        let (op, dst, src, off, imm) = insn(i);
        if dst > 10 || src > 10 {
            return Err(r("eBPF: register out of range"));
        }
        let class = op & 7;
        let writes_dst = matches!(class, CLS_LD | CLS_LDX | CLS_ALU | CLS_ALU64);
        if writes_dst && dst == 10 {
            return Err(r("eBPF: r10 (the frame pointer) is read-only"));
        }
        match class {
            CLS_LD => {
                if op != LDDW {
                    return Err(r("eBPF: legacy packet loads are not allowed"));
                }
                if i + 1 >= n || insn(i + 1).0 != 0 || insn(i + 1).1 != 0 || insn(i + 1).2 != 0 || insn(i + 1).3 != 0 {
                    return Err(r("eBPF: incomplete lddw"));
                }
                tail[i + 1] = true;
                i += 2;
                continue;
            }
            CLS_LDX => {
                if op & 0xe0 != 0x60 {
                    return Err(r("eBPF: unknown load"));
                }
            }
            CLS_ST | CLS_STX => {
                // Mode MEM (0x60) only: atomics (0xc0) are not implemented safely.
                if op & 0xe0 != 0x60 {
                    return Err(r("eBPF: atomic or unknown store"));
                }
            }
            CLS_ALU | CLS_ALU64 => {
                let code = op & 0xf0;
                if code > 0xd0 || (code == 0xd0 && class == CLS_ALU64) {
                    return Err(r("eBPF: unknown ALU operation"));
                }
                if (op == BSWAP_LE || op == BSWAP_BE) && !matches!(imm, 16 | 32 | 64) {
                    return Err(r("eBPF: byte swap of a width other than 16, 32 or 64"));
                }
            }
            CLS_JMP | CLS_JMP32 => {
                if op == CALL || op == 0x8d {
                    return Err(r("eBPF: helper and tail calls are not allowed"));
                }
                if op == EXIT {
                    i += 1;
                    continue;
                }
                let code = op & 0xf0;
                if code > 0xd0 || code == 0x80 || code == 0x90 || (class == CLS_JMP32 && code == 0) {
                    return Err(r("eBPF: unknown jump"));
                }
                let t = i as i64 + 1 + off as i64;
                if t < 0 || t >= n as i64 {
                    return Err(r("eBPF: jump outside the program"));
                }
            }
            _ => unreachable!("class is three bits"),
        }
        i += 1;
    }
    // Successors of instruction i, once every `lddw` tail is known: a jump's target
    // (never an `lddw` tail) and the next instruction unless it is `ja` or `exit`
    // (never past the end).
    let succ = |i: usize| -> Result<([usize; 2], usize), LoadError> {
        let (op, _, _, off, _) = insn(i);
        let mut s = [0usize; 2];
        let mut k = 0;
        let class = op & 7;
        if matches!(class, CLS_JMP | CLS_JMP32) && op != EXIT {
            let t = (i as i64 + 1 + off as i64) as usize;
            if tail[t] {
                return Err(r("eBPF: jump into the middle of lddw"));
            }
            s[k] = t;
            k += 1;
        }
        if op != EXIT && op != 0x05 {
            let next = if op == LDDW { i + 2 } else { i + 1 };
            if next >= n {
                return Err(r("eBPF: runs off the end without exit"));
            }
            s[k] = next;
            k += 1;
        }
        Ok((s, k))
    };
    // Depth-first search from the entry: an edge back to an instruction still on the
    // stack closes a loop.
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut mark = vec![NEW; n];
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    mark[0] = OPEN;
    while let Some(&mut (i, ref mut next)) = stack.last_mut() {
        let (s, k) = succ(i)?;
        if *next < k {
            let t = s[*next];
            *next += 1;
            match mark[t] {
                NEW => {
                    mark[t] = OPEN;
                    stack.push((t, 0));
                }
                OPEN => return Err(r("eBPF: a loop (every program must end within its length)")),
                _ => {}
            }
        } else {
            mark[i] = DONE;
            stack.pop();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Tech;
    use crate::point::Point;

    fn ins(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
        let o = off.to_le_bytes();
        let i = imm.to_le_bytes();
        [op, dst | src << 4, o[0], o[1], i[0], i[1], i[2], i[3]]
    }

    fn prog(v: &[[u8; 8]]) -> Vec<u8> {
        v.concat()
    }

    const MOV_IMM: u8 = 0xb7;
    const JEQ_IMM: u8 = 0x15;
    const JA: u8 = 0x05;

    fn run(p: &[u8], input: &[u8]) -> Result<u64, Abort> {
        let f = GraftFile { point: Point::Evict, tech: Tech::Ebpf, state_len: 8, name: "t", code: p, sig: &[] };
        Ebpf::load(&f).map_err(|_| Abort::Broken)?.call(input, 0)
    }

    #[test]
    fn acyclic_programs_run_and_loops_are_refused() {
        // r0 = 7; if r1 == 0 goto exit_block; goto exit_block; exit_block (behind): exit
        let shared_exit = prog(&[ins(MOV_IMM, 0, 0, 0, 7), ins(JA, 0, 0, 1, 0), ins(EXIT, 0, 0, 0, 0), ins(JA, 0, 0, -2, 0)]);
        assert!(verify(&shared_exit).is_ok(), "a backward jump that closes no loop");
        assert_eq!(run(&shared_exit, &[]), Ok(7));
        let lp = prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(JEQ_IMM, 0, 0, -2, 0), ins(EXIT, 0, 0, 0, 0)]);
        assert!(matches!(verify(&lp), Err(LoadError::Refused(w)) if w.contains("loop")));
        let selfjump = prog(&[ins(JA, 0, 0, -1, 0), ins(EXIT, 0, 0, 0, 0)]);
        assert!(verify(&selfjump).is_err());
    }

    #[test]
    fn every_unsafe_shape_is_refused() {
        let exit = ins(EXIT, 0, 0, 0, 0);
        let bad: [(&str, Vec<u8>); 12] = [
            ("empty", vec![]),
            ("partial", vec![0x95, 0, 0]),
            ("off the end", prog(&[ins(MOV_IMM, 0, 0, 0, 1)])),
            ("jump past the end", prog(&[ins(JA, 0, 0, 5, 0), exit])),
            ("jump before the start", prog(&[ins(JA, 0, 0, -3, 0), exit])),
            ("write r10", prog(&[ins(MOV_IMM, 10, 0, 0, 1), exit])),
            ("register 11", prog(&[ins(MOV_IMM, 11, 0, 0, 1), exit])),
            ("byte swap of 8", prog(&[ins(BSWAP_LE, 0, 0, 0, 8), exit])),
            ("atomic add", prog(&[ins(0xdb, 1, 0, 0, 0), exit])),
            ("helper call", prog(&[ins(CALL, 0, 0, 0, 1), exit])),
            ("legacy packet load", prog(&[ins(0x30, 0, 0, 0, 0), exit])),
            ("jump into lddw", prog(&[ins(JA, 0, 0, 1, 0), ins(LDDW, 0, 0, 0, 1), ins(0, 0, 0, 0, 0), exit])),
        ];
        for (what, p) in bad {
            assert!(verify(&p).is_err(), "{what} passed the verifier");
        }
        let lddw = prog(&[ins(LDDW, 0, 0, 0, 5), ins(0, 0, 0, 0, 1), exit]);
        assert_eq!(run(&lddw, &[]), Ok(5 | 1 << 32));
        assert!(verify(&prog(&[ins(LDDW, 0, 0, 0, 5), exit])).is_err(), "an lddw without its second half");
    }

    #[test]
    fn memory_outside_the_region_is_an_abort() {
        // r0 = *(u64 *)(r1 + 4096)
        let p = prog(&[ins(0x79, 0, 1, 4096, 0), ins(EXIT, 0, 0, 0, 0)]);
        assert_eq!(run(&p, &[]), Err(Abort::Memory));
        // r0 = *(u64 *)(r1 + 16): the input's first word.
        let p = prog(&[ins(0x79, 0, 1, 16, 0), ins(EXIT, 0, 0, 0, 0)]);
        assert_eq!(run(&p, &7u64.to_le_bytes()), Ok(7));
        assert_eq!(run(&p, &[0; 65]), Err(Abort::Memory), "more input than the point's");
    }

    /// Random programs: the verifier never panics, and whatever it passes runs to an
    /// answer or an abort, never a panic or a hang.
    #[test]
    fn random_programs_never_panic() {
        let mut x = 0x853c49e6748fea9bu64;
        let mut passed = 0;
        for _ in 0..30000 {
            let n = 1 + (x % 12) as usize;
            let mut p = Vec::new();
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let ops = [MOV_IMM, 0x07, 0x0f, 0x1f, 0x2f, 0x37, 0x3f, 0x87, 0x84, 0x9f, 0x79, 0x61, 0x7b, 0x63, JEQ_IMM, 0x1d, 0x2d, 0x16, JA, EXIT, LDDW, 0, BSWAP_BE, 0xc7, 0x67];
                let op = ops[(x % ops.len() as u64) as usize];
                p.extend_from_slice(&ins(op, (x >> 8) as u8 % 11, (x >> 12) as u8 % 11, ((x >> 16) as i16) % 4, (x >> 32) as i32 % 70));
            }
            if verify(&p).is_ok() {
                passed += 1;
                let _ = run(&p, &[1, 2, 3, 4, 5, 6, 7, 8]);
            }
        }
        assert!(passed > 100, "only {passed} random programs passed: the test shows little");
    }
}
