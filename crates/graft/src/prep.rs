//! A load's checks, done a slice at a time so that no load holds its server: an eBPF
//! program's verification (the verifier follows up to a million instructions), a
//! WebAssembly module's validation (wasmparser's validator, an operator a unit), a
//! signed or compiled graft's signature (the file hashed a piece at a time). The table
//! (`table::Table::start_load`) runs one slice — `SLICE` units of work, each about a few
//! hundred machine instructions — per request of the loader's, in the arena the graft
//! will have (so the check's memory is charged to it), its time paid from the loader's
//! share; once the check passes it vouches for the bytes (`vouch`) and builds the engine
//! from them, which then does not check them again in one go.
//!
//! What is left of a load after its check is bounded apart from the file's size, or
//! small: a script's compile (its source at most `engine::script::MAX_SOURCE`), a checked
//! module's parse and instantiation (no start function, two tiny address queries), a
//! signed image's copy and relocations, and the eBPF JIT's translation (linear in the
//! program).

use alloc::boxed::Box;

use crate::format::{GraftFile, Tech};
use crate::LoadError;

/// Units of work in one slice of a load's check: each a few hundred machine
/// instructions (an instruction followed or a state compared by the eBPF verifier, an
/// operator validated, 32 bytes hashed), so a slice is a fraction of a millisecond,
/// about what a server takes for a small request.
pub const SLICE: u64 = 1024;

/// A check under way.
pub trait Prep {
    /// Go on for about `budget` units of work on `f` (the same file each time): `None`
    /// while there is more to do, else whether `f` passed.
    fn run(&mut self, f: &GraftFile<'_>, budget: u64) -> Option<Result<(), LoadError>>;
    /// Vouch for `f`, which passed, while its engine is built from it (the table stops
    /// vouching right after: `vouch::vouch(None)`).
    fn vouch(&self, f: &GraftFile<'_>);
}

/// The check `f` needs before its engine is built (`None`: none, or one its engine
/// makes in a few steps), its static part made now. `key`: the server's key for signed
/// code (`None`: the engine checks the signature itself).
pub fn of(f: &GraftFile<'_>, key: Option<[u8; 32]>) -> Result<Option<Box<dyn Prep>>, LoadError> {
    let _ = key;
    Ok(match f.tech {
        #[cfg(feature = "ebpf")]
        Tech::Ebpf => {
            use crate::engine::bpf::{verify, INPUT};
            let mem_len = INPUT + f.point.max_input() + f.state_len;
            let v = verify::Verifier::new(f.code, mem_len, verify::Limits::default()).map_err(|(_, e)| e)?;
            Some(Box::new(Verify { v, mem_len }))
        }
        #[cfg(feature = "wasmi")]
        Tech::Wasmi => Some(Box::new(crate::engine::wasm::Validate::new())),
        #[cfg(feature = "signed")]
        Tech::SignedRust | Tech::WasmAot => match key {
            Some(key) => Some(Box::new(Signature { check: crate::signed::Check::new(f, &key)?, key })),
            None => None,
        },
        _ => None,
    })
}

#[cfg(feature = "ebpf")]
struct Verify {
    v: crate::engine::bpf::verify::Verifier,
    mem_len: usize,
}

#[cfg(feature = "ebpf")]
impl Prep for Verify {
    fn run(&mut self, f: &GraftFile<'_>, budget: u64) -> Option<Result<(), LoadError>> {
        self.v.run(f.code, budget).map(|r| r.map(drop).map_err(|(_, e)| e))
    }

    fn vouch(&self, f: &GraftFile<'_>) {
        crate::vouch::vouch(Some((crate::vouch::Kind::Verified, f.code, &[self.mem_len])));
    }
}

#[cfg(feature = "wasmi")]
impl Prep for crate::engine::wasm::Validate {
    fn run(&mut self, f: &GraftFile<'_>, budget: u64) -> Option<Result<(), LoadError>> {
        crate::engine::wasm::Validate::run(self, f.code, budget)
    }

    fn vouch(&self, f: &GraftFile<'_>) {
        crate::engine::wasm::Validate::vouch(self, f.code);
    }
}

#[cfg(feature = "signed")]
struct Signature {
    check: crate::signed::Check,
    key: [u8; 32],
}

#[cfg(feature = "signed")]
impl Prep for Signature {
    fn run(&mut self, _f: &GraftFile<'_>, budget: u64) -> Option<Result<(), LoadError>> {
        self.check.run(budget)
    }

    fn vouch(&self, f: &GraftFile<'_>) {
        crate::signed::vouch(Some((f, &self.key)));
    }
}
