//! Supervision (`manifest::restart`): `crashloop` (a program that faults as it starts,
//! marked `restart`) is restarted with a growing back-off and left down once it has died
//! 10 times within 30 s — reported in `ps` as `down` and staying down — while `echo`
//! answers every call the whole time. A manual start (`run`: SPAWN by a program that
//! may operate the machine) runs it again as root's own, its count cleared, and it is
//! left down again after another 10 deaths. Before the budget, root restarted such a
//! program for ever, thousands of times, with no pause between. Left down is not for
//! ever: `ps` says when root tries it again, and after its `retry_after` (15 s here)
//! root does, once (it dies again, and its deaths of the last 30 s leave it down again).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use echo_api as echo;
use rt::ipc::{self, Msg, FOREVER};
use rt::{env, println, sys};
use tests::Checks;

rt::entry!(main);

const NAME: &str = "crashloop";

/// `crashloop`'s line in `ps`: (its id if an instance runs, its state, its restarts).
fn state() -> Option<(Option<u64>, String, u64)> {
    env::ps().ok()?.lines().skip(1).find_map(|l| {
        let w: alloc::vec::Vec<&str> = l.split_whitespace().collect();
        (w.get(1) == Some(&NAME))
            .then(|| Some((w[0].parse().ok(), String::from(*w.get(2)?), w.get(7)?.parse().ok()?)))?
    })
}

/// Call echo (and look at `crashloop`) until it is left down or `limit_us` passes:
/// returns (the time it took, calls made, calls failed, the longest call in µs, its
/// restarts seen 1 s in).
fn watch(e: u64, limit_us: u64) -> (Option<u64>, u64, u64, u64, Option<u64>) {
    let t0 = sys::now_us();
    let (mut calls, mut failed, mut longest, mut at_1s) = (0u64, 0u64, 0u64, None);
    let mut next_look = t0;
    loop {
        let now = sys::now_us();
        if now - t0 > limit_us {
            return (None, calls, failed, longest, at_1s);
        }
        let mut m = Msg::new(echo::ECHO, &[calls]);
        let r = ipc::call(e, &mut m, FOREVER);
        let took = sys::now_us() - now;
        longest = longest.max(took);
        calls += 1;
        if r.is_err() || m.word(1) != calls - 1 {
            failed += 1;
        }
        if now >= next_look {
            next_look = now + 20_000;
            let s = state();
            if at_1s.is_none() && now - t0 >= 1_000_000 {
                at_1s = s.as_ref().map(|s| s.2);
            }
            if s.as_ref().is_some_and(|s| s.1 == "down") {
                return (Some(now - t0), calls, failed, longest, at_1s);
            }
        }
        sys::sleep_us(2_000);
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let e = rt::alloc_slot();
    c.eq(env::lookup("echo", e), Ok(()), "find echo");

    let (took, calls, failed, longest, at_1s) = watch(e, 40_000_000);
    println!(
        "supervise_test: left down after {:?} ms; echo: {} calls, {} failed, longest {} µs; restarts 1 s in: {:?}",
        took.map(|t| t / 1000),
        calls,
        failed,
        longest,
        at_1s
    );
    c.check(took.is_some(), "a program that always dies is left down within 40 s");
    // The back-off between restarts adds up to 7.15 s before the tenth death; the first
    // deaths came before this test began.
    c.check(took.is_some_and(|t| t >= 5_000_000), &format!("after its back-off, not at once ({took:?} µs)"));
    c.check(
        at_1s.is_some_and(|n| n <= 6),
        &format!("restarts are spaced out: {at_1s:?} in the first second (0, 50, 100, 200, 400 ms waits)"),
    );
    let s = state();
    c.eq(
        s.as_ref().map(|s| (s.0, s.1.as_str(), s.2)),
        Some((None, "down", 9)),
        "ps shows it down, with no instance, after 9 restarts (10 deaths)",
    );
    c.eq(failed, 0, "echo answered every call meanwhile");
    c.check(
        calls >= 100 && longest < 1_000_000,
        &format!("echo kept answering ({calls} calls, the longest {longest} µs)"),
    );
    sys::sleep_us(3_000_000);
    c.eq(state().map(|s| (s.1, s.2)), Some((String::from("down"), 9)), "it stays down (no more restarts 3 s later)");
    c.eq(tests::id_of(NAME), None, "no instance runs");

    // Started again by hand: as root's own, its deaths counted afresh.
    let pair = rt::alloc_slot_pair();
    let id = env::spawn(NAME, pair);
    c.check(id.is_ok(), &format!("run {NAME} starts it again ({id:?})"));
    c.check(
        tests::wait_until(300, || state().is_some_and(|s| s.2 >= 11)),
        "root restarts it again when it dies (its budget was cleared)",
    );
    let (took, calls, failed, _, _) = watch(e, 40_000_000);
    c.check(took.is_some(), "and leaves it down again after another 10 deaths");
    c.eq(state().map(|s| (s.1, s.2)), Some((String::from("down"), 19)), "19 restarts in all");
    c.check(calls > 0 && failed == 0, "echo answered every call meanwhile");

    // Tried again after its `retry_after` (15 s), and `ps` says when.
    let line = env::ps().ok().and_then(|t| t.lines().find(|l| l.contains(NAME)).map(String::from));
    c.check(
        line.as_ref().is_some_and(|l| l.contains("retry in")),
        &format!("ps says when it is tried again ({line:?})"),
    );
    let t0 = sys::now_us();
    c.check(
        tests::wait_until(3000, || state().is_some_and(|s| s.2 >= 20)),
        "root tries it again after its retry_after",
    );
    let waited = (sys::now_us() - t0) / 1000;
    println!("supervise_test: tried again {waited} ms after ps showed it down");
    c.check((10_000..25_000).contains(&waited), &format!("after about 15 s ({waited} ms)"));
    c.check(
        tests::wait_until(300, || state().is_some_and(|s| s.1 == "down")),
        "it died at once again: left down again after that one try",
    );
    c.eq(state().map(|s| s.2), Some(20), "one restart more, not ten");
    c.finish("supervise_test")
}
