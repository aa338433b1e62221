//! Signed safe-Rust grafts (VINO's Modula-3) in a server: `graft::signed` checks the
//! signature against the key the server was built with (`SCION_GRAFT_KEY`, set by
//! `cargo xtask build`; a server built without it refuses every signed graft) and the
//! code's offsets; here the image is put in pages of its own from sigma0, its relative
//! relocations applied, its write right taken away (the pages are read and execute only
//! from then on), and each call is a plain function call on the server's thread — no
//! sandbox and no budget: the signature says a trusted compiler proved the code memory
//! safe and free of panics, and termination is trusted as for native grafts. Unloading
//! gives the pages back to sigma0.
//!
//! `sfi`: WebAssembly compiled ahead of time by wasm2c and clang (VINO's SFI), signed,
//! in the same kind of pages. `host`: the `graft::Host` of every server with graft
//! points (an arena per graft, the watchdog, panics contained).
#![no_std]

extern crate alloc;

mod host;
pub mod sfi;

pub use host::host;

use abi::fpage::{Fpage, UNMAP_SELF};
use abi::Error;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use graft::engine::{Abort, Answer, Direct, Engine};
use graft::{GraftFile, LoadError, Tech};
use rt::ipc::Msg;

/// Where graft code is mapped: one slot of at most `SLOT_LOG2` pages for each graft,
/// of which it takes only the power of two of pages its code needs (2 MiB: eBPF
/// compiled by the JIT, ~96 bytes an instruction).
const CODE_VA: u64 = rt::layout::GRAFT_CODE;
const SLOT_LOG2: u64 = 9;
const SLOT_BYTES: u64 = 4096 << SLOT_LOG2;
/// Slots in use (one bit each; a server holds at most `graft::table::MAX_GRAFTS`).
static SLOTS: AtomicU64 = AtomicU64::new(0);

/// The public key this server was built with.
pub fn key() -> Option<[u8; 32]> {
    let hex = option_env!("SCION_GRAFT_KEY")?.as_bytes();
    let mut k = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, b) in k.iter_mut().enumerate() {
        let d = |c: u8| (c as char).to_digit(16);
        *b = (d(hex[2 * i])? * 16 + d(hex[2 * i + 1])?) as u8;
    }
    Some(k)
}

/// Clock ticks a compiled graft's call may run (`graft::table::WAIT_CALL_MS`, set by `host`).
pub(crate) static CALL_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);

/// A loaded signed graft: its state, the block its calls go through, its code's pages.
pub struct Signed {
    /// `rt::guard::watched_entry`: calls the graft under the watchdog's image watch.
    watched: extern "C" fn(u64, u64, u64, u64) -> Answer,
    /// The call's block: the graft's entry, the state's place and length (boxed: the
    /// table calls through its address).
    block: Box<[u64; 3]>,
    state: Vec<u8>,
    dead: bool,
    _code: CodeSlot,
}

/// Fresh memory from sigma0 for `bytes` of code (a power of two of pages, at most
/// `SLOT_BYTES`) at a slot of `GRAFT_CODE`, mapped read, write and execute until the
/// loader takes rights away; given back to sigma0 (every mapping of it revoked) when
/// dropped. Sized to the code: a graft holds the few pages it needs, not a whole slot.
pub(crate) struct CodeSlot {
    pub(crate) base: u64,
    log2: u64,
    slot: u64,
    phys: u64,
    sigma0: u64,
}

impl CodeSlot {
    /// The most code one slot holds.
    pub(crate) const MAX: usize = SLOT_BYTES as usize;

    pub(crate) fn new(sigma0: u64, bytes: usize) -> Result<CodeSlot, LoadError> {
        if bytes > Self::MAX {
            return Err(LoadError::Limit("graft code bigger than a code slot"));
        }
        let log2 = (bytes.div_ceil(4096).max(1).next_power_of_two().trailing_zeros() as u64).min(SLOT_LOG2);
        let slot = take_slot().ok_or(LoadError::Limit("no room for more graft code"))?;
        let base = CODE_VA + slot * SLOT_BYTES;
        let mut m = Msg::new(sigma0_api::ALLOC, &[log2, base]);
        if rt::server::request_mapping(
            sigma0,
            [Fpage::mem(base, 12 + log2, abi::mem::READ | abi::mem::WRITE | abi::mem::EXEC), Fpage(0), Fpage(0)],
            &mut m,
        )
        .is_err()
            || m.items() != 1
        {
            give_slot(slot);
            return Err(LoadError::Limit("no memory for the code"));
        }
        Ok(CodeSlot { base, log2, slot, phys: m.word(2), sigma0 })
    }

