//! The eBPF engine's host tests: programs the verifier refuses and accepts, and calls
//! through rbpf's interpreter and JIT.
//!
//! Why one file of about 950 lines: the cases share one small assembler (`ins`,
//! `prog`), one memory layout and one runner through the interpreter and the JIT, and
//! the differential test's model of eBPF; each case is a function of its own.

extern crate std;

use super::verify::{self, Insn, OPCODES};
use super::*;
use crate::format::Tech;
use crate::point::Point;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn ins(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let o = off.to_le_bytes();
    let i = imm.to_le_bytes();
    [op, dst | src << 4, o[0], o[1], i[0], i[1], i[2], i[3]]
}

fn prog(v: &[[u8; 8]]) -> Vec<u8> {
    v.concat()
}

const MOV_IMM: u8 = 0xb7;
const MOV_REG: u8 = 0xbf;
const ADD_IMM: u8 = 0x07;
const JEQ_IMM: u8 = 0x15;
const JA: u8 = 0x05;
const EXIT: u8 = 0x95;
const LDDW: u8 = 0x18;
const BSWAP_LE: u8 = 0xd4;
const STXDW: u8 = 0x7b;
const LDXDW: u8 = 0x79;

fn engine(p: &[u8], state_len: usize) -> Result<Ebpf, LoadError> {
    let f = GraftFile { point: Point::Stream, tech: Tech::Ebpf, state_len, name: "t", code: p, sig: &[] };
    Ebpf::load(&f)
}

fn run(p: &[u8], input: &[u8]) -> Result<u64, Abort> {
    let interpreted = engine(p, 64).map_err(|_| Abort::Broken)?.call(input, 0);
    let compiled = jit(p, 64).map_err(|_| Abort::Broken)?.call(input, 0);
    assert_eq!(interpreted, compiled, "the JIT and the interpreter agree");
    interpreted
}

/// Executable memory on the host for the JIT's code: one mapping per thread, used by
/// one engine at a time (each test drops its engine before it makes the next).
#[allow(unsafe_code)]
fn exec_memory() -> &'static mut [u8] {
    const BYTES: usize = 4 << 20;
    std::thread_local! {
        static AT: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }
    let at = AT.with(|a| {
        if a.get() == 0 {
            // SAFETY: a fresh anonymous mapping, kept for the thread's life.
            let p = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    BYTES,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert!(p != libc::MAP_FAILED);
            a.set(p as usize);
        }
        a.get()
    });
    // SAFETY: the mapping lives as long as the thread; the engine that used it
    // before on this thread is gone (callers keep one at a time).
    unsafe { core::slice::from_raw_parts_mut(at as *mut u8, BYTES) }
}

fn jit(p: &[u8], state_len: usize) -> Result<jit::Jit, LoadError> {
    let f = GraftFile { point: Point::Stream, tech: Tech::Ebpf, state_len, name: "t", code: p, sig: &[] };
    jit::Jit::load(&f, exec_memory())
}

/// The memory of a stream graft with 64 bytes of state, as `engine(_, 64)` makes it.
const MEM_LEN: usize = INPUT + 1024 + 64;

fn verify(p: &[u8]) -> Result<Vec<Insn>, LoadError> {
    verify::verify(p, MEM_LEN)
}

fn refused_for(p: &[u8], why: &str) {
    match verify(p) {
        Err(LoadError::Refused(w)) => assert!(w.contains(why), "refused for {w:?}, not {why:?}"),
        other => panic!("not refused ({why}): {other:?}"),
    }
}

/// Loops whose every round the verifier can follow to an end run; loops it cannot
/// prove end are refused, and so are loops longer than it follows.
#[test]
fn bounded_loops_run_and_the_others_are_refused() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    // r0 = sum of the input's first 8 bytes: for (r2 = 0; r2 < 8; r2++) r0 += in[r2]
    let sum = |bound: [u8; 8]| {
        prog(&[
            ins(MOV_IMM, 0, 0, 0, 0),
            ins(MOV_IMM, 2, 0, 0, 0),
            bound,
            ins(MOV_REG, 3, 1, 0, 0),
            ins(0x0f, 3, 2, 0, 0),
            ins(0x71, 4, 3, 16, 0),
            ins(0x0f, 0, 4, 0, 0),
            ins(ADD_IMM, 2, 0, 0, 1),
            ins(JA, 0, 0, -7, 0),
            exit,
        ])
    };
    let p = sum(ins(0x35, 2, 0, 6, 8));
    assert!(verify(&p).is_ok(), "{:?}", verify(&p).err());
    assert_eq!(run(&p, &[1, 2, 3, 4, 5, 6, 7, 8, 100]), Ok(36));
    // The bound from the input, masked: for (r2 = 0; r2 < (in[8] & 63); r2++) …
    let masked = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(MOV_IMM, 2, 0, 0, 0),
        ins(0x71, 5, 1, 24, 0),
        ins(0x57, 5, 0, 0, 63),
        ins(0x3d, 2, 5, 6, 0),
        ins(MOV_REG, 3, 1, 0, 0),
        ins(0x0f, 3, 2, 0, 0),
        ins(0x71, 4, 3, 16, 0),
        ins(0x0f, 0, 4, 0, 0),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(JA, 0, 0, -7, 0),
        exit,
    ]);
    assert!(verify(&masked).is_ok(), "{:?}", verify(&masked).err());
    let mut input = [1u8; 16];
    input[8] = 5;
    assert_eq!(run(&masked, &input), Ok(5));
    // Unmasked, the index may leave the memory.
    let unmasked = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(MOV_IMM, 2, 0, 0, 0),
        ins(LDXDW, 5, 1, 24, 0),
        ins(0x3d, 2, 5, 6, 0),
        ins(MOV_REG, 3, 1, 0, 0),
        ins(0x0f, 3, 2, 0, 0),
        ins(0x71, 4, 3, 16, 0),
        ins(0x0f, 0, 4, 0, 0),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(JA, 0, 0, -7, 0),
        exit,
    ]);
    assert!(verify(&unmasked).is_err());
    // while (in[0] != 0) {}: never narrower at its head.
    refused_for(
        &prog(&[ins(LDXDW, 2, 1, 16, 0), ins(MOV_IMM, 0, 0, 0, 0), ins(0x55, 2, 0, -1, 0), exit]),
        "cannot prove ends",
    );
    // A loop of 2^22 rounds: longer than the verifier follows.
    refused_for(
        &prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(ADD_IMM, 0, 0, 0, 1), ins(0xa5, 0, 0, -2, 1 << 22), exit]),
        "too complex",
    );
}

