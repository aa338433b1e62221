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
    use wasmparser::{Parser, Payload};
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(payload) = payload else { return true };
        if let Payload::CodeSectionEntry(body) = payload {
            let Ok(mut ops) = body.get_operators_reader() else { return true };
            while !ops.eof() {
                match ops.read() {
                    Ok(op) if !stores(&op) => {}
                    _ => return true,
                }
            }
        }
    }
    false
}

/// Does `op` write linear memory (`writes_memory`)?
fn stores(op: &wasmparser::Operator<'_>) -> bool {
    use wasmparser::Operator as O;
    matches!(
        op,
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
            | O::MemoryInit { .. }
    )
}

/// Fuel for the two address queries (`graft_input`, `graft_state`).
const SETUP_FUEL: u64 = 1 << 16;

/// The WebAssembly features wasmi 2 validates with by default (`Config::default_features`,
/// which it keeps to itself): the sliced validation (`Validate`) must take exactly what
/// wasmi would, as wasmi then takes the module unchecked.
fn features() -> wasmparser::WasmFeatures {
    use wasmparser::WasmFeatures as F;
    F::MUTABLE_GLOBAL
        | F::MULTI_VALUE
        | F::MULTI_MEMORY
        | F::SATURATING_FLOAT_TO_INT
        | F::SIGN_EXTENSION
        | F::BULK_MEMORY
        | F::REFERENCE_TYPES
        | F::GC_TYPES
        | F::TAIL_CALL
        | F::EXTENDED_CONST
        | F::FLOATS
}

/// Bytes of a section other than the code and the data that a graft may have: the
/// validator takes such a section in one go (its entries are small: types, functions,
/// exports), and a graft needs few of them.
pub const MAX_SECTION: usize = 16 * 1024;
/// Data segments a graft may have (the validator takes the data section in one go; its
/// bytes are not looked at, its segments are).
pub const MAX_DATA_SEGMENTS: u32 = 256;
/// The longest body of `graft_input` or `graft_state`, which the load calls (and wasmi
/// translates on that first call): they answer a place, an `i32.const`.
pub const MAX_QUERY_BODY: usize = 256;
/// Operators validated in one unit of a validation's work (`Validate::run`): about as
/// long as a unit of the eBPF verifier's.
const UNIT_OPS: u64 = 1;

/// A module's validation under way, in slices (the server answers others between
/// them): wasmparser's validator fed the module a section — and inside the code, a few
/// operators — at a time. What it refuses wasmi would (the same parser and features);
/// a module it passes wasmi takes without validating again (`vouch`). Besides, it
/// refuses what would make the rest of the load long: a start function, a large section
/// other than code or data, many data segments, and a large `graft_input` or
/// `graft_state` (the load calls them). Its memory is in the arena it runs in.
pub struct Validate {
    parser: wasmparser::Parser,
    validator: wasmparser::Validator,
    /// Where the next payload starts.
    at: usize,
    /// The function whose body is under way: its validator, where its next operator
    /// starts, where its body ends.
    func: Option<(wasmparser::FuncValidator<wasmparser::ValidatorResources>, usize, usize)>,
    allocs: Option<wasmparser::FuncValidatorAllocations>,
    /// Functions defined so far (the code section's entries), and the two queries' indices.
    defined: u32,
    queries: [Option<u32>; 2],
    /// Some operator writes memory (`writes_memory`, found on the way).
    writes: bool,
    done: bool,
}

fn refuse(why: &'static str) -> Option<Result<(), LoadError>> {
    Some(Err(LoadError::Refused(why)))
}

impl Validate {
    pub fn new() -> Validate {
        Validate {
            parser: wasmparser::Parser::new(0),
            validator: wasmparser::Validator::new_with_features(features()),
            at: 0,
            func: None,
            allocs: Some(Default::default()),
            defined: 0,
            queries: [None, None],
            writes: false,
            done: false,
        }
    }

