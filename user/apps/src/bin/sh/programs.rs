//! Programs: `run` (SPAWN through root, waiting until the program ends or Ctrl-C, in
//! one pair of capability slots kept for it) and `kill`, with a program's id and name
//! found in root's list (`ps`).

use crate::help::usage;
use crate::line::Input;
use crate::words;
use abi::Error;
use alloc::string::String;
use rt::{env, println};

/// The pair of capability slots SPAWN fills (the thread, then the task), taken once and
/// emptied after each program: a slot pair per `run` ran the shell out of slots after
/// about 500.
static SPAWN_PAIR: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Start a program; with `wait`, until it has ended (root removes its task) or Ctrl-C.
pub(crate) fn spawn(input: &mut Input, cmd: &str, wait: bool) {
    use core::sync::atomic::Ordering;
    let slot = match SPAWN_PAIR.load(Ordering::Relaxed) {
        0 => {
            let s = rt::alloc_slot_pair();
            SPAWN_PAIR.store(s, Ordering::Relaxed);
            s
        }
        s => s,
    };
    // A WebAssembly program runs with the files tree from `/` preopened: compiled ahead
    // of time when the boot image holds the program compiled from this very file
    // (`compiled`), else under the WASI runner, wasmi (`run wasi OPTIONS PROGRAM.wasm …`
    // chooses the runner and the options).
    let wasm = cmd.split(' ').next().filter(|p| p.ends_with(".wasm"));
    let aot = wasm.and_then(compiled).map(|name| alloc::format!("{name} --dir=/ {cmd}"));
    if aot.as_ref().is_none_or(|aot| !spawn_in(input, aot, wait, slot, true)) {
        let cmd = if wasm.is_some() { alloc::format!("wasi --dir=/ {cmd}") } else { cmd.into() };
        spawn_in(input, &cmd, wait, slot, false);
    }
    // The shell keeps nothing of the program (it is named by its id from here on).
    let _ = rt::sys::cap_delete(slot);
    let _ = rt::sys::cap_delete(slot + 1);
}

/// The boot image's name for the program compiled ahead of time from WebAssembly file
/// `path` (`wasip1::aot_name`: the file's stem and the hash of its bytes, read here in
/// 64 KiB pieces); `None` when the file cannot be read. Whether the boot image holds it
/// is SPAWN's to say.
fn compiled(path: &str) -> Option<String> {
    use files_api::client as f;
    let srv = rt::alloc_slot();
    let name = env::lookup("files", srv).ok().and_then(|_| {
        let (h, size) = f::open(srv, path, false).ok()?;
        let mut hash = wasip1::ModuleHash::default();
        let mut buf = alloc::vec![0u8; 64 << 10];
        let mut off = 0u64;
        let whole = loop {
            match f::read_into(srv, h, off, &mut buf) {
                Ok(0) => break off == size,
                Ok(n) => {
                    hash.update(&buf[..n]);
                    off += n as u64;
                }
                Err(_) => break false,
            }
        };
        let _ = f::close(srv, h);
        whole.then(|| wasip1::aot_name(path, hash))
    });
    rt::free_slot(srv);
    name
}

/// Start `cmd` (and wait for it); with `quiet_missing`, a program the boot image does not
/// hold is not said, and answered `false` (the caller tries another).
fn spawn_in(input: &mut Input, cmd: &str, wait: bool, slot: u64, quiet_missing: bool) -> bool {
    // SPAWN fills `slot` (the thread) and `slot + 1` (the task).
    let task = slot + 1;
    let name = cmd.split(' ').next().unwrap_or(cmd);
    match rt::env::spawn(cmd, slot) {
        Ok(id) if !wait => println!("started {} as program {}", cmd, id),
        Ok(id) => {
            // (A program this shell may not control, or a server root started again,
            // gives no task capability: then there is nothing to wait for.)
            while rt::sys::cap_info(task).is_ok() {
                if input.sleep(10_000) {
                    println!("run: {} runs on as program {} (`kill {}` ends it)", name, id, id);
                    return true;
                }
            }
        }
        Err(Error::NotFound) if quiet_missing => return false,
        Err(Error::NotFound) => {
            println!("run: there is no program `{}` in the boot image (`ps` shows those running)", name)
        }
        Err(Error::NoRights) => {
            println!("run: this shell may start `{}` only as the manifest says (no other arguments or pager)", name)
        }
        Err(Error::NoMemory) => {
            println!("run: `{}` may not start: not enough memory or programs left (root's log says which)", name)
        }
        Err(e) => println!("run: cannot start `{}`: {}", name, words(e)),
    }
    true
}

/// `kill ID|NAME`.
pub(crate) fn kill(arg: &str) {
    if arg.is_empty() || arg.contains(' ') {
        return usage("kill");
    }
    let named = arg.parse::<u64>().is_err();
    let Some(id) = arg.parse::<u64>().ok().or_else(|| program_id(arg)) else {
        return println!("kill: no program called `{}` is running (`ps` lists them)", arg);
    };
    match env::kill(id) {
        Ok(()) => println!("killed {}", id),
        Err(Error::InvalidArg) => match program_name(id) {
            Some(n) if n.starts_with("mem") => {
                println!("kill: program {} is {}, a memory server: it pages the others and is not ended", id, n)
            }
            _ if named => println!("kill: `{}` has ended already", arg),
            _ => println!("kill: no program {} is running (`ps` lists them)", id),
        },
        Err(Error::NoRights) => {
            println!("kill: this shell may not end program {} (its manifest entry lacks `machine`)", id)
        }
        Err(e) => println!("kill: program {}: {}", id, words(e)),
    }
}

/// The id of the first running program called `name` (from root's program list).
fn program_id(name: &str) -> Option<u64> {
    let ps = env::ps().ok()?;
    ps.lines().skip(1).find_map(|l| {
        let mut w = l.split_whitespace();
        let id = w.next()?.parse().ok()?;
        (w.next()? == name).then_some(id)
    })
}

/// The name of program `id` in root's program list.
fn program_name(id: u64) -> Option<String> {
    let ps = env::ps().ok()?;
    ps.lines().skip(1).find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()?.parse::<u64>().ok()? == id).then(|| String::from(w.next().unwrap_or("")))
    })
}
