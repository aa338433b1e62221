//! `fuzz_hostile SEED CALLS [biased]`: four threads issue CALLS random system calls in
//! all, then report the count to PEER. Its own vital capabilities are moved out of
//! reach first, so that the random calls attack the kernel, not the fuzzer.
//!
//! Two generators. The raw one draws numbers and arguments from hostile values (edge
//! values, kernel and non-canonical pointers, random UTCB string descriptors): most
//! calls die in argument checks. The biased one (`biased`) gets past them: it names
//! live capabilities (child tasks, their threads, the workers, badged and reduced
//! copies, saved replies), page edges in memory it holds and in the children, and sends
//! well-formed messages with memory and capability items between the workers, so that
//! the deep paths (mapping database, grants over cycles, revocation, task teardown,
//! thread control) run on state that keeps changing.
#![no_std]
#![no_main]

use abi::{cap, rights, sys as nr};
use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc::{self, Msg};
use rt::{sys, thread};

use tests::Rng;

rt::entry!(main);

const WORKERS: u64 = 4;
const HIDE: u64 = 1000; // slots 1000..1005 hold the vital capabilities meanwhile
/// Hidden while the workers run: its own task and thread, root, its peer, and its memory
/// server (random requests there could set its resident limit to a few pages and make
/// every later touch a page fault: the program would attack its own speed, not the
/// kernel; the memory server's protocol has a fuzzer of its own, `fuzz_mem`).
const VITAL: [u64; 5] = [cap::SELF_TASK, cap::SELF_THREAD, cap::PARENT, cap::PEER, cap::PAGER];
const SANDBOX: u64 = rt::layout::SCRATCH;

static GO: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);
static SEED: AtomicU64 = AtomicU64::new(0);
static PER_WORKER: AtomicU64 = AtomicU64::new(0);

/// A hostile argument: edge values, kernel and non-canonical pointers, sandbox pages,
/// small numbers (slots, counts), random bits. Never the hidden slots.
fn arg(r: &mut Rng) -> u64 {
    let v = match r.below(16) {
        0 => 0,
        1 => r.below(48),
        2 => r.below(8),
        3 => u64::MAX - r.below(3),
        4 => 0xffff_8000_0000_0000 + r.below(1 << 30),
        5 => 0xffff_ffff_8010_0000,
        6 => 0x0000_8000_0000_0000 - r.below(2) * 4096,
        7 | 8 => SANDBOX + r.below(64) * 4096,
        9 => SANDBOX + r.below(1 << 20),
        10 => 1 << r.below(64),
        11 => r.below(5000),
        12 => r.next() & 0x3ff,
        13 => abi::ipc::timeouts(r.below(3000) as u32, r.below(3000) as u32),
        _ => r.next(),
    };
    if (HIDE..HIDE + 8).contains(&v) {
        v + 16
    } else {
        v
    }
}

/// Whether `va` may lie in this program's own memory (image, heap, UTCBs, stacks).
fn own(va: u64) -> bool {
    va < 0x1_0000_0000
        || (0x0000_2000_0000_0000..0x0000_2001_0000_0000).contains(&va)
        || (0x0000_7f00_0000_0000..0x0000_8000_0000_0000).contains(&va)
}

/// A random flexpage for UNMAP, kept off this program's own memory and hidden slots.
fn tame_fpage(raw: u64, r: &mut Rng) -> u64 {
    use abi::fpage::{Fpage, CAP, MEM};
    let f = Fpage(if r.below(2) == 0 {
        raw
    } else {
        Fpage::mem(SANDBOX + r.below(64) * 4096, 12 + r.below(3), r.below(8)).0
    });
    match f.kind() {
        MEM if f.is_valid() => {
            let (lo, hi) = (f.base(), f.base().saturating_add(f.size()));
            let overlaps = |a: u64, b: u64| lo < b && a < hi;
            if overlaps(0, 0x1_0000_0000)
                || overlaps(0x0000_2000_0000_0000, 0x0000_2001_0000_0000)
                || overlaps(0x0000_7f00_0000_0000, 0x0000_8000_0000_0000)
                || f.size() > (1 << 40)
            {
                Fpage::mem(SANDBOX, 12, abi::mem::RIGHTS_MASK).0
            } else {
                f.0
            }
        }
        CAP if f.is_valid() && f.base() < HIDE + 8 && f.base() + f.size() > HIDE => {
            Fpage::caps(32, 3, abi::rights::ALL).0
        }
        _ => f.0,
    }
}