#[test]
fn acyclic_programs_run_and_loops_are_refused() {
    // r0 = 7; goto exit_block; exit_block (behind): exit
    let shared_exit =
        prog(&[ins(MOV_IMM, 0, 0, 0, 7), ins(JA, 0, 0, 1, 0), ins(EXIT, 0, 0, 0, 0), ins(JA, 0, 0, -2, 0)]);
    assert!(verify(&shared_exit).is_ok(), "a backward jump that closes no loop");
    assert_eq!(run(&shared_exit, &[]), Ok(7));
    refused_for(&prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(JEQ_IMM, 0, 0, -2, 0), ins(EXIT, 0, 0, 0, 0)]), "loop");
    assert!(verify(&prog(&[ins(JA, 0, 0, -1, 0), ins(EXIT, 0, 0, 0, 0)])).is_err());
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
        ("helper call", prog(&[ins(0x85, 0, 0, 0, 1), exit])),
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

/// The longest program there may be (32,767 instructions) verifies and runs.
#[test]
fn the_longest_program_runs() {
    let mut p: Vec<[u8; 8]> = (0..MAX_INSNS - 1).map(|k| ins(MOV_IMM, 0, 0, 0, k as i32)).collect();
    p.push(ins(EXIT, 0, 0, 0, 0));
    assert_eq!(run(&prog(&p), &[]), Ok(MAX_INSNS as u64 - 2));
    p.insert(0, ins(MOV_IMM, 0, 0, 0, 0));
    assert!(verify(&prog(&p)).is_err(), "one more is refused");
}

/// The opcodes rbpf 0.4.1 lacks and used to pass Scion's verifier (the first call
/// then panicked in the server: `entered unreachable code`): NEG and JA with the
/// source bit.
#[test]
fn opcodes_the_interpreter_lacks_are_refused() {
    for op in [0x8c, 0x8f, 0x0d] {
        refused_for(
            &prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(op, 0, 0, 0, 0), ins(EXIT, 0, 0, 0, 0)]),
            "does not implement",
        );
    }
    assert_eq!(OPCODES.len(), 111);
    let mut sorted = OPCODES.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), OPCODES.len(), "no opcode twice");
}

/// Every one of the 256 opcodes, with every register and a spread of offsets and
/// immediates, in a program the verifier may pass: whatever it passes runs to an
/// answer or an abort, and never panics the engine.
#[test]
fn whatever_passes_never_panics_the_engine() {
    let mut passed = [false; 256];
    let imms = [0, 1, -1, 8, 16, 32, 64, 7, i32::MIN, i32::MAX];
    let offs = [0i16, 1, -1, 8, -8, 16, -512, 511];
    for op in 0..=255u8 {
        for dst in 0..12u8 {
            for src in [0u8, 1, 2, 10, 11] {
                for (k, &imm) in imms.iter().enumerate() {
                    let off = offs[k % offs.len()];
                    // r2 = r1 + 16 (a pointer to the input), then the instruction
                    // (with the second half of an lddw, else a jump to the next),
                    // then r0 = 0 and exit.
                    let next = if op == LDDW { ins(0, 0, 0, 0, imm) } else { ins(JA, 0, 0, 0, 0) };
                    // Every register but r1 and r10 written first (nothing unwritten
                    // may be read), and a stack slot.
                    let mut pre: Vec<[u8; 8]> =
                        [0u8, 2, 3, 4, 5, 6, 7, 8, 9].iter().map(|&r| ins(MOV_IMM, r, 0, 0, r as i32)).collect();
                    pre.push(ins(0x7a, 10, 0, -8, 5));
                    let p = prog(
                        &[
                            &pre[..],
                            &[
                                ins(MOV_REG, 2, 1, 0, 0),
                                ins(ADD_IMM, 2, 0, 0, 16),
                                ins(op, dst, src, off.clamp(-1, 2), imm),
                                next,
                                ins(MOV_IMM, 0, 0, 0, 0),
                                ins(EXIT, 0, 0, 0, 0),
                            ],
                        ]
                        .concat(),
                    );
                    let q = prog(
                        &[
                            &pre[..],
                            &[ins(op, dst, src, off, imm), next, ins(MOV_IMM, 0, 0, 0, 0), ins(EXIT, 0, 0, 0, 0)],
                        ]
                        .concat(),
                    );
                    for p in [p, q] {
                        if verify(&p).is_ok() {
                            passed[op as usize] = true;
                            let r = catch_unwind(AssertUnwindSafe(|| run(&p, &[1, 2, 3, 4, 5, 6, 7, 8])));
                            assert!(r.as_ref().is_ok_and(|r| r.is_ok()) || r.is_err(), "never here");
                            assert!(
                                r.is_ok(),
                                "opcode {op:#04x} (dst {dst}, src {src}, off {off}, imm {imm}) panicked the engine"
                            );
                        }
                    }
                }
            }
        }
    }
    for op in 0..=255u8 {
        assert_eq!(
            passed[op as usize],
            OPCODES.contains(&op),
            "opcode {op:#04x}: passes some program iff it is allowed"
        );
    }
}

