//! A mapping flood: one program maps the same 1024 pages over and
//! over in its own address space. Every mapping has a mapping-database node in the
//! kernel heap; before those nodes were charged to the program's kernel quota, 400,000
//! mappings exhausted the heap and panicked the kernel with the quota showing 814 of
//! 1,024 pages. Now the flood ends in `NoMemory` at the program's quota, another
//! program is started and served afterwards, and the quota comes back with an UNMAP.
//! `flood_test fault` (entry `flood_faulter`): floods, then touches a new page. The
//! pager's answer cannot be mapped (the quota is spent), so the fault goes to root,
//! which removes the program (before, the thread waited forever for its pager).
//! With the quota spent, moving a thread's endpoint (`THREAD_CONTROL SUCCEED`, a page of
//! the caller's quota while it lasts) fails with `NoMemory`; with it back, it works and
//! the page returns when the successor ends.
#![no_std]
#![no_main]

use abi::fpage::{Fpage, UNMAP_SELF};
use abi::{cap, mem, Error};
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, Msg, FOREVER};
use rt::{println, sys};
use tests::Checks;

rt::entry!(main);

const SRC: u64 = rt::layout::POOL;
const N: u64 = mem::MAX_PAGES_PER_CALL;
/// Where the copies go: a 2^40-byte range of its own.
const FLOOD_AT: u64 = 0x0000_4000_0000_0000;
const FLOOD_LOG2: u64 = 40;

/// Map SRC again and again until the kernel refuses: (mappings made, the refusal).
fn flood() -> (u64, Error) {
    let (mut made, mut at) = (0u64, FLOOD_AT);
    loop {
        // SAFETY: maps our own pages read-only at fresh addresses no Rust object uses.
        match unsafe { sys::mem_map(cap::SELF_TASK, SRC, at, N, mem::READ) } {
            Ok(()) => {
                made += N;
                at += N * 4096;
            }
            Err(e) => return (made, e),
        }
        if made >= 1_000_000 {
            return (made, Error::InvalidArg);
        }
    }
}

static STARTED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// A thread that only sleeps (its pages faulted in before the quota is spent).
fn idle(_: u64) {
    STARTED.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    loop {
        sys::sleep_us(10_000);
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    sys::prefault(SRC, N);
    if rt::args().split(' ').nth(1) == Some("fault") {
        let _ = flood();
        // SAFETY: a read of our own pool, past the pages faulted in above.
        unsafe { core::ptr::read_volatile((SRC + 2 * N * 4096) as *const u8) };
        println!("flood: the fault was served after all");
        return 0;
    }
    // Two threads for SUCCEED, made while there is quota for them.
    let prio = rt::thread::my_priority();
    let (Ok(t1), Ok(t2)) = (rt::thread::spawn(idle, 0, prio), rt::thread::spawn(idle, 0, prio)) else {
        c.check(false, "start two threads");
        return c.finish("flood_test");
    };
    c.check(tests::wait_until(1000, || STARTED.load(core::sync::atomic::Ordering::SeqCst) == 2), "they run");
    sys::sleep_us(50_000);
    let before = sys::kernel_info();
    let (made, end) = flood();
    let full = sys::kernel_info();
    // Spend what is left a page of mappings at a time, then ask for a SUCCEED.
    let mut at = FLOOD_AT + made * 4096;
    // SAFETY: as in `flood`: read-only copies of our own pages at fresh addresses.
    while unsafe { sys::mem_map(cap::SELF_TASK, SRC, at, 1, mem::READ) }.is_ok() {
        at += 4096;
    }
    let spent = sys::thread_succeed(t1.slot, t2.slot);
    // SAFETY: the range past the flood holds only the single copies made just above.
    let _ = unsafe { sys::unmap(Fpage::mem(FLOOD_AT + made * 4096, 22, 0), UNMAP_SELF) };
    // Give the last copies back first: printing and checking may need a page or two
    // of stack or heap, and a fault needs quota (see `fault`).
    // SAFETY: the range holds only the last read-only copies.
    let last = unsafe { sys::unmap(Fpage::mem(FLOOD_AT + (made - N) * 4096, 22, 0), UNMAP_SELF) };
    println!(
        "flood: {} mappings, then {}; kernel quota {} of {} pages used (before: {})",
        made,
        end.name(),
        full.quota_used,
        full.quota_limit,
        before.quota_used
    );
    c.eq(end, Error::NoMemory, "the flood ends with NoMemory");
    c.eq(spent, Err(Error::NoMemory), "SUCCEED with the quota spent: NoMemory");
    c.check(
        (4_000..20_000).contains(&made),
        "after thousands of mappings (a quota of 128 pages), not hundreds of thousands",
    );
    c.check(full.quota_used + 4 >= full.quota_limit, "at the program's kernel quota");
    c.eq(last, Ok(()), "unmap the last copies");
    // The kernel heap was not exhausted: another program starts and answers.
    let echo_slot = rt::alloc_slot_pair();
    c.check(spawn("echo", echo_slot).is_ok(), "spawn echo with the flood still mapped");
    let mut m = Msg::new(echo::ECHO, &[7]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "echo answers");
    // SAFETY: the flood range holds only the read-only copies made above.
    let r = unsafe { sys::unmap(Fpage::mem(FLOOD_AT, FLOOD_LOG2, 0), UNMAP_SELF) };
    c.eq(r, Ok(()), "unmap the flood");
    let after = sys::kernel_info();
    let nodes = made / kcore::quota::Objects::PER_PAGE;
    println!("flood: after the unmap, {} pages used", after.quota_used);
    c.check(after.quota_used + nodes <= full.quota_used + 1, "the nodes' pages came back");
    // SAFETY: as above.
    c.eq(unsafe { sys::mem_map(cap::SELF_TASK, SRC, FLOOD_AT, N, mem::READ) }, Ok(()), "and mapping works again");
    // With the quota back, SUCCEED holds a page of it while the move lasts.
    let q = sys::kernel_info().quota_used;
    c.eq(sys::thread_succeed(t1.slot, t2.slot), Ok(()), "SUCCEED with quota");
    c.eq(sys::kernel_info().quota_used, q + 1, "it holds one page of the quota");
    // SAFETY: the thread only sleeps; its stack is leaked, not reused.
    c.eq(unsafe { sys::thread_destroy(t2.slot) }, Ok(()), "end the successor");
    let q2 = sys::kernel_info().quota_used;
    // SAFETY: as above.
    c.eq(unsafe { sys::thread_destroy(t1.slot) }, Ok(()), "end the other thread");
    let q1 = sys::kernel_info().quota_used;
    c.eq(q + 1 - q2, q2 - q1 + 1, "the successor's end gave back a thread's pages and the move's page");
    // A program that faults with its quota spent is removed, not left waiting.
    let f = rt::alloc_slot_pair();
    c.check(spawn("flood_faulter", f).is_ok(), "start flood_faulter");
    c.check(tests::wait_until(3000, || sys::cap_info(f + 1).is_err()), "it ends");
    c.finish("flood_test")
}
