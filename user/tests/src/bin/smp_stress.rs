//! Stress on two CPUs: six workers, three per CPU, for three seconds each
//! call four servers (two per CPU: same-CPU calls take the fastpath without the kernel
//! lock, cross-CPU ones the general path and a wake-up), write a page of their own and
//! unmap it (the pager maps it again at the next touch; with another worker of this
//! space on the other CPU, each unmap is a TLB shootdown), and every 64 rounds move
//! themselves to the other CPU; meanwhile this thread moves the servers. Every answer
//! and every byte is checked; at the end the operations are counted and none failed.
#![no_std]
#![no_main]

extern crate alloc;

use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc::{self, Msg};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

const SERVERS: usize = 4;
const WORKERS: usize = 6;
/// How long the workers run (microseconds).
const RUN_US: u64 = 3_000_000;

static SERVER: [AtomicU64; SERVERS] = [const { AtomicU64::new(0) }; SERVERS];
static CALLS: AtomicU64 = AtomicU64::new(0);
static UNMAPS: AtomicU64 = AtomicU64::new(0);
static MOVES: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);
static END: AtomicU64 = AtomicU64::new(0);

fn fail(what: &str, w: u64) {
    if FAILED.fetch_add(1, Ordering::Relaxed) < 10 {
        rt::println!("smp_stress: worker {w}: {what}");
    }
}

fn worker(w: u64) {
    // A page of its own, in memory the pager maps again after each unmap.
    let buf: &'static mut [u8] = alloc::boxed::Box::leak(alloc::vec![0u8; 2 * 4096].into_boxed_slice());
    let page = (buf.as_ptr() as u64 + 4095) & !4095;
    let end = END.load(Ordering::Acquire);
    let mut round = 0u64;
    while sys::now_us() < end {
        for (k, s) in SERVER.iter().enumerate() {
            let v = (w << 40) | (round << 8) | k as u64;
            let mut m = Msg::new(1, &[v]);
            match ipc::call(s.load(Ordering::Relaxed), &mut m, ipc::FOREVER) {
                Ok(()) if m.word(1) == v + 1 => {}
                r => fail(&alloc::format!("call to server {k}: {r:?}, answer {:#x} for {v:#x}", m.word(1)), w),
            }
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        if round.is_multiple_of(4) {
            let v = (w << 32) | round;
            // SAFETY: `page` lies in `buf`, leaked and used by this worker alone; after the
            // unmap the next touch brings it back through the pager.
            unsafe {
                core::ptr::write_volatile(page as *mut u64, v);
                if core::ptr::read_volatile(page as *const u64) != v {
                    fail("the page does not hold what was written", w);
                }
                if let Err(e) = sys::unmap_pages(page, 1) {
                    fail(&alloc::format!("unmap: {e:?}"), w);
                }
                core::ptr::write_volatile(page as *mut u64, !v);
                if core::ptr::read_volatile(page as *const u64) != !v {
                    fail("the page, mapped again, does not hold what was written", w);
                }
            }
            UNMAPS.fetch_add(1, Ordering::Relaxed);
        }
        if round % 64 == 63 {
            let to = 1 - sys::thread_cpu(abi::cap::SELF_THREAD).unwrap_or(0);
            match sys::thread_set_cpu(abi::cap::SELF_THREAD, to) {
                Ok(()) => {
                    MOVES.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => fail(&alloc::format!("move to CPU {to}: {e:?}"), w),
            }
        }
        round += 1;
    }
    DONE.fetch_add(1, Ordering::Release);
}

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(sys::smp_info().cpus, 2, "two CPUs");
    let prio = thread::my_priority();
    let mut servers = alloc::vec::Vec::new();
    for (k, s) in SERVER.iter().enumerate() {
        match thread::spawn(tests::echo_plus_one, 0, prio) {
            Ok(t) => {
                let _ = sys::thread_set_cpu(t.slot, (k % 2) as u64);
                s.store(t.slot, Ordering::Relaxed);
                servers.push(t.slot);
            }
            Err(e) => {
                c.check(false, &alloc::format!("server {k}: {e:?}"));
                return c.finish("smp_stress");
            }
        }
    }
    let before = sys::smp_info();
    END.store(sys::now_us() + RUN_US, Ordering::Release);
    for w in 0..WORKERS {
        // Below this thread, which moves the servers meanwhile.
        match thread::spawn(worker, w as u64, prio - 1) {
            Ok(t) => {
                let _ = sys::thread_set_cpu(t.slot, (w % 2) as u64);
            }
            Err(e) => {
                c.check(false, &alloc::format!("worker {w}: {e:?}"));
                return c.finish("smp_stress");
            }
        }
    }
    let mut server_moves = 0;
    let mut k = 0;
    while DONE.load(Ordering::Acquire) < WORKERS as u64 && sys::now_us() < END.load(Ordering::Relaxed) + 5_000_000 {
        sys::sleep_us(20_000);
        let s = servers[k % SERVERS];
        let to = 1 - sys::thread_cpu(s).unwrap_or(0);
        if sys::thread_set_cpu(s, to).is_ok() {
            server_moves += 1;
        }
        k += 1;
    }
    let after = sys::smp_info();
    let (calls, unmaps, moves) =
        (CALLS.load(Ordering::Relaxed), UNMAPS.load(Ordering::Relaxed), MOVES.load(Ordering::Relaxed));
    rt::println!(
        "smp_stress: {calls} calls ({} without the lock), {unmaps} unmaps ({} shootdowns), {moves} worker moves, {server_moves} server moves, {} lock handovers",
        after.fast_unlocked - before.fast_unlocked,
        after.shootdowns - before.shootdowns,
        after.handovers - before.handovers
    );
    c.eq(DONE.load(Ordering::Acquire), WORKERS as u64, "every worker ran to the end");
    c.eq(FAILED.load(Ordering::Relaxed), 0, "no call, page or move failed");
    c.check(
        calls >= 100 * WORKERS as u64 && unmaps >= 10 * WORKERS as u64 && moves >= 3,
        &alloc::format!("the workers got work done ({calls} calls, {unmaps} unmaps, {moves} moves)"),
    );
    c.check(server_moves >= 10, "the servers moved between the CPUs under the calls");
    c.check(after.shootdowns > before.shootdowns, "unmaps shot down the other CPU's TLB");
    c.check(after.fast_unlocked > before.fast_unlocked, "same-CPU calls took the fastpath without the lock");
    c.finish("smp_stress")
}