    /// Go on for about `budget` units of work over `wasm` (the same bytes each time):
    /// `None` while there is more, else whether the module is valid.
    pub fn run(&mut self, wasm: &[u8], budget: u64) -> Option<Result<(), LoadError>> {
        use wasmparser::{BinaryReader, Chunk, Payload, ValidPayload};
        let invalid = "not a valid WebAssembly module";
        if self.done {
            return refuse("the validation is over");
        }
        let mut left = budget.max(1).saturating_mul(UNIT_OPS);
        loop {
            if let Some((fv, pos, end)) = &mut self.func {
                let Some(body) = wasm.get(*pos..*end) else { return refuse(invalid) };
                let mut r = BinaryReader::new(body, *pos);
                r.set_features(features());
                while !r.eof() {
                    if left == 0 {
                        *pos = r.original_position();
                        return None;
                    }
                    left -= 1;
                    let at = r.original_position();
                    let ok = r.read_operator().map_err(drop).and_then(|op| {
                        self.writes |= stores(&op);
                        fv.op(at, &op).map_err(drop)
                    });
                    if ok.is_err() {
                        self.done = true;
                        return refuse(invalid);
                    }
                }
                let end = *end;
                let Some((fv, ..)) = self.func.take() else { return refuse(invalid) };
                let mut fv = fv;
                if fv.finish(end).is_err() {
                    self.done = true;
                    return refuse(invalid);
                }
                self.allocs = Some(fv.into_allocations());
                continue;
            }
            if left == 0 {
                return None;
            }
            let Some(rest) = wasm.get(self.at..) else { return refuse(invalid) };
            let chunk = self.parser.parse(rest, true);
            let Ok(Chunk::Parsed { consumed, payload }) = chunk else {
                self.done = true;
                return refuse(invalid);
            };
            self.at += consumed;
            left = left.saturating_sub(1 + (consumed / 64) as u64);
            match &payload {
                Payload::StartSection { .. } => {
                    self.done = true;
                    return refuse("the module has a start function (a graft may have none)");
                }
                Payload::DataSection(d) if d.count() > MAX_DATA_SEGMENTS => {
                    self.done = true;
                    return refuse("the module has more data segments than a graft may");
                }
                Payload::ExportSection(e) => {
                    for x in e.clone().into_iter().flatten() {
                        let k = ["graft_input", "graft_state"].iter().position(|n| *n == x.name);
                        if let (Some(k), wasmparser::ExternalKind::Func) = (k, x.kind) {
                            self.queries[k] = Some(x.index);
                        }
                    }
                }
                Payload::CodeSectionEntry(body) => {
                    let big = body.range().len() > MAX_QUERY_BODY;
                    if big && self.queries.contains(&Some(self.defined)) {
                        self.done = true;
                        return refuse("graft_input or graft_state is longer than a constant's answer");
                    }
                    self.defined += 1;
                }
                _ => {}
            }
            let big = match payload.as_section() {
                // Custom (0), code (10) and data (11) sections may be long: their bytes
                // cost the validator nothing, their functions and segments are bounded.
                Some((id, range)) => ![0, 10, 11].contains(&id) && range.len() > MAX_SECTION,
                None => false,
            };
            if big {
                self.done = true;
                return refuse("the module has a section larger than a graft's may be");
            }
            match self.validator.payload(&payload) {
                Ok(ValidPayload::Ok) => {}
                Ok(ValidPayload::Func(f, body)) => {
                    let allocs = self.allocs.take().unwrap_or_default();
                    let mut fv = f.into_validator(allocs);
                    let mut r = body.get_binary_reader();
                    if fv.read_locals(&mut r).is_err() {
                        self.done = true;
                        return refuse(invalid);
                    }
                    self.func = Some((fv, r.original_position(), body.range().end));
                }
                Ok(ValidPayload::End(_)) => {
                    self.done = true;
                    return Some(Ok(()));
                }
                Ok(ValidPayload::Parser(_)) | Err(_) => {
                    self.done = true;
                    return refuse(invalid);
                }
            }
        }
    }
}

impl Validate {
    /// Vouch for `wasm`, which passed (`crate::vouch`; and whether its code writes memory).
    pub fn vouch(&self, wasm: &[u8]) {
        crate::vouch::vouch(Some((crate::vouch::Kind::Validated, wasm, &[self.writes as usize])));
    }

    fn vouched(wasm: &[u8], writes: bool) -> bool {
        crate::vouch::vouched(crate::vouch::Kind::Validated, wasm, &[writes as usize])
    }
}

impl Default for Validate {
    fn default() -> Validate {
        Validate::new()
    }
}

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
    #[allow(unsafe_code)]
    pub fn load(f: &GraftFile<'_>, limits: Limits) -> Result<Wasm, LoadError> {
        let mut c = Config::default();
        c.consume_fuel(true);
        // A graft recursing without end traps instead of growing the server's heap.
        c.set_max_recursion_depth(256)
            .set_min_stack_height(1024)
            .set_max_stack_height(256 * 1024)
            .set_max_cached_stacks(1);
        let engine = WEngine::new(&c);
        // Validated in slices by the table (`Validate`), which says too whether its code
        // writes memory: nothing is read through again.
        let vouched = [false, true].into_iter().find(|w| Validate::vouched(f.code, *w));
        let module = if vouched.is_some() {
            // SAFETY: the table has just validated these very bytes (`Validate`: wasmi's
            // parser, with wasmi's features) and changed nothing in them since.
            unsafe { Module::new_unchecked(&engine, f.code) }
        } else {
            Module::new(&engine, f.code)
        }
        .map_err(|_| LoadError::Refused("not a valid WebAssembly module"))?;
        if module.imports().len() != 0 {
            return Err(LoadError::Refused("the module imports something (a graft may import nothing)"));
        }
        let store = Store::new(&engine, limiter(limits));
        let mut w = Wasm::instantiate(module, store, f.state_len, f.point.max_input(), limits)?;
        w.writes = vouched.unwrap_or_else(|| writes_memory(f.code));
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
