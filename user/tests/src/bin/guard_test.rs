//! Guarded calls and arenas (`rt::guard`, `rt::heap`), the mechanism that keeps a graft
//! from taking its server down, tested here on their own: a call past its deadline is
//! stopped by the watchdog, a call that panics is left, code in an arena is charged
//! for what it holds and forgotten at once, and the program goes on each time.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use rt::guard::{self, Stop};
use rt::heap::ArenaHeap;
use rt::sys;
use tests::Checks;

rt::entry!(main);

fn spin() -> u64 {
    let mut n = 0u64;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    guard::watch(5_000);
    // Armed: a disarmed watchdog waits in a receive and watches nothing.
    guard::arm(true);
    let per_ms = sys::kernel_info().tsc_per_ms;
    let far = u64::MAX;

    c.eq(guard::run(far, || 42), Ok(42), "a guarded call that returns answers");

    let t0 = sys::rdtsc();
    let r = guard::run(t0 + 50 * per_ms, spin);
    let took = (sys::rdtsc() - t0) / per_ms;
    c.eq(r, Err(Stop::Time), "a call that never returns is stopped by the watchdog");
    c.check((50..2000).contains(&took), &format!("at its deadline (50 ms; stopped after {took} ms)"));
    c.eq(guard::stops().0, 1, "the watchdog counts it");

    let r: Result<u64, Stop> = guard::run(far, || panic!("on purpose, inside a guarded call"));
    c.eq(r, Err(Stop::Panic), "a call that panics is left, and the program goes on");
    c.eq(guard::stops().1, 1, "counted");
    c.eq(guard::run(far, || 7), Ok(7), "the next guarded call runs as usual");

    // Arenas: what code allocates inside one is charged to it, wherever it is freed.
    let held = || mem_api::client::usage(abi::cap::PAGER, u64::MAX).map_or(0, |u| u.pages + u.reserved);
    let before = held();
    let Some(mut a) = ArenaHeap::new(1 << 20) else {
        c.check(false, "make an arena");
        return c.finish("guard_test");
    };
    // (`black_box`: an allocation nothing reads may be left out by the compiler.)
    let v = core::hint::black_box(a.within(|| alloc::vec![1u8; 100_000]));
    c.check(a.used() >= 100_000 && !a.over(), &format!("an allocation inside is charged to it ({} bytes)", a.used()));
    drop(v);
    c.eq(a.used(), 0, "freed outside, it is given back to it");
    // Past its limit an allocation fails, there and then: never served from elsewhere.
    let r = a.within(|| {
        let mut v: Vec<u8> = Vec::new();
        v.try_reserve_exact(3 << 19).map(|_| v)
    });
    c.check(r.is_err() && a.over(), "an allocation past its limit is refused, and the arena says so");
    c.eq(a.used(), 0, "nothing of it was charged");
    a.clear_over();
    // Inside a guarded call (as an engine runs), a plain allocation that fails is a panic
    // that leaves the call, not the program.
    let r = a.within(|| guard::run(far, || core::hint::black_box(alloc::vec![5u8; 3 << 20]).len()));
    c.eq(r, Err(Stop::Panic), "a plain allocation past the limit leaves the guarded call");
    c.check(a.over(), "and the arena says why");
    let big = core::hint::black_box(a.within(|| alloc::vec![2u8; 3 << 18]));
    c.check(big.iter().all(|b| *b == 2), "within its limit it serves again");
    drop(big);
    a.clear_over();
    c.check(!a.over() && a.peak() >= 3 << 18, &format!("its peak is kept ({} bytes)", a.peak()));

    // Code stopped half-way inside an arena (as an engine is): the arena is reset — its
    // pages given back to the memory server — and serves again.
    let r = a.within(|| {
        guard::run(sys::rdtsc() + 30 * per_ms, || {
            let _held: Vec<u64> = core::hint::black_box((0..10_000).collect());
            spin()
        })
    });
    c.eq(r, Err(Stop::Time), "code holding memory in the arena is stopped");
    c.check(a.used() >= 80_000, "what it held is still counted");
    c.check(held() > before, &format!("the arena holds pages ({} before, {} now)", before, held()));
    a.reset();
    c.eq(a.used(), 0, "reset: forgotten at once");
    c.eq((rt::heap::arenas_held(), held()), (0, before), "and its pages are given back to the memory server");
    let again = core::hint::black_box(a.within(|| alloc::vec![3u8; 50_000]));
    c.check(again.iter().all(|b| *b == 3) && a.used() >= 50_000, "and the arena serves again");
    // Dropped while its code still holds something (a leak of its own): given back whole.
    core::mem::forget(again);
    drop(a);
    c.eq((rt::heap::arenas_held(), held()), (0, before), "an arena dropped holding a leak gives its pages back");
    let outside: Vec<u8> = alloc::vec![4u8; 1 << 20];
    c.check(outside.iter().all(|b| *b == 4), "the program's own heap is untouched");
    c.finish("guard_test")
}