/// Slots of the live capabilities the biased generator works on (set up by `main`):
/// child tasks, threads in them, SEND copies of the workers, and free slots the calls
/// fill (copies, saved replies, received capabilities).
const LIVE: u64 = 32;
const LIVE_SLOTS: u64 = 32;
const CHILD_TASKS: u64 = LIVE; // 3 tasks
const CHILD_THREADS: u64 = LIVE + 3; // 3 threads, one in each
const WORKER_CAPS: u64 = LIVE + 8; // SEND copies of the 4 workers
/// Where workers receive memory items (their receive window).
const RECV_AREA: u64 = rt::layout::SCRATCH2;
const SANDBOX_PAGES: u64 = 64;
/// Where pages land in the child tasks.
const CHILD_AT: u64 = 0x10_0000;

fn live_slot(r: &mut Rng) -> u64 {
    match r.below(10) {
        0 => r.below(HIDE),
        1 => LIVE + LIVE_SLOTS + r.below(4),
        _ => LIVE + r.below(LIVE_SLOTS),
    }
}

/// A page edge: the first, last or a middle byte of a page, or the next page.
fn edge(base: u64, pages: u64, r: &mut Rng) -> u64 {
    let p = base + r.below(pages + 1) * 4096;
    match r.below(6) {
        0 => p + 4095,
        1 => p + 8,
        2 => p.wrapping_sub(4096),
        _ => p,
    }
}

fn child_task(r: &mut Rng) -> u64 {
    if r.below(8) == 0 {
        live_slot(r)
    } else {
        CHILD_TASKS + r.below(3)
    }
}

