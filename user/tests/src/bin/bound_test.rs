//! Kernel work per call is bounded. A heartbeat thread of higher
//! priority sleeps a millisecond at a time and records the longest gap between its
//! wake-ups while the main thread makes the largest calls an unprivileged program can:
//! a 2^45-byte map item (refused, `TooLong`), messages of the most pages one message
//! may carry (into a window already full, so every page is replaced), `MEM_MAP` of the
//! most pages one call may map, `UNMAP` of the whole address space over thousands of
//! mapped pages (cut into slices and restarted), and the destruction of a task that holds
//! them. Each gap must stay under 10 ms of guest time (the scenario runs under icount,
//! so the TSC counts instructions and the figure is deterministic), and the kernel
//! clock must not fall behind the TSC.
//!
//! One frame's whole mapping tree: one page mapped into a child task as many times as
//! the kernel allows (asked for 65,532 times: before `kcore::framedb`, each map searched
//! the frame's list and one `UNMAP` of the page walked all of them at once — 44 s in
//! all, heartbeat gaps of 456 ms), refused past `framedb::MAX_NODES` with `NoMemory`,
//! then one `UNMAP` of the page and the destruction of the task holding the copies,
//! each with the heartbeat under 10 ms.
#![no_std]
#![no_main]

use abi::fpage::{Fpage, UNMAP_SELF};
use abi::{mem, Error};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rt::ipc::{self, Msg, FOREVER};
use rt::{println, sys, thread};
use tests::Checks;

rt::entry!(main);

/// The pages the main thread maps for itself and passes on (16 MiB).
const SRC: u64 = rt::layout::POOL;
const SRC_PAGES: u64 = 4096;
/// Where the receiver thread's window is.
const WINDOW: u64 = rt::layout::SCRATCH;
/// Where the child task gets pages.
const CHILD_AT: u64 = 0x0000_4000_0000_0000;
/// Where the copies of one page go in the second child.
const TREE_AT: u64 = 0x0000_4100_0000_0000;
/// Copies of one page asked for (the count).
const COPIES: u64 = 65_532;
const LIMIT_MS: u64 = 10;

static MAX_GAP: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
static BEATS: AtomicU64 = AtomicU64::new(0);

fn heartbeat(_: u64) {
    let mut last = sys::rdtsc();
    while !STOP.load(Ordering::Relaxed) {
        sys::sleep_us(1000);
        let now = sys::rdtsc();
        MAX_GAP.fetch_max(now - last, Ordering::Relaxed);
        BEATS.fetch_add(1, Ordering::Relaxed);
        last = now;
    }
}

/// Receives map items into its window and answers each message.
fn receiver(_: u64) {
    ipc::set_windows(Fpage::mem(WINDOW, 22, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0));
    let mut reply: Option<Msg> = None;
    loop {
        let mut m = Msg::empty();
        if ipc::serve_next(reply.take(), &mut m).is_ok() {
            reply = Some(Msg::new(1, &[m.items() as u64]));
        }
    }
}

/// Run `f`; the longest heartbeat gap while it ran, in ms (after two more beats, so that
/// a gap that ends after `f` is counted).
fn phase(c: &mut Checks, what: &str, tsc_per_ms: u64, f: impl FnOnce() -> bool) {
    let b = BEATS.load(Ordering::Relaxed);
    let beating = tests::wait_until(100, || BEATS.load(Ordering::Relaxed) > b);
    MAX_GAP.store(0, Ordering::Relaxed);
    let ok = f();
    let b = BEATS.load(Ordering::Relaxed);
    let beating = beating && tests::wait_until(100, || BEATS.load(Ordering::Relaxed) >= b + 2);
    c.check(beating, "the heartbeat beats");
    let gap = MAX_GAP.load(Ordering::Relaxed);
    let ms10 = gap * 10 / tsc_per_ms;
    println!("  {}: longest heartbeat gap {}.{} ms ({} ticks)", what, ms10 / 10, ms10 % 10, gap);
    c.check(ok, what);
    c.check(gap < LIMIT_MS * tsc_per_ms, "and the heartbeat gap stayed under 10 ms");
}

