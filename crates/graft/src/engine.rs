//! One engine per technology. An engine holds a loaded graft's code and its state
//! inside its sandbox (a Wasm instance's linear memory, an eBPF program's memory
//! region, a script's blob), and runs one call with a budget. It never decides
//! whether an answer is good (the point does) nor undoes anything (the `Graft`
//! around it does); it only has to leave itself callable again after `reset`.

use alloc::boxed::Box;

use crate::format::{GraftFile, Tech};
use crate::LoadError;

#[cfg(feature = "ebpf")]
pub mod bpf;
pub mod native;
#[cfg(feature = "script")]
pub mod script;
#[cfg(feature = "wasmi")]
pub mod wasm;

/// Why a call was aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// The call ran out of its budget (fuel, operations).
    Budget,
    /// The graft touched memory it was not given.
    Memory,
    /// The graft trapped (unreachable, division, a panic, a script error, a bad type).
    Trap,
    /// The point refused the answer (a victim that is not a candidate, a block
    /// outside the segment).
    BadAnswer,
    /// The engine could not be made callable again; the graft is unloaded.
    Broken,
}

impl Abort {
    /// In the order of their codes (the graft protocol's `STATS` sends code + 1).
    pub const ALL: [Abort; 5] = [Abort::Budget, Abort::Memory, Abort::Trap, Abort::BadAnswer, Abort::Broken];

    pub fn what(self) -> &'static str {
        match self {
            Abort::Budget => "over budget",
            Abort::Memory => "memory out of bounds or over the limit",
            Abort::Trap => "trap",
            Abort::BadAnswer => "answer refused by the point",
            Abort::Broken => "engine broken",
        }
    }
}

/// What a compiled graft's entry answers, in rax and rdx (`struct scion_sfi_answer`):
/// the graft's answer, and in `how` a trap's code (low 32 bits; 0: none) or, for a call
/// that returned, `WROTE` if it may have stored into its state.
#[repr(C)]
pub struct Answer {
    pub value: u64,
    pub how: u64,
}

/// `Answer::how` of a call that may have stored into its state.
pub const WROTE: u64 = 1 << 32;
/// The trap codes the entries answer: wasm2c's (`wasm_rt_trap_t`: out of bounds is 1),
/// and Scion's for a call the watchdog stopped past its time (`rt::guard::IMAGE_STOPPED`).
pub const TRAP_OOB: u32 = 1;
pub const TRAP_STOPPED: u32 = 9;

/// Why a call whose entry answered trap `code` (not 0) was aborted: out of bounds is a
/// memory fault, stopped over budget, the rest (unreachable, division, stack exhausted,
/// …) a trap.
pub fn abort_of(code: u32) -> Abort {
    match code {
        TRAP_OOB => Abort::Memory,
        TRAP_STOPPED => Abort::Budget,
        _ => Abort::Trap,
    }
}

/// A compiled graft's entry, which the table calls itself, with no engine between (no
/// dispatch, no result to unpack): `entry(input.len(), input, arg, 0)`, for an input of
/// at most `max_input` bytes. The entry guards itself (it tells the server's watchdog
/// that a call is under way and where a stopped one exits) and answers its traps in
/// `Answer::how`; after `TRAP_STOPPED` it is never called again. The engine keeps the
/// code and whatever `arg` points to for as long as it lives.
#[derive(Clone, Copy)]
pub struct Direct {
    pub entry: extern "C" fn(u64, u64, u64, u64) -> Answer,
    pub arg: u64,
    pub max_input: usize,
}

/// A loaded graft's code, in its sandbox.
pub trait Engine {
    /// The graft's state as the sandbox holds it (exactly the file's `state_len`
    /// bytes). The owner writes it (a hot list); the graft reads and writes it.
    fn state(&mut self) -> &mut [u8];
    /// Run one call on `input` (at most the point's `max_input` bytes) within
    /// `budget` units of the technology's own measure.
    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort>;
    /// After an aborted call: make the engine callable again (a fresh instance). The
    /// state is written back by the caller afterwards.
    fn reset(&mut self) -> Result<(), Abort>;
    /// Does a call allocate (an interpreter's values)? Compiled code does not: its calls
    /// need no heap of their own. Asked once, when the graft is loaded.
    fn allocates(&self) -> bool {
        true
    }
    /// Does a call guard itself (compiled code: signed code, which the server's watchdog
    /// stops past its time in a few instructions, not the host's guarded run; SFI, whose
    /// instrumented code stops at the end of its fuel)? Such an engine answers a stopped
    /// call `Budget` and cannot be reset after it.
    fn guards_itself(&self) -> bool {
        false
    }
    /// Could the last call have changed the state? An engine that knows it did not (a
    /// compiled graft that stored nothing into its memory, a Wasm module with no store in
    /// its code) saves the table its undo copy before the next call. Only an exact "no"
    /// may answer `false`. The table asks the engines that note their writes
    /// (`notes_writes`; by `call_noting` those that guard their own calls); any other is
    /// taken to have written.
    fn wrote_state(&self) -> bool {
        true
    }
    /// Does `wrote_state` ever answer `false` (the table then asks, else it does not)?
    fn notes_writes(&self) -> bool {
        false
    }
    /// `call`, and `wrote_state` after it, in one call of the engine (the table's, for an
    /// engine it calls directly that notes its writes).
    fn call_noting(&mut self, input: &[u8], budget: u64) -> (Result<u64, Abort>, bool) {
        let r = self.call(input, budget);
        (r, self.wrote_state())
    }
    /// The entry the table may call itself instead of `call` (compiled code that guards
    /// its own calls: signed Rust, SFI), asked once when the graft is loaded.
    fn direct(&self) -> Option<Direct> {
        None
    }
}

