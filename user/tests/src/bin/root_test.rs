//! Root gives back what it takes: 500 program starts (SPAWN, as the shell's `run`
//! does) and 500 kills of a server the manifest restarts leave root's free capability
//! slots where they began (each start kept two slots and each temporary capability one
//! more once, and a few hundred starts exhausted root), and its program records no
//! more than they were (it kept one per program ever started: a million `run`s would
//! have filled its heap). The ids it gives are new each time.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use rt::env;
use rt::println;
use tests::Checks;

rt::entry!(main);

const STARTS: u32 = 500;
const RESTARTS: u32 = 500;
/// Programs in the chain: `chain 50` down to `chain 0`.
const CHAIN: u64 = 51;

/// Root's free slots and records once every program started here has ended (they
/// end on their own or are being restarted; give root a moment).
fn settled(free_before: u64, records_before: u64) -> (u64, u64) {
    let mut now = (0, 0);
    tests::wait_until(200, || {
        now = env::root_slots().map(|s| (s.0, s.1)).unwrap_or((0, u64::MAX));
        now.0 == free_before && now.1 <= records_before
    });
    now
}

fn main() -> i32 {
    let mut c = Checks::new();
    let Ok((before, records, started_before)) = env::root_slots() else {
        c.check(false, "root answers SLOTS");
        return c.finish("root_test");
    };
    println!("root_test: root has {} free slots and {} program records", before, records);
    let mut ids = alloc::vec::Vec::new();
    let pair = rt::alloc_slot_pair();
    let mut started = 0;
    for _ in 0..STARTS {
        if let Ok(id) = env::spawn("root_test_child", pair) {
            started += 1;
            ids.push(id);
            // One at a time, as a person's `run`s come: wait until it has ended (its
            // task capability dies with the task).
            for _ in 0..1000 {
                if rt::sys::task_info(pair + 1).is_err() {
                    break;
                }
                rt::sys::sleep_us(1000);
            }
        }
        // Our own copies of its thread and task capabilities go; the slots are reused.
        let _ = rt::sys::cap_delete(pair);
        let _ = rt::sys::cap_delete(pair + 1);
    }
    c.eq(started, STARTS, "every start succeeded");
    let mut restarted = 0;
    for _ in 0..RESTARTS {
        let Some(id) = tests::id_of("echo") else { break };
        if env::kill(id).is_ok() {
            restarted += 1;
        }
    }
    c.eq(restarted, RESTARTS, "echo killed (and restarted by root) every time");
    c.check(tests::id_of("echo").is_some(), "echo runs after the last restart");
    let (after, records_after) = settled(before, records);
    c.eq(after, before, "root's free slots are where they began");
    c.check(
        records_after <= records,
        &alloc::format!("root keeps no more program records than before ({records} before, {records_after} after)"),
    );
    let started_after = env::root_slots().map_or(0, |s| s.2);
    c.eq(
        started_after.saturating_sub(started_before),
        1000,
        "1,000 programs were started (500 spawned, 500 restarted)",
    );
    ids.dedup();
    c.check(ids.len() == 500 && ids.windows(2).all(|w| w[0] < w[1]), "each start got an id of its own");
    // A chain of 51 programs, each starting the next and ending; the last waits. Root
    // keeps the live one's record, not its 50 ended ancestors' (it kept them all once,
    // and each SPAWN walked them).
    let chain_from = env::root_slots().map_or(0, |s| s.2);
    c.check(env::spawn("root_test_child chain 50", pair).is_ok(), "a chain of programs starts");
    let _ = rt::sys::cap_delete(pair);
    let _ = rt::sys::cap_delete(pair + 1);
    let mut now = (0, 0);
    tests::wait_until(1000, || {
        now = env::root_slots().map_or((0, u64::MAX), |s| (s.2.saturating_sub(chain_from), s.1));
        now.0 == CHAIN && now.1 <= records + 1
    });
    c.eq(now.0, CHAIN, "51 programs of the chain were started");
    c.check(
        now.1 <= records + 1,
        &alloc::format!(
            "while the chain's last program runs, root keeps its record alone ({} before, {})",
            records,
            now.1
        ),
    );
    let last = tests::id_of("root_test_child");
    c.check(last.is_some_and(|id| env::kill(id).is_ok()), "the chain's last program is killed");
    c.finish("root_test")
}
