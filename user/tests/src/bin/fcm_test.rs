//! files' per-file state component (`files.fcm`, crate `fcm`), on two CPUs:
//!
//! 1. `files.fcm` is listed with its implementations (single, replicated, auto).
//! 2. A worker per CPU writes and reads back, through its own handles, a file both
//!    share and a file of its own, every answer checked, while this thread swaps
//!    `files.fcm` single ↔ replicated again and again. Afterwards `STAT` (which the
//!    component answers: in `replicated`, the combine of both CPUs' representatives)
//!    counts exactly the reads, writes and bytes the workers saw answered: no call lost,
//!    none counted twice, across every swap.
//! 3. `auto`: both CPUs calling on the shared file swaps it to `replicated`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use files_api::client as f;
use rt::{env, println, sys};
use swap_api::client as sw;
use tests::Checks;

rt::entry!(main);

/// Rounds each worker makes (a write and a read back on each of its two files).
const ROUNDS: u64 = 150;
const LEN: usize = 64;
const SHARED: &str = "/fcm_shared";
const OWN: [&str; 2] = ["/fcm_0", "/fcm_1"];

static FILES: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
/// Per CPU: rounds done, answers wrong, and whether it has ended.
static ROUNDS_DONE: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static BAD: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static DONE: AtomicU64 = AtomicU64::new(0);
/// Rounds to make (`u64::MAX`: until `STOP`).
static TARGET: AtomicU64 = AtomicU64::new(ROUNDS);

/// One round on `path` through handle `h`: write LEN bytes tagged with the CPU and
/// round at the worker's own place in the file, read them back.
fn round(srv: u64, h: u64, cpu: u64, i: u64) -> bool {
    let off = cpu * 4096 + (i % 32) * LEN as u64;
    let data = [b'a' + (cpu * 7 + i) as u8 % 26; LEN];
    let mut back = [0u8; LEN];
    matches!(f::write(srv, h, off, &data), Ok(n) if n == LEN as u64)
        && matches!(f::read_into(srv, h, off, &mut back), Ok(n) if n == LEN)
        && back == data
}

fn worker(cpu: u64) {
    let _ = tests::wait_until(300, || sys::cpu() == cpu);
    let c = cpu as usize;
    let srv = FILES.load(Ordering::Relaxed);
    let hs = (f::open(srv, SHARED, true), f::open(srv, OWN[c], true));
    let (Ok((shared, _)), Ok((own, _))) = hs else {
        println!("fcm_test: CPU {cpu} cannot open its files: {:?}", hs);
        BAD[c].fetch_add(1, Ordering::Relaxed);
        DONE.fetch_add(1, Ordering::Release);
        return;
    };
    let mut i = 0;
    while i < TARGET.load(Ordering::Relaxed) && !STOP.load(Ordering::Relaxed) {
        if !round(srv, shared, cpu, i) || !round(srv, own, cpu, i) || sys::cpu() != cpu {
            BAD[c].fetch_add(1, Ordering::Relaxed);
        }
        i += 1;
        ROUNDS_DONE[c].store(i, Ordering::Relaxed);
    }
    if f::close(srv, shared).is_err() || f::close(srv, own).is_err() {
        BAD[c].fetch_add(1, Ordering::Relaxed);
    }
    DONE.fetch_add(1, Ordering::Release);
}

fn on_cpu(f: fn(u64), cpu: u64) -> bool {
    match rt::thread::spawn(f, cpu, rt::thread::my_priority()) {
        Ok(t) => sys::thread_set_cpu(t.slot, cpu).is_ok(),
        Err(_) => false,
    }
}

/// `files.fcm`'s line in files' component list.
fn fcm_line(srv: u64) -> String {
    let mut buf = [0u8; 1024];
    let n = sw::list(srv, &mut buf).unwrap_or(0);
    let text = core::str::from_utf8(&buf[..n]).unwrap_or("");
    text.lines().find(|l| l.starts_with("fcm ")).unwrap_or("").into()
}

