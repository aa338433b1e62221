//! `fuzz_test SEED CALLS [biased]`: lets `fuzz_hostile` throw CALLS random system calls at the
//! kernel, then checks that the kernel survived, freed the hostile program's memory,
//! and still serves a well-behaved pair of programs.
#![no_std]
#![no_main]

use abi::Error;
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, POLL};
use rt::{println, sys};
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let mut args = rt::args().split(' ').skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let calls: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mode = args.next().unwrap_or("raw");
    println!("fuzz: seed {} ({} {} random system calls from 4 hostile threads)", seed, calls, mode);
    let free_before = sys::kernel_info().free_frames;
    let hostile = rt::alloc_slot_pair();
    let hostile_task = hostile + 1;
    let cmd = alloc::format!("fuzz_hostile {} {} {}", seed, calls, mode);
    c.check(spawn(&cmd, hostile).is_ok(), "spawn the hostile program");
    let mut m = Msg::empty();
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 500_000_000));
    c.check(r.is_ok(), "hostile program finished and reported");
    let done = m.word(1);
    println!("fuzz: {} calls made", done);
    c.check(done >= calls, "all random system calls were made");
    if mode == "biased" {
        let ok = m.word(2);
        println!("fuzz: {} of them carried out (no error)", ok);
        c.check(ok * 100 >= done, "at least one biased call in a hundred gets past every check");
    }
    let _ = ipc::reply(&Msg::new(0, &[]));
    // Root destroys it when it exits; its memory must come back.
    let gone = tests::wait_until(500, || sys::cap_info(hostile_task) == Err(Error::InvalidCap));
    c.check(gone, "hostile program removed");
    let free_after = sys::kernel_info().free_frames;
    println!("fuzz: free frames before {} after {}", free_before, free_after);
    c.check(free_after + 64 >= free_before, "no memory lost to the hostile program");

    // A well-behaved pair still works.
    let e = rt::alloc_slot_pair();
    c.check(spawn("echo", e).is_ok(), "spawn echo afterwards");
    let mut ok = true;
    for i in 0..1000u64 {
        let mut m = Msg::new(echo::ECHO, &[i, i * 3]);
        ok &= ipc::call(e, &mut m, FOREVER).is_ok() && m.word(1) == i && m.word(2) == i * 3;
    }
    c.check(ok, "1000 correct call/reply round trips after the fuzzing");
    c.finish("fuzz_test")
}

extern crate alloc;
