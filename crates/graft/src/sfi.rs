//! WebAssembly compiled ahead of time by software fault isolation (VINO's SFI, as
//! Firefox's RLBox does it): `cargo xtask build` translates each example's Wasm module
//! to C with `wasm2c` (WABT) and compiles it with clang, with Scion's harness around it
//! (`crates/graft-examples/sfi/harness.c`: the runtime the generated code needs and two entries), for
//! x86_64 with general registers only (the servers are soft-float; a module with a
//! float does not compile), into one position-independent image, and signs it with the
//! build's key as it signs Rust grafts — the server runs the machine code as it stands,
//! so the signature is what says the build's compiler made it from a Wasm module.
//!
//! What the compiled code guarantees: every load and store is checked against the
//! linear memory's size (wasm2c's bounds-check mode), the call depth is counted and
//! bounded (a graft recursing too deep traps), a trap leaves the call at once (the
//! harness's own non-local exit to its entry, which answers the trap's code in the
//! control block, `Ctl`), and a call says whether it stored into linear memory at all
//! (`Ctl::wrote`: if not, the state is as it was and the table keeps its undo copy).
//! What the server adds: the linear memory (reserved up to the graft's memory limit, in
//! the graft's own heap: `memory.grow` grows it within), the watchdog (the image's
//! entries tell it, in a block of the server's — `Ctl::watch`, `rt::guard::ImageWatch`
//! — which call is under way and where it exits: nothing is armed per call; a call past
//! its time is started again at that exit, answers `Budget`, and the engine is not
//! called again) and the undo copy of the state (the table's).
//!
//! The code field (u32s little-endian): the offsets of the two entries (`scion_sfi_init`,
//! `scion_sfi_run`), the end of the code (`text`: a multiple of 4096 — code and
//! read-only data below, the harness's writable data from there), the bytes the image
//! takes in memory (`size`: its writable data zeroed past the image's bytes), the number
//! of relocations, each relocation's offset (a u64 of the image to which the load
//! address is added), then the image's bytes. The entries are
//! `extern "C" fn(a, b, c, d) -> Answer`: `init(ctl)` and `run(input_len, input)` (the
//! image copies the input in).
#![allow(unsafe_code)]

use alloc::vec::Vec;

use crate::engine::{Abort, Engine, Limits};
use crate::format::{GraftFile, Tech};
use crate::LoadError;

/// The most memory an image takes (code, data): a server's code slot.
pub const MAX_SIZE: usize = 2 << 20;

/// An image's parts, every offset checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code<'a> {
    pub init: usize,
    pub run: usize,
    /// Code and read-only data lie below, writable data from here.
    pub text: usize,
    /// Bytes the image takes in memory.
    pub size: usize,
    pub relocs: Vec<usize>,
    pub image: &'a [u8],
}

fn u32_at(b: &[u8], k: usize) -> Option<usize> {
    b.get(4 * k..4 * k + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
}

/// The code field's parts, every offset checked against the image.
pub fn parse(code: &[u8]) -> Result<Code<'_>, LoadError> {
    let bad = LoadError::Format;
    let w = |k| u32_at(code, k).ok_or(bad("the code field is shorter than its header"));
    let (init, run, text, size, n) = (w(0)?, w(1)?, w(2)?, w(3)?, w(4)?);
    let head = n
        .checked_add(5)
        .and_then(|k| k.checked_mul(4))
        .filter(|h| *h <= code.len())
        .ok_or(bad("more relocations than the code holds"))?;
    let image = &code[head..];
    if !text.is_multiple_of(4096) || text > image.len() || size < image.len() || size > MAX_SIZE {
        return Err(bad("the image's code, data and size do not fit together"));
    }
    if init >= text || run >= text {
        return Err(bad("an entry lies outside the code"));
    }
    let relocs: Vec<usize> = (0..n).filter_map(|k| u32_at(code, 5 + k)).collect();
    if relocs.iter().any(|r| !r.is_multiple_of(8) || r + 8 > image.len()) {
        return Err(bad("a relocation outside the image"));
    }
    Ok(Code { init, run, text, size, relocs, image })
}

/// The code field for an image.
pub fn code(init: usize, run: usize, text: usize, size: usize, relocs: &[usize], image: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(20 + 4 * relocs.len() + image.len());
    for w in [init, run, text, size, relocs.len()].iter().chain(relocs) {
        v.extend_from_slice(&(*w as u32).to_le_bytes());
    }
    v.extend_from_slice(image);
    v
}

