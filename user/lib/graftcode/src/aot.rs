//! WebAssembly compiled ahead of time (VINO's SFI), run by Wasmtime's `no_std` runtime.
//! The module is the build's: `cargo xtask build` compiled it with Cranelift
//! (`graft::aot::config`, the settings both sides share) and signed it, and a server
//! takes no other — Wasmtime's loader trusts the machine code it is given, so the
//! signature (`graft::signed::check_signature`) is what keeps a program from handing
//! the server code of its own. The compiled code checks every memory access against
//! the module's memory and counts fuel (the budget); a trap or running out of fuel
//! unwinds to the call (no signals: explicit checks only). The module's bytes sit in
//! a code slot of this server's (`CodeSlot`); Wasmtime publishes its text through
//! `Region`, which takes the write right from the text's pages and the execute right
//! from every other page. The ABI is the interpreted engine's (`graft::engine::wasm`):
//! `graft_input`, `graft_state`, `graft_run`.

use alloc::sync::Arc;
use graft::engine::{Abort, Engine, Limits};
use graft::{GraftFile, LoadError};
use wasmtime::{CustomCodeMemory, Instance, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, Trap, TypedFunc};

use crate::CodeSlot;

// Wasmtime's per-thread state hooks (`wasmtime_tls_get`/`_set`) are `rt::wasmtime_platform`.

/// A code slot's pages as Wasmtime's code memory.
struct Region {
    slot: CodeSlot,
}

impl CustomCodeMemory for Region {
    fn required_alignment(&self) -> usize {
        4096
    }

    fn publish_executable(&self, ptr: *const u8, len: usize) -> wasmtime::Result<()> {
        let (base, end) = (self.slot.base, self.slot.base + self.slot.size());
        let (from, to) = (ptr as u64, ptr as u64 + len as u64);
        if from < base || to > end {
            return Err(wasmtime::format_err!("code outside its slot"));
        }
        let fail = |_| wasmtime::format_err!("unmap");
        // The text: read and execute. Everything else of the slot: read and write.
        self.slot.take(from - base, to - base, abi::mem::WRITE).map_err(fail)?;
        self.slot.take(0, from - base, abi::mem::EXEC).map_err(fail)?;
        self.slot.take(to - base, self.slot.size(), abi::mem::EXEC).map_err(fail)
    }

    fn unpublish_executable(&self, _ptr: *const u8, _len: usize) -> wasmtime::Result<()> {
        // The slot goes back to sigma0 with the module.
        Ok(())
    }
}

fn limiter(l: Limits) -> StoreLimits {
    StoreLimitsBuilder::new().memory_size(l.memory).memories(1).tables(1).table_elements(1024).instances(1).trap_on_grow_failure(false).build()
}

/// Fuel for the module's start function and the two address queries.
const SETUP_FUEL: u64 = 1 << 20;

pub struct Aot {
    store: Store<StoreLimits>,
    memory: Memory,
    run: TypedFunc<i32, i64>,
    input_at: usize,
    state_at: usize,
    state_len: usize,
    max_input: usize,
    limits: Limits,
    /// Last: the module (and its code's slot) outlives the store and instance.
    module: Module,
}

pub fn load(f: &GraftFile<'_>, sigma0: u64, limits: Limits) -> Result<Aot, LoadError> {
    graft::signed::check_signature(f, &crate::key_or_refuse()?)?;
    let mut slot = CodeSlot::new(sigma0, f.code.len())?;
    slot.bytes()[..f.code.len()].copy_from_slice(f.code);
    let (base, len) = (slot.base, f.code.len());
    let region = Arc::new(Region { slot });
    let mut c = graft::aot::config();
    c.with_custom_code_memory(Some(region.clone()));
    // SAFETY: the servers are built soft-float (x86_64-unknown-none), Cranelift's code
    // passes floats in SSE registers; no float crosses between them because
    // `graft::aot::config` turns WebAssembly's floating point off, so no module with a
    // float compiles, and a module compiled otherwise fails the runtime's check of the
    // features it was compiled with.
    unsafe { c.x86_float_abi_ok(true) };
    let engine = wasmtime::Engine::new(&c).map_err(|_| LoadError::Refused("the runtime refused its settings"))?;
    // SAFETY: the bytes are a module this system's compiler made with these settings
    // (the signature says so), they lie in the slot `region` owns, which the module
    // keeps alive (the engine holds `region`), and nothing writes them from now on.
    let memory = unsafe { core::ptr::NonNull::slice_from_raw_parts(core::ptr::NonNull::new_unchecked(base as *mut u8), len) };
    // SAFETY: as above.
    let module = unsafe { Module::deserialize_raw(&engine, memory) }.map_err(|e| {
        rt::println!("graftcode: wasmtime: {:?}", e);
        LoadError::Refused("not a module compiled for this runtime")
    })?;
    if module.imports().len() != 0 {
        return Err(LoadError::Refused("the module imports something (a graft may import nothing)"));
    }
    let mut a = instantiate(module, f.state_len, f.point.max_input(), limits)?;
    a.state().fill(0);
    Ok(a)
}

fn instantiate(module: Module, state_len: usize, max_input: usize, limits: Limits) -> Result<Aot, LoadError> {
    let r = LoadError::Refused;
    let mut store = Store::new(module.engine(), limiter(limits));
    store.limiter(|l| l);
    store.set_fuel(SETUP_FUEL).map_err(|_| r("fuel"))?;
    let linker = Linker::<StoreLimits>::new(module.engine());
    let inst: Instance = linker.instantiate(&mut store, &module).map_err(|_| r("the module does not instantiate within the limits"))?;
    let memory = inst.get_memory(&mut store, "memory").ok_or(r("the module exports no memory"))?;
    let mut q = |name| -> Result<usize, LoadError> {
        let f = inst.get_typed_func::<(), i32>(&mut store, name).map_err(|_| r("missing graft_input or graft_state () -> i32"))?;
        f.call(&mut store, ()).map(|v| v as u32 as usize).map_err(|_| r("graft_input or graft_state trapped"))
    };
    let input_at = q("graft_input")?;
    let state_at = q("graft_state")?;
    let run = inst.get_typed_func::<i32, i64>(&mut store, "graft_run").map_err(|_| r("missing graft_run (i32) -> i64"))?;
    graft::engine::check_wasm_buffers(memory.data(&store).len(), input_at, max_input, state_at, state_len)?;
    Ok(Aot { store, memory, run, input_at, state_at, state_len, max_input, limits, module })
}

impl Engine for Aot {
    fn state(&mut self) -> &mut [u8] {
        let (a, n) = (self.state_at, self.state_len);
        // In bounds: checked at instantiation, and linear memory never shrinks.
        &mut self.memory.data_mut(&mut self.store)[a..a + n]
    }

    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort> {
        if input.len() > self.max_input {
            return Err(Abort::Memory);
        }
        let at = self.input_at;
        self.memory.data_mut(&mut self.store)[at..at + input.len()].copy_from_slice(input);
        self.store.set_fuel(budget).map_err(|_| Abort::Broken)?;
        match self.run.call(&mut self.store, input.len() as i32) {
            Ok(v) => Ok(v as u64),
            Err(e) => Err(match e.downcast_ref::<Trap>() {
                Some(Trap::OutOfFuel) => Abort::Budget,
                Some(Trap::MemoryOutOfBounds) => Abort::Memory,
                _ => Abort::Trap,
            }),
        }
    }

    fn reset(&mut self) -> Result<(), Abort> {
        *self = instantiate(self.module.clone(), self.state_len, self.max_input, self.limits).map_err(|_| Abort::Broken)?;
        Ok(())
    }
}
