//! The `k42` suite's Scion side (K42: online reconfiguration).
//!
//! - **Table 1** (`interpose_*`, ticks per call, in this program: the same `swap` and
//!   `baio::cache` code the cache runs): a plain function call; a component call through
//!   the translation table (`Slot::get`, then a call through the interface: one
//!   indirection); the same with a counter, a trace and a timer interposer attached (the
//!   wrapper `swap::interface!` generates); the cache's own LRU `touched` method plainly
//!   and through the table with a counter; a request's admission to a slot (`begin` and
//!   `end`: the generation count the mediator needs).
//! - **Figure 4** (`swap_*`, at the cache server): an IPC round trip to the cache (a
//!   label it does not have: the loop answers), a null swap (LRU to LRU: the mediator,
//!   the state moved, the reply), and LRU ↔ MRU swaps with 0, 1, 4 and 16 client
//!   threads reading through the cache at the same time (their reads are LOOKUPs at the
//!   cache, in the queue ahead of the swap): the caller's ticks per swap
//!   (`swap_clients_N`) and the mediator's own (`swap_mediator_clients_N`).
//! - **Figure 7** (`swap_adaptive_*`): the same workload with the policy fixed at LRU, fixed
//!   at MRU, and swapped by the cache itself (`auto`): rounds of a sequential stream of
//!   2000 blocks (twice the cache) and then random reads in one of two hot sets of 384
//!   blocks; busy ticks of the whole workload and the cache's misses. The cache is held
//!   to one block of frames (`blocks=1` in `system/bench/k42.toml`: 1,024 blocks).
//! - **Figure 6** (`swap_postmark_*`): a Postmark-style workload of many small files through
//!   `files` — 100 files made, each written in eight 512-byte appends and closed, read
//!   back, removed — with sessions fixed shared (every write through) and adapting
//!   (exclusive: appends kept back and written as one); busy ticks. Then the same with
//!   sharing (`swap_postmark_sharing_*`): a second program (`bench_k42_peer`) opens every
//!   fourth file before it is written, so its session must be shared (adapting: swapped
//!   from exclusive when the second client opens it).
//! - **Live update** (`update_*`): `files` replaced by a new instance five times while a
//!   client thread reads 1 KiB from it in a loop: the time of each update (root's
//!   `UPDATE`, from the ask to the answer), and the client's calls — the median, and the
//!   longest (the one that waited for an update).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use baio::cache::{Lru, Policy, PolicyVia};
use blk_api as p;
use blk_api::client::{self as bc, Segment};
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rt::{env, ipc, println, sys};
use swap::interposers::{Counter, Timer, Trace};
use swap::{Generations, Interposer, Slot};
use swap_api::client as sw;

use bench::report;

rt::entry!(main);

swap::interface! {
    /// A null component: the smallest method there is.
    trait Nop via NopVia, methods NopMethod {
        fn nop(&mut self, x: u64) -> u64;
    }
}

struct NopImpl(u64);

impl swap::Component for NopImpl {
    fn formats(&self) -> swap::Formats {
        1
    }
    fn export(&mut self, _: u32) -> Option<swap::State> {
        Some(swap::State::Bytes(self.0.to_le_bytes().to_vec()))
    }
    fn import(&mut self, _: u32, s: swap::State) -> bool {
        s.bytes().and_then(|b| b.try_into().ok()).map(|b| self.0 = u64::from_le_bytes(b)).is_some()
    }
}

impl Nop for NopImpl {
    #[inline(never)]
    fn nop(&mut self, x: u64) -> u64 {
        self.0 = self.0.wrapping_add(x);
        self.0
    }
}

#[inline(never)]
fn plain(c: &mut NopImpl, x: u64) -> u64 {
    c.0 = c.0.wrapping_add(x);
    c.0
}

const CALLS: u64 = 1000;
const SAMPLES: usize = 9;

/// `smoke` among the arguments (`cargo xtask bench --smoke`): every count cut to a few,
/// to check that each figure is printed and parsed, not to measure.
static SMOKE: AtomicBool = AtomicBool::new(false);

/// `real`, or `small` in a smoke run.
fn count<T>(real: T, small: T) -> T {
    if SMOKE.load(Ordering::Relaxed) {
        small
    } else {
        real
    }
}