/// The number after `key=` in `line`.
fn field(line: &str, key: &str) -> Option<u64> {
    line.split(' ').find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

fn swap_to(srv: u64, imp: usize) -> bool {
    let mut why = [0u8; 128];
    sw::swap(srv, 1, imp, &mut why).is_ok()
}

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(sys::smp_info().cpus, 2, "two CPUs");
    let srv = rt::alloc_slot();
    c.eq(env::lookup("files", srv), Ok(()), "look up files");
    FILES.store(srv, Ordering::Relaxed);
    // 1. The component.
    let line = fcm_line(srv);
    println!("fcm_test: {line}");
    c.check(line.starts_with("fcm single single,replicated,auto in=single"), "files lists component fcm, single");

    // 2. Swaps while both CPUs call.
    for cpu in 0..2 {
        c.check(on_cpu(worker, cpu), &format!("a worker on CPU {cpu}"));
    }
    let mut swaps = 0;
    let mut swap_ok = true;
    while DONE.load(Ordering::Acquire) < 2 {
        let before = ROUNDS_DONE[0].load(Ordering::Relaxed);
        swap_ok &= swap_to(srv, (swaps % 2 + 1) % 2);
        swaps += 1;
        // Let some calls run in each component.
        let _ = tests::wait_until(50, || {
            ROUNDS_DONE[0].load(Ordering::Relaxed) >= before + 2 || DONE.load(Ordering::Acquire) == 2
        });
    }
    let line = fcm_line(srv);
    println!("fcm_test: after {swaps} swaps under calls: {line}");
    c.check(swap_ok, "every swap answered Ok");
    c.check(swaps >= 4, "several swaps while both CPUs called");
    c.eq(field(&line, "swaps"), Some(swaps as u64), "files made every swap asked for");
    for cpu in 0..2 {
        c.eq(ROUNDS_DONE[cpu].load(Ordering::Relaxed), ROUNDS, &format!("CPU {cpu}'s worker made every round"));
        c.eq(BAD[cpu].load(Ordering::Relaxed), 0, &format!("every answer on CPU {cpu} right, on its CPU"));
    }
    // Each worker: per file ROUNDS writes and ROUNDS reads of LEN bytes, one open and
    // close; the shared file has both workers'.
    let n = ROUNDS;
    let l = LEN as u64;
    for (path, k) in [(SHARED, 2), (OWN[0], 1), (OWN[1], 1)] {
        c.eq(
            f::fcm_stat(srv, path),
            Ok([0, k * n, k * n, k * n * l, k * n * l]),
            &format!("{path}: every read and write counted once (open now, reads, writes, bytes)"),
        );
    }
    // Both ways again: the state moves with the swap.
    for imp in [1, 0] {
        c.check(swap_to(srv, imp), "swap once more");
        c.eq(f::fcm_stat(srv, SHARED).map(|s| s[1]), Ok(2 * n), "the state moved with it");
    }

    // 3. auto: both CPUs on the shared file until it swaps to replicated.
    c.check(swap_to(srv, 2), "swap files.fcm auto");
    c.check(fcm_line(srv).starts_with("fcm auto "), "auto in place");
    TARGET.store(u64::MAX, Ordering::Relaxed);
    DONE.store(0, Ordering::Release);
    for cpu in 0..2 {
        c.check(on_cpu(worker, cpu), &format!("a worker on CPU {cpu} again"));
    }
    let went = tests::wait_until(6000, || fcm_line(srv).contains("in=replicated"));
    STOP.store(true, Ordering::Relaxed);
    c.check(tests::wait_until(6000, || DONE.load(Ordering::Acquire) == 2), "the workers end");
    let line = fcm_line(srv);
    println!("fcm_test: auto, both CPUs calling: {line}");
    c.check(went, "auto swapped to replicated under calls from both CPUs");
    for (cpu, bad) in BAD.iter().enumerate() {
        c.eq(bad.load(Ordering::Relaxed), 0, &format!("every answer on CPU {cpu} right under auto"));
    }
    let r: u64 = (0..2).map(|i| ROUNDS_DONE[i].load(Ordering::Relaxed)).sum();
    c.eq(f::fcm_stat(srv, SHARED).map(|s| s[1]), Ok(2 * n + r), "auto lost no read of the shared file");
    c.finish("fcm_test")
}
