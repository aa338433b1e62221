//! `wasi [OPTIONS] PROGRAM.wasm [ARGS…]`: run a WASI preview-1 program (a `.wasm` file
//! from the files server) as this Scion program, interpreted by wasmi: every memory
//! access is checked by the engine, and every call's pointers by `wasip1`. The shell's
//! `run PROGRAM.wasm ARGS…` starts it.
//!
//! Options (before the program):
//! - `--dir=SCION[:NAME]`: preopen Scion directory SCION as NAME (default: the same
//!   name); nothing outside the preopened directories is reachable.
//! - `--env=NAME=VALUE`: an environment variable.
//! - `--listen=PORT`: a listening TCP socket on PORT as the next descriptor (as
//!   wasmtime's `--tcplisten`), for `sock_accept`.
//! - `--mem=MIB`: the most linear memory the program may grow to (default 64 MiB).
//! - `--trace`: say each call that answers an errno (its name, arguments and errno).
//!
//! Arguments are split at spaces (no quoting). The exit status is the program's
//! `proc_exit` code; a trap ends it with 134 and a line saying which.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::string::String;
use alloc::vec::Vec;
use rt::println;
use wasi_host::{options, Scion, Unsigned, MAX_MODULE};
use wasip1::ctx::Ctx;
use wasip1::mem::Mem;
use wasmi::{Caller, Config, Engine, Extern, Linker, Module, Store, StoreLimits, StoreLimitsBuilder};

rt::entry!(main);

struct State {
    ctx: Ctx<Scion>,
    limits: StoreLimits,
    /// `--trace`: each call that answers an errno is said on the console.
    trace: bool,
}

fn main() -> i32 {
    let o = match options(rt::args()) {
        Ok(o) => o,
        Err(e) => {
            println!("wasi: {e}\nusage: wasi {}", wasi_host::USAGE);
            return 2;
        }
    };
    let prog = o.args[0].clone();
    let ctx = match wasi_host::start(&o, "wasi") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let files = ctx.host.files();
    let code = match files_api::client::stat(files, &prog) {
        Ok((files_api::Kind::File, size)) if size <= MAX_MODULE => files_api::client::read_all(files, &prog),
        Ok((files_api::Kind::File, size)) => {
            println!("wasi: {prog}: {size} bytes, more than the {MAX_MODULE} a program may have");
            return 2;
        }
        Ok(_) => Err(Error::BadState),
        Err(e) => Err(e),
    };
    let code = match code {
        Ok(c) => c,
        Err(e) => {
            println!("wasi: {prog}: cannot read it: {e:?}");
            return 2;
        }
    };
    let engine = Engine::new(&Config::default());
    let module = match Module::new(&engine, &code) {
        Ok(m) => m,
        Err(e) => {
            // (wasmi's words span lines: one line here.)
            let why: Vec<String> = alloc::format!("{e}").split_whitespace().map(String::from).collect();
            println!("wasi: {prog}: not a valid WebAssembly module: {}", why.join(" "));
            return 2;
        }
    };
    drop(code);
    let limits = StoreLimitsBuilder::new().memory_size(o.mem_mib << 20).instances(1).memories(1).tables(4).build();
    let mut store = Store::new(&engine, State { ctx, limits, trace: o.trace });
    store.limiter(|s| &mut s.limits);
    let mut linker = Linker::<State>::new(&engine);
    if let Err(e) = define(&mut linker) {
        println!("wasi: {e}");
        return 2;
    }
    let instance = match linker.instantiate_and_start(&mut store, &module) {
        Ok(i) => i,
        Err(e) => {
            println!("wasi: {prog}: cannot start it: {e}");
            return 2;
        }
    };
    let Ok(start) = instance.get_typed_func::<(), ()>(&store, "_start") else {
        println!("wasi: {prog}: exports no `_start` (not a WASI command)");
        return 2;
    };
    match start.call(&mut store, ()) {
        Ok(()) => 0,
        Err(e) => match e.i32_exit_status() {
            Some(code) => code,
            None => {
                println!("wasi: {prog}: trapped: {e}");
                134
            }
        },
    }
}

/// Every preview-1 import: each takes the program's memory and hands its arguments to
/// `wasip1` (the list: `wasi_host::preview1_calls!`).
fn define(l: &mut Linker<State>) -> Result<(), String> {
    macro_rules! wasi {
        ($name:literal, |$c:ident, $m:ident $(, $a:ident: $t:ty)*| $body:expr) => {
            l.func_wrap(wasip1::MODULE, $name, |mut caller: Caller<'_, State>, $($a: $t),*| -> i32 {
                let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory) else {
                    return wasip1::errno::FAULT as i32;
                };
                let (data, st) = memory.data_and_store_mut(&mut caller);
                let trace = st.trace;
                let ($c, $m) = (&mut st.ctx, &mut Mem(data));
                $(let $a = Unsigned::u($a);)*
                let e = $body;
                if trace && e != 0 {
                    wasi_host::trace($name, &[$($a as u64),*], e);
                }
                e as i32
            })
            .map_err(|e| alloc::format!("{}: {e}", $name))?;
        };
    }
    wasi_host::preview1_calls!(wasi);
    l.func_wrap(wasip1::MODULE, "proc_exit", |mut caller: Caller<'_, State>, code: i32| -> Result<(), wasmi::Error> {
        caller.data_mut().ctx.proc_exit(code as u32);
        Err(wasmi::Error::i32_exit(code))
    })
    .map_err(|e| alloc::format!("proc_exit: {e}"))?;
    Ok(())
}