/// Every load and store is proven inside the program's memory or stack when it is
/// loaded: a constant or bounded offset past either is refused (the engine's own
/// check at run time is a second line, never reached by a verified program).
#[test]
fn memory_outside_the_region_is_refused() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    refused_for(&prog(&[ins(LDXDW, 0, 1, MEM_LEN as i16 - 7, 0), exit]), "cannot prove inside");
    refused_for(&prog(&[ins(LDXDW, 0, 10, 0, 0), exit]), "cannot prove inside");
    refused_for(&prog(&[ins(LDXDW, 0, 10, -520, 0), exit]), "cannot prove inside");
    // r2 = input word 0, unbounded: r1 + r2 may lie anywhere.
    refused_for(&prog(&[ins(LDXDW, 2, 1, 16, 0), ins(0x0f, 2, 1, 0, 0), ins(0x71, 0, 2, 0, 0), exit]), "unbounded");
    refused_for(
        &prog(&[ins(LDXDW, 2, 1, 16, 0), ins(MOV_REG, 3, 1, 0, 0), ins(0x0f, 3, 2, 0, 0), ins(0x71, 0, 3, 0, 0), exit]),
        "unbounded",
    );
    // The same index bounded by a test (if r2 > 1023 return): proven, and it runs.
    let bounded = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(LDXDW, 2, 1, 16, 0),
        ins(0x25, 2, 0, 4, 1023),
        ins(MOV_REG, 3, 1, 0, 0),
        ins(0x0f, 3, 2, 0, 0),
        ins(0x71, 0, 3, 16, 0),
        exit,
        exit,
    ]);
    assert!(verify(&bounded).is_ok());
    let mut input = [0u8; 16];
    input[0] = 9;
    input[9] = 77;
    assert_eq!(run(&bounded, &input), Ok(77));
    // Or by a mask.
    let masked = prog(&[
        ins(LDXDW, 2, 1, 16, 0),
        ins(0x57, 2, 0, 0, 1023),
        ins(MOV_REG, 3, 1, 0, 0),
        ins(0x0f, 3, 2, 0, 0),
        ins(0x71, 0, 3, 16, 0),
        exit,
    ]);
    assert_eq!(run(&masked, &input), Ok(77));
    let p = prog(&[ins(LDXDW, 0, 1, 16, 0), exit]);
    assert_eq!(engine(&p, 8).unwrap().call(&7u64.to_le_bytes(), 0), Ok(7));
    assert_eq!(engine(&p, 8).unwrap().call(&[0; 1025], 0), Err(Abort::Memory), "more input than the point's");
}

/// A graft may not learn where the server's memory lies (the attack: r1 and r10
/// stored into its state, read back by its owner). Every way a pointer could leave
/// the registers and stack, or steer the program, is refused; a pointer kept whole
/// in the stack and read back whole is fine (clang spills `r1` so).
#[test]
fn pointers_never_leave_the_program() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    let zero = ins(MOV_IMM, 0, 0, 0, 0);
    let leaks: [(&str, Vec<u8>, &str); 12] = [
        ("r1 into the state", prog(&[ins(STXDW, 1, 1, 16, 0), zero, exit]), "only in the stack"),
        ("r10 into the state", prog(&[ins(STXDW, 1, 10, 16, 0), zero, exit]), "only in the stack"),
        ("r1 returned", prog(&[ins(MOV_REG, 0, 1, 0, 0), exit]), "returned"),
        ("r1 xor a number", prog(&[ins(MOV_REG, 2, 1, 0, 0), ins(0xa7, 2, 0, 0, 0x5555), zero, exit]), "arithmetic"),
        ("r1 cut to 32 bits", prog(&[ins(0xbc, 2, 1, 0, 0), zero, exit]), "32 bits"),
        ("r1 shifted", prog(&[ins(MOV_REG, 2, 1, 0, 0), ins(0x77, 2, 0, 0, 12), zero, exit]), "arithmetic"),
        ("r1 compared", prog(&[zero, ins(0x25, 1, 0, 0, 1000), exit, exit]), "compared"),
        ("r10 - r1", prog(&[ins(MOV_REG, 2, 10, 0, 0), ins(0x1f, 2, 1, 0, 0), zero, exit]), "arithmetic"),
        (
            "half of a kept pointer",
            prog(&[ins(STXDW, 10, 1, -8, 0), ins(0x61, 2, 10, -8, 0), zero, exit]),
            "part of a kept pointer",
        ),
        ("a pointer kept unaligned", prog(&[ins(STXDW, 10, 1, -12, 0), zero, exit]), "whole"),
        (
            "memory through a number",
            prog(&[ins(MOV_IMM, 2, 0, 0, 4096), ins(LDXDW, 0, 2, 0, 0), exit]),
            "through a number",
        ),
        (
            "a pointer on one path only",
            prog(&[
                ins(LDXDW, 3, 1, 16, 0),
                ins(MOV_IMM, 2, 0, 0, 0),
                ins(JEQ_IMM, 3, 0, 1, 0),
                ins(MOV_REG, 2, 1, 0, 0),
                ins(STXDW, 1, 2, 16, 0),
                zero,
                exit,
            ]),
            "only in the stack",
        ),
    ];
    for (what, p, why) in &leaks {
        match verify(p) {
            Err(LoadError::Refused(w)) => assert!(w.contains(why), "{what}: refused for {w:?}, not {why:?}"),
            other => panic!("{what} passed: {other:?}"),
        }
    }
    // Kept in the stack and used again: r2 = *(r10 - 8) (= r1); r0 = *(u64 *)(r2 + 16).
    let spill = prog(&[
        ins(STXDW, 10, 1, -8, 0),
        ins(MOV_IMM, 1, 0, 0, 0),
        ins(LDXDW, 2, 10, -8, 0),
        ins(LDXDW, 0, 2, 16, 0),
        exit,
    ]);
    assert_eq!(run(&spill, &9u64.to_le_bytes()), Ok(9));
    // Two pointers of one kind subtracted give a number: the distance, not a place.
    let dist = prog(&[
        ins(MOV_REG, 2, 1, 0, 0),
        ins(ADD_IMM, 2, 0, 0, 40),
        ins(MOV_REG, 0, 2, 0, 0),
        ins(0x1f, 0, 1, 0, 0),
        exit,
    ]);
    assert_eq!(run(&dist, &[]), Ok(40));
}

