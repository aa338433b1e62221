//! SPAWN gives no authority the spawner lacks. An unprivileged
//! program spawns every entry of its manifest: it controls the new task only when the
//! entry grants nothing it does not have itself (ports, interrupt lines, servers,
//! principal, priority); otherwise it gets a task capability without rights (enough to
//! see the program end), cannot plant a thread there or give it capabilities, and
//! cannot change its arguments or memory server. It may end what it started, but not
//! other programs, and may not halt the machine.
//!
//! `spawn_test child` is what the entries run: it waits to be ended.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::{cap, rights, Error};
use rt::{env, sys};
use tests::Checks;

rt::entry!(main);

/// Every entry of `system/scenarios/spawn.toml`, and whether this program (caps
/// ["echo"], principal 0, priority 100) may control it.
const ENTRIES: [(&str, bool); 10] = [
    ("spawn_test", true),
    ("echo", true),
    ("sp_plain", true),
    ("sp_echo", true),
    ("sp_io", false),
    ("sp_irq", false),
    ("sp_sigma0", false),
    ("sp_machine", false),
    ("sp_principal", false),
    ("sp_prio", false),
];

fn main() -> i32 {
    if rt::args().split(' ').nth(1) == Some("child") {
        loop {
            sys::sleep_us(1_000_000);
        }
    }
    let mut c = Checks::new();
    for (name, control) in ENTRIES {
        let pair = rt::alloc_slot_pair();
        // The sp_ entries run `spawn_test child` as the manifest says; this program is
        // given that argument (its own entry: arguments are the spawner's to choose).
        let cmd = if name == "spawn_test" { "spawn_test child" } else { name };
        let Ok(id) = env::spawn(cmd, pair) else {
            c.check(false, name);
            continue;
        };
        let want = if control { rights::CONTROL } else { 0 };
        c.eq(sys::cap_info(pair + 1).map(|i| (i.0, i.1)), Ok((cap::TASK, want)), name);
        if !control {
            let t = rt::alloc_slot();
            c.eq(sys::thread_create(pair + 1, t, 0x7e00_0000_0000, 1), Err(Error::NoRights), "no thread planted in it");
            rt::free_slot(t);
            c.eq(sys::cap_give(pair + 1, pair, 40, rights::SEND), Err(Error::NoRights), "no capability given to it");
            let p2 = rt::alloc_slot_pair();
            c.eq(
                env::spawn(&alloc::format!("{} other args", name), p2),
                Err(Error::NoRights),
                "its arguments are the manifest's",
            );
            c.eq(
                env::spawn(&alloc::format!("pager=mem1 {}", name), p2),
                Err(Error::NoRights),
                "so is its memory server",
            );
        }
        c.eq(env::kill(id), Ok(()), "the spawner may end what it started");
        c.check(tests::wait_until(200, || sys::cap_info(pair + 1).is_err()), "and sees it end");
        let _ = sys::cap_delete(pair);
    }
    // Programs it did not start, and the machine, are not its to end.
    let echo = env::ps().ok().and_then(|ps| {
        ps.lines().skip(1).find_map(|l| {
            let mut w = l.split_whitespace();
            let id: u64 = w.next()?.parse().ok()?;
            (w.next()? == "echo").then_some(id)
        })
    });
    c.check(echo.is_some(), "echo runs (started by root)");
    c.eq(env::kill(echo.unwrap_or(1)), Err(Error::NoRights), "ending a program root started: refused");
    c.eq(env::halt(), Err(Error::NoRights), "halting the machine: refused");
    c.finish("spawn_test")
}