/// Is `f` compiled WebAssembly whose signature `key` made? Then its code.
pub fn verify<'a>(f: &GraftFile<'a>, key: &[u8; crate::signed::KEY_LEN]) -> Result<Code<'a>, LoadError> {
    if f.tech != Tech::WasmAot {
        return Err(LoadError::Unsupported);
    }
    crate::signed::check_signature(f, key)?;
    parse(f.code)
}

/// Lay the image out in `mem` (at least `code.size` bytes, to be loaded at `base`): its
/// bytes, zeros after them (its writable data), its relocations applied.
pub fn place(code: &Code<'_>, mem: &mut [u8], base: u64) -> Result<(), LoadError> {
    let mem = mem.get_mut(..code.size).ok_or(LoadError::Limit("graft code bigger than its memory"))?;
    let (bytes, rest) = mem.split_at_mut(code.image.len());
    bytes.copy_from_slice(code.image);
    rest.fill(0);
    for &r in &code.relocs {
        // `parse` checked: 8-aligned, inside the image.
        let v = u64::from_le_bytes(mem[r..r + 8].try_into().unwrap_or_default()).wrapping_add(base);
        mem[r..r + 8].copy_from_slice(&v.to_le_bytes());
    }
    Ok(())
}

/// The control block the image and the server share (`struct scion_sfi_ctl`).
#[repr(C)]
#[derive(Debug, Default)]
pub struct Ctl {
    /// The linear memory's place and the bytes reserved for it.
    pub mem_base: u64,
    pub mem_cap: u64,
    /// Written by `init`: the memory's size, where the input and the state lie.
    pub mem_size: u64,
    pub input_at: u64,
    pub state_at: u64,
    /// The server's watch block (four u64s: a call under way, its number, where a
    /// stopped call exits, the caller's stack pointer), which the image's entries write.
    pub watch: u64,
}

use crate::engine::{abort_of, Direct, TRAP_STOPPED};
pub use crate::engine::{Answer, WROTE};

/// An image's entry.
pub type Entry = extern "C" fn(u64, u64, u64, u64) -> Answer;

/// A loaded image with its linear memory.
pub struct Sfi {
    init: Entry,
    run: Entry,
    ctl: alloc::boxed::Box<Ctl>,
    /// The linear memory: `mem_cap` bytes reserved, never moved (its length stays 0: the
    /// image writes it, the engine reads through `Ctl`'s offsets).
    memory: Vec<u8>,
    input_at: usize,
    state_at: usize,
    state_len: usize,
    max_input: usize,
    dead: bool,
    /// The last call stored into linear memory (or did not return).
    wrote: bool,
}

impl Sfi {
    /// Instantiate the image loaded at `base` for graft `f`: its module's memory in a
    /// reservation of `limits.memory` bytes, its data segments in, the input and state
    /// buffers checked to lie inside it and apart.
    ///
    /// # Safety
    /// `base` holds `code` as `place` lays it out, its code executable, its writable data
    /// writable, and stays so as long as the engine; `code` is an image the build made
    /// from a WebAssembly module with Scion's harness (its signature says so). `watch`
    /// is four u64s the image may write at every call, for as long as the engine lives
    /// (the server's watchdog's block).
    pub unsafe fn instantiate(
        base: u64,
        code: &Code<'_>,
        f: &GraftFile<'_>,
        limits: Limits,
        watch: *mut u64,
    ) -> Result<Sfi, LoadError> {
        // SAFETY: the entries lie in the image's code (`parse`), which the caller promises
        // is loaded at `base`, executable, and made by the build with this ABI.
        let entry = |at: usize| unsafe { core::mem::transmute::<u64, Entry>(base + at as u64) };
        let memory: Vec<u8> = Vec::with_capacity(limits.memory);
        let ctl = alloc::boxed::Box::new(Ctl {
            mem_base: memory.as_ptr() as u64,
            mem_cap: memory.capacity() as u64,
            watch: watch as u64,
            ..Ctl::default()
        });
        let mut s = Sfi {
            init: entry(code.init),
            run: entry(code.run),
            ctl,
            memory,
            input_at: 0,
            state_at: 0,
            state_len: f.state_len,
            max_input: f.point.max_input(),
            dead: false,
            wrote: true,
        };
        s.start().map_err(|_| LoadError::Refused("the module does not instantiate within the limits"))?;
        let c = &s.ctl;
        crate::engine::check_wasm_buffers(
            c.mem_size as usize,
            c.input_at as usize,
            s.max_input,
            c.state_at as usize,
            s.state_len,
        )?;
        (s.input_at, s.state_at) = (c.input_at as usize, c.state_at as usize);
        s.state().fill(0);
        Ok(s)
    }

