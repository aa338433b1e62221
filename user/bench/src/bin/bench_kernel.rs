//! Measures the kernel's basic costs in rdtsc ticks (guest instructions under
//! `-icount shift=0`, guest cycles under plain TCG): the null system call, an IPC
//! call+reply round trip with an 8-byte message between two tasks and between two
//! threads of one task, a yield between two threads, a page fault served by a
//! user-level pager, mapping one page by IPC, demapping a page mapped into N spaces,
//! and an interrupt reaching a user-level driver. Prints
//! `BENCH <metric> median=… min=… max=… samples=… unit=ticks/op`.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::ipc::{label, Tag};
use abi::{cap, mem, rights};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use rt::env::spawn;
use rt::ipc::{self, Msg};
use rt::{println, sys, thread};

rt::entry!(main);

/// Tells `probe_rtt`'s call from other programs' code at the same address (xtask's
/// breakpoint is on a virtual address, in every address space).
const PROBE_MAGIC: u64 = 0x5c10_4b1d_0000_0001;

/// One 8-byte cross-task round trip, as `ipc_rtt_8b_cross` measures it; xtask breaks
/// here (`magic` in rdi) and single-steps to the return (the instruction breakdown).
#[no_mangle]
#[inline(never)]
extern "C" fn probe_rtt(magic: u64, echo: u64, tag: u64) -> u64 {
    let (e, _, w) = ipc::call_regs(echo, tag, 8);
    core::hint::black_box(magic);
    if e != 0 {
        u64::MAX
    } else {
        w
    }
}

/// One 512-byte string round trip, as `ipc_rtt_512b_cross` measures it (the send string
/// is set by the caller); xtask's second breakdown steps through it.
#[no_mangle]
#[inline(never)]
#[allow(improper_ctypes_definitions)] // called from Rust only; the magic is in rdi
extern "C" fn probe_str(magic: u64, es: u64, send: &[u8], back: &mut [u8]) -> u64 {
    let (e, _, w, got) = ipc::call_regs_string(es, STRING_TAG, 0, send, back);
    core::hint::black_box(magic);
    if e != 0 || got != send.len() {
        u64::MAX
    } else {
        w
    }
}

/// The string echo's request: label `STRING`, no words (the string flag is set by
/// `call_regs_string`).
const STRING_TAG: u64 = abi::ipc::Tag::new(echo_api::STRING, 0).0;

const BATCHES: usize = 15;
/// `smoke` among the arguments (`cargo xtask bench --smoke`): every count cut to a few,
/// to check that each figure is printed and parsed, not to measure.
static SMOKE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

fn smoke() -> bool {
    SMOKE.load(Ordering::Relaxed)
}

/// Batches per figure: `BATCHES`, 3 in a smoke run.
fn nbatches() -> usize {
    if smoke() {
        3
    } else {
        BATCHES
    }
}

/// Calls per batch: `PER_BATCH`, 20 in a smoke run.
fn per_batch() -> u64 {
    if smoke() {
        20
    } else {
        PER_BATCH
    }
}
/// String sizes of the Figure 3 curve (`rpc_str_N`; xtask reads whichever come).
const STRING_SIZES: [usize; 7] = [8, 64, 256, 512, 1024, 2048, 4096];
const PER_BATCH: u64 = 1000;

fn measure(name: &str, mut op: impl FnMut()) -> u64 {
    for _ in 0..100 {
        op(); // warm up
    }
    let per = batches(op);
    report(name, per.clone());
    per[per.len() / 2]
}

/// Ticks per call of `op` in each of `nbatches()` batches, sorted.
fn batches(mut op: impl FnMut()) -> Vec<u64> {
    let per_batch = per_batch();
    let mut per: Vec<u64> = (0..nbatches())
        .map(|_| {
            let t0 = sys::rdtsc_ordered();
            for _ in 0..per_batch {
                op();
            }
            (sys::rdtsc_ordered() - t0) / per_batch
        })
        .collect();
    per.sort_unstable();
    per
}

/// The median ticks per call of `op`, without printing.
fn measure_quiet(op: impl FnMut()) -> u64 {
    let per = batches(op);
    per[per.len() / 2]
}

fn local_server(_: u64) {
    echo_api::fast_loop()
}

static YIELDING: AtomicU64 = AtomicU64::new(1);

fn yielder(_: u64) {
    while YIELDING.load(Ordering::Relaxed) != 0 {
        sys::yield_now();
    }
}

