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
/// parser cannot be stopped and resumed), so what it may be bounds that time
/// (docs/grafts.md, "A script's compile"): at most `MAX_SOURCE` bytes and `MAX_TOKENS`
/// tokens as `tokens` counts them, compiled without rhai's optimizer (whose passes over
/// a block's statements are quadratic: 2,000 empty blocks `{}` took 15 ms on the host,
/// some 300 ms in a server).
pub const MAX_SOURCE: usize = 4096;
/// The most tokens a script may have (`tokens`). rhai's parse costs about 90 ns a token
/// on the host at worst (`!x;` repeated; 85 µs for the MD5 example's 955), plus 45 µs
/// for the engine: under 3 ms of a server's thread under TCG (`graft_loads`).
pub const MAX_TOKENS: usize = 1024;

/// A script's tokens, counted so that rhai's are never more: every run of ASCII
/// letters, digits and `_` is one, every other byte that is not ASCII whitespace is one
/// (an operator of two characters counts two; a string literal or a comment counts its
/// words and punctuation as if they were code: nothing hides tokens in them).
pub fn tokens(src: &str) -> usize {
    let b = src.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        n += 1;
        if word(b[i]) {
            while i < b.len() && word(b[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    n
}

impl Script {
    pub fn load(f: &GraftFile<'_>, limits: Limits) -> Result<Script, LoadError> {
        if f.code.len() > MAX_SOURCE {
            return Err(LoadError::Limit("script: longer than 4 KiB (a load compiles it in one go)"));
        }
        let src = core::str::from_utf8(f.code).map_err(|_| LoadError::Refused("script: not UTF-8"))?;
        if tokens(src) > MAX_TOKENS {
            return Err(LoadError::Limit(
                "script: more than 1,024 tokens (a load compiles it in one go; comments count)",
            ));
        }
        let mut engine = REngine::new();
        engine.set_optimization_level(rhai::OptimizationLevel::None);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Tech;
    use crate::point::Point;
    use alloc::string::String;

    fn load(src: &str) -> Result<Script, LoadError> {
        let f = GraftFile {
            point: Point::Evict,
            tech: Tech::Script,
            state_len: 8,
            name: "s",
            code: src.as_bytes(),
            sig: &[],
        };
        Script::load(&f, Limits::default())
    }

    fn repeat(unit: &str, n: usize) -> String {
        let mut s = String::from("fn graft(input) { let x = 0; ");
        for _ in 0..n {
            s.push_str(unit);
        }
        s.push_str("0 }");
        s
    }

    /// The shipped scripts fit (the MD5 example, the longest, has 955 tokens).
    #[test]
    fn the_shipped_scripts_fit() {
        for (name, src) in [
            ("md5", include_str!("../../../graft-examples/rhai/md5.rhai")),
            ("ldisk", include_str!("../../../graft-examples/rhai/ldisk.rhai")),
            ("hotlist", include_str!("../../../graft-examples/rhai/hotlist.rhai")),
        ] {
            assert!(tokens(src) <= MAX_TOKENS, "{name}: {} tokens", tokens(src));
            assert!(load(src).is_ok(), "{name}");
        }
        assert_eq!(tokens(include_str!("../../../graft-examples/rhai/md5.rhai")), 955);
    }

    /// What costs rhai's parser the most a byte — a token a byte or two (`!x;`, `{}`) —
    /// is refused past `MAX_TOKENS` however few bytes it is, with a message that says
    /// why; at the bound it loads.
    #[test]
    fn scripts_past_the_token_bound_are_refused() {
        let head = tokens(&repeat("", 0));
        for unit in ["!x;", "{}", "x;", ";"] {
            let fit = (MAX_TOKENS - head) / tokens(unit);
            assert!(load(&repeat(unit, fit)).is_ok(), "{unit} x {fit}");
            let over = repeat(unit, fit + 1);
            assert!(over.len() < MAX_SOURCE, "{unit}: within the byte bound");
            match load(&over) {
                Err(LoadError::Limit(m)) => assert!(m.contains("1,024 tokens"), "{m}"),
                Err(e) => panic!("{unit}: {e:?}"),
                Ok(_) => panic!("{unit}: loaded past the bound"),
            }
        }
    }

    /// A string literal, an interpolated string or a comment hides no tokens from the
    /// count: each counts its words and punctuation as code would.
    #[test]
    fn nothing_hides_tokens() {
        assert_eq!(tokens("x;x;x;"), 6);
        assert_eq!(tokens("\"x;x;x;\""), 8);
        assert_eq!(tokens("`${x;x;x;}`"), 11);
        assert_eq!(tokens("// x;x;x;\n"), 8);
        assert_eq!(tokens("/* x;x;x; */"), 10);
        assert_eq!(tokens("abc_12 0xff"), 2);
        assert_eq!(tokens("é"), 2, "every byte past ASCII counts");
    }
}