/// A counted loop of 330,000 rounds (a million instructions followed, Linux's bound)
/// is proven and runs, in the interpreter and compiled, to the right sum; the
/// verifier holds a few states for it, not one a round.
#[test]
fn a_counted_loop_of_330000_rounds_runs() {
    // r0 = 0; r2 = 0; do { r0 += r2; r2 += 1 } while (r2 < 330000); return r0
    let p = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(MOV_IMM, 2, 0, 0, 0),
        ins(0x0f, 0, 2, 0, 0),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(0xa5, 2, 0, -3, 330_000),
        ins(EXIT, 0, 0, 0, 0),
    ]);
    let (r, work) = verify::check_with(&p, MEM_LEN, verify::Limits::default());
    assert!(r.is_ok(), "{:?}", r.err());
    assert_eq!(work.processed, 2 + 3 * 330_000 + 1);
    assert!(work.peak_bytes < 8 << 10, "{work:?}");
    assert_eq!(run(&p, &[]), Ok(329_999 * 330_000 / 2));
    // One round more than a million instructions is refused, clearly.
    let mut q = p.clone();
    q[4 * 8 + 4..4 * 8 + 8].copy_from_slice(&333_334i32.to_le_bytes());
    refused_for(&q, "too complex");
}

/// Signed tests bound a register both ways, from a negative start and a signed
/// value: `for (i = -20; i s< in[0] - 128; i++) n++;` then `in[in[0] - 128]` read
/// only if `0 s<= in[0] - 128 s<= 8`, proven inside the memory by the signed tests
/// alone; and a loop counting up from -5 while `i s< 100`.
#[test]
fn signed_bounds_and_negative_starts_are_proven() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    let p = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(0x71, 5, 1, 16, 0),
        ins(0x17, 5, 0, 0, 128),
        ins(MOV_IMM, 2, 0, 0, -20),
        // 4: if r2 s>= r5 goto 8
        ins(0x7d, 2, 5, 3, 0),
        ins(ADD_IMM, 0, 0, 0, 1),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(JA, 0, 0, -4, 0),
        // 8: if r5 s< 0 goto exit; if r5 s> 8 goto exit
        ins(0xc5, 5, 0, 5, 0),
        ins(0x65, 5, 0, 4, 8),
        ins(MOV_REG, 3, 1, 0, 0),
        ins(0x0f, 3, 5, 0, 0),
        ins(0x71, 4, 3, 16, 0),
        ins(0x0f, 0, 4, 0, 0),
        exit,
    ]);
    assert!(verify(&p).is_ok(), "{:?}", verify(&p).err());
    assert_eq!(run(&p, &[131, 1, 2, 50, 4, 5, 6, 7, 8, 9]), Ok(23 + 50));
    assert_eq!(run(&p, &[100, 1, 2, 50]), Ok(0), "-28: no round, no read");
    assert_eq!(run(&p, &[255, 1, 2, 50]), Ok(147), "127: past 8, no read");
    // Without the lower test, a negative index may leave the memory.
    let mut q = p.clone();
    q[8 * 8..9 * 8].copy_from_slice(&ins(MOV_IMM, 3, 0, 0, 0));
    refused_for(&q, "cannot prove inside");
    let up = prog(&[
        ins(MOV_IMM, 2, 0, 0, -5),
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(ADD_IMM, 0, 0, 0, 1),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(0xc5, 2, 0, -3, 100),
        exit,
    ]);
    assert_eq!(run(&up, &[]), Ok(105));
    // 32-bit signed: for (w2 = -3; w2 s< 4; w2++) n++ (JSLT32 0xc6).
    let up32 = prog(&[
        ins(0xb4, 2, 0, 0, -3),
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(ADD_IMM, 0, 0, 0, 1),
        ins(0x04, 2, 0, 0, 1),
        ins(0xc6, 2, 0, -3, 4),
        exit,
    ]);
    assert_eq!(run(&up32, &[]), Ok(7));
    // Counting down past zero, signed, with no end: refused.
    refused_for(
        &prog(&[ins(MOV_IMM, 2, 0, 0, 5), ins(ADD_IMM, 2, 0, 0, -1), ins(0xc5, 2, 0, -2, 10), exit]),
        "too complex",
    );
}

/// 200 tests of an input's bits (JSET), each adding to a sum on one way only: 2^200
/// paths, whose states differ only in the sum, which decides nothing (it is
/// returned): followed in a few instructions a test, and run.
#[test]
fn two_hundred_diamonds_are_verified_in_little_work() {
    let mut v = vec![ins(MOV_IMM, 0, 0, 0, 0), ins(LDXDW, 2, 1, 16, 0)];
    for k in 0..200 {
        v.push(ins(0x45, 2, 0, 1, 1 << (k % 31)));
        v.push(ins(ADD_IMM, 0, 0, 0, k + 1));
    }
    v.push(ins(EXIT, 0, 0, 0, 0));
    let p = prog(&v);
    let t = std::time::Instant::now();
    let (r, work) = verify::check_with(&p, MEM_LEN, verify::Limits::default());
    std::println!("200 diamonds: {work:?} in {:?}", t.elapsed());
    assert!(r.is_ok(), "{:?}", r.err());
    assert!(work.processed <= 10 * 200, "{work:?}");
    let want: u64 = (0..200u64).filter(|k| 1u64 << (k % 31) & 5 == 0).map(|k| k + 1).sum();
    assert_eq!(run(&p, &5u64.to_le_bytes()), Ok(want));
    // The same sum then tested (so it decides something): each place holds every
    // sum reached so far, too many to follow; refused within the bounds, clearly.
    let mut w = v.clone();
    for k in 0..200 {
        w[2 + 2 * k + 1] = ins(0xa7, 0, 0, 0, 1 << (k % 31));
    }
    w.pop();
    w.push(ins(0x15, 0, 0, 1, 77));
    w.push(ins(MOV_IMM, 0, 0, 0, 1));
    w.push(ins(EXIT, 0, 0, 0, 0));
    let t = std::time::Instant::now();
    let (r, work) = verify::check_with(&prog(&w), MEM_LEN, verify::Limits::default());
    std::println!("200 diamonds, the value tested: {work:?} in {:?}", t.elapsed());
    assert!(matches!(r, Err((_, LoadError::Refused(w))) if w.contains("too complex")), "{r:?}");
    assert!(work.processed <= verify::MAX_PROCESSED + 1);
}