fn report(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    if v.is_empty() {
        return;
    }
    println!(
        "BENCH {} median={} min={} max={} samples={} unit=ticks/op",
        name,
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

// ---- page fault through a user-level pager

const PF_REGION: u64 = rt::layout::BENCH[0];
const PF_POOL: u64 = rt::layout::BENCH[1];
const PF_N: u64 = 200;
static PF_TICKS: [AtomicU64; PF_N as usize] = [const { AtomicU64::new(0) }; PF_N as usize];
static PF_DONE: AtomicU64 = AtomicU64::new(0);

extern "C" fn faulter(_: u64) -> ! {
    for i in 0..PF_N {
        let p = (PF_REGION + i * 4096) as *const u64;
        let t0 = sys::rdtsc_ordered();
        // SAFETY: the region is paged by our own pager thread on first touch.
        unsafe { core::ptr::read_volatile(p) };
        PF_TICKS[i as usize].store(sys::rdtsc_ordered() - t0, Ordering::Relaxed);
    }
    PF_DONE.store(1, Ordering::SeqCst);
    sys::thread_exit()
}

fn page_faults() {
    sys::prefault(PF_POOL, PF_N);
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 0).unwrap();
    let t = rt::alloc_slot();
    sys::thread_create(cap::SELF_TASK, t, thread::alloc_utcb(), thread::my_priority()).unwrap();
    sys::thread_set_pager(t, me, 1).unwrap();
    let stack = alloc::vec![0u8; 16384].leak();
    sys::thread_start(t, faulter as *const () as u64, ((stack.as_ptr() as u64 + 16384) & !15) - 8, 0).unwrap();
    let mut m = Msg::empty();
    let mut r = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    for i in 0..PF_N {
        if r.is_err() || m.label() != label::PAGE_FAULT {
            println!("bench: unexpected message while paging");
            return;
        }
        let mut a = Msg::new(0, &[]);
        a.push_item(Fpage::mem(PF_POOL + i * 4096, 12, mem::READ | mem::WRITE), m.word(1));
        if i + 1 == PF_N {
            let _ = ipc::reply(&a);
            break;
        }
        m = a;
        r = ipc::reply_wait(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    }
    while PF_DONE.load(Ordering::SeqCst) == 0 {
        sys::yield_now();
    }
    report("page_fault_user_pager", PF_TICKS.iter().skip(1).map(|a| a.load(Ordering::Relaxed)).collect());
}

// ---- map one page by IPC

fn map_by_ipc() {
    let peer = rt::alloc_slot_pair();
    if spawn("map_test peer", peer).is_err() {
        println!("bench: cannot start the map peer");
        return;
    }
    const POOL: u64 = rt::layout::BENCH[2];
    sys::prefault(POOL, 64);
    let mut v = Vec::new();
    for round in 0..5 {
        for i in 0..64u64 {
            let mut m = Msg::new(1, &[]);
            m.push_item(Fpage::mem(POOL + i * 4096, 12, mem::READ | mem::WRITE), i * 4096);
            let t0 = sys::rdtsc_ordered();
            let ok = ipc::call(peer, &mut m, ipc::FOREVER).is_ok();
            let dt = sys::rdtsc_ordered() - t0;
            if ok && round > 0 {
                v.push(dt);
            }
        }
    }
    report("map_page_ipc", v);
}

// ---- demap a page mapped into N spaces

fn demap_fanout(n: usize) {
    const PAGE: u64 = rt::layout::BENCH[3];
    sys::prefault(PAGE, 1);
    let tasks: Vec<u64> = (0..n)
        .map(|_| {
            let t = rt::alloc_slot();
            sys::task_create(t, 16).expect("task for the fan-out");
            t
        })
        .collect();
    let mut v = Vec::new();
    for round in 0..11 {
        for t in &tasks {
            // SAFETY: maps our page into tasks we made; nothing of ours changes.
            unsafe { sys::mem_map(*t, PAGE, PAGE, 1, mem::READ) }.expect("map for the fan-out");
        }
        let t0 = sys::rdtsc_ordered();
        // SAFETY: without UNMAP_SELF our own mapping stays.
        unsafe { sys::unmap(Fpage::mem(PAGE, 12, 0), 0) }.expect("demap");
        let dt = sys::rdtsc_ordered() - t0;
        if round > 0 {
            v.push(dt);
        }
    }
    for t in tasks {
        let _ = sys::task_destroy(t);
    }
    report(&alloc::format!("demap_fanout_{}", n), v);
}

// ---- interrupt → user-level driver

const COM1: u16 = 0x3F8;
static IRQ_T0: AtomicU64 = AtomicU64::new(0);
static IRQ_N: AtomicU64 = AtomicU64::new(0);
static IRQ_TICKS: [AtomicU64; 40] = [const { AtomicU64::new(0) }; 40];
static IRQ_SLOT: AtomicU64 = AtomicU64::new(0);

fn outb(port: u16, v: u8) {
    // SAFETY: COM1's ports are granted to this program by its manifest entry.
    unsafe { core::arch::asm!("out dx, al", in("dx") port, in("al") v, options(nostack, nomem)) };
}

fn irq_driver(_: u64) {
    let slot = IRQ_SLOT.load(Ordering::SeqCst);
    if sys::irq_attach(slot, 0x1_0000).is_err() {
        return;
    }
    let mut m = Msg::empty();
    while (IRQ_N.load(Ordering::SeqCst) as usize) < IRQ_TICKS.len() {
        if ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER).is_err() {
            break;
        }
        let t1 = sys::rdtsc_ordered();
        outb(COM1 + 1, 0); // transmitter-empty interrupt off again
        let n = IRQ_N.load(Ordering::SeqCst) as usize;
        IRQ_TICKS[n].store(t1 - IRQ_T0.load(Ordering::SeqCst), Ordering::SeqCst);
        let _ = sys::irq_ack(slot);
        IRQ_N.store(n as u64 + 1, Ordering::SeqCst);
    }
}

fn irq_latency() {
    let slot = rt::alloc_slot();
    if rt::env::io(COM1 as u64, 3).is_err() || rt::env::irq(4, slot).is_err() {
        println!("bench: no COM1 ports or IRQ 4 granted; irq_to_driver not measured");
        return;
    }
    IRQ_SLOT.store(slot, Ordering::SeqCst);
    // The driver thread runs above us, so the interrupt's message preempts us at once.
    let _ = thread::spawn(irq_driver, 0, thread::my_priority()).unwrap();
    sys::sleep_us(2_000);
    let drv_prio = thread::my_priority();
    let _ = drv_prio;
    for i in 0..IRQ_TICKS.len() as u64 {
        IRQ_T0.store(sys::rdtsc_ordered(), Ordering::SeqCst);
        outb(COM1 + 1, 0x02); // transmitter empty: the UART raises IRQ 4 at once
        while IRQ_N.load(Ordering::SeqCst) <= i {
            sys::yield_now();
        }
    }
    report("irq_to_driver", IRQ_TICKS.iter().skip(1).map(|a| a.load(Ordering::SeqCst)).collect());
}

fn main() -> i32 {
    SMOKE.store(rt::args().split(' ').skip(1).any(|a| a == "smoke"), Ordering::Relaxed);
    let tag = Tag::new(1, 1).0;
    measure("null_syscall", || {
        sys::null();
    });

    let echo = rt::alloc_slot_pair();
    if spawn("echo fast", echo).is_err() {
        println!("bench: cannot start echo");
        return 1;
    }
    let mut bad = 0u64;
    measure("ipc_rtt_8b_cross", || {
        let (e, _, w) = ipc::call_regs(echo, tag, 8);
        bad += (e != 0 || w != 8) as u64;
    });
    // Once more, warm, for `cargo xtask bench kernel`'s breakdown: a debugger steps
    // through this round trip an instruction at a time.
    // (Its code page is touched first: the first call would take a page fault there.)
    bad += (probe_rtt(0, echo, tag) != 8) as u64;
    bad += (probe_rtt(PROBE_MAGIC, echo, tag) != 8) as u64;

    // Strings each way, the kernel copying them between the two spaces: the L4 paper's
    // Figure 3 (RPC time against message size), with a server as lean as `echo fast`
    // (`echo strings`: reply-and-wait with the string it got). 512 bytes is also
    // `ipc_rtt_512b_cross`.
    let es = rt::alloc_slot_pair();
    if spawn("echo strings", es).is_ok() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut back = alloc::vec![0u8; 4096];
        for n in STRING_SIZES {
            // Register-only, as `ipc_rtt_8b_cross`: the string each way is the kernel's
            // work measured (the receive buffer is offered for each call, as a receive
            // takes the offer back).
            let (send, recv) = (&data[..n], &mut back[..n]);
            let mut one = || {
                let (e, _, w, got) = ipc::call_regs_string(es, STRING_TAG, 0, send, recv);
                bad += (e != 0 || w != n as u64 || got != n) as u64;
            };
            measure(&alloc::format!("rpc_str_{n}"), &mut one);
            if n == 512 {
                measure("ipc_rtt_512b_cross", &mut one);
                bad += (probe_str(0, es, &data[..n], &mut back[..n]) != n as u64) as u64;
                bad += (probe_str(PROBE_MAGIC, es, &data[..n], &mut back[..n]) != n as u64) as u64;
            }
            bad += (back[..n] != data[..n]) as u64;
        }
    }

    // The floor: two system calls and two address-space switches per round trip.
    let machine = rt::alloc_slot();
    if rt::env::lookup("machine", machine).is_ok() {
        let pairs = per_batch();
        let mut v = Vec::new();
        for _ in 0..nbatches() {
            // SAFETY: MEASURE_CR3 switches to the kernel's own space and back; nothing of
            // this program changes.
            let r = unsafe { sys::syscall(abi::sys::MACHINE, machine, abi::machine::MEASURE_CR3, pairs, 0, 0, 0) };
            v.push(r[1] / pairs);
        }
        v.sort_unstable();
        let pair = v[v.len() / 2];
        let null = measure_quiet(|| {
            sys::null();
        });
        println!(
            "BENCH cr3_switch_pair median={} min={} max={} samples={} unit=ticks/op",
            pair,
            v[0],
            v[v.len() - 1],
            v.len()
        );
        println!(
            "BENCH cr3_switch_floor median={} min={} max={} samples={} unit=ticks/op",
            2 * null + pair,
            2 * null + v[0],
            2 * null + v[v.len() - 1],
            v.len()
        );
    } else {
        println!("bench: no machine capability; cr3_switch_floor not measured");
    }

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
    page_faults();
    map_by_ipc();
    for n in [1, 8, 64] {
        demap_fanout(n);
    }
    irq_latency();
    if bad != 0 {
        println!("bench: {} round trips returned wrong values", bad);
        return 1;
    }
    0
}
