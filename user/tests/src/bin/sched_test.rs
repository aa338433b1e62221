//! Scheduling: threads of equal priority share the CPU (a spinner does not starve
//! its peer), a higher priority preempts at once, a lower priority waits while
//! higher ones are runnable, yield rotates among equals, sleep waits its time.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

static SPIN: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static LOW: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicU64 = AtomicU64::new(0);
static HIGH_WOKE: AtomicU64 = AtomicU64::new(0);
static SEQ: AtomicU64 = AtomicU64::new(0);
static ORDER: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

fn spinner(i: u64) {
    while STOP.load(Ordering::Relaxed) == 0 {
        SPIN[i as usize].fetch_add(1, Ordering::Relaxed);
    }
}

fn low(_: u64) {
    loop {
        LOW.fetch_add(1, Ordering::Relaxed);
    }
}

fn high(_: u64) {
    sys::sleep_us(20_000);
    // Runs while the spinners (lower priority) are still spinning.
    HIGH_WOKE.store(1 + SPIN[0].load(Ordering::Relaxed), Ordering::SeqCst);
}

fn yielder(id: u64) {
    for _ in 0..4 {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        if (n as usize) < ORDER.len() {
            ORDER[n as usize].store(id, Ordering::SeqCst);
        }
        sys::yield_now();
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let me = thread::my_priority();

    // Sleep.
    let t0 = sys::kernel_info().ticks;
    let (tsc0, idle0) = (sys::rdtsc_ordered(), sys::idle_tsc());
    sys::sleep_us(50_000);
    let dt = sys::kernel_info().ticks - t0;
    let (tsc, idle) = (sys::rdtsc_ordered() - tsc0, sys::idle_tsc() - idle0);
    c.check((50..500).contains(&dt), "sleep 50 ms lasts 50 ms (in ticks)");
    c.check(idle > tsc / 2 && idle <= tsc, "while nothing else runs, the CPU is idle most of a sleep (KERNEL_INFO(1))");
    let (tsc0, idle0) = (sys::rdtsc_ordered(), sys::idle_tsc());
    let mut x = 1u64;
    for i in 0..200_000u64 {
        x = core::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    let (tsc, idle) = (sys::rdtsc_ordered() - tsc0, sys::idle_tsc() - idle0);
    c.check(x != 0 && idle < tsc / 10, "and hardly idle while this thread computes");

    // Yield rotates between two threads of equal priority: strict alternation (the
    // image present first: a thread's first touch of a page is a page fault, which
    // would let the other run first).
    sys::prefault_image();
    let _ = thread::spawn(yielder, 1, me - 10).unwrap();
    let _ = thread::spawn(yielder, 2, me - 10).unwrap();
    sys::sleep_us(50_000);
    let order: [u64; 8] = core::array::from_fn(|i| ORDER[i].load(Ordering::SeqCst));
    c.eq(order, [1, 2, 1, 2, 1, 2, 1, 2], "yield alternates between equals");

    // Two spinners of equal priority, a lower thread, a higher sleeper.
    let _ = thread::spawn(low, 0, me - 60).unwrap();
    let _ = thread::spawn(spinner, 0, me - 50).unwrap();
    let _ = thread::spawn(spinner, 1, me - 50).unwrap();
    let _ = thread::spawn(high, 0, me - 40).unwrap();
    sys::sleep_us(300_000);
    let (a, b) = (SPIN[0].load(Ordering::Relaxed), SPIN[1].load(Ordering::Relaxed));
    rt::println!("  spinner counts {} and {}, low {}", a, b, LOW.load(Ordering::Relaxed));
    c.check(a > 0 && b > 0, "neither spinner starves the other");
    c.check(a.min(b) * 4 > a.max(b), "round robin shares the CPU roughly evenly");
    c.check(HIGH_WOKE.load(Ordering::SeqCst) > 1, "higher priority preempted the spinners when its sleep ended");
    c.eq(LOW.load(Ordering::Relaxed), 0, "lower priority does not run while higher ones spin");
    STOP.store(1, Ordering::Relaxed);
    sys::sleep_us(20_000);
    c.check(LOW.load(Ordering::Relaxed) > 0, "lower priority runs once the spinners stop");
    c.finish("sched_test")
}
