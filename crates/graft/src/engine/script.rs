//! Script source interpreted by `rhai` (VINO's Tcl). The script defines
//! `fn graft(input)`: `input` is a blob of the point's bytes, `this` the graft's state
//! (a blob of fixed length), the result an integer. Budgets: `max_operations` per
//! call, and limits on strings, arrays, variables, call depth and expression depth,
//! which together bound the memory a script can hold. No modules, no `eval`, no
//! clock, no printing: a script sees only its two blobs.

use alloc::vec;
use alloc::vec::Vec;

use rhai::{CallFnOptions, Dynamic, Engine as REngine, Scope, AST};

use super::{Abort, Engine, Limits};
use crate::format::GraftFile;
use crate::LoadError;

pub struct Script {
    engine: REngine,
    ast: AST,
    state: Vec<u8>,
}

/// The longest script: a load compiles it in one go on the server's thread (rhai's
/// parser cannot be stopped and resumed), so its length bounds that time — about 0.2 ms
/// a KiB on the host, a few ms in a server (the MD5 example is 2.9 KiB).
pub const MAX_SOURCE: usize = 4096;

impl Script {
    pub fn load(f: &GraftFile<'_>, limits: Limits) -> Result<Script, LoadError> {
        if f.code.len() > MAX_SOURCE {
            return Err(LoadError::Limit("script: longer than 4 KiB (a load compiles it in one go)"));
        }
        let src = core::str::from_utf8(f.code).map_err(|_| LoadError::Refused("script: not UTF-8"))?;
        let mut engine = REngine::new();
        let cells = (limits.memory / 64).max(64);
        engine
            .set_max_string_size(cells)
            .set_max_array_size(cells)
            .set_max_map_size(256)
            .set_max_variables(256)
            .set_max_functions(64)
            .set_max_call_levels(32)
            .set_max_expr_depths(64, 32)
            .set_max_operations(1 << 20);
        engine.disable_symbol("eval");
        engine.on_print(|_| {});
        engine.on_debug(|_, _, _| {});
        // rhai's own limits do not count everything a script holds (map keys, values
        // curried into a function pointer): the graft's heap does, and a script over
        // it stops at its next step.
        let over = limits.over;
        engine.on_progress(move |_| over().then_some(Dynamic::UNIT));
        let ast = engine.compile(src).map_err(|_| LoadError::Refused("script: does not compile"))?;
        if !ast.iter_functions().any(|f| f.name == "graft" && f.params.len() == 1) {
            return Err(LoadError::Refused("script: no fn graft(input)"));
        }
        Ok(Script { engine, ast, state: vec![0; f.state_len] })
    }
}

impl Engine for Script {
    fn state(&mut self) -> &mut [u8] {
        &mut self.state
    }

    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort> {
        let len = self.state.len();
        self.engine.set_max_operations(budget.max(1));
        let mut this = Dynamic::from_blob(core::mem::take(&mut self.state));
        let opts = CallFnOptions::new().eval_ast(false).rewind_scope(true).bind_this_ptr(&mut this);
        let r = self.engine.call_fn_with_options::<i64>(
            opts,
            &mut Scope::new(),
            &self.ast,
            "graft",
            (Dynamic::from_blob(input.to_vec()),),
        );
        // Whatever the script did to `this`, the state stays a blob of its length.
        let back = this.into_blob().ok().filter(|b| b.len() == len);
        let ok = back.is_some();
        self.state = back.unwrap_or_else(|| vec![0; len]);
        match r {
            Ok(_) if !ok => Err(Abort::Trap),
            Ok(v) => Ok(v as u64),
            Err(e) => Err(match *e {
                rhai::EvalAltResult::ErrorTooManyOperations(_) => Abort::Budget,
                rhai::EvalAltResult::ErrorTerminated(..) => Abort::Memory,
                rhai::EvalAltResult::ErrorDataTooLarge(..)
                | rhai::EvalAltResult::ErrorTooManyVariables(_)
                | rhai::EvalAltResult::ErrorStackOverflow(_) => Abort::Memory,
                _ => Abort::Trap,
            }),
        }
    }

    fn reset(&mut self) -> Result<(), Abort> {
        Ok(())
    }
}

/// Fill rhai's lazily made statics (its hashing seed, the indexers' hashes) from the
/// server's own heap: a script that indexes a blob, run once.
pub fn warm_up() {
    let e = REngine::new();
    let _ = e.eval::<i64>("let b = blob(2); b[1] = 7; let m = #{a: 1}; m.a + b[1]");
}