/// Ticks per call of `f` (CALLS calls per sample).
fn per_call(name: &str, mut f: impl FnMut(u64) -> u64) {
    let mut v = Vec::new();
    let calls = count(CALLS, 50);
    for _ in 0..count(SAMPLES, 3) {
        let t = sys::rdtsc();
        let mut acc = 0u64;
        for k in 0..calls {
            acc = acc.wrapping_add(f(black_box(k)));
        }
        black_box(acc);
        v.push((sys::rdtsc() - t) / calls);
    }
    report(name, "ticks/call", v);
}

fn table1() {
    let mut direct = NopImpl(0);
    per_call("interpose_plain_call", |k| plain(&mut direct, k));
    let mut g = Generations::new();
    // The components and interposers pass through `black_box`, as in a server, where
    // what a slot holds changes at run time: the compiler cannot see through the table.
    let mut slot: Slot<dyn Nop> = Slot::new(black_box(Box::new(NopImpl(0)) as Box<dyn Nop>));
    let call = slot.begin(&mut g, 0, false).expect("no swap under way");
    per_call("interpose_table_call", |k| NopVia::call(black_box(&mut slot), &call, |c| c.nop(k)));
    slot.interpose(Some(black_box(Box::new(Counter::default()) as Box<dyn Interposer>)));
    per_call("interpose_counter_call", |k| NopVia::call(black_box(&mut slot), &call, |c| c.nop(k)));
    slot.interpose(Some(black_box(Box::new(Trace::new(sys::rdtsc)) as Box<dyn Interposer>)));
    per_call("interpose_trace_call", |k| NopVia::call(black_box(&mut slot), &call, |c| c.nop(k)));
    slot.interpose(Some(black_box(Box::new(Timer::new(sys::rdtsc)) as Box<dyn Interposer>)));
    per_call("interpose_timer_call", |k| NopVia::call(black_box(&mut slot), &call, |c| c.nop(k)));
    slot.interpose(None);
    slot.end(&mut g, call);
    per_call("interpose_admit_request", |k| {
        let slot = black_box(&mut slot);
        let c = slot.begin(&mut g, k, false).expect("no swap under way");
        slot.end(&mut g, c);
        k
    });

    // The cache's own policy method, on a list of 1024 slots.
    let mut lru = Lru::default();
    for s in 0..1024 {
        lru.touched(s);
    }
    per_call("interpose_lru_touched_plain", |k| {
        lru.touched(k as u32 & 1023);
        k
    });
    let mut slot: Slot<dyn Policy> = Slot::new(black_box(Box::new(lru) as Box<dyn Policy>));
    let call = slot.begin(&mut g, 0, false).expect("no swap under way");
    per_call("interpose_lru_touched_table", |k| {
        PolicyVia::call(black_box(&mut slot), &call, |p| p.touched(k as u32 & 1023));
        k
    });
    slot.interpose(Some(black_box(Box::new(Counter::default()) as Box<dyn Interposer>)));
    per_call("interpose_lru_touched_counter", |k| {
        PolicyVia::call(black_box(&mut slot), &call, |p| p.touched(k as u32 & 1023));
        k
    });
    slot.end(&mut g, call);
}

const SEG: &str = "k42";
/// Blocks of the segment: a flush region, two hot sets, a stream (see `figure7`).
const BLOCKS: u64 = 4000;
const AREA: u64 = rt::layout::SEGMENT_AREA;
static STOP: AtomicBool = AtomicBool::new(false);
static RUNNING: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
/// The blocks client threads write (they fit in the cache: hits).
const CLIENT_BLOCKS: u64 = 256;

/// A client thread: one-block buffered writes (each a cache `LOOKUP` that hits: a
/// buffered read that hits is served by blk from the cache's tags without a call, so it
/// would not load the component) until told to stop.
fn client(k: u64) {
    let blk = rt::alloc_slot();
    let seg = env::lookup("blk", blk).ok().and_then(|_| bc::open(blk, SEG, 3, AREA + (k + 1) * (4 << 20)).ok());
    STARTED.fetch_add(1, Ordering::Relaxed);
    if let Some(seg) = seg {
        RUNNING.fetch_add(1, Ordering::Relaxed);
        let mut b = k * 13;
        while !STOP.load(Ordering::Relaxed) {
            b = (b + 7) % CLIENT_BLOCKS;
            let _ = seg.batch_ops(&[p::op(p::WRITE_OP | p::BUFFERED, b, 1, 0, p::DATA)], p::WAIT_ALL);
            READS.fetch_add(1, Ordering::Relaxed);
        }
        let _ = seg.close();
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    } else {
        println!("bench_k42: client {} cannot open the segment", k);
    }
}

