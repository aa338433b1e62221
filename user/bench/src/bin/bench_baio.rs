//! The `baio` benchmark (BAIO paper, Figures 3–5): a web-server-like pipelined workload.
//! Each request reads (or writes) 8 KiB at a random (or sequential) place inside a
//! working set of the segment `bench`, then processes it (a checksum of the 8 KiB);
//! the asynchronous variants issue request i + k while processing request i.
//!
//! Variants: BAIO direct and BAIO buffered (k requests in flight through the ring),
//! synchronous requests through the same service (the "raw" baseline: one request
//! at a time, `WAIT_ALL`), and a pool of k threads each making synchronous requests
//! (the paper's KAIO emulation of asynchrony).
//!
//! Prints per variant and working set `BENCH <name>_rps median=…` (requests per second
//! of guest time: meaningful under plain TCG) and `BENCH <name>_ipr median=…` (busy
//! guest ticks per request — instructions under icount — with the CPU's idle time
//! taken out). Arguments: `MiB,MiB,… REQUESTS K` (working sets, requests per figure,
//! requests in flight; the last working set is the headline one, whose metrics carry
//! no suffix). A fourth argument `reads`: the random reads of BAIO direct and buffered
//! alone, no metadata figures (the `devices` suite's runs on each device).
//!
//! First, what the disk's cache flushes cost (`metadata`): a create and a delete of a
//! segment, a write that moves a segment's written mark against one under it, and a
//! `SYNC`, each with the flushes blk sent for it (`BENCH baio_meta_*`). `meta` as the
//! only argument measures just these.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client::{self as baio, Segment};
use core::sync::atomic::{AtomicU64, Ordering};
use rt::{env, println, sys};

rt::entry!(main);

const AREA: u64 = rt::layout::SEGMENT_AREA;
/// 8 KiB requests.
const REQ_BLOCKS: u64 = 2;
const REQ_BYTES: u64 = REQ_BLOCKS * 4096;

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Direct,
    Buffered,
    Sync,
    Pool,
}

struct Run {
    variant: Variant,
    write: bool,
    random: bool,
    ws_blocks: u64,
    n: u64,
    depth: u64,
}