/// The verifier's work and memory are bounded by the limits it is given, with a clear
/// refusal past either.
#[test]
fn the_verifiers_work_and_memory_are_bounded() {
    let p =
        prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(ADD_IMM, 0, 0, 0, 1), ins(0xa5, 0, 0, -2, 1000), ins(EXIT, 0, 0, 0, 0)]);
    let few = verify::Limits { processed: 1000, bytes: verify::MAX_BYTES };
    let (r, work) = verify::check_with(&p, MEM_LEN, few);
    assert!(matches!(r, Err((_, LoadError::Refused(w))) if w.contains("too complex")), "{r:?}");
    assert_eq!(work.processed, 1001);
    let small = verify::Limits { processed: verify::MAX_PROCESSED, bytes: 300 };
    let (r, _) = verify::check_with(&p, MEM_LEN, small);
    assert!(matches!(r, Err((_, LoadError::Refused(w))) if w.contains("states to keep")), "{r:?}");
    assert!(verify::check_with(&p, MEM_LEN, verify::Limits::default()).0.is_ok());
}

/// `lddw` with a nonzero source or offset is what Linux reads as a map (or other
/// pseudo) reference, not a constant: refused.
#[test]
fn lddw_pseudo_references_are_refused() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    for (src, off) in [(1u8, 0i16), (2, 0), (4, 0), (0, 1)] {
        refused_for(&prog(&[ins(LDDW, 0, src, off, 5), ins(0, 0, 0, 0, 0), exit]), "pseudo");
    }
    assert!(verify(&prog(&[ins(LDDW, 0, 0, 0, 5), ins(0, 0, 0, 0, 0), exit])).is_ok());
}

/// rbpf reads a 64-bit compare's immediate zero-extended for the unsigned and
/// equality tests; eBPF (and clang) sign-extend it: `if r0 == -1` would not mean
/// what it says, so it is refused (the signed tests and 32-bit compares agree).
#[test]
fn immediates_the_engine_would_read_otherwise_are_refused() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    refused_for(&prog(&[ins(MOV_IMM, 0, 0, 0, -1), ins(JEQ_IMM, 0, 0, 1, -1), exit, exit]), "negative immediate");
    assert!(
        verify(&prog(&[ins(MOV_IMM, 0, 0, 0, -1), ins(0x65, 0, 0, 1, -1), exit, exit])).is_ok(),
        "JSGT sign-extends in both"
    );
    refused_for(&prog(&[ins(MOV_IMM, 0, 0, 0, 5), ins(0x94, 0, 0, 0, 0), exit]), "modulo");
}

// ---- The differential test: a model of eBPF beside the engine. ----

