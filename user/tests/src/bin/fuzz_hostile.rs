//! `fuzz_hostile SEED CALLS`: four threads issue CALLS random system calls in all
//! (random numbers, random arguments drawn from hostile values, random UTCB string
//! descriptors), then report the count to PEER. Its own vital capabilities are moved
//! out of reach first, so that the random calls attack the kernel, not the fuzzer.
#![no_std]
#![no_main]

use abi::{cap, rights, sys as nr};
use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc::{self, Msg};
use rt::{sys, thread};

rt::entry!(main);

const WORKERS: u64 = 4;
const HIDE: u64 = 1000; // slots 1000..1004 hold the vital capabilities meanwhile
const SANDBOX: u64 = rt::layout::SCRATCH;

static GO: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);
static SEED: AtomicU64 = AtomicU64::new(0);
static PER_WORKER: AtomicU64 = AtomicU64::new(0);

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

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
    va < 0x1_0000_0000 || (0x0000_2000_0000_0000..0x0000_2001_0000_0000).contains(&va) || (0x0000_7f00_0000_0000..0x0000_8000_0000_0000).contains(&va)
}

/// A random flexpage for UNMAP, kept off this program's own memory and hidden slots.
fn tame_fpage(raw: u64, r: &mut Rng) -> u64 {
    use abi::fpage::{Fpage, CAP, MEM};
    let f = Fpage(if r.below(2) == 0 { raw } else { Fpage::mem(SANDBOX + r.below(64) * 4096, 12 + r.below(3), r.below(8)).0 });
    match f.kind() {
        MEM if f.is_valid() => {
            let (lo, hi) = (f.base(), f.base().saturating_add(f.size()));
            let overlaps = |a: u64, b: u64| lo < b && a < hi;
            if overlaps(0, 0x1_0000_0000) || overlaps(0x0000_2000_0000_0000, 0x0000_2001_0000_0000) || overlaps(0x0000_7f00_0000_0000, 0x0000_8000_0000_0000) || f.size() > (1 << 40) {
                Fpage::mem(SANDBOX, 12, 7).0
            } else {
                f.0
            }
        }
        CAP if f.is_valid() && f.base() < HIDE + 8 && f.base() + f.size() > HIDE => Fpage::caps(32, 3, 7).0,
        _ => f.0,
    }
}

fn worker(idx: u64) {
    let mut r = Rng(SEED.load(Ordering::Relaxed) ^ (idx + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    while GO.load(Ordering::Acquire) == 0 {
        sys::yield_now();
    }
    let n = PER_WORKER.load(Ordering::Relaxed);
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
    SEED.store(seed.max(1), Ordering::Relaxed);
    PER_WORKER.store(calls.div_ceil(WORKERS), Ordering::Relaxed);
    let prio = thread::my_priority();
    for i in 0..WORKERS {
        let t = thread::spawn(worker, i, prio).expect("worker");
        sys::cap_delete(t.slot).unwrap();
    }
    for (i, s) in [cap::SELF_TASK, cap::SELF_THREAD, cap::PARENT, cap::PEER].iter().enumerate() {
        sys::cap_copy(*s, HIDE + i as u64, rights::ALL, 0).unwrap();
        sys::cap_delete(*s).unwrap();
    }
    GO.store(1, Ordering::Release);
    // Wait with yields: sleeping would need no capability either, but yield keeps
    // the main thread out of the way of the workers.
    while FINISHED.load(Ordering::SeqCst) < WORKERS {
        sys::sleep_us(5_000);
    }
    for (i, s) in [cap::SELF_TASK, cap::SELF_THREAD, cap::PARENT, cap::PEER].iter().enumerate() {
        let _ = sys::cap_delete(*s);
        sys::cap_copy(HIDE + i as u64, *s, rights::ALL, 0).unwrap();
    }
    let mut m = Msg::new(1, &[COUNT.load(Ordering::SeqCst)]);
    let _ = ipc::call(cap::PEER, &mut m, ipc::FOREVER);
    0
}
