//! The `smp` suite, on a machine with two CPUs under plain TCG (icount runs
//! one CPU): throughput of independent IPC pairs with both pairs on one CPU and with a
//! pair per CPU; the IPC round trip within a CPU and across; an unmap when no other CPU
//! has the space loaded and when one does (the shootdown); the null system call (every
//! entry but same-CPU IPC takes the big kernel lock), and how often the lock passed
//! between the CPUs while the pairs ran. Ticks are TSC cycles.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::Tag;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc;
use rt::{println, sys, thread};

rt::entry!(main);

const BATCHES: usize = 9;
const PER_BATCH: u64 = 2000;
/// Round trips each client makes in a throughput run.
const PAIR_CALLS: u64 = 20_000;
/// `smoke` among the arguments (`cargo xtask bench --smoke`): every count cut to a few,
/// to check that each figure is printed and parsed, not to measure.
static SMOKE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// (batches, calls per batch, round trips per client in a throughput run): the
/// constants above, or a few of each in a smoke run.
fn counts() -> (usize, u64, u64) {
    if SMOKE.load(Ordering::Relaxed) {
        (3, 20, 200)
    } else {
        (BATCHES, PER_BATCH, PAIR_CALLS)
    }
}

fn report(name: &str, mut v: Vec<u64>, unit: &str) {
    v.sort_unstable();
    if !v.is_empty() {
        println!(
            "BENCH {} median={} min={} max={} samples={} unit={unit}",
            name,
            v[v.len() / 2],
            v[0],
            v[v.len() - 1],
            v.len()
        );
    }
}

fn measure(name: &str, mut op: impl FnMut()) {
    for _ in 0..200 {
        op();
    }
    let (batches, per_batch, _) = counts();
    let per = (0..batches)
        .map(|_| {
            let t0 = sys::rdtsc_ordered();
            for _ in 0..per_batch {
                op();
            }
            (sys::rdtsc_ordered() - t0) / per_batch
        })
        .collect();
    report(name, per, "ticks/op");
}

fn server(_: u64) {
    echo_api::fast_loop()
}

/// Per client: its server's slot (set before it starts) and the calls it has done.
static SERVER: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static DONE: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Per client: when it began and ended its last round (TSC), so that a round's time is
/// the clients' own, not the main thread's polling.
static BEGAN: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static ENDED: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static GO: AtomicU64 = AtomicU64::new(0);
const STOP: u64 = u64::MAX;

fn client(i: u64) {
    let i = i as usize;
    let tag = Tag::new(1, 1).0;
    let (_, _, pair_calls) = counts();
    loop {
        let round = GO.load(Ordering::Acquire);
        if round == STOP {
            return;
        }
        if round == 0 || DONE[i].load(Ordering::Relaxed) >= round * pair_calls {
            sys::sleep_us(200);
            continue;
        }
        let srv = SERVER[i].load(Ordering::Relaxed);
        BEGAN[i].store(sys::rdtsc_ordered(), Ordering::Relaxed);
        for _ in 0..pair_calls {
            let _ = ipc::call_regs(srv, tag, 1);
        }
        ENDED[i].store(sys::rdtsc_ordered(), Ordering::Relaxed);
        DONE[i].fetch_add(pair_calls, Ordering::Release);
    }
}

fn spin(_: u64) {
    loop {
        core::hint::spin_loop();
    }
}

