//! A user-level pager: a worker thread whose pager is this program's main thread
//! touches thousands of pages of an empty region; each fault arrives as an IPC, the
//! pager answers with a map item of a zeroed page from its pool, the worker resumes.
//! A pager that declines (answers without a map item) hands the fault to the
//! thread's fault handler. Also measures fault → pager → resume.
#![no_std]
#![no_main]

use abi::fpage::Fpage;
use abi::ipc::label;
use abi::{cap, mem, rights};
use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc::{self, timeouts, Msg, POLL};
use rt::{println, sys, thread};
use tests::Checks;

rt::entry!(main);

const REGION: u64 = rt::layout::SCRATCH;
const POOL: u64 = rt::layout::POOL;
const PAGES: u64 = 3000;
const PAGER_BADGE: u64 = 0x9A6E;
const HANDLER_BADGE: u64 = 0xFA17;

static SUM: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

extern "C" fn worker(_: u64) -> ! {
    let mut sum = 0;
    for i in 0..PAGES {
        let p = (REGION + i * 4096) as *mut u64;
        // SAFETY: the region is paged in by this program's pager on first touch.
        unsafe {
            sum += core::ptr::read_volatile(p); // demand-zero: reads 0
            core::ptr::write_volatile(p, i + 1);
            sum += core::ptr::read_volatile(p);
        }
    }
    SUM.store(sum, Ordering::SeqCst);
    DONE.store(1, Ordering::SeqCst);
    sys::thread_exit()
}

extern "C" fn refused(_: u64) -> ! {
    // SAFETY: deliberately outside what the pager serves.
    unsafe { core::ptr::read_volatile(0x0000_4444_0000_0000 as *const u64) };
    DONE.store(99, Ordering::SeqCst);
    sys::thread_exit()
}

extern "C" fn last_page(_: u64) -> ! {
    // SAFETY: deliberately on the page no pager may map.
    unsafe { core::ptr::read_volatile(abi::layout::USER_MAP_END as *const u64) };
    DONE.store(98, Ordering::SeqCst);
    sys::thread_exit()
}

fn start(entry: extern "C" fn(u64) -> !, me: u64) -> u64 {
    let t = rt::alloc_slot();
    sys::thread_create(cap::SELF_TASK, t, thread::alloc_utcb(), thread::my_priority()).unwrap();
    sys::thread_set_pager(t, me, PAGER_BADGE).unwrap();
    sys::thread_set_fault_handler(t, me, HANDLER_BADGE).unwrap();
    let stack = alloc::vec![0u8; 16384].leak();
    let top = ((stack.as_ptr() as u64 + 16384) & !15) - 8;
    sys::thread_start(t, entry as *const () as u64, top, 0).unwrap();
    t
}

fn main() -> i32 {
    let mut c = Checks::new();
    // The threads below are paged by this program, which serves only its region: the
    // code and data they run on must be present before they start.
    sys::prefault_image();
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 0).unwrap();
    // The pool: pages from our own pager (a memory server), which we page on.
    sys::prefault(POOL, PAGES);
    // The statics the threads below write: paged in by our memory server now (the
    // threads' own pager, this thread, serves only REGION). Where the linker puts them
    // is no business of the test's: untouched, a page of them faults to us.
    SUM.store(0, Ordering::SeqCst);
    DONE.store(0, Ordering::SeqCst);

    let _w = start(worker, me);
    let (mut served, mut bad, mut next) = (0u64, 0u64, 0u64);
    let mut cycles = 0u64;
    let mut m = Msg::empty();
    let mut answer: Option<Msg> = None;
    let mut t_reply = 0u64;
    loop {
        let r = match answer.take() {
            Some(a) => {
                m = a;
                t_reply = sys::rdtsc_ordered();
                ipc::reply_wait(ipc::RECV_ANY, &mut m, timeouts(POLL, 5_000_000))
            }
            None => ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 5_000_000)),
        };
        if r.is_err() {
            break;
        }
        if t_reply != 0 {
            cycles += sys::rdtsc_ordered() - t_reply;
        }
        if r != Ok(PAGER_BADGE) || m.label() != label::PAGE_FAULT {
            bad += 1;
            break;
        }
        let addr = m.word(1) & !0xfff;
        if !(REGION..REGION + PAGES * 4096).contains(&addr) || next >= PAGES {
            bad += 1;
            break;
        }
        let mut a = Msg::new(0, &[]);
        a.push_item(Fpage::mem(POOL + next * 4096, 12, mem::READ | mem::WRITE), addr);
        next += 1;
        served += 1;
        answer = Some(a);
        if served == PAGES {
            // Answer the last fault and stop serving.
            let _ = ipc::reply(answer.as_ref().unwrap());
            break;
        }
    }
    sys::sleep_us(20_000);
    c.eq(bad, 0, "every message was a page fault in the region, from the worker");
    c.eq(served, PAGES, "thousands of demand-zero faults served by a user-level pager");
    c.eq(DONE.load(Ordering::SeqCst), 1, "worker ran to the end");
    c.eq(SUM.load(Ordering::SeqCst), PAGES * (PAGES + 1) / 2, "pages read zero first, then kept their values");
    if served > 1 {
        // Each sample: from our reply to the next fault's arrival = resume + run to the
        // next page + fault + IPC to us. Printed, not asserted.
        println!(
            "BENCH page_fault_user_pager_loop mean={} unit=ticks/fault samples={}",
            cycles / (served - 1),
            served - 1
        );
    }

    // A pager that declines hands the fault to the fault handler.
    let _r = start(refused, me);
    let mut m = Msg::empty();
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    c.eq(r, Ok(PAGER_BADGE), "the pager hears of the fault first");
    c.eq(m.label(), label::PAGE_FAULT, "as a page fault");
    let _ = ipc::reply(&Msg::new(0, &[])); // no map item: decline
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    c.eq(r, Ok(HANDLER_BADGE), "then the fault handler");
    c.check(m.label() == label::FAULT && m.word(1) == abi::ipc::fault::PAGE_FAULT, "as an unhandled page fault");
    c.eq(m.word(2), 0x0000_4444_0000_0000, "with the address");
    c.eq(DONE.load(Ordering::SeqCst), 1, "the refused thread did not continue");

    // A pager whose answer the kernel refuses (a page on the user half's last page,
    // which may not be mapped): the pager is told, and the fault goes to the fault
    // handler too — the thread does not wait for an answer no pager will send.
    let _l = start(last_page, me);
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    c.eq(r, Ok(PAGER_BADGE), "the pager hears of the fault on the last page");
    c.eq(m.word(1), abi::layout::USER_MAP_END, "at its address");
    let mut a = Msg::new(0, &[]);
    a.push_item(Fpage::mem(POOL, 12, mem::READ), abi::layout::USER_MAP_END);
    c.eq(
        ipc::reply(&a),
        Err(abi::Error::InvalidArg),
        "an item for a page that may not be mapped is refused to the pager",
    );
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    c.eq(r, Ok(HANDLER_BADGE), "then the fault handler hears of it");
    c.check(
        m.label() == label::FAULT && m.word(1) == abi::ipc::fault::PAGE_FAULT && m.word(2) == abi::layout::USER_MAP_END,
        "as an unhandled page fault at that address",
    );
    c.eq(DONE.load(Ordering::SeqCst), 1, "the thread did not continue");
    c.finish("pager_test")
}

extern crate alloc;
