//! Root gives back what it takes: 500 program starts (SPAWN, as the shell's `run`
//! does) and 500 kills of a server the manifest restarts leave root's free capability
//! slots where they began. Before the fix each start kept two slots and each temporary
//! capability one more, and a few hundred starts exhausted root.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use rt::env;
use rt::println;
use tests::Checks;

rt::entry!(main);

const STARTS: u32 = 500;
const RESTARTS: u32 = 500;

/// Root's free slots once every program started here has ended (they end on their own
/// or are being restarted; give root a moment).
fn settled(want: u64) -> u64 {
    let mut free = 0;
    tests::wait_until(200, || {
        free = env::root_slots().map(|s| s.0).unwrap_or(0);
        free == want
    });
    free
}

fn main() -> i32 {
    let mut c = Checks::new();
    let Ok((before, records)) = env::root_slots() else {
        c.check(false, "root answers SLOTS");
        return c.finish("root_test");
    };
    println!("root_test: root has {} free slots and {} program records", before, records);
    let pair = rt::alloc_slot_pair();
    let mut started = 0;
    for _ in 0..STARTS {
        if env::spawn("root_test_child", pair).is_ok() {
            started += 1;
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
    let after = settled(before);
    c.eq(after, before, "root's free slots are where they began");
    c.finish("root_test")
}
