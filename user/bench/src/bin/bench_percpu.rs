//! Servers on every CPU (`k42` suite, "Servers on every CPU"): calls to `files`
//! (`PROFILE`: answered from its state, no disk) and to this program's memory server
//! (`USAGE`), through the client library's routing (`rt::server::request_routed`: the
//! server's thread on the caller's CPU).
//!
//! - `percpu_{files,mem}_call`: ticks per call, one client on CPU 0 (instructions
//!   under icount).
//! - `percpu_{files,mem}_cps_{N}cpu`: calls per second (from the host clock: the
//!   guest's `now_us`) with one client thread on each of the machine's N CPUs, calling
//!   for `RUN_US`.
//! - On two CPUs also `percpu_{files,mem}_call_cross`: ticks per call from CPU 1 to the
//!   server's main thread on CPU 0 (what every call cost before per-CPU endpoints: the
//!   kernel's general path and a wake-up across CPUs), and
//!   `percpu_{files,mem}_handovers_2cpu`: times the kernel lock passed between the CPUs
//!   per 1000 calls of the two-CPU run, and `percpu_{files,mem}_unlocked_2cpu`: IPCs
//!   the kernel's fastpath carried without the kernel lock, per 1000 calls (2000: every
//!   call and every reply on its CPU's lock-free fastpath).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use files_api::client as f;
use rt::ipc::Msg;
use rt::{env, println, sys};

use bench::report;

rt::entry!(main);

static FILES: AtomicU64 = AtomicU64::new(0);
/// Which server the threads call (0 files, 1 memory server), until when (µs), and the
/// calls each CPU's thread made.
static WHICH: AtomicU64 = AtomicU64::new(0);
static UNTIL: AtomicU64 = AtomicU64::new(0);
static START: AtomicU64 = AtomicU64::new(0);
static CALLS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static DONE: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// One call to server `which` (routed to the caller's CPU's thread).
#[inline(always)]
fn call(which: u64) -> bool {
    if which == 0 {
        f::profile(FILES.load(Ordering::Relaxed)).is_ok()
    } else {
        mem_api::client::usage_raw(abi::cap::PAGER, u64::MAX).is_ok()
    }
}

/// One call to the server's main capability, not routed.
fn call_main(which: u64) -> bool {
    let (srv, label) = if which == 0 {
        (FILES.load(Ordering::Relaxed), files_api::PROFILE)
    } else {
        (abi::cap::PAGER, mem_api::USAGE)
    };
    let mut m = if which == 0 { Msg::new(label, &[]) } else { Msg::new(label, &[u64::MAX]) };
    rt::server::request(srv, &mut m).is_ok()
}

fn client(cpu: u64) {
    let _ = tests_wait_cpu(cpu);
    let which = WHICH.load(Ordering::Relaxed);
    // Learn the endpoints outside the count, then wait for the start.
    call(which);
    while sys::now_us() < START.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    let until = UNTIL.load(Ordering::Relaxed);
    let mut n = 0;
    while sys::now_us() < until {
        for _ in 0..16 {
            if !call(which) {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
        }
        n += 16;
    }
    CALLS[cpu as usize].store(n, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
}

/// Wait (up to a second) until this thread runs on `cpu`.
fn tests_wait_cpu(cpu: u64) -> bool {
    for _ in 0..1000 {
        if sys::cpu() == cpu {
            return true;
        }
        sys::sleep_us(1000);
    }
    false
}

/// Ticks per call from this thread, median of `rounds` rounds of `n` calls.
fn per_call(rounds: usize, n: u64, mut f: impl FnMut() -> bool) -> Vec<u64> {
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t = sys::rdtsc();
        for _ in 0..n {
            if !f() {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
        }
        v.push(sys::rdtsc().wrapping_sub(t) / n);
    }
    v
}

fn main() -> i32 {
    let smoke = rt::args().split(' ').any(|a| a == "smoke");
    let (rounds, n, run_us) = if smoke { (3, 20, 100_000) } else { (11, 500, 1_000_000) };
    let files = rt::alloc_slot();
    if env::lookup("files", files).is_err() {
        println!("bench_percpu: no files server");
        return 1;
    }
    FILES.store(files, Ordering::Relaxed);
    let cpus = sys::smp_info().cpus.min(8);
    let _ = sys::thread_set_cpu(abi::cap::SELF_THREAD, 0);
    let names = ["files", "mem"];
    for which in 0..2u64 {
        let name = names[which as usize];
        call(which);
        if cpus == 1 {
            report(&alloc::format!("percpu_{name}_call"), "ticks", per_call(rounds, n, || call(which)));
        } else {
            // From CPU 1 to the main thread on CPU 0: the cost per-CPU endpoints avoid.
            let _ = sys::thread_set_cpu(abi::cap::SELF_THREAD, 1);
            report(&alloc::format!("percpu_{name}_call_cross"), "ticks", per_call(rounds, n, || call_main(which)));
            report(&alloc::format!("percpu_{name}_call_cpu1"), "ticks", per_call(rounds, n, || call(which)));
            let _ = sys::thread_set_cpu(abi::cap::SELF_THREAD, 0);
        }
        // One client per CPU, calling for `run_us`; three runs.
        let mut cps = Vec::new();
        let mut handovers = Vec::new();
        let mut unlocked = Vec::new();
        let fast = || (0..cpus).map(|c| sys::cpu_info(c).map(|i| i.fast_unlocked).unwrap_or(0)).sum::<u64>();
        for _ in 0..3 {
            WHICH.store(which, Ordering::Relaxed);
            DONE.store(0, Ordering::Relaxed);
            let start = sys::now_us() + 200_000;
            UNTIL.store(start + run_us, Ordering::Relaxed);
            START.store(start, Ordering::Release);
            for cpu in 0..cpus {
                match rt::thread::spawn(client, cpu, rt::thread::my_priority()) {
                    Ok(t) => {
                        let _ = sys::thread_set_cpu(t.slot, cpu);
                    }
                    Err(e) => {
                        println!("bench_percpu: no client thread: {:?}", e);
                        return 1;
                    }
                }
            }
            let (h0, u0) = (sys::smp_info().handovers, fast());
            while DONE.load(Ordering::Acquire) < cpus {
                sys::sleep_us(10_000);
            }
            let (h1, u1) = (sys::smp_info().handovers, fast());
            let total: u64 = (0..cpus as usize).map(|c| CALLS[c].load(Ordering::Relaxed)).sum();
            cps.push(total * 1_000_000 / run_us);
            handovers.push((h1 - h0) * 1000 / total.max(1));
            unlocked.push((u1 - u0) * 1000 / total.max(1));
        }
        report(&alloc::format!("percpu_{name}_cps_{cpus}cpu"), "calls/s", cps);
        if cpus >= 2 {
            report(&alloc::format!("percpu_{name}_handovers_{cpus}cpu"), "per 1000 calls", handovers);
            report(&alloc::format!("percpu_{name}_unlocked_{cpus}cpu"), "per 1000 calls", unlocked);
        }
    }
    let failed = FAILED.load(Ordering::Relaxed);
    if failed != 0 {
        println!("bench_percpu: {} calls failed", failed);
        return 1;
    }
    println!("bench_percpu: done");
    0
}