fn main() -> i32 {
    let mut c = Checks::new();
    let info = sys::kernel_info();
    let start = sys::rdtsc();
    let tsc_per_ms = info.tsc_per_ms.max(1);
    let prio = thread::my_priority();
    sys::prefault(SRC, SRC_PAGES);
    // The heartbeat keeps our priority; we and the receiver go one below it.
    let hb = thread::spawn(heartbeat, 0, prio);
    c.check(
        hb.is_ok() && sys::thread_set_priority(abi::cap::SELF_THREAD, prio - 1).is_ok(),
        "a heartbeat thread above us",
    );
    let rx = thread::spawn(receiver, 0, prio - 1).expect("receiver");

    phase(&mut c, "a 2^45-byte map item is refused", tsc_per_ms, || {
        let mut m = Msg::new(1, &[]);
        m.push_item(Fpage::mem(0, 45, mem::READ), 0);
        ipc::call(rx.slot, &mut m, FOREVER) == Err(Error::TooLong)
    });
    phase(&mut c, "31 items over the page limit are refused", tsc_per_ms, || {
        let mut m = Msg::new(1, &[]);
        for i in 0..31 {
            m.push_item(Fpage::mem(SRC + (i % 2) * (1 << 22), 22, mem::READ), 0);
        }
        ipc::call(rx.slot, &mut m, FOREVER) == Err(Error::TooLong)
    });
    phase(&mut c, "20 messages of the most pages one may carry, each replacing the last", tsc_per_ms, || {
        (0..20).all(|i| {
            let mut m = Msg::new(1, &[]);
            m.push_item(Fpage::mem(SRC + (i % 4) * (1 << 22), 22, mem::READ | mem::WRITE), 0);
            ipc::call(rx.slot, &mut m, FOREVER).is_ok() && m.word(1) == 1
        })
    });
    let child = rt::alloc_slot();
    // Its quota pays for the page tables and mapping-database nodes of 16384 pages.
    c.eq(sys::task_create(child, 512), Ok(()), "a child task");
    phase(&mut c, "MEM_MAP of the most pages one call may map, four times", tsc_per_ms, || {
        (0..4).all(|i| {
            let n = mem::MAX_PAGES_PER_CALL;
            // SAFETY: maps our own pages into the child; nothing of ours changes.
            unsafe { sys::mem_map(child, SRC, CHILD_AT + i * n * 4096, n, mem::READ) }.is_ok()
        })
    });
    phase(&mut c, "UNMAP of everything derived from the whole address space", tsc_per_ms, || {
        // SAFETY: takes back only what we gave (no UNMAP_SELF).
        let r = unsafe { sys::unmap(Fpage::mem(0, 47, 0), 0) };
        let mut m = Msg::new(1, &[]);
        m.push_item(Fpage::mem(SRC, 22, mem::READ), 0);
        r.is_ok() && ipc::call(rx.slot, &mut m, FOREVER).is_ok()
    });
    let n = mem::MAX_PAGES_PER_CALL;
    let again = (0..4 * SRC_PAGES / n).all(|i| {
        // SAFETY: maps our own pages into the child again, four times over.
        unsafe { sys::mem_map(child, SRC + (i * n * 4096) % (SRC_PAGES * 4096), CHILD_AT + i * n * 4096, n, mem::READ) }
            .is_ok()
    });
    c.check(again, "the child maps 16384 pages again");
    phase(&mut c, "destroying a task that holds them", tsc_per_ms, || sys::task_destroy(child).is_ok());
    // One frame mapped as often as the kernel allows, then taken back at once.
    let tree = rt::alloc_slot();
    // Its quota pays for the page tables and mapping nodes of 65,532 pages.
    c.eq(sys::task_create(tree, 1100), Ok(()), "a child task for the copies of one page");
    let page = SRC + 5 * 4096;
    let mut made = 0u64;
    let mut refusal = Ok(());
    phase(&mut c, "one page mapped into it again and again", tsc_per_ms, || {
        while made < COPIES {
            // SAFETY: maps our own page into the child; nothing of ours changes.
            if let Err(e) = unsafe { sys::mem_map(tree, page, TREE_AT + made * 4096, 1, mem::READ) } {
                refusal = Err(e);
                break;
            }
            made += 1;
        }
        true
    });
    println!("  {} copies of one page made, then {:?}", made, refusal);
    c.check(
        made >= 8000 && made < kcore::framedb::MAX_NODES as u64,
        "thousands of copies, as many as a frame may have (not 65,532)",
    );
    c.eq(refusal, Err(Error::NoMemory), "past a frame's most mappings: NoMemory");
    phase(&mut c, "UNMAP of the page: its whole mapping tree", tsc_per_ms, || {
        // SAFETY: takes back only what we gave (no UNMAP_SELF).
        unsafe { sys::unmap(Fpage::mem(page, 12, 0), 0) }.is_ok()
    });
    // SAFETY: as above.
    let again = (0..made).all(|i| unsafe { sys::mem_map(tree, page, TREE_AT + i * 4096, 1, mem::READ) }.is_ok());
    c.check(again, "the copies are made again");
    phase(&mut c, "destroying the task that holds them", tsc_per_ms, || sys::task_destroy(tree).is_ok());
    // SAFETY: reading our own page, still ours.
    c.eq(unsafe { core::ptr::read_volatile(page as *const u8) }, 0, "the page itself stays ours");

    phase(&mut c, "UNMAP of our own pages, whole space", tsc_per_ms, || {
        // SAFETY: SRC is not used by Rust code; the heap and stacks lie elsewhere, but
        // only SRC's range is named.
        unsafe { sys::unmap(Fpage::mem(SRC, 24, 0), UNMAP_SELF) }.is_ok()
    });

    // The kernel's clock kept up with the TSC through all of it: no ticks lost.
    let end = sys::kernel_info();
    let clock = end.ticks - info.ticks;
    let tsc = (sys::rdtsc() - start) / tsc_per_ms;
    println!("  the kernel clock advanced {} ms while the TSC advanced {} ms", clock, tsc);
    c.check(clock + 2 >= tsc && clock <= tsc + 2, "the kernel clock kept time");
    STOP.store(true, Ordering::Relaxed);
    c.finish("bound_test")
}