/// Where a WebAssembly graft keeps the point's input and its state (`graft_input`,
/// `graft_state`), checked against its memory's `size` for either Wasm engine: both
/// buffers inside, and apart.
pub fn check_wasm_buffers(
    size: usize,
    input_at: usize,
    max_input: usize,
    state_at: usize,
    state_len: usize,
) -> Result<(), LoadError> {
    let r = LoadError::Refused;
    let fits = |at: usize, n: usize| at.checked_add(n).is_some_and(|e| e <= size);
    if !fits(input_at, max_input) || !fits(state_at, state_len) {
        return Err(r("the input or state buffer is outside the module's memory"));
    }
    // In bounds, so the sums cannot overflow.
    if state_len > 0 && input_at < state_at + state_len && state_at < input_at + max_input {
        return Err(r("the input and state buffers overlap"));
    }
    Ok(())
}

/// Limits an engine enforces besides the per-call budget.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of memory a graft may hold (Wasm linear memory; script values).
    pub memory: usize,
    /// Is the graft's heap over its limit (`host::Host::over_probe`)? An engine that
    /// can stop itself between steps asks this at each (the script engine: what it
    /// holds is not all counted by its own limits — map keys, curried values).
    pub over: fn() -> bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { memory: 1 << 20, over: || false }
    }
}

/// Run each engine once on the server's own heap before any graft's: statics an
/// engine fills the first time it runs (rhai's hashing seed and indexer hashes) must not
/// be filled from a graft's heap, which is forgotten whole when its engine is stopped.
pub fn warm_up() {
    #[cfg(feature = "script")]
    script::warm_up();
}

/// Build the engine for a parsed file, with the technologies compiled in. `Upcall`,
/// `WasmAot` and `SignedRust` need a server's help (IPC, executable memory, the key)
/// and come through the table's `extra` hook instead.
pub fn build(f: &GraftFile<'_>, limits: Limits) -> Result<Box<dyn Engine>, LoadError> {
    match f.tech {
        Tech::Native => Ok(Box::new(native::Native::load(f)?)),
        #[cfg(feature = "wasmi")]
        Tech::Wasmi => Ok(Box::new(wasm::Wasm::load(f, limits)?)),
        #[cfg(feature = "ebpf")]
        Tech::Ebpf => Ok(Box::new(bpf::Ebpf::load(f)?)),
        #[cfg(feature = "script")]
        Tech::Script => Ok(Box::new(script::Script::load(f, limits)?)),
        _ => {
            let _ = limits;
            Err(LoadError::Unsupported)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_wasm_buffers;

    /// A module that puts its buffers outside its memory, across each other, or where
    /// the sum of place and size would wrap, is refused.
    #[test]
    fn wasm_buffers_inside_and_apart() {
        assert!(check_wasm_buffers(4096, 0, 1024, 1024, 520).is_ok());
        assert!(check_wasm_buffers(4096, 1024, 1024, 0, 1024).is_ok(), "touching is apart");
        assert!(check_wasm_buffers(4096, 3500, 1024, 0, 8).is_err(), "input past the memory");
        assert!(check_wasm_buffers(4096, 0, 1024, 4000, 520).is_err(), "state past the memory");
        assert!(check_wasm_buffers(4096, 0, 1024, 1000, 8).is_err(), "state inside the input");
        assert!(check_wasm_buffers(4096, 100, 64, 0, 520).is_err(), "input inside the state");
        assert!(check_wasm_buffers(4096, usize::MAX - 10, 64, 0, 8).is_err(), "a sum that wraps");
        assert!(check_wasm_buffers(4096, 0, 64, 32, 0).is_ok(), "no state: nothing to overlap");
    }
}