fn figures45(cache: u64) {
    // An IPC round trip to the cache: a label it does not have.
    let mut v = Vec::new();
    for _ in 0..count(200, 10) {
        let mut m = ipc::Msg::new(0x9f, &[]);
        let t = sys::rdtsc();
        let _ = ipc::call(cache, &mut m, ipc::FOREVER);
        v.push(sys::rdtsc() - t);
    }
    report("swap_ipc_rtt", "ticks", v);
    let mut why = [0u8; 128];
    let mut swap = |imp: usize| sw::swap(cache, 0, imp, &mut why).ok();
    let (mut v, mut med) = (Vec::new(), Vec::new());
    for _ in 0..count(200, 10) {
        let t = sys::rdtsc();
        if let Some((_, m)) = swap(0) {
            v.push(sys::rdtsc() - t);
            med.push(m);
        }
    }
    report("swap_null", "ticks", v);
    report("swap_null_mediator", "ticks", med);
    let prio = rt::thread::my_priority();
    let mut started = 0;
    for n in [0u64, 1, 4, 16] {
        while started < n {
            if rt::thread::spawn(client, started, prio).is_err() {
                println!("bench_k42: no thread for client {}", started);
                return;
            }
            started += 1;
        }
        while STARTED.load(Ordering::Relaxed) < n {
            rt::sys::yield_now();
        }
        if RUNNING.load(Ordering::Relaxed) < n {
            return;
        }
        let (mut v, mut med) = (Vec::new(), Vec::new());
        let r0 = READS.load(Ordering::Relaxed);
        let swaps = count(200, 10);
        for k in 0..swaps {
            // Let the clients run (same priority): their reads are under way when the
            // swap is asked for.
            rt::sys::yield_now();
            let t = sys::rdtsc();
            if let Some((_, m)) = swap(1 - k % 2) {
                v.push(sys::rdtsc() - t);
                med.push(m);
            }
        }
        println!("bench_k42: {} clients read {} times during {} swaps", n, READS.load(Ordering::Relaxed) - r0, swaps);
        report(&alloc::format!("swap_clients_{n}"), "ticks", v);
        report(&alloc::format!("swap_mediator_clients_{n}"), "ticks", med);
    }
    STOP.store(true, Ordering::Relaxed);
    while RUNNING.load(Ordering::Relaxed) > 0 {
        rt::sys::yield_now();
    }
    let _ = swap(0);
}

/// Read blocks `first..first + n` in order, buffered, 8 at a time (one LOOKUP each).
fn stream(seg: &Segment, first: u64, n: u64) {
    let mut b = first;
    while b < first + n {
        let ops: Vec<[u64; p::OP_WORDS]> = (0..p::MAX_REG_OPS as u64)
            .take_while(|k| b + 8 * k < first + n)
            .map(|k| p::op(p::READ_OP | p::BUFFERED, b + 8 * k, 8, k, p::DATA + k * 8 * 4096))
            .collect();
        let _ = seg.batch_ops(&ops, p::WAIT_ALL);
        b += 8 * ops.len() as u64;
    }
}

fn cache_misses(cache: u64) -> u64 {
    let mut m = ipc::Msg::new(cache_api::STATS, &[]);
    let _ = rt::server::request(cache, &mut m);
    m.word(3)
}

/// Figure 7: rounds of a stream and a hot phase under each policy.
fn figure7(cache: u64, seg: &Segment) {
    // Hot sets at 0 and 512 (384 blocks each), blocks the workload never reads at
    // 896..2000, the stream at 2000..4000.
    const HOT: [u64; 2] = [0, 512];
    const HOT_N: u64 = 384;
    const FLUSH: (u64, u64) = (896, 1104);
    const STREAM: (u64, u64) = (2000, 2000);
    let mut why = [0u8; 64];
    for (name, imp) in [("lru", 0usize), ("mru", 1), ("auto", 2)] {
        // The same start for each: LRU, the cache full of blocks none of the workload reads.
        let _ = sw::swap(cache, 0, 0, &mut why);
        flush(seg, FLUSH.0, count(FLUSH.1, 16));
        let _ = sw::swap(cache, 0, imp, &mut why);
        let (t0, i0, m0) = (sys::rdtsc(), sys::idle_tsc(), cache_misses(cache));
        let mut x = 12345u64;
        for round in 0..count(4, 1) {
            stream(seg, STREAM.0, count(STREAM.1, 64));
            let h = HOT[round % 2];
            for _ in 0..count(2 * HOT_N, 16) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let b = h + (x >> 33) % HOT_N;
                let _ = seg.batch_ops(&[p::op(p::WRITE_OP | p::BUFFERED, b, 1, 0, p::DATA)], p::WAIT_ALL);
            }
        }
        let (t, i, m) = (sys::rdtsc() - t0, sys::idle_tsc() - i0, cache_misses(cache) - m0);
        report(&alloc::format!("swap_adaptive_{name}_busy"), "ticks", alloc::vec![t.saturating_sub(i)]);
        report(&alloc::format!("swap_adaptive_{name}_elapsed"), "ticks", alloc::vec![t]);
        report(&alloc::format!("swap_adaptive_{name}_misses"), "blocks", alloc::vec![m]);
        let mut buf = [0u8; 256];
        let n = sw::list(cache, &mut buf).unwrap_or(0);
        println!("bench_k42: {}: {}", name, core::str::from_utf8(&buf[..n]).unwrap_or("?").trim());
    }
    let _ = sw::swap(cache, 0, 0, &mut why);
}