    /// Run the image's `init`: a fresh instance (globals, memory, data segments).
    fn start(&mut self) -> Result<(), Abort> {
        let ctl = &mut *self.ctl as *mut Ctl as u64;
        match (self.init)(ctl, 0, 0, 0).how as u32 {
            0 if self.ctl.mem_size as usize <= self.memory.capacity() => Ok(()),
            TRAP_STOPPED => {
                self.dead = true;
                Err(Abort::Budget)
            }
            _ => Err(Abort::Broken),
        }
    }
}

/// An engine and the memory its image lives in, `K` (a server's code slot, the host's
/// mapping): dropped after the engine (fields drop in order), so nothing runs the code
/// once its pages go.
pub struct Held<K> {
    sfi: Sfi,
    _code: K,
}

impl<K> Held<K> {
    pub fn new(sfi: Sfi, code: K) -> Held<K> {
        Held { sfi, _code: code }
    }
}

impl<K> Engine for Held<K> {
    fn state(&mut self) -> &mut [u8] {
        self.sfi.state()
    }
    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort> {
        self.sfi.call(input, budget)
    }
    fn reset(&mut self) -> Result<(), Abort> {
        self.sfi.reset()
    }
    fn allocates(&self) -> bool {
        self.sfi.allocates()
    }
    fn guards_itself(&self) -> bool {
        self.sfi.guards_itself()
    }
    fn wrote_state(&self) -> bool {
        self.sfi.wrote_state()
    }
    fn call_noting(&mut self, input: &[u8], budget: u64) -> (Result<u64, Abort>, bool) {
        let r = self.sfi.call(input, budget);
        (r, self.sfi.wrote)
    }
    fn notes_writes(&self) -> bool {
        true
    }
    fn direct(&self) -> Option<Direct> {
        self.sfi.direct()
    }
}

impl Engine for Sfi {
    #[inline]
    fn state(&mut self) -> &mut [u8] {
        // SAFETY: the state lies inside the memory's size (checked at instantiation;
        // linear memory never shrinks, and a fresh instance has the same size), which
        // lies inside the reservation; the image writes it only during a call, which
        // needs `&mut self`.
        unsafe { core::slice::from_raw_parts_mut(self.memory.as_mut_ptr().add(self.state_at), self.state_len) }
    }

    #[inline]
    fn call(&mut self, input: &[u8], _budget: u64) -> Result<u64, Abort> {
        if self.dead {
            return Err(Abort::Broken);
        }
        if input.len() > self.max_input {
            return Err(Abort::Memory);
        }
        // Called directly: the image copies the input into its buffer (`max_input` bytes
        // at `input_at`, inside the memory and apart from the state: checked at
        // instantiation; `input` is at most that long: checked above), tells the
        // watchdog itself that a call is under way (and where it exits), its traps come
        // back here by its own exit, and it calls nothing outside itself.
        let a = (self.run)(input.len() as u64, input.as_ptr() as u64, 0, 0);
        self.wrote = a.how != 0;
        match a.how as u32 {
            0 => Ok(a.value),
            TRAP_STOPPED => {
                // Stopped past its time: a loop that does not end is not called again
                // (unloaded).
                self.dead = true;
                Err(Abort::Budget)
            }
            t => Err(abort_of(t)),
        }
    }

    #[inline]
    fn wrote_state(&self) -> bool {
        self.wrote
    }

    #[inline]
    fn reset(&mut self) -> Result<(), Abort> {
        if self.dead {
            return Err(Abort::Broken);
        }
        self.start()?;
        // A fresh instance keeps its buffers where they were checked (the image copies
        // the input to where its own `init` found them).
        match (self.ctl.input_at as usize, self.ctl.state_at as usize) == (self.input_at, self.state_at) {
            true => Ok(()),
            false => Err(Abort::Broken),
        }
    }

    #[inline]
    fn allocates(&self) -> bool {
        false
    }

    #[inline]
    fn guards_itself(&self) -> bool {
        true
    }

    /// The image's `run`, called by the table itself: it copies the input in (at most
    /// `max_input` bytes, which the table checks), guards itself and answers its traps.
    fn direct(&self) -> Option<Direct> {
        (!self.dead).then_some(Direct { entry: self.run, arg: 0, max_input: self.max_input })
    }
}

/// Images run on the host (tests, tools): the same bytes a server runs, in memory of the
/// host's own (`mmap`), called directly — no watchdog: a graft that never returns never
/// returns here.
#[cfg(feature = "sfi-host")]
pub mod host {
    extern crate std;