    /// Bytes mapped.
    pub(crate) fn size(&self) -> u64 {
        4096 << self.log2
    }

    /// The slot's memory, to write the code into (before any right is taken away).
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: sigma0 mapped `size()` bytes of fresh memory at `base`, read-write,
        // for this slot alone; `&mut self` makes this the only reference to it.
        unsafe { core::slice::from_raw_parts_mut(self.base as *mut u8, self.size() as usize) }
    }

    /// Take `rights` from our own mapping of the pages `from .. to` (offsets; rounded
    /// out to pages), each step the largest aligned flexpage that fits.
    pub(crate) fn take(&self, from: u64, to: u64, rights: u64) -> Result<(), Error> {
        let (mut p, to) = (from & !0xfff, to.div_ceil(4096) * 4096);
        while p < to {
            let mut log2 = 12;
            while log2 < 12 + self.log2 && p.is_multiple_of(1 << (log2 + 1)) && p + (1 << (log2 + 1)) <= to {
                log2 += 1;
            }
            // SAFETY: takes rights from our own mapping of pages of this slot only.
            unsafe { rt::sys::unmap(Fpage::mem(self.base + p, log2, rights), UNMAP_SELF) }?;
            p += 1 << log2;
        }
        Ok(())
    }
}

impl Drop for CodeSlot {
    fn drop(&mut self) {
        // Every mapping of the frames goes with them (ours too).
        let _ = rt::server::request(self.sigma0, &mut Msg::new(sigma0_api::FREE, &[self.phys, self.log2]));
        give_slot(self.slot);
    }
}

/// The engine for `f` if it is a signed graft (`None` for other technologies): its
/// signature checked, its code mapped executable. `sigma0`: the server's capability to
/// sigma0, whose pages hold the code.
pub fn engine(f: &GraftFile<'_>, sigma0: u64) -> Option<Result<Box<dyn Engine>, LoadError>> {
    match f.tech {
        Tech::SignedRust => Some(load(f, sigma0).map(|s| Box::new(s) as Box<dyn Engine>)),
        Tech::WasmAot => Some(sfi::load(f, sigma0, graft::engine::Limits::default())),
        Tech::Ebpf => bpf_jit(f, sigma0),
        _ => None,
    }
}

/// eBPF compiled by the JIT into a code slot of its own, made read and execute only once
/// the code is in. `None` (the interpreter runs it) when the program is too long for a
/// slot or no slot is left; a refusal of the verifier's is the load's answer.
fn bpf_jit(f: &GraftFile<'_>, sigma0: u64) -> Option<Result<Box<dyn Engine>, LoadError>> {
    let bytes = graft::engine::bpf::jit::code_bytes(f.code.len() * 2);
    if bytes > CodeSlot::MAX {
        return None;
    }
    let mut slot = CodeSlot::new(sigma0, bytes).ok()?;
    let mem = slot.bytes();
    // SAFETY: the slot's memory is mapped (read, write, execute) until the slot is
    // dropped; the engine below owns the slot, in a field dropped after the compiled
    // program that borrows the memory, and nothing else touches it.
    let exec: &'static mut [u8] = unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr(), mem.len()) };
    let jit = match graft::engine::bpf::jit::Jit::load(f, exec) {
        Ok(j) => j,
        Err(LoadError::Refused(why)) if !why.contains("too long") => return Some(Err(LoadError::Refused(why))),
        Err(_) => return None,
    };
    // From now on the code cannot be written, here or by anyone.
    if slot.take(0, slot.size(), abi::mem::WRITE).is_err() {
        return Some(Err(LoadError::Refused("the code's pages could not be made read-only")));
    }
    Some(Ok(Box::new(BpfJit { jit, dead: false, _code: slot })))
}

/// eBPF compiled into a code slot: the program, then its code's pages (dropped after it).
struct BpfJit {
    jit: graft::engine::bpf::jit::Jit,
    dead: bool,
    _code: CodeSlot,
}