/// eBPF as RFC 9669 defines it (what clang compiles for), written from the RFC, with
/// one point where rbpf 0.4.1 differs and no verifier can know beforehand: a 32-bit
/// modulo by a register holding zero leaves the whole register (rbpf) rather than
/// its lower half. `r1` is `mem` at `mem_at`, `r10` the top of a 512-byte stack at
/// `stack_at`.
fn model(p: &[Insn], mem: &mut [u8], mem_at: u64, stack_at: u64) -> Result<u64, ()> {
    let mut stack = [0u8; 512];
    let mut r = [0u64; 11];
    r[1] = mem_at;
    r[10] = stack_at + 512;
    let mut pc = 0usize;
    for _ in 0..=verify::MAX_PROCESSED {
        let x = p[pc];
        pc += 1;
        let (d, s) = (x.dst as usize, x.src as usize);
        let imm = x.imm as i64 as u64;
        let class = x.op & 7;
        let src = if x.op & 8 != 0 { r[s] } else { imm };
        let at = |base: u64, size: usize| -> Result<(bool, usize), ()> {
            let a = base.wrapping_add(x.off as i64 as u64);
            let e = a.checked_add(size as u64).ok_or(())?;
            if a >= mem_at && e <= mem_at + mem.len() as u64 {
                Ok((true, (a - mem_at) as usize))
            } else if a >= stack_at && e <= stack_at + 512 {
                Ok((false, (a - stack_at) as usize))
            } else {
                Err(())
            }
        };
        match class {
            0x04 | 0x07 => {
                let w64 = class == 0x07;
                let (a, b) = if w64 { (r[d], src) } else { (r[d] & 0xffff_ffff, src & 0xffff_ffff) };
                let v = match x.op & 0xf0 {
                    0x00 => a.wrapping_add(b),
                    0x10 => a.wrapping_sub(b),
                    0x20 => a.wrapping_mul(b),
                    0x30 => a.checked_div(b).unwrap_or(0),
                    0x40 => a | b,
                    0x50 => a & b,
                    0x60 => a << (b & if w64 { 63 } else { 31 }),
                    0x70 => a >> (b & if w64 { 63 } else { 31 }),
                    0x80 => a.wrapping_neg(),
                    0x90 if b == 0 => r[d],
                    0x90 => a % b,
                    0xa0 => a ^ b,
                    0xb0 => b,
                    0xc0 if w64 => ((a as i64) >> (b & 63)) as u64,
                    0xc0 => ((a as u32 as i32) >> (b & 31)) as u32 as u64,
                    0xd0 => match (x.op & 8 != 0, x.imm) {
                        (false, 16) => r[d] as u16 as u64,
                        (false, 32) => r[d] as u32 as u64,
                        (false, _) => r[d],
                        (true, 16) => (r[d] as u16).swap_bytes() as u64,
                        (true, 32) => (r[d] as u32).swap_bytes() as u64,
                        (true, _) => r[d].swap_bytes(),
                    },
                    _ => unreachable!(),
                };
                let modzero = x.op & 0xf0 == 0x90 && b == 0;
                r[d] = if w64 || x.op & 0xf0 == 0xd0 || modzero { v } else { v & 0xffff_ffff };
            }
            0x00 => {
                r[d] = (x.imm as u32 as u64) | (p[pc].imm as u32 as u64) << 32;
                pc += 1;
            }
            0x01 => {
                let size = x.size();
                let (m, o) = at(r[s], size)?;
                let b = if m { &mem[o..o + size] } else { &stack[o..o + size] };
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(b);
                r[d] = u64::from_le_bytes(w);
            }
            0x02 | 0x03 => {
                let size = x.size();
                let v = if class == 0x03 { r[s] } else { imm };
                let (m, o) = at(r[d], size)?;
                let b = if m { &mut mem[o..o + size] } else { &mut stack[o..o + size] };
                b.copy_from_slice(&v.to_le_bytes()[..size]);
            }
            _ => {
                if x.op == 0x95 {
                    return Ok(r[0]);
                }
                let w64 = class == 0x05;
                let (a, b) = if w64 { (r[d], src) } else { (r[d] & 0xffff_ffff, src & 0xffff_ffff) };
                let (sa, sb) =
                    if w64 { (a as i64, b as i64) } else { (a as u32 as i32 as i64, b as u32 as i32 as i64) };
                let jump = match x.op & 0xf0 {
                    0x00 => true,
                    0x10 => a == b,
                    0x20 => a > b,
                    0x30 => a >= b,
                    0x40 => a & b != 0,
                    0x50 => a != b,
                    0x60 => sa > sb,
                    0x70 => sa >= sb,
                    0xa0 => a < b,
                    0xb0 => a <= b,
                    0xc0 => sa < sb,
                    0xd0 => sa <= sb,
                    _ => unreachable!(),
                };
                if jump {
                    pc = (pc as i64 + x.off as i64) as usize;
                }
            }
        }
    }
    panic!("a verified program ran longer than the verifier follows");
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random program shaped to pass often: forward jumps, memory reached through
/// `r1`, `r10` and copies of them, numbers of every kind.
fn shaped(g: &mut Rng) -> Vec<u8> {
    // Registers and the stack written first (nothing unwritten may be read), then
    // 3 to 42 random instructions.
    let mut p: Vec<[u8; 8]> =
        [0u8, 2, 3, 4, 5, 6, 7, 8, 9].iter().map(|&r| ins(MOV_IMM, r, 0, 0, g.next() as i32)).collect();
    for k in 1..=64 {
        p.push(ins(0x7a, 10, 0, -8 * k, g.below(1000) as i32));
    }
    let n = p.len() + 3 + g.below(40) as usize;
    let reg = |g: &mut Rng| g.below(10) as u8;
    let imm = |g: &mut Rng| match g.below(4) {
        0 => g.below(8) as i32,
        1 => g.below(70) as i32 - 5,
        2 => g.next() as i32,
        _ => [16, 32, 64, -1, 1024][g.below(5) as usize],
    };
    while p.len() < n {
        let left = n - p.len();
        match g.below(10) {
            0..=3 => {
                let alu: Vec<u8> = OPCODES.iter().copied().filter(|o| matches!(o & 7, 4 | 7)).collect();
                p.push(ins(alu[g.below(alu.len() as u64) as usize], reg(g), g.below(11) as u8, 0, imm(g)));
            }
            4 => p.push(ins(
                [MOV_REG, ADD_IMM][g.below(2) as usize],
                2 + g.below(3) as u8,
                [1, 10][g.below(2) as usize],
                0,
                g.below(40) as i32 - 20,
            )),
            5 | 6 => {
                let sizes = [0x10u8, 0x08, 0x00, 0x18];
                let class = [0x01u8, 0x02, 0x03][g.below(3) as usize];
                let base = [1u8, 10, 2, 3][g.below(4) as usize];
                let off = if base == 10 { -(g.below(520) as i16) } else { g.below(MEM_LEN as u64 + 8) as i16 };
                let op = class | 0x60 | sizes[g.below(4) as usize];
                let (dst, src) = if class == 0x01 { (reg(g), base) } else { (base, g.below(11) as u8) };
                p.push(ins(op, dst, src, off, imm(g)));
            }
            7 if left > 2 => {
                let jcc: Vec<u8> = OPCODES.iter().copied().filter(|o| matches!(o & 7, 5 | 6) && *o != 0x95).collect();
                // Mostly forward; now and then back (a loop, which may or may not end).
                let off = if g.below(6) == 0 {
                    -(g.below(p.len() as u64 + 1) as i16) - 1
                } else {
                    g.below(left as u64 - 1) as i16
                };
                p.push(ins(jcc[g.below(jcc.len() as u64) as usize], reg(g), g.below(11) as u8, off, imm(g)));
            }
            8 if left > 2 => {
                p.push(ins(LDDW, reg(g), 0, 0, imm(g)));
                p.push(ins(0, 0, 0, 0, imm(g)));
            }
            _ if g.below(4) == 0 => p.push(ins(EXIT, 0, 0, 0, 0)),
            _ => p.push(ins(MOV_IMM, 0, 0, 0, imm(g))),
        }
    }
    p.push(ins(MOV_IMM, 0, 0, 0, 3));
    p.push(ins(EXIT, 0, 0, 0, 0));
    prog(&p)
}

/// Random programs, shaped and raw: the verifier never panics; whatever it passes
/// the engine runs without a panic and without leaving its memory, computing
/// exactly what the model computes (the answer, and every byte of the input and
/// state) — and the same wherever its memory lies (two engines, two places; the
/// model at two more).
#[test]
fn the_engine_computes_what_the_model_does() {
    let mut g = Rng(0x853c49e6748fea9b);
    let (mut passed, mut loops) = (0, 0);
    for round in 0..100_000 {
        let p = if round % 3 == 0 {
            let n = 1 + g.below(12) as usize;
            (0..n)
                .flat_map(|_| {
                    ins(g.next() as u8, g.below(12) as u8, g.below(12) as u8, (g.below(9) as i16) - 4, g.next() as i32)
                })
                .collect()
        } else {
            shaped(&mut g)
        };
        let Ok(decoded) = catch_unwind(|| verify(&p)).expect("the verifier panicked") else { continue };
        passed += 1;
        loops += decoded.iter().any(|x| matches!(x.op & 7, 5 | 6) && x.op != 0x95 && x.off < 0) as u32;
        let input: Vec<u8> = (0..g.below(64)).map(|_| g.next() as u8).collect();
        let state: Vec<u8> = (0..64).map(|_| g.next() as u8).collect();
        let mut outcomes = Vec::new();
        for _ in 0..2 {
            let mut e = engine(&p, 64).expect("verified programs load");
            e.state().copy_from_slice(&state);
            let r = catch_unwind(AssertUnwindSafe(|| e.call(&input, 0)))
                .unwrap_or_else(|_| panic!("round {round}: the engine panicked on {p:02x?}"));
            outcomes.push((r.ok(), e.mem.clone()));
        }
        assert_eq!(outcomes[0], outcomes[1], "round {round}: the answer depends on where the memory lies: {p:02x?}");
        {
            let mut e = jit(&p, 64).expect("verified programs compile");
            e.state().copy_from_slice(&state);
            let r = catch_unwind(AssertUnwindSafe(|| e.call(&input, 0)))
                .unwrap_or_else(|_| panic!("round {round}: the JIT's code panicked on {p:02x?}"));
            let mut mem = vec![0u8; MEM_LEN];
            mem[INPUT + 1024..].copy_from_slice(e.state());
            let mut want = outcomes[0].1.clone();
            want[..INPUT + 1024].fill(0);
            assert_eq!(
                (r.ok(), &mem),
                (outcomes[0].0, &want),
                "round {round}: the JIT computes otherwise than the interpreter: {p:02x?}"
            );
        }
        for (mem_at, stack_at) in [(0x1000_0000u64, 0x7000_0000u64), (0x5555_0000_0000, 0x10_0000)] {
            let mut mem = vec![0u8; MEM_LEN];
            mem[..8].copy_from_slice(&(input.len() as u64).to_le_bytes());
            mem[8..16].copy_from_slice(&64u64.to_le_bytes());
            mem[INPUT..INPUT + input.len()].copy_from_slice(&input);
            mem[INPUT + 1024..].copy_from_slice(&state);
            let want = model(&decoded, &mut mem, mem_at, stack_at);
            assert!(want.is_ok(), "round {round}: a verified program left its memory in the model: {p:02x?}");
            assert_eq!(outcomes[0].0, want.ok(), "round {round}: the answer differs from the model's: {p:02x?}");
            assert_eq!(outcomes[0].1, mem, "round {round}: memory differs from the model's: {p:02x?}");
        }
    }
    assert!(passed > 5_000, "only {passed} random programs passed: the test shows little");
    assert!(loops > 100, "only {loops} programs with a jump back passed");
}

/// Each ALU operation and each conditional jump, on random operands, compiled by the
/// JIT computes what the model does (this found rbpf's JIT compiling a 32-bit move
/// as a 64-bit one and `le16`/`le32` as nothing: `jit::for_the_jit` rewrites them).
#[test]
fn every_operation_compiles_to_what_the_model_computes() {
    let mut g = Rng(12345);
    let mut bad = std::collections::BTreeSet::new();
    for op in OPCODES {
        if matches!(op & 7, 5 | 6) || op == LDDW || matches!(op & 7, 1..=3) {
            continue;
        }
        for _ in 0..200 {
            let a = g.next();
            let b = g.next();
            let imm = match g.below(3) {
                0 => g.next() as i32,
                1 => [16, 32, 64][g.below(3) as usize],
                _ => g.below(70) as i32 - 5,
            };
            let p = prog(&[
                ins(LDDW, 2, 0, 0, a as i32),
                ins(0, 0, 0, 0, (a >> 32) as i32),
                ins(LDDW, 3, 0, 0, b as i32),
                ins(0, 0, 0, 0, (b >> 32) as i32),
                ins(op, 2, 3, 0, imm),
                ins(MOV_REG, 0, 2, 0, 0),
                ins(EXIT, 0, 0, 0, 0),
            ]);
            let Ok(d) = verify(&p) else { continue };
            let mut mem = vec![0u8; MEM_LEN];
            let want = model(&d, &mut mem, 0x1000_0000, 0x7000_0000).ok();
            let got = jit(&p, 64).unwrap().call(&[], 0).ok();
            if got != want {
                bad.insert((op, std::format!("a={a:#x} b={b:#x} imm={imm} got {got:x?} want {want:x?}")));
                break;
            }
        }
    }
    for op in OPCODES {
        if !matches!(op & 7, 5 | 6) || op == 0x95 || op == JA {
            continue;
        }
        for _ in 0..300 {
            let a = if g.below(2) == 0 { g.next() } else { g.below(10) };
            let b = if g.below(3) == 0 {
                a
            } else if g.below(2) == 0 {
                g.next()
            } else {
                g.below(10)
            };
            let imm = match g.below(3) {
                0 => g.next() as i32,
                1 => b as i32,
                _ => g.below(20) as i32 - 10,
            };
            let p = prog(&[
                ins(LDDW, 2, 0, 0, a as i32),
                ins(0, 0, 0, 0, (a >> 32) as i32),
                ins(LDDW, 3, 0, 0, b as i32),
                ins(0, 0, 0, 0, (b >> 32) as i32),
                ins(op, 2, 3, 2, imm),
                ins(MOV_IMM, 0, 0, 0, 1),
                ins(EXIT, 0, 0, 0, 0),
                ins(MOV_IMM, 0, 0, 0, 2),
                ins(EXIT, 0, 0, 0, 0),
            ]);
            let Ok(d) = verify(&p) else { continue };
            let mut mem = vec![0u8; MEM_LEN];
            let want = model(&d, &mut mem, 0x1000_0000, 0x7000_0000).ok();
            let got = jit(&p, 64).unwrap().call(&[], 0).ok();
            if got != want {
                bad.insert((op, std::format!("a={a:#x} b={b:#x} imm={imm} got {got:x?} want {want:x?}")));
                break;
            }
        }
    }
    for b in &bad {
        std::println!("{:#04x} {}", b.0, b.1);
    }
    assert!(bad.is_empty());
}

/// Verification in slices, as a server does it (`Verifier::run`), comes to the same
/// answer with the same work as in one go, and no slice does much more than it was
/// given (a place compares a bounded number of states).
#[test]
fn verification_in_slices_is_the_same_in_bounded_steps() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    let counted = prog(&[
        ins(MOV_IMM, 0, 0, 0, 0),
        ins(MOV_IMM, 2, 0, 0, 0),
        ins(0x0f, 0, 2, 0, 0),
        ins(ADD_IMM, 2, 0, 0, 1),
        ins(0xa5, 2, 0, -3, 330_000),
        exit,
    ]);
    let mut tested = vec![ins(MOV_IMM, 0, 0, 0, 0), ins(LDXDW, 2, 1, 16, 0)];
    for k in 0..200 {
        tested.push(ins(0x45, 2, 0, 1, 1 << (k % 31)));
        tested.push(ins(0xa7, 0, 0, 0, 1 << (k % 31)));
    }
    tested.extend([ins(0x15, 0, 0, 1, 77), ins(MOV_IMM, 0, 0, 0, 1), exit]);
    let spin = prog(&[ins(MOV_IMM, 0, 0, 0, 0), ins(JA, 0, 0, -1, 0), exit]);
    for p in [counted, prog(&tested), spin] {
        let (whole, w) = verify::check_with(&p, MEM_LEN, verify::Limits::default());
        let mut v = verify::Verifier::new(&p, MEM_LEN, verify::Limits::default()).unwrap();
        let units = |w: verify::Work| (w.checked + w.processed + w.compared) as u64;
        let (mut last, mut slices) = (0, 0u64);
        let r = loop {
            let r = v.run(&p, verify::SLICE);
            let now = units(v.work());
            assert!(now - last <= verify::SLICE + 64, "a slice of {} units", now - last);
            last = now;
            slices += 1;
            if let Some(r) = r {
                break r;
            }
        };
        assert_eq!(r.map_err(|e| e.1), whole.map_err(|e| e.1));
        assert_eq!(v.work().processed, w.processed);
        assert_eq!(v.work().compared, w.compared);
        assert!(slices >= units(w) / (verify::SLICE + 64), "{slices} slices for {w:?}");
        assert!(v.run(&p, verify::SLICE).is_none(), "an answer once");
    }
}