/// Fill the cache with blocks `first..first + n` (read backwards one by one: no stream
/// for `auto` to see).
fn flush(seg: &Segment, first: u64, n: u64) {
    for k in (0..n).rev() {
        let b = first + k;
        let _ = seg.batch_ops(&[p::op(p::READ_OP | p::BUFFERED, b, 1, 0, p::DATA)], p::WAIT_ALL);
    }
}

static LAT: [AtomicU64; 8192] = [const { AtomicU64::new(0) }; 8192];
static READS_DONE: AtomicU64 = AtomicU64::new(0);
static READER_DONE: AtomicBool = AtomicBool::new(false);
static READER_STOP: AtomicBool = AtomicBool::new(false);

/// Reads 1 KiB of `/k42u` through `files` in a loop, each call timed.
fn reader(_: u64) {
    let srv = rt::alloc_slot();
    let ok = env::lookup("files", srv).is_ok();
    let h = if ok { files_api::client::open(srv, "/k42u", true).ok() } else { None };
    if let Some((h, _)) = h {
        let _ = files_api::client::write(srv, h, 0, &[7u8; 1024]);
        while !READER_STOP.load(Ordering::Relaxed) {
            let t = sys::rdtsc();
            let r = files_api::client::read(srv, h, 0, 1024);
            let dt = sys::rdtsc() - t;
            let k = READS_DONE.fetch_add(1, Ordering::Relaxed) as usize;
            LAT[k % LAT.len()].store(if r.is_ok_and(|d| d.len() == 1024) { dt } else { u64::MAX }, Ordering::Relaxed);
        }
    }
    READER_DONE.store(true, Ordering::Relaxed);
}

fn postmark() {
    use files_api::client as f;
    let (srv, peer) = (rt::alloc_slot(), rt::alloc_slot());
    if env::lookup("files", srv).is_err() {
        return;
    }
    let peer = env::lookup("bench_k42_peer", peer).is_ok().then_some(peer);
    let _ = f::mkdir(srv, "/pm");
    let mut why = [0u8; 64];
    let files = count(100, 8);
    // Without sharing, then with every fourth file held open by a second program while
    // it is written (its session shared, by swap when adapting).
    for (workload, sharing) in [("swap_postmark", None), ("swap_postmark_sharing", peer)] {
        for (name, imp) in [("shared", 1usize), ("auto", 0)] {
            let _ = sw::swap(srv, 0, imp, &mut why);
            let mut ok = true;
            let (t0, i0) = (sys::rdtsc(), sys::idle_tsc());
            for i in 0..files {
                let path = alloc::format!("/pm/f{i}");
                match f::open(srv, &path, true) {
                    Ok((h, _)) => {
                        if let Some(peer) = sharing.filter(|_| i % 4 == 0) {
                            ipc::set_send_string(path.as_bytes());
                            ok &= rt::server::request(peer, &mut ipc::Msg::new(PEER_OPEN, &[]).with_string()).is_ok();
                        }
                        for k in 0..8u64 {
                            ok &= f::write(srv, h, 512 * k, &[i as u8; 512]).is_ok();
                        }
                        ok &= f::close(srv, h).is_ok();
                    }
                    Err(_) => ok = false,
                }
            }
            if let Some(peer) = sharing {
                ok &= rt::server::request(peer, &mut ipc::Msg::new(PEER_CLOSE_ALL, &[])).is_ok();
            }
            for i in 0..files {
                let path = alloc::format!("/pm/f{i}");
                match f::open(srv, &path, false) {
                    Ok((h, _)) => {
                        ok &=
                            f::read(srv, h, 0, 4096).is_ok_and(|d| d.len() == 4096 && d.iter().all(|b| *b == i as u8));
                        ok &= f::close(srv, h).is_ok();
                    }
                    Err(_) => ok = false,
                }
            }
            for i in 0..files {
                ok &= f::remove(srv, &alloc::format!("/pm/f{i}")).is_ok();
            }
            let (t, i) = (sys::rdtsc() - t0, sys::idle_tsc() - i0);
            if !ok {
                println!("bench_k42: {} with {} sessions failed", workload, name);
                continue;
            }
            report(&alloc::format!("{workload}_{name}_busy"), "ticks", alloc::vec![t.saturating_sub(i)]);
            let mut buf = [0u8; 256];
            let n = sw::list(srv, &mut buf).unwrap_or(0);
            println!("bench_k42: {} {}: {}", workload, name, core::str::from_utf8(&buf[..n]).unwrap_or("?").trim());
        }
    }
    let _ = sw::swap(srv, 0, 0, &mut why);
}