fn main() -> i32 {
    SMOKE.store(rt::args().split(' ').skip(1).any(|a| a == "smoke"), Ordering::Relaxed);
    let (batches, _, pair_calls) = counts();
    let info = sys::smp_info();
    println!("bench_smp: {} CPUs", info.cpus);
    if info.cpus < 2 {
        println!("bench_smp: needs two CPUs");
        return 1;
    }
    let prio = thread::my_priority();
    let tag = Tag::new(1, 1).0;
    measure("smp_null_syscall", || {
        sys::null();
    });

    // Two pairs (a client and a server thread each), clients and servers of pair 1
    // moved between runs.
    let (Ok(s0), Ok(s1)) = (thread::spawn(server, 0, prio), thread::spawn(server, 0, prio)) else {
        println!("bench_smp: cannot start servers");
        return 1;
    };
    SERVER[0].store(s0.slot, Ordering::Relaxed);
    SERVER[1].store(s1.slot, Ordering::Relaxed);
    let (Ok(_), Ok(c1)) = (thread::spawn(client, 0, prio), thread::spawn(client, 1, prio)) else {
        println!("bench_smp: cannot start clients");
        return 1;
    };
    let per_ms = sys::kernel_info().tsc_per_ms.max(1);
    let mut round = 0;
    for (name, cpu) in [("ipc_pairs_rps_1cpu", 0u64), ("ipc_pairs_rps_2cpu", 1)] {
        let _ = sys::thread_set_cpu(s1.slot, cpu);
        let _ = sys::thread_set_cpu(c1.slot, cpu);
        let mut v = Vec::new();
        let handovers = sys::smp_info().handovers;
        for _ in 0..3 {
            round += 1;
            GO.store(round, Ordering::Release);
            while DONE.iter().any(|d| d.load(Ordering::Acquire) < round * pair_calls) {
                sys::sleep_us(1_000);
            }
            // From the first client's start to the last one's end (both ran throughout:
            // each does the same number of calls).
            let began = BEGAN.iter().map(|b| b.load(Ordering::Relaxed)).min().unwrap_or(0);
            let ended = ENDED.iter().map(|e| e.load(Ordering::Relaxed)).max().unwrap_or(0);
            let ticks = ended.saturating_sub(began).max(1);
            v.push(2 * pair_calls * per_ms * 1000 / ticks);
        }
        report(name, v, "rps");
        if cpu == 1 {
            let n = sys::smp_info().handovers - handovers;
            println!(
                "BENCH ipc_pairs_handovers_2cpu median={} min={} max={} samples=1 unit=per-1000",
                n * 1000 / (3 * 2 * pair_calls),
                n * 1000 / (3 * 2 * pair_calls),
                n * 1000 / (3 * 2 * pair_calls)
            );
        }
    }

    GO.store(STOP, Ordering::Release);

    // One round trip: server on this CPU, then on the other.
    let _ = sys::thread_set_cpu(s1.slot, 0);
    measure("ipc_rtt_same_cpu", || {
        let _ = ipc::call_regs(s1.slot, tag, 8);
    });
    let _ = sys::thread_set_cpu(s1.slot, 1);
    measure("ipc_rtt_cross_cpu", || {
        let _ = ipc::call_regs(s1.slot, tag, 8);
    });

    // Unmap one page of this task: no other CPU has the space loaded (the clients and
    // servers sleep or wait), then a spinning thread of this task holds it on CPU 1.
    let buf: &'static mut [u8] = alloc::boxed::Box::leak(alloc::vec![0u8; 2 * 4096].into_boxed_slice());
    let page = (buf.as_ptr() as u64 + 4095) & !4095;
    let _ = sys::thread_set_cpu(s1.slot, 0);
    sys::sleep_us(20_000);
    let unmap_one = || {
        // SAFETY: the page lies in `buf`, leaked and used for nothing but this; touching
        // it brings it back through the pager.
        unsafe {
            core::ptr::write_volatile(page as *mut u8, 1);
            let _ = sys::unmap_pages(page, 1);
        }
    };
    let timed = |name: &str| {
        let mut v = Vec::new();
        for _ in 0..batches {
            let t0 = sys::rdtsc_ordered();
            for _ in 0..200 {
                unmap_one();
            }
            v.push((sys::rdtsc_ordered() - t0) / 200);
        }
        report(name, v, "ticks/op");
    };
    timed("unmap_touch_local");
    let before = sys::smp_info().shootdowns;
    match thread::spawn(spin, 0, prio) {
        Ok(sp) => {
            let _ = sys::thread_set_cpu(sp.slot, 1);
            sys::sleep_us(20_000);
            timed("unmap_touch_shootdown");
            let n = sys::smp_info().shootdowns - before;
            println!("bench_smp: {n} shootdowns");
            // SAFETY: the spinner holds nothing.
            let _ = unsafe { sys::thread_destroy(sp.slot) };
        }
        Err(e) => println!("bench_smp: no spinner: {e:?}"),
    }
    println!("bench_smp: done");
    0
}