fn biased_call(r: &mut Rng, me: u64) {
    let u = ipc::utcb();
    let sandbox = |r: &mut Rng| edge(SANDBOX, SANDBOX_PAGES, r);
    let child = |r: &mut Rng| edge(CHILD_AT, 64, r);
    let pages = |r: &mut Rng| match r.below(8) {
        0 => 0,
        1 => abi::mem::MAX_PAGES_PER_CALL + r.below(2),
        _ => 1 + r.below(4),
    };
    let arm = r.below(19);
    ARM[me as usize].store(arm, Ordering::Relaxed);
    let (no, a) = match arm {
        0..=4 => {
            // A well-formed message, maybe with items, to another worker (or a child's
            // thread, which never receives: the send times out).
            let mut m = Msg::new(r.below(1 << 20), &[r.next(), r.next()][..r.below(3) as usize]);
            for _ in 0..r.below(4) {
                match r.below(3) {
                    0 => {
                        m.push_item(
                            abi::fpage::Fpage::mem(
                                (SANDBOX + r.below(SANDBOX_PAGES) * 4096) & !0x3fff,
                                12 + r.below(3),
                                r.below(8),
                            ),
                            (r.next() & !0xfff) | r.below(2),
                        );
                    }
                    1 => {
                        m.push_item(
                            abi::fpage::Fpage::caps(live_slot(r) & !1, r.below(2), r.below(8)),
                            (live_slot(r) << 12) | r.below(2),
                        );
                    }
                    _ => {
                        m.push_item(abi::fpage::Fpage(r.next() & !3), r.next());
                    }
                }
            }
            let dest = if r.below(6) == 0 { live_slot(r) } else { WORKER_CAPS + r.below(4) };
            // Mostly polls (a wait costs a timer tick): a call now and then, which waits
            // a tick for its answer.
            let send_to = if r.below(16) == 0 { 1 } else { 0 };
            count(
                if r.below(8) == 0 {
                    ipc::call(dest, &mut m, abi::ipc::timeouts(send_to, 1))
                } else {
                    ipc::send(dest, &m, abi::ipc::timeouts(send_to, 0))
                }
                .is_ok(),
            );
            return;
        }
        5..=6 => {
            // Receive (items land in our window), maybe save the reply right, answer.
            ipc::set_windows(
                abi::fpage::Fpage::mem(RECV_AREA + me * 0x10_0000, 12 + r.below(5), abi::mem::RIGHTS_MASK),
                abi::fpage::Fpage::caps(LIVE + 16, 4, abi::rights::ALL),
                abi::fpage::Fpage(0),
            );
            let mut m = Msg::empty();
            let got =
                ipc::recv(ipc::RECV_ANY, &mut m, abi::ipc::timeouts(0, if r.below(16) == 0 { 1 } else { 0 })).is_ok();
            count(got);
            if got {
                match r.below(3) {
                    0 => {
                        let _ = ipc::save_reply(LIVE + 16 + r.below(16));
                    }
                    1 => {
                        let _ = ipc::reply(&Msg::new(0, &[r.next()]));
                    }
                    _ => {}
                }
            }
            return;
        }
        // From the sandbox or from what other workers sent us (their windows).
        7 => {
            let src = if r.below(3) == 0 { edge(RECV_AREA + r.below(4) * 0x10_0000, 16, r) } else { sandbox(r) };
            (
                nr::MEM_MAP,
                [
                    child_task(r),
                    src,
                    child(r),
                    pages(r),
                    r.below(8) | if r.below(8) == 0 { abi::mem::GRANT } else { 0 },
                    0,
                ],
            )
        }
        // Mostly what was derived from the sandbox; now and then the sandbox itself.
        8 => (
            nr::UNMAP,
            [
                tame_fpage(
                    abi::fpage::Fpage::mem(SANDBOX + r.below(SANDBOX_PAGES) * 4096, 12 + r.below(4), r.below(8)).0,
                    r,
                ),
                (r.below(8) == 0) as u64,
                0,
                0,
                0,
                0,
            ],
        ),
        9 => (
            nr::CAP_COPY,
            [live_slot(r), live_slot(r), r.below(8), if r.below(3) == 0 { r.below(100) } else { 0 }, 0, 0],
        ),
        10 => (nr::CAP_GIVE, [child_task(r), live_slot(r), r.below(1100), r.below(8), 0, 0]),
        11 => (nr::CAP_DELETE, [LIVE + 16 + r.below(16), 0, 0, 0, 0, 0]),
        12 => (
            nr::THREAD_CREATE,
            [child_task(r), LIVE + 16 + r.below(16), edge(0x7e00_0000_0000, 4, r), r.below(120), 0, 0],
        ),
        13 => {
            let op = 1 + r.below(7);
            let t = if r.below(3) == 0 { live_slot(r) } else { CHILD_THREADS + r.below(3) };
            (nr::THREAD_CONTROL, [t, op, child(r), child(r), r.next(), 0])
        }
        // New tasks, also where destroyed children were (so that they come back).
        14 => (
            nr::TASK_CREATE,
            [
                if r.below(2) == 0 { CHILD_TASKS + r.below(3) } else { LIVE + 16 + r.below(16) },
                8 + r.below(64),
                0,
                0,
                0,
                0,
            ],
        ),
        15 if r.below(8) == 0 => (nr::TASK_DESTROY, [CHILD_TASKS + r.below(3), 0, 0, 0, 0, 0]),
        15 => (nr::TASK_DESTROY, [LIVE + 16 + r.below(16), 0, 0, 0, 0, 0]),
        16 => (nr::TASK_INFO, [live_slot(r), 0, 0, 0, 0, 0]),
        17 => (nr::CAP_INFO, [live_slot(r), 0, 0, 0, 0, 0]),
        // (The sandbox is not touched again: a page granted away is not given back by
        // the memory server, whose refusal would stop the worker. Pages keep moving
        // between the workers' windows instead.)
        _ => (nr::SAVE_REPLY, [LIVE + 16 + r.below(16), 0, 0, 0, 0, 0]),
    };
    u.send_buf_len = 0;
    // SAFETY: as in `worker`: the slots named are the live ones or hidden-safe, and the
    // addresses lie in the sandbox or the children.
    count(unsafe { sys::syscall(no, a[0], a[1], a[2], a[3], a[4], a[5]) }[0] == 0);
}

static BIASED: AtomicU64 = AtomicU64::new(0);
static PROG: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static ARM: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Calls the kernel carried out (no error): the biased generator's reach.
static SUCCEEDED: AtomicU64 = AtomicU64::new(0);

fn count(ok: bool) {
    if ok {
        SUCCEEDED.fetch_add(1, Ordering::Relaxed);
    }
}