impl Engine for BpfJit {
    fn state(&mut self) -> &mut [u8] {
        self.jit.state()
    }

    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort> {
        // The compiled program may be left anywhere: rbpf's call into it owns nothing.
        match rt::guard::run_for(CALL_TICKS.load(Ordering::Relaxed), || self.jit.call(input, budget)) {
            Ok(r) => r,
            Err(_) => {
                self.dead = true;
                Err(Abort::Budget)
            }
        }
    }

    fn reset(&mut self) -> Result<(), Abort> {
        if self.dead {
            return Err(Abort::Broken);
        }
        self.jit.reset()
    }

    fn allocates(&self) -> bool {
        false
    }

    fn guards_itself(&self) -> bool {
        true
    }
}

/// The build's key, or why a signed graft cannot be loaded here.
pub(crate) fn key_or_refuse() -> Result<[u8; 32], LoadError> {
    key().ok_or(LoadError::Refused("this server was built without a key for signed grafts"))
}

fn load(f: &GraftFile<'_>, sigma0: u64) -> Result<Signed, LoadError> {
    let code = graft::signed::verify(f, &key_or_refuse()?)?;
    let mut slot = CodeSlot::new(sigma0, code.image.len())?;
    let base = slot.base;
    let mem = slot.bytes();
    mem[..code.image.len()].copy_from_slice(code.image);
    for &r in &code.relocs {
        // `verify` checked: 8-aligned, inside the image.
        let v = u64::from_le_bytes(mem[r..r + 8].try_into().unwrap_or_default()).wrapping_add(base);
        mem[r..r + 8].copy_from_slice(&v.to_le_bytes());
    }
    // From now on the code cannot be written, here or by anyone.
    slot.take(0, slot.size(), abi::mem::WRITE)
        .map_err(|_| LoadError::Refused("the code's pages could not be made read-only"))?;
    let entry = base + code.entry as u64;
    let watched = rt::guard::watched_entry(CALL_TICKS.load(Ordering::Relaxed));
    // SAFETY: `watched_entry` is an assembly routine with exactly this ABI (System V:
    // four words in, two back in rax and rdx), and it is called only with an input and
    // this engine's block (`call`, and the table through `direct`, while the engine
    // lives), which it calls as `f(input, length, state, state's length)`: the entry lies
    // inside the image (`verify`), the signed code a trusted compiler made with that ABI,
    // mapped executable as long as `_code`, which the engine owns; the state's buffer is
    // the engine's and never resized.
    let watched = unsafe { core::mem::transmute::<u64, extern "C" fn(u64, u64, u64, u64) -> Answer>(watched) };
    let mut state = vec![0; f.state_len];
    let block = Box::new([entry, state.as_mut_ptr() as u64, state.len() as u64]);
    Ok(Signed { watched, block, state, dead: false, _code: slot })
}

fn take_slot() -> Option<u64> {
    loop {
        let used = SLOTS.load(Ordering::Acquire);
        let k = (!used).trailing_zeros() as u64;
        if k >= 64 {
            return None;
        }
        if SLOTS.compare_exchange(used, used | 1 << k, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return Some(k);
        }
    }
}

fn give_slot(k: u64) {
    SLOTS.fetch_and(!(1 << k), Ordering::AcqRel);
}

impl Engine for Signed {
    fn state(&mut self) -> &mut [u8] {
        &mut self.state
    }

    fn call(&mut self, input: &[u8], _budget: u64) -> Result<u64, Abort> {
        if self.dead {
            return Err(Abort::Broken);
        }
        let a = (self.watched)(input.len() as u64, input.as_ptr() as u64, self.block_arg(), 0);
        match a.how {
            0 => Ok(a.value),
            _ => {
                self.dead = true;
                Err(Abort::Budget)
            }
        }
    }

    fn reset(&mut self) -> Result<(), Abort> {
        if self.dead {
            return Err(Abort::Broken);
        }
        Ok(())
    }

    fn allocates(&self) -> bool {
        false
    }

    fn guards_itself(&self) -> bool {
        true
    }

    /// The watched entry with this graft's block: the table calls it itself.
    fn direct(&self) -> Option<Direct> {
        (!self.dead).then_some(Direct { entry: self.watched, arg: self.block_arg(), max_input: usize::MAX })
    }
}

impl Signed {
    fn block_arg(&self) -> u64 {
        &*self.block as *const [u64; 3] as u64
    }
}
