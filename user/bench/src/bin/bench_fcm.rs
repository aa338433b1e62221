//! Figure 5 of the K42 paper (`k42` suite, "Figure 5"): files' per-file state component
//! (`files.fcm`, crate `fcm`) single against replicated (and `auto`), under a
//! Postmark-like workload and an N-way SDET-like one, throughput against CPUs.
//!
//! - **Postmark-like** (one client, as Postmark is one program): a pool of `POOL` small
//!   files (512 B to 4 KiB), then transactions, each a create or a delete paired with a
//!   read or an append of a random file (Katcher's biases: even), and a `STAT` of the
//!   file it touched (Postmark's look at what it made). Metric `fig5_postmark_{imp}`:
//!   busy ticks per transaction (one CPU; instructions under icount; the CPU's idle
//!   ticks, waiting for the disk, taken out), and
//!   `fig5_postmark_{imp}_tps_{N}cpu`: transactions per second on an N-CPU machine.
//! - **SDET-like** (N scripts, one per CPU, all at once): each script creates its own
//!   file, writes it, reads it back, reads the file the scripts share (their common
//!   working set), looks at both (`STAT`), closes and removes its own. Metric
//!   `fig5_sdet_{imp}`: busy ticks per script (one CPU), and `fig5_sdet_{imp}_sps_{N}cpu`:
//!   scripts per second with one script thread per CPU. (SDET's program starts are not
//!   in it.)
//!
//! The implementation is set through the reconfiguration protocol before each run
//! (`swap files.fcm single|replicated|auto`). Per-second figures come from the guest's
//! clock (plain TCG: the host's; a figure of a quiet host only).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use files_api::client as f;
use rt::{env, println, sys};

use bench::report;

rt::entry!(main);

static FILES: AtomicU64 = AtomicU64::new(0);
static START: AtomicU64 = AtomicU64::new(0);
static UNTIL: AtomicU64 = AtomicU64::new(0);
static COUNT: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static DONE: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

const IMPS: [&str; 3] = ["single", "replicated", "auto"];
const POOL: u64 = 64;
const SHARED: &str = "/sdet_common";

/// The TSC less the ticks every CPU spent idle (the kernel's count): busy ticks, with
/// the waits for the disk taken out (as Figure 7's).
fn busy_now() -> u64 {
    let idle: u64 = (0..sys::smp_info().cpus).map(|c| sys::cpu_info(c).map(|i| i.idle_tsc).unwrap_or(0)).sum();
    sys::rdtsc().wrapping_sub(idle)
}

fn fail(what: &str, e: impl core::fmt::Debug) {
    if FAILED.fetch_add(1, Ordering::Relaxed) < 5 {
        println!("bench_fcm: {what}: {e:?}");
    }
}

/// A small random generator (xorshift): the workload is the same each run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

static DATA: [u8; 4096] = [b'x'; 4096];

/// Postmark's file `i` of the pool, `len` bytes.
fn pm_create(srv: u64, i: u64, len: u64) {
    let path = format!("/pm_{i}");
    match f::open(srv, &path, true) {
        Ok((h, _)) => {
            if let Err(e) = f::write(srv, h, 0, &DATA[..len as usize]) {
                fail("postmark write", e);
            }
            let _ = f::close(srv, h);
        }
        Err(e) => fail("postmark create", e),
    }
}

/// One Postmark-like transaction.
fn pm_transaction(srv: u64, r: &mut Rng, live: &mut [bool]) {
    let i = r.next() % POOL;
    let path = format!("/pm_{i}");
    // Create or delete.
    if live[i as usize] {
        if let Err(e) = f::remove(srv, &path) {
            fail("postmark delete", e);
        }
        live[i as usize] = false;
    } else {
        pm_create(srv, i, 512 + r.next() % 3584);
        live[i as usize] = true;
    }
    // Read or append, on a live file.
    let j = (0..POOL).map(|k| (i + 1 + k) % POOL).find(|&k| live[k as usize]).unwrap_or(i);
    let path = format!("/pm_{j}");
    match f::open(srv, &path, false) {
        Ok((h, size)) => {
            let r = if r.next().is_multiple_of(2) {
                let mut buf = [0u8; 4096];
                f::read_into(srv, h, 0, &mut buf[..size.min(4096) as usize]).map(|_| 0)
            } else {
                f::write(srv, h, size, &DATA[..512])
            };
            if let Err(e) = r {
                fail("postmark read/append", e);
            }
            let _ = f::close(srv, h);
            if let Err(e) = f::fcm_stat(srv, &path) {
                fail("postmark stat", e);
            }
        }
        Err(e) => fail("postmark open", e),
    }
}

/// One SDET-like script on CPU `cpu` (its `n`th).
fn sdet_script(srv: u64, cpu: u64, n: u64) {
    let own = format!("/sdet_{cpu}_{}", n % 4);
    let r = (|| {
        let (h, _) = f::open(srv, &own, true)?;
        f::write(srv, h, 0, &DATA[..2048])?;
        let mut buf = [0u8; 2048];
        f::read_into(srv, h, 0, &mut buf)?;
        let (s, _) = f::open(srv, SHARED, false)?;
        f::read_into(srv, s, 0, &mut buf)?;
        f::fcm_stat(srv, SHARED)?;
        f::fcm_stat(srv, &own)?;
        f::close(srv, s)?;
        f::close(srv, h)?;
        f::remove(srv, &own)
    })();
    if let Err(e) = r {
        fail("sdet script", e);
    }
}