    use super::{Code, Held, Sfi};
    use crate::engine::{Engine, Limits};
    use crate::format::GraftFile;
    use crate::LoadError;
    use alloc::boxed::Box;

    /// An image's pages in host memory.
    struct Mapped {
        at: *mut libc::c_void,
        len: usize,
    }

    impl Drop for Mapped {
        fn drop(&mut self) {
            // SAFETY: the mapping is this engine's alone; nothing runs its code any more.
            unsafe { libc::munmap(self.at, self.len) };
        }
    }

    /// The watch block the images write on the host (no watchdog reads it). Shared by
    /// every engine on the host: writes of relaxed words, read by nobody.
    static WATCH: [core::sync::atomic::AtomicU64; 4] = [const { core::sync::atomic::AtomicU64::new(0) }; 4];

    /// The engine for a compiled graft signed with `key`, run on the host.
    pub fn load(f: &GraftFile<'_>, key: &[u8; 32], limits: Limits) -> Result<Box<dyn Engine>, LoadError> {
        let code: Code<'_> = super::verify(f, key)?;
        let len = code.size.div_ceil(4096) * 4096;
        // SAFETY: a fresh private mapping, ours alone.
        let at = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(LoadError::Limit("no memory for the code"));
        }
        let base = at as u64;
        // SAFETY: `len` bytes mapped read-write at `at`, ours alone.
        let mem = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) };
        let placed = super::place(&code, mem, base);
        // SAFETY: the code's pages of our own mapping: read and execute from now on.
        if placed.is_err() || unsafe { libc::mprotect(at, code.text, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
            // SAFETY: our own mapping, unused.
            unsafe { libc::munmap(at, len) };
            return Err(placed.err().unwrap_or(LoadError::Refused("the code's pages could not be made executable")));
        }
        // SAFETY: the image is laid out at `base` by `place`, its code executable and its
        // data writable, for as long as the engine keeps `Mapped` (dropped after it); signed by `key`.
        match unsafe { Sfi::instantiate(base, &code, f, limits, WATCH.as_ptr() as *mut u64) } {
            Ok(sfi) => Ok(Box::new(Held::new(sfi, Mapped { at, len }))),
            Err(e) => {
                // SAFETY: our own mapping; the engine that ran it is gone.
                unsafe { libc::munmap(at, len) };
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offset_must_lie_in_its_part() {
        let img = [0u8; 4096 + 64];
        let ok = |init, run, text, size, relocs: &[usize]| parse(&code(init, run, text, size, relocs, &img)).is_ok();
        assert!(ok(0, 16, 4096, 8192, &[0, 4096 + 56]));
        assert!(!ok(4096, 16, 4096, 8192, &[]), "init in the data");
        assert!(!ok(0, 5000, 4096, 8192, &[]), "run past the code");
        assert!(!ok(0, 16, 100, 8192, &[]), "code not ending at a page");
        assert!(!ok(0, 16, 8192, 8192, &[]), "code past the image");
        assert!(!ok(0, 16, 4096, 4096, &[]), "a size below the image's bytes");
        assert!(!ok(0, 16, 4096, MAX_SIZE + 1, &[]), "bigger than a code slot");
        assert!(!ok(0, 16, 4096, 8192, &[4]), "a relocation not aligned");
        assert!(!ok(0, 16, 4096, 8192, &[4096 + 64]), "a relocation past the image");
        assert!(parse(&[1, 2, 3]).is_err());
        let mut c = code(0, 16, 4096, 8192, &[], &img);
        c[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&c).is_err(), "a relocation count past the code");
    }

    #[test]
    fn place_relocates_and_zeroes() {
        let mut img = [0u8; 4096 + 16];
        img[4096..4104].copy_from_slice(&40u64.to_le_bytes());
        img[4104] = 7;
        let c = code(0, 0, 4096, 8192, &[4096], &img);
        let code = parse(&c).unwrap();
        let mut mem = alloc::vec![0xffu8; 8192];
        place(&code, &mut mem, 0x10_0000).unwrap();
        assert_eq!(u64::from_le_bytes(mem[4096..4104].try_into().unwrap()), 0x10_0000 + 40);
        assert_eq!(mem[4104], 7);
        assert!(mem[4096 + 16..].iter().all(|b| *b == 0), "the data past the image is zeroed");
        assert!(place(&code, &mut [0u8; 100], 0).is_err(), "memory smaller than the image");
    }
}
