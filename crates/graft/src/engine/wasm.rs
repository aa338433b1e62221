//! WebAssembly interpreted by `wasmi` 2 (VINO's interpreted byte code). The module
//! imports nothing and exports `memory`, `graft_input() -> i32` and `graft_state() ->
//! i32` (where in its memory the point's input and the graft's state live) and
//! `graft_run(len: i32) -> i64`. Fuel bounds a call, a store limiter bounds memory,
//! tables and instances; the module sees nothing but its own linear memory. An
//! aborted call leaves the instance behind (its stack pointer may be anywhere), so
//! `reset` instantiates the module afresh. A module whose code stores nothing into its
//! memory (`writes_memory`) cannot change its state: the table then keeps its undo copy
//! from one call to the next instead of taking it again before each.

use wasmi::{
    Config, Engine as WEngine, Instance, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, TrapCode,
    TypedFunc,
};

use super::{Abort, Engine, Limits};
use crate::format::GraftFile;
use crate::LoadError;

pub struct Wasm {
    module: Module,
    store: Store<StoreLimits>,
    memory: Memory,
    run: TypedFunc<i32, i64>,
    input_at: usize,
    state_at: usize,
    state_len: usize,
    max_input: usize,
    limits: Limits,
    /// Its code may write its memory (`writes_memory`).
    writes: bool,
}

/// May the module's code write its linear memory: a store of any width, or
/// `memory.fill`, `memory.copy` or `memory.init` anywhere in it? (`memory.grow` changes
/// no byte there is; nothing else a module wasmi accepts writes memory: no imports, no
/// atomics — threads are not enabled, so validation refused them — and no SIMD — its
/// operators do not even parse without wasmparser's `simd`.) Anything that does not
/// parse answers yes.
pub fn writes_memory(wasm: &[u8]) -> bool {
    use wasmparser::{Operator as O, Parser, Payload};
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(payload) = payload else { return true };
        if let Payload::CodeSectionEntry(body) = payload {
            let Ok(mut ops) = body.get_operators_reader() else { return true };
            while !ops.eof() {
                match ops.read() {
                    Ok(
                        O::I32Store { .. }
                        | O::I64Store { .. }
                        | O::F32Store { .. }
                        | O::F64Store { .. }
                        | O::I32Store8 { .. }
                        | O::I32Store16 { .. }
                        | O::I64Store8 { .. }
                        | O::I64Store16 { .. }
                        | O::I64Store32 { .. }
                        | O::MemoryFill { .. }
                        | O::MemoryCopy { .. }
                        | O::MemoryInit { .. },
                    )
                    | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        }
    }
    false
}

/// Fuel for the module's start function and the two address queries.
const SETUP_FUEL: u64 = 1 << 20;

fn limiter(l: Limits) -> StoreLimits {
    StoreLimitsBuilder::new()
        .memory_size(l.memory)
        .memories(1)
        .tables(1)
        .table_elements(1024)
        .instances(1)
        .trap_on_grow_failure(false)
        .build()
}

impl Wasm {
    pub fn load(f: &GraftFile<'_>, limits: Limits) -> Result<Wasm, LoadError> {
        let mut c = Config::default();
        c.consume_fuel(true);
        // A graft recursing without end traps instead of growing the server's heap.
        c.set_max_recursion_depth(256)
            .set_min_stack_height(1024)
            .set_max_stack_height(256 * 1024)
            .set_max_cached_stacks(1);
        let engine = WEngine::new(&c);
        let module = Module::new(&engine, f.code).map_err(|_| LoadError::Refused("not a valid WebAssembly module"))?;
        if module.imports().len() != 0 {
            return Err(LoadError::Refused("the module imports something (a graft may import nothing)"));
        }
        let store = Store::new(&engine, limiter(limits));
        let mut w = Wasm::instantiate(module, store, f.state_len, f.point.max_input(), limits)?;
        w.writes = writes_memory(f.code);
        w.state().fill(0);
        Ok(w)
    }

    fn instantiate(
        module: Module,
        mut store: Store<StoreLimits>,
        state_len: usize,
        max_input: usize,
        limits: Limits,
    ) -> Result<Wasm, LoadError> {
        let r = LoadError::Refused;
        store.limiter(|l| l);
        store.set_fuel(SETUP_FUEL).map_err(|_| r("fuel"))?;
        let linker = Linker::<StoreLimits>::new(module.engine());
        let inst: Instance = linker
            .instantiate_and_start(&mut store, &module)
            .map_err(|_| r("the module does not instantiate within the limits"))?;
        let memory = inst.get_memory(&store, "memory").ok_or(r("the module exports no memory"))?;
        let q = |s: &mut Store<StoreLimits>, name| -> Result<usize, LoadError> {
            let f = inst
                .get_typed_func::<(), i32>(&*s, name)
                .map_err(|_| r("missing graft_input or graft_state () -> i32"))?;
            f.call(s, ()).map(|v| v as u32 as usize).map_err(|_| r("graft_input or graft_state trapped"))
        };
        let input_at = q(&mut store, "graft_input")?;
        let state_at = q(&mut store, "graft_state")?;
        let run =
            inst.get_typed_func::<i32, i64>(&store, "graft_run").map_err(|_| r("missing graft_run (i32) -> i64"))?;
        super::check_wasm_buffers(memory.data(&store).len(), input_at, max_input, state_at, state_len)?;
        Ok(Wasm { module, store, memory, run, input_at, state_at, state_len, max_input, limits, writes: true })
    }
}

impl Engine for Wasm {
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
            Err(e) => Err(match e.as_trap_code() {
                Some(TrapCode::OutOfFuel) => Abort::Budget,
                Some(TrapCode::MemoryOutOfBounds) | Some(TrapCode::GrowthOperationLimited) => Abort::Memory,
                _ => Abort::Trap,
            }),
        }
    }

    fn reset(&mut self) -> Result<(), Abort> {
        let store = Store::new(self.module.engine(), limiter(self.limits));
        let w = Wasm::instantiate(self.module.clone(), store, self.state_len, self.max_input, self.limits)
            .map_err(|_| Abort::Broken)?;
        *self = Wasm { writes: self.writes, ..w };
        Ok(())
    }

    /// Only a module that stores nothing says so: its calls leave the state as it was.
    fn notes_writes(&self) -> bool {
        !self.writes
    }

    fn wrote_state(&self) -> bool {
        self.writes
    }
}