/// `bench_k42_peer`'s requests: open the file named by the string and keep it open;
/// close every file it keeps.
const PEER_OPEN: u64 = 1;
const PEER_CLOSE_ALL: u64 = 2;

fn updates() {
    if rt::thread::spawn(reader, 0, rt::thread::my_priority()).is_err() {
        return;
    }
    while READS_DONE.load(Ordering::Relaxed) < 100 && !READER_DONE.load(Ordering::Relaxed) {
        rt::sys::yield_now();
    }
    let mut took = Vec::new();
    for _ in 0..count(5, 2) {
        let t = sys::rdtsc();
        match env::update("files files") {
            Ok(()) => took.push(sys::rdtsc() - t),
            Err((e, why)) => println!("bench_k42: update failed: {:?} {}", e, why),
        }
        let c = READS_DONE.load(Ordering::Relaxed);
        while READS_DONE.load(Ordering::Relaxed) < c + 100 && !READER_DONE.load(Ordering::Relaxed) {
            rt::sys::yield_now();
        }
    }
    READER_STOP.store(true, Ordering::Relaxed);
    while !READER_DONE.load(Ordering::Relaxed) {
        rt::sys::yield_now();
    }
    let n = (READS_DONE.load(Ordering::Relaxed) as usize).min(LAT.len());
    let lat: Vec<u64> = LAT[..n].iter().map(|l| l.load(Ordering::Relaxed)).collect();
    let failed = lat.iter().filter(|l| **l == u64::MAX).count();
    println!(
        "bench_k42: {} reads during {} updates, {} failed",
        READS_DONE.load(Ordering::Relaxed),
        took.len(),
        failed
    );
    report("update_files", "ticks", took);
    report("update_client_call", "ticks", lat.iter().copied().filter(|l| *l != u64::MAX).collect());
}

fn main() -> i32 {
    SMOKE.store(rt::args().split(' ').skip(1).any(|a| a == "smoke"), Ordering::Relaxed);
    table1();
    let (blk, cache) = (rt::alloc_slot(), rt::alloc_slot());
    if env::lookup("blk", blk).is_err() || env::lookup("cache", cache).is_err() {
        println!("bench_k42: the manifest must grant blk and cache");
        return 1;
    }
    if bc::create(blk, SEG, BLOCKS, 1).is_err() {
        println!("bench_k42: cannot create segment {}", SEG);
        return 1;
    }
    let Ok(seg) = bc::open(blk, SEG, 3, AREA) else {
        println!("bench_k42: cannot open segment {}", SEG);
        return 1;
    };
    // Give every block a number (written once, straight to the disk).
    let mut b = 0;
    while b < BLOCKS {
        let ops: Vec<[u64; p::OP_WORDS]> = (0..8u64)
            .take_while(|k| b + 32 * k < BLOCKS)
            .map(|k| p::op(p::WRITE_OP, b + 32 * k, 32.min(BLOCKS - b - 32 * k), k, p::DATA + k * 32 * 4096))
            .collect();
        let _ = seg.batch_ops(&ops, p::WAIT_ALL);
        b += 256;
    }
    let _ = seg.sync();
    // The clients open the segment too: 16 of them and this one would be past a
    // principal's 16 open segments.
    let _ = seg.close();
    figures45(cache);
    let Ok(seg) = bc::open(blk, SEG, 3, AREA) else {
        println!("bench_k42: cannot open segment {} again", SEG);
        return 1;
    };
    figure7(cache, &seg);
    let _ = seg.close();
    postmark();
    updates();
    println!("bench_k42: done");
    0
}
