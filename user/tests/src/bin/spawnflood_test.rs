//! A spawn flood stops at the spawner's own limit (SPAWN counts against the spawner),
//! and root serves the other principals on.
//!
//! `spawnflood_test` (principal 5, unprivileged, `spawns` = 8 by default): starts
//! `flood_deep`, which starts copies of `flood_child` until root refuses it; then starts
//! `flood_child` itself, 110 times over: every program started below it counts against
//! it, so all of them together stop at 8, and the rest is refused with `NoMemory`. It
//! also makes tasks of its own until the kernel refuses (its quota); then it ends,
//! leaving its programs running.
//! `spawnflood_test victim` (principal 6): once the flood is over, root still answers
//! it: a name, a program of its own started (SPAWN), echo crashed and restarted by root
//! (a manifest program started again), and a task of its own made.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use echo_api as echo;
use rt::ipc::{self, Msg, FOREVER};
use rt::{env, println, sys};
use tests::Checks;

rt::entry!(main);

/// What the flood asks for (the 110 copies).
const ATTEMPTS: u64 = 110;

fn sleep_forever() -> ! {
    loop {
        sys::sleep_us(1_000_000);
    }
}

/// Spawn `name` `ATTEMPTS` times (one slot pair kept for the refused): how many
/// started, and the refusal of the others (None: none refused, or not all alike).
fn flood(name: &str) -> (u64, Option<Error>) {
    let (mut n, mut why, mut refused) = (0, None, 0);
    let mut pair = rt::alloc_slot_pair();
    for _ in 0..ATTEMPTS {
        match env::spawn(name, pair) {
            Ok(_) => {
                n += 1;
                pair = rt::alloc_slot_pair();
            }
            Err(e) => {
                refused += 1;
                if why.is_none_or(|w| w == e) {
                    why = Some(e);
                }
            }
        }
    }
    (n, if refused == ATTEMPTS - n { why } else { None })
}

/// `flood_deep`: floods below itself, tells its spawner how far it got, then sleeps.
fn deep() -> ! {
    let (n, e) = flood("flood_child");
    let mut m = Msg::new(1, &[n, e.map_or(0, |e| e as u64)]);
    let _ = ipc::call(abi::cap::PEER, &mut m, FOREVER);
    sleep_forever()
}

/// How many programs called `name` run (from root's `ps`).
fn running(name: &str) -> usize {
    env::ps().map_or(0, |ps| ps.lines().skip(1).filter(|l| l.split_whitespace().nth(1) == Some(name)).count())
}

fn flooder() -> i32 {
    let mut c = Checks::new();
    let deep = env::spawn("flood_deep", rt::alloc_slot_pair());
    c.check(deep.is_ok(), "a program of its own that floods below it");
    let mut m = Msg::empty();
    let got = ipc::recv(ipc::RECV_ANY, &mut m, ipc::timeouts(ipc::POLL, 10_000_000));
    let (below, why) = (m.word(1), m.word(2));
    let _ = ipc::reply(&Msg::new(0, &[]));
    println!("spawnflood: flood_deep started {} and was refused with {:?}", below, Error::from_code(why));
    c.check(got.is_ok() && why == Error::NoMemory as u64, "the flood below it is refused with NoMemory");
    let (mine, refused) = flood("flood_child");
    println!("spawnflood: of {} more asked for, it started {}; the others: {:?}", ATTEMPTS, mine, refused);
    let total = 1 + below + mine;
    c.eq(total, manifest::DEFAULT_SPAWNS, "all of them together stop at its `spawns`");
    c.eq(refused, Some(Error::NoMemory), "the rest is refused with NoMemory");
    c.eq(running("flood_child") as u64, below + mine, "they run");
    // Tasks of its own: its kernel quota (11 pages each, at least) stops them.
    let mut tasks = 0;
    let why = loop {
        match sys::task_create(rt::alloc_slot(), abi::kquota::TASK_PAGES + abi::kquota::CSPACE_PAGES) {
            Ok(()) => tasks += 1,
            Err(e) => break e,
        }
        if tasks > abi::tables::MAX_TASKS {
            break Error::InvalidArg;
        }
    };
    println!("spawnflood: {} tasks of its own, then {:?}", tasks, why);
    c.eq(why, Error::NoMemory, "its own tasks stop at its kernel quota");
    let (free, _) = sys::kernel_tables();
    c.check(free > abi::tables::ROOT_TASKS as u64, "and leave task slots for root");
    c.finish("spawnflood_test")
}

fn victim() -> i32 {
    let mut c = Checks::new();
    // The flood is over once the flooder has ended and its programs still run.
    let over = tests::wait_until(2000, || running("spawnflood_test") == 0 && running("flood_child") >= 1);
    c.check(over, "the flood is over (its programs run on)");
    let e = rt::alloc_slot();
    c.eq(env::lookup("echo", e), Ok(()), "root answers a name");
    let mut m = Msg::new(echo::ECHO, &[5]);
    c.check(ipc::call(e, &mut m, FOREVER).is_ok() && m.word(1) == 5, "echo answers");
    let pair = rt::alloc_slot_pair();
    let child = env::spawn("victim_child", pair);
    c.check(child.is_ok(), "root starts a program of its own (SPAWN)");
    if let Ok(id) = child {
        c.eq(env::kill(id), Ok(()), "and ends it");
    }
    // echo crashes; root, its supervisor, starts it again.
    let mut m = Msg::new(echo::CRASH, &[]);
    let _ = ipc::call(e, &mut m, FOREVER);
    let e2 = rt::alloc_slot();
    let back = tests::wait_until(300, || {
        env::lookup("echo", e2).is_ok() && {
            let mut m = Msg::new(echo::ECHO, &[6]);
            ipc::call(e2, &mut m, ipc::timeouts(100_000, 100_000)).is_ok() && m.word(1) == 6
        }
    });
    c.check(back, "root restarts a manifest program (echo) and it answers");
    c.eq(sys::task_create(rt::alloc_slot(), 16), Ok(()), "a task of its own");
    c.finish("flood_victim")
}

fn main() -> i32 {
    match rt::args().split(' ').nth(1) {
        Some("child") => sleep_forever(),
        Some("deep") => deep(),
        Some("victim") => victim(),
        _ => flooder(),
    }
}