fn rng(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// The block of request i.
fn place(r: &Run, i: u64, x: &mut u64) -> u64 {
    let slots = r.ws_blocks / REQ_BLOCKS;
    if r.random {
        (rng(x) % slots) * REQ_BLOCKS
    } else {
        (i % slots) * REQ_BLOCKS
    }
}

fn offset(slot: u64) -> u64 {
    p::DATA + slot * REQ_BYTES
}

/// "Processing" a request: a checksum over its 8 KiB (or, for a write, filling them).
fn process(seg: &Segment, slot: u64, write: bool, i: u64) -> u64 {
    let buf = seg.bytes(offset(slot), REQ_BYTES);
    // SAFETY: 8 KiB of the shared area, 8-byte aligned (offsets are page multiples).
    let words = unsafe { core::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u64, buf.len() / 8) };
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words.iter_mut() {
        if write {
            *w = h ^ i;
        }
        h = (h ^ *w).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn kind(r: &Run) -> u64 {
    (if r.write { p::WRITE_OP } else { p::READ_OP }) | if r.variant == Variant::Buffered { p::BUFFERED } else { 0 }
}

static SEG: AtomicU64 = AtomicU64::new(0);
static NEXT: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);
static POOL: AtomicU64 = AtomicU64::new(0);

/// A pool thread: synchronous requests until the run's requests are taken.
fn worker(slot: u64) {
    // SAFETY: main stores the segment and the run before starting the pool and keeps
    // both alive until every worker has counted itself done.
    let (seg, r) =
        unsafe { (&*(SEG.load(Ordering::Acquire) as *const Segment), &*(POOL.load(Ordering::Acquire) as *const Run)) };
    let mut x = 0x1234_5678 + slot * 7919;
    loop {
        let i = NEXT.fetch_add(1, Ordering::AcqRel);
        if i >= r.n {
            break;
        }
        let b = place(r, i, &mut x);
        if r.write {
            process(seg, slot, true, i);
        }
        let _ = seg.batch_ops(&[p::op(kind(r), b, REQ_BLOCKS, slot, offset(slot))], p::WAIT_ALL);
        if !r.write {
            process(seg, slot, false, i);
        }
    }
    DONE.fetch_add(1, Ordering::AcqRel);
}

/// One run: returns (ticks, idle ticks, failures).
fn run(seg: &Segment, r: &Run) -> (u64, u64, u64) {
    let mut x = 0x9e37_79b9u64;
    let mut failed = 0;
    let t0 = sys::rdtsc_ordered();
    let idle0 = sys::idle_tsc();
    match r.variant {
        Variant::Sync => {
            for i in 0..r.n {
                let b = place(r, i, &mut x);
                if r.write {
                    process(seg, 0, true, i);
                }
                let _ = seg.batch_ops(&[p::op(kind(r), b, REQ_BLOCKS, 0, offset(0))], p::WAIT_ALL);
                failed += (seg.status(0) != p::DONE) as u64;
                if !r.write {
                    process(seg, 0, false, i);
                }
            }
        }
        Variant::Direct | Variant::Buffered => {
            // Keep `depth` requests in flight: slot i % depth, status word the same. As
            // an io_uring program does: wait for the oldest, reap every later one that
            // is done too, and refill the freed slots in one submission.
            let op = |i: u64, x: &mut u64| {
                let s = i % r.depth;
                let b = place(r, i, x);
                if r.write {
                    process(seg, s, true, i);
                }
                p::op(kind(r), b, REQ_BLOCKS, s, offset(s))
            };
            let first: alloc::vec::Vec<_> = (0..r.depth.min(r.n)).map(|i| op(i, &mut x)).collect();
            let _ = seg.submit(&first, 0);
            let mut i = 0;
            while i < r.n {
                let mut j = i;
                loop {
                    let s = j % r.depth;
                    let st = if j == i { seg.wait(s) } else { seg.status(s) };
                    if st == 0 {
                        break;
                    }
                    failed += (st != p::DONE) as u64;
                    if !r.write {
                        process(seg, s, false, j);
                    }
                    j += 1;
                    if j == r.n || j == i + r.depth {
                        break;
                    }
                }
                let next: alloc::vec::Vec<_> =
                    (i..j).filter(|k| k + r.depth < r.n).map(|k| op(k + r.depth, &mut x)).collect();
                if !next.is_empty() {
                    let _ = seg.submit(&next, 0);
                }
                i = j;
            }
        }
        Variant::Pool => {
            SEG.store(seg as *const Segment as u64, Ordering::Release);
            POOL.store(r as *const Run as u64, Ordering::Release);
            NEXT.store(0, Ordering::Release);
            DONE.store(0, Ordering::Release);
            for t in 0..r.depth {
                if rt::thread::spawn(worker, t, 100).is_err() {
                    println!("bench_baio: cannot start pool thread {}", t);
                    DONE.fetch_add(1, Ordering::AcqRel);
                }
            }
            while DONE.load(Ordering::Acquire) < r.depth {
                sys::sleep_us(100);
            }
        }
    }
    let t1 = sys::rdtsc_ordered();
    (t1 - t0, sys::idle_tsc() - idle0, failed)
}

/// Ops per metadata figure (the written-mark figure's segment takes 256 blocks per op:
/// the test scenarios' principal 1 has 2048 blocks of quota left).
const META_N: u64 = 8;

/// One metadata figure: `op` done `META_N` times; prints rate, busy ticks and flushes
/// per op. False if an op failed.
fn meta(blk: u64, name: &str, tsc_per_ms: u64, mut op: impl FnMut(u64) -> bool) -> bool {
    let f0 = baio::flushes(blk).map_or(0, |f| f.0);
    let t0 = sys::rdtsc_ordered();
    let idle0 = sys::idle_tsc();
    let mut ok = true;
    for i in 0..META_N {
        ok &= op(i);
    }
    let (ticks, idle) = (sys::rdtsc_ordered() - t0, sys::idle_tsc() - idle0);
    let flushes = baio::flushes(blk).map_or(0, |f| f.0) - f0;
    println!(
        "BENCH baio_meta_{}_rps median={} samples={} unit=ops/s",
        name,
        META_N * tsc_per_ms * 1000 / ticks.max(1),
        META_N
    );
    println!(
        "BENCH baio_meta_{}_ipr median={} samples={} unit=busy-ticks/op",
        name,
        ticks.saturating_sub(idle) / META_N,
        META_N
    );
    // Hundredths: a figure is a whole number.
    println!(
        "BENCH baio_meta_{}_flushes median={} samples={} unit=flushes/100-ops",
        name,
        flushes * 100 / META_N,
        META_N
    );
    ok
}

/// What the flushes at metadata updates cost (see the module's head).
fn metadata(blk: u64, tsc_per_ms: u64) -> bool {
    match baio::flushes(blk) {
        Ok((_, true)) => println!("bench_baio: the disk has a write cache: blk flushes it"),
        _ => println!("bench_baio: the disk offers no flush: the flush counts are 0"),
    }
    let mut ok = meta(blk, "create_delete", tsc_per_ms, |i| {
        let name = format!("meta{i}");
        baio::create(blk, &name, 256, 0).is_ok() && baio::delete(blk, &name).is_ok()
    });
    // Each write lands 256 blocks past the last: one written-mark move each (256 blocks
    // of zeros, two flushes), against the same writes again under the mark.
    if let Err(e) = baio::create(blk, "metamark", 256 * META_N, 0) {
        println!("bench_baio: create metamark: {}", e.name());
        return false;
    }
    let s = match baio::open(blk, "metamark", 3, AREA) {
        Ok(s) => s,
        Err(e) => {
            println!("bench_baio: open metamark: {}", e.name());
            return false;
        }
    };
    let write = |i: u64| {
        s.batch_ops(&[p::op(p::WRITE_OP, i * 256, 1, 0, p::DATA)], p::WAIT_ALL).is_ok() && s.status(0) == p::DONE
    };
    ok &= meta(blk, "mark_write", tsc_per_ms, write);
    ok &= meta(blk, "write", tsc_per_ms, write);
    ok &= meta(blk, "sync", tsc_per_ms, |_| s.sync().is_ok());
    let _ = s.close();
    ok &= baio::delete(blk, "metamark").is_ok();
    ok
}

fn main() -> i32 {
    if rt::args().split(' ').nth(1) == Some("meta") {
        let blk = rt::alloc_slot();
        if env::lookup("blk", blk).is_err() {
            println!("bench_baio: no block service");
            return 1;
        }
        let ok = metadata(blk, sys::kernel_info().tsc_per_ms.max(1));
        println!("bench_baio: done");
        return if ok { 0 } else { 1 };
    }
    let mut args = rt::args().split(' ').skip(1);
    let ws: Vec<u64> = args.next().map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect()).unwrap_or_default();
    let n: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let depth = args.next().and_then(|v| v.parse().ok()).unwrap_or(8u64).clamp(1, 64);
    let reads_only = args.next() == Some("reads");
    if ws.is_empty() {
        println!("bench_baio: usage: bench_baio MiB[,MiB…] [REQUESTS] [DEPTH] [reads]");
        return 1;
    }
    let blk = rt::alloc_slot();
    if env::lookup("blk", blk).is_err() {
        println!("bench_baio: no block service");
        return 1;
    }
    // The metadata figures first: their segment opens at AREA too.
    let tsc_per_ms = sys::kernel_info().tsc_per_ms.max(1);
    if !reads_only && !metadata(blk, tsc_per_ms) {
        println!("bench_baio: a metadata operation failed");
        return 1;
    }
    let seg = match baio::open(blk, "bench", 3, AREA) {
        Ok(s) => s,
        Err(e) => {
            println!("bench_baio: cannot open segment bench: {:?}", e);
            return 1;
        }
    };
    let headline = *ws.last().unwrap_or(&0);
    // The cache's counters after each buffered run, when the manifest gives it.
    let cache = rt::alloc_slot();
    let cache = env::lookup("cache", cache).is_ok().then_some(cache);
    let variants = [
        (Variant::Direct, "baio_direct"),
        (Variant::Buffered, "baio_buffered"),
        (Variant::Sync, "sync"),
        (Variant::Pool, "threadpool"),
    ];
    let mut failures = 0;
    for &w in &ws {
        let ws_blocks = (w * 256).min(seg.blocks) / REQ_BLOCKS * REQ_BLOCKS;
        for write in [false, true] {
            for random in [true, false] {
                for (v, vname) in variants {
                    // Sequential runs: direct and synchronous only (as the issue names them).
                    if !random && !matches!(v, Variant::Direct | Variant::Sync) {
                        continue;
                    }
                    if reads_only && (write || !random || !matches!(v, Variant::Direct | Variant::Buffered)) {
                        continue;
                    }
                    let r = Run { variant: v, write, random, ws_blocks, n, depth };
                    // Warm up, then measure. Buffered runs first read the working set
                    // once in order (up to 128 MiB), so a cache it fits in is warm.
                    let _ = run(&seg, &Run { n: n / 4, ..r });
                    if v == Variant::Buffered {
                        let _ = run(
                            &seg,
                            &Run { n: (ws_blocks / REQ_BLOCKS).min(16384), write: false, random: false, ..r },
                        );
                    }
                    let (ticks, idle, failed) = run(&seg, &r);
                    failures += failed;
                    let suffix = if w == headline { String::new() } else { format!("_ws{}", w) };
                    let name = format!(
                        "{}_{}_{}{}",
                        vname,
                        if random { "random" } else { "seq" },
                        if write { "write" } else { "read" },
                        suffix
                    );
                    let rps = n * tsc_per_ms * 1000 / ticks.max(1);
                    let ipr = ticks.saturating_sub(idle) / n;
                    println!("BENCH {}_rps median={} samples={} unit=requests/s", name, rps, n);
                    println!("BENCH {}_ipr median={} samples={} unit=busy-ticks/request", name, ipr, n);
                    if let (Variant::Buffered, Some(Ok(s))) = (v, cache.map(cache_api::client::stats)) {
                        println!("bench_baio: the cache after {}: {} blocks of {} pages, {} resident, hits {}, misses {}, lookup calls {}", name, s[8], s[11], s[2], s[0], s[1], s[12]);
                    }
                }
            }
        }
    }
    println!("bench_baio: done ({} failed requests)", failures);
    if failures == 0 {
        0
    } else {
        1
    }
}