fn worker(idx: u64) {
    let mut r = Rng(SEED.load(Ordering::Relaxed) ^ (idx + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    while GO.load(Ordering::Acquire) == 0 {
        sys::yield_now();
    }
    let n = PER_WORKER.load(Ordering::Relaxed);
    if BIASED.load(Ordering::Relaxed) != 0 {
        for i in 0..n {
            PROG[idx as usize].store(i, Ordering::Relaxed);
            biased_call(&mut r, idx);
        }
        ipc::set_windows(abi::fpage::Fpage(0), abi::fpage::Fpage(0), abi::fpage::Fpage(0));
        COUNT.fetch_add(n, Ordering::SeqCst);
        FINISHED.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let u = ipc::utcb();
    for _ in 0..n {
        let mut no = r.below(nr::COUNT + 3);
        let mut a = [arg(&mut r), arg(&mut r), arg(&mut r), arg(&mut r), arg(&mut r), arg(&mut r)];
        match no {
            nr::THREAD_EXIT => no = nr::NULL,
            nr::DEBUG_PUT => a[0] = 0xffff_8000_0000_0000,
            nr::SLEEP => a[0] %= 2000,
            // Unmapping or granting away our own pages would attack the fuzzer, not the
            // kernel: keep those addresses in the sandbox.
            nr::UNMAP => a[0] = tame_fpage(a[0], &mut r),
            nr::MEM_MAP if own(a[1]) => a[1] = SANDBOX + (a[1] & 0xf_f000),
            nr::IPC_SEND | nr::IPC_RECV | nr::IPC_CALL | nr::IPC_REPLY | nr::IPC_REPLY_WAIT => {
                a[2] = abi::ipc::timeouts(r.below(2000) as u32, r.below(2000) as u32);
                u.send_buf_addr = arg(&mut r);
                u.send_buf_len = r.below(70_000);
                u.recv_buf_addr = SANDBOX + r.below(64) * 4096;
                u.recv_buf_len = r.below(8192);
            }
            _ => {}
        }
        // SAFETY: the vital capabilities are hidden and the random addresses never
        // name this program's code, data, heap or stacks, so no call can change
        // memory or threads that Rust code here relies on.
        unsafe { sys::syscall(no, a[0], a[1], a[2], a[3], a[4], a[5]) };
    }
    COUNT.fetch_add(n, Ordering::SeqCst);
    FINISHED.fetch_add(1, Ordering::SeqCst);
}

fn main() -> i32 {
    let mut args = rt::args().split(' ').skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let calls: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let biased = args.next() == Some("biased");
    SEED.store(seed.max(1), Ordering::Relaxed);
    PER_WORKER.store(calls.div_ceil(WORKERS), Ordering::Relaxed);
    BIASED.store(biased as u64, Ordering::Relaxed);
    let prio = thread::my_priority();
    if biased {
        // The live objects: three child tasks with a thread each, our sandbox present.
        for i in 0..3 {
            sys::task_create(CHILD_TASKS + i, 96).expect("child task");
            sys::thread_create(CHILD_TASKS + i, CHILD_THREADS + i, 0x7e00_0000_0000, prio).expect("child thread");
        }
        sys::prefault(SANDBOX, SANDBOX_PAGES);
    }
    // With several CPUs the workers are spread over them: hostile calls on every CPU at
    // once (and the calls themselves move threads with `SET_CPU`).
    let cpus = sys::smp_info().cpus.max(1);
    for i in 0..WORKERS {
        let t = thread::spawn(worker, i, prio).expect("worker");
        let _ = sys::thread_set_cpu(t.slot, i % cpus);
        if biased {
            sys::cap_copy(t.slot, WORKER_CAPS + i, rights::SEND, 0).expect("worker capability");
        }
        sys::cap_delete(t.slot).unwrap();
    }
    let mut hidden = [false; VITAL.len()];
    for (i, s) in VITAL.iter().enumerate() {
        // PAGER is there only for a program a memory server pages.
        hidden[i] = sys::cap_copy(*s, HIDE + i as u64, rights::ALL, 0).is_ok();
        if hidden[i] {
            sys::cap_delete(*s).unwrap();
        }
    }
    GO.store(1, Ordering::Release);
    // Wait with yields: sleeping would need no capability either, but yield keeps
    // the main thread out of the way of the workers.
    let mut waited = 0;
    while FINISHED.load(Ordering::SeqCst) < WORKERS {
        sys::sleep_us(5_000);
        waited += 1;
        if waited % 2000 == 0 {
            for w in 0..4 {
                rt::println!(
                    "fuzz_hostile: still running: worker {} at call {}, kind {}",
                    w,
                    PROG[w].load(Ordering::Relaxed),
                    ARM[w].load(Ordering::Relaxed)
                );
            }
        }
    }
    for (i, s) in VITAL.iter().enumerate().filter(|(i, _)| hidden[*i]) {
        let _ = sys::cap_delete(*s);
        sys::cap_copy(HIDE + i as u64, *s, rights::ALL, 0).unwrap();
    }
    let mut m = Msg::new(1, &[COUNT.load(Ordering::SeqCst), SUCCEEDED.load(Ordering::SeqCst)]);
    let _ = ipc::call(cap::PEER, &mut m, ipc::FOREVER);
    0
}
