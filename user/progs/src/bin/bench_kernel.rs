//! Measures the kernel's basic costs in rdtsc ticks (guest instructions under
//! `-icount shift=0`, guest cycles under plain TCG): the null system call, an IPC
//! call+reply round trip with an 8-byte message between two tasks and between two
//! threads of one task, and a yield between two threads. Prints
//! `BENCH <metric> median=… min=… max=… samples=… unit=ticks/op`.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::Tag;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use progs::spawn;
use rt::ipc::{self, Msg};
use rt::{println, sys, thread};

rt::entry!(main);

const BATCHES: usize = 15;
const PER_BATCH: u64 = 1000;

fn measure(name: &str, mut op: impl FnMut()) -> u64 {
    for _ in 0..100 {
        op(); // warm up
    }
    let mut per: Vec<u64> = (0..BATCHES)
        .map(|_| {
            let t0 = sys::rdtsc_ordered();
            for _ in 0..PER_BATCH {
                op();
            }
            (sys::rdtsc_ordered() - t0) / PER_BATCH
        })
        .collect();
    per.sort_unstable();
    let med = per[per.len() / 2];
    println!(
        "BENCH {} median={} min={} max={} samples={} unit=ticks/op",
        name,
        med,
        per[0],
        per[per.len() - 1],
        BATCHES
    );
    med
}

fn local_server(_: u64) {
    let mut m = Msg::empty();
    let _ = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    let (mut tag, mut w) = (m.mr[0], m.mr[1]);
    loop {
        let (e, _, t, w1) = ipc::reply_wait_regs(tag, w);
        if e == 0 {
            tag = t;
            w = w1;
        }
    }
}

static YIELDING: AtomicU64 = AtomicU64::new(1);

fn yielder(_: u64) {
    while YIELDING.load(Ordering::Relaxed) != 0 {
        sys::yield_now();
    }
}

fn main() -> i32 {
    let tag = Tag::new(1, 1).0;
    measure("null_syscall", || {
        sys::null();
    });

    let echo = rt::alloc_slot();
    rt::alloc_slot();
    if spawn("echo fast", echo).is_err() {
        println!("bench: cannot start echo");
        return 1;
    }
    let mut bad = 0u64;
    measure("ipc_rtt_8b_cross", || {
        let (e, _, w) = ipc::call_regs(echo, tag, 8);
        bad += (e != 0 || w != 8) as u64;
    });

    let srv = thread::spawn(local_server, 0, thread::my_priority()).unwrap();
    measure("ipc_rtt_8b_same", || {
        let (e, _, w) = ipc::call_regs(srv.slot, tag, 8);
        bad += (e != 0 || w != 8) as u64;
    });

    let _ = thread::spawn(yielder, 0, thread::my_priority()).unwrap();
    // Each yield of ours switches to the yielder and back: two switches.
    let per_pair = measure("yield_pair", sys::yield_now);
    println!("BENCH thread_switch median={} unit=ticks/op (half a yield pair)", per_pair / 2);
    YIELDING.store(0, Ordering::Relaxed);
    if bad != 0 {
        println!("bench: {} round trips returned wrong values", bad);
        return 1;
    }
    0
}