fn sdet_thread(cpu: u64) {
    for _ in 0..1000 {
        if sys::cpu() == cpu {
            break;
        }
        sys::sleep_us(1000);
    }
    let srv = FILES.load(Ordering::Relaxed);
    // Learn the endpoints outside the count.
    let _ = f::profile(srv);
    while sys::now_us() < START.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    let until = UNTIL.load(Ordering::Relaxed);
    let mut n = 0;
    while sys::now_us() < until {
        sdet_script(srv, cpu, n);
        n += 1;
    }
    COUNT[cpu as usize].store(n, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
}

/// Set `files.fcm` to `imp` (0 single, 1 replicated, 2 auto); from single each time.
fn set(srv: u64, imp: usize) {
    let mut why = [0u8; 128];
    for i in [0, imp] {
        if let Err(e) = swap_api::client::swap(srv, 1, i, &mut why) {
            fail("swap files.fcm", e.0);
        }
    }
}

fn main() -> i32 {
    let smoke = rt::args().split(' ').any(|a| a == "smoke");
    let (transactions, scripts, run_us, runs) = if smoke { (40, 10, 200_000, 1) } else { (400, 100, 1_000_000, 3) };
    let srv = rt::alloc_slot();
    if env::lookup("files", srv).is_err() {
        println!("bench_fcm: no files server");
        return 1;
    }
    FILES.store(srv, Ordering::Relaxed);
    let cpus = sys::smp_info().cpus.min(8);
    let _ = sys::thread_set_cpu(abi::cap::SELF_THREAD, 0);
    match f::open(srv, SHARED, true) {
        Ok((h, _)) => {
            let _ = f::write(srv, h, 0, &DATA[..2048]);
            let _ = f::close(srv, h);
        }
        Err(e) => fail("the shared file", e),
    }
    // A round of each workload first, untimed: the first implementation measured would
    // otherwise pay the filesystem's first touches (its cache, its free-space hints).
    {
        let mut r = Rng(1);
        let mut live = [false; POOL as usize];
        for _ in 0..transactions {
            pm_transaction(srv, &mut r, &mut live);
        }
        for i in 0..POOL {
            if live[i as usize] {
                let _ = f::remove(srv, &format!("/pm_{i}"));
            }
        }
        for n in 0..scripts {
            sdet_script(srv, 0, n);
        }
    }
    for (k, imp) in IMPS.iter().enumerate() {
        set(srv, k);
        // Postmark-like: one client on CPU 0.
        let mut ticks = Vec::new();
        let mut tps = Vec::new();
        for run in 0..runs {
            let mut r = Rng(0x9e37_79b9_7f4a_7c15 + run);
            let mut live = [false; POOL as usize];
            for i in 0..POOL / 2 {
                pm_create(srv, i, 512 + r.next() % 3584);
                live[i as usize] = true;
            }
            let (t, us) = (busy_now(), sys::now_us());
            for _ in 0..transactions {
                pm_transaction(srv, &mut r, &mut live);
            }
            let (t, us) = (busy_now().wrapping_sub(t), sys::now_us() - us);
            ticks.push(t / transactions);
            tps.push(transactions * 1_000_000 / us.max(1));
            for i in 0..POOL {
                if live[i as usize] {
                    let _ = f::remove(srv, &format!("/pm_{i}"));
                }
            }
        }
        if cpus == 1 {
            report(&format!("fig5_postmark_{imp}"), "ticks", ticks);
        }
        report(&format!("fig5_postmark_{imp}_tps_{cpus}cpu"), "transactions/s", tps);
        // SDET-like on one CPU: ticks per script.
        if cpus == 1 {
            let mut v = Vec::new();
            for _ in 0..runs {
                let t = busy_now();
                for n in 0..scripts {
                    sdet_script(srv, 0, n);
                }
                v.push(busy_now().wrapping_sub(t) / scripts);
            }
            report(&format!("fig5_sdet_{imp}"), "ticks", v);
        }
        // N-way SDET-like: a script thread per CPU.
        let mut sps = Vec::new();
        for _ in 0..runs {
            DONE.store(0, Ordering::Relaxed);
            let start = sys::now_us() + 200_000;
            UNTIL.store(start + run_us, Ordering::Relaxed);
            START.store(start, Ordering::Release);
            for cpu in 0..cpus {
                match rt::thread::spawn(sdet_thread, cpu, rt::thread::my_priority()) {
                    Ok(t) => {
                        let _ = sys::thread_set_cpu(t.slot, cpu);
                    }
                    Err(e) => {
                        println!("bench_fcm: no script thread: {:?}", e);
                        return 1;
                    }
                }
            }
            while DONE.load(Ordering::Acquire) < cpus {
                sys::sleep_us(10_000);
            }
            let total: u64 = (0..cpus as usize).map(|c| COUNT[c].load(Ordering::Relaxed)).sum();
            sps.push(total * 1_000_000 / run_us);
        }
        report(&format!("fig5_sdet_{imp}_sps_{cpus}cpu"), "scripts/s", sps);
    }
    let failed = FAILED.load(Ordering::Relaxed);
    if failed != 0 {
        println!("bench_fcm: {} calls failed", failed);
        return 1;
    }
    println!("bench_fcm: done");
    0
}