/// The static checks of a long program go in slices too: making a `Verifier` looks at
/// no instruction, and no slice looks at more than it was given, whether the program
/// passes or is refused at its last instruction (it took 13 ms of the cache's thread in
/// one request for 20,000 instructions when `new` made them all).
#[test]
fn the_static_checks_go_in_slices() {
    let exit = ins(EXIT, 0, 0, 0, 0);
    let mut long = vec![ins(MOV_IMM, 0, 0, 0, 0)];
    for k in 0..20_000 {
        // Jumps over nothing, so that every pass has work: targets, predecessors.
        long.push(if k % 3 == 0 { ins(0x15, 0, 0, 0, k) } else { ins(ADD_IMM, 0, 0, 0, 1) });
    }
    let mut bad = long.clone();
    bad.push(ins(0x8f, 0, 0, 0, 0));
    long.push(exit);
    bad.push(exit);
    for (p, ok) in [(prog(&long), true), (prog(&bad), false)] {
        let n = p.len() / 8;
        let mut v = verify::Verifier::new(&p, MEM_LEN, verify::Limits::default()).unwrap();
        assert_eq!(v.work(), verify::Work::default(), "nothing looked at by new");
        let units = |w: verify::Work| (w.checked + w.processed + w.compared) as u64;
        let (mut last, mut slices) = (0, 0u64);
        let r = loop {
            let r = v.run(&p, verify::SLICE);
            let now = units(v.work());
            assert!(now - last <= verify::SLICE + 64, "a slice of {} units", now - last);
            last = now;
            slices += 1;
            if let Some(r) = r {
                break r;
            }
        };
        let w = v.work();
        assert_eq!(r.is_ok(), ok, "{r:?}");
        if ok {
            // Decode, successors, targets, three passes for the predecessors and at
            // least one look at each instruction by each dataflow.
            assert!(w.checked >= 8 * n, "{w:?}");
            assert!(slices >= (8 * n) as u64 / (verify::SLICE + 64), "{slices} slices");
        } else {
            assert_eq!(r.unwrap_err().0, n - 2, "refused at its bad instruction");
            assert!(slices >= n as u64 / (verify::SLICE + 64), "{slices} slices");
        }
        let (whole, _) = verify::check_with(&p, MEM_LEN, verify::Limits::default());
        assert_eq!(whole.is_ok(), ok);
    }
}
