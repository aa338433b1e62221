//! The shared cache grows into free memory and gives it back: a
//! buffered working set larger than the cache's first block makes it grow (its `STATS`
//! say so); then this program sets aside and touches 75% of the RAM, which it gets only
//! if the cache gives frames back — and it does (its `STATS` say that too). Every block
//! read through the cache, before, between the steps of the allocation and after, holds
//! the bytes written to it.
//!
//! Argument: the machine's RAM in MiB.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use blk_api as p;
use blk_api::client::{self as baio, SLOT_BYTES};
use rt::{env, println, sys};
use tests::{Checks, Rng};

rt::entry!(main);

/// The working set: 48 MiB of blocks (the scenario's disk is 64 MiB), twelve times the
/// cache's first block.
const BLOCKS: u64 = 12288;
/// Blocks per operation (one 16 KiB slot).
const PER_OP: u64 = SLOT_BYTES / 4096;
const OPS: u64 = BLOCKS / PER_OP;
/// Where the memory it sets aside lies.
const AT: u64 = 0x0000_0800_0000_0000;
const PAGE: u64 = 4096;
/// Pages set aside between two rounds of reads while it allocates.
const STEP: u64 = 8192;

/// Word `i` of block `b`.
fn value(b: u64, i: u64) -> u64 {
    (b << 20 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xc0ffee
}

fn fill(d: &mut [u8], first: u64) {
    for (k, w) in d.chunks_exact_mut(8).enumerate() {
        let (b, i) = (first + k as u64 / 512, k as u64 % 512);
        w.copy_from_slice(&value(b, i).to_le_bytes());
    }
}

/// Blocks of `d` (from block `first`) that do not hold their bytes.
fn wrong(d: &[u8], first: u64) -> u64 {
    let mut bad = 0;
    for (j, blk) in d.chunks_exact(4096).enumerate() {
        let b = first + j as u64;
        if blk.chunks_exact(8).enumerate().any(|(i, w)| u64::from_le_bytes(w.try_into().unwrap()) != value(b, i as u64))
        {
            bad += 1;
        }
    }
    bad
}

fn read_random(s: &baio::Segment, rng: &mut Rng, n: u64) -> (u64, u64) {
    let (mut failed, mut bad) = (0, 0);
    let mut done = 0;
    while done < n {
        let k = (n - done).min(p::MAX_REG_OPS as u64);
        let firsts: alloc::vec::Vec<u64> = (0..k).map(|_| rng.next() % OPS * PER_OP).collect();
        let ops: alloc::vec::Vec<(u64, u64, u64)> =
            firsts.iter().map(|f| (p::READ_OP | p::BUFFERED, *f, PER_OP)).collect();
        for i in 0..k {
            s.data(i).fill(0);
        }
        if s.batch(&ops).is_err() {
            return (failed + k, bad);
        }
        for (i, f) in firsts.iter().enumerate() {
            if s.wait(i as u64) != p::DONE {
                failed += 1;
            } else {
                bad += wrong(s.data(i as u64), *f);
            }
        }
        done += k;
    }
    (failed, bad)
}

/// The cache's counters (`cache_api::STATS`): hits, misses, resident, slots, ...,
/// blocks held, taken, given back, pages per block, lookup calls.
fn stats(cache: u64) -> [u64; 13] {
    let mut m = rt::ipc::Msg::new(cache_api::STATS, &[]);
    match rt::server::request(cache, &mut m) {
        Ok(()) => core::array::from_fn(|k| m.words().get(1 + k).copied().unwrap_or(0)),
        Err(_) => [0; 13],
    }
}

fn main() -> i32 {
    let mib: u64 = rt::args().split(' ').nth(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    let mut c = Checks::new();
    let (blk, cache) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(env::lookup("cache", cache), Ok(()), "find the cache");
    c.check(mib > 0, "the machine's RAM in MiB is given");
    let s0 = stats(cache);
    println!("cache_test: the cache starts with {} blocks of {} pages ({} slots)", s0[8], s0[11], s0[3]);
    c.eq(baio::create(blk, "ws", BLOCKS, 0), Ok(()), "make a 48 MiB segment");
    let Ok(s) = baio::open(blk, "ws", 3, rt::layout::SEGMENT_AREA) else {
        c.check(false, "open it");
        return c.finish("cache_test");
    };

    // 1. Write a known pattern (directly: around the cache), then read it through the
    // cache at random until the cache has grown (or for a bounded number of rounds).
    let mut first = 0;
    let mut ok = true;
    while first < BLOCKS {
        let n = ((BLOCKS - first) / PER_OP).min(p::MAX_REG_OPS as u64);
        for i in 0..n {
            fill(s.data(i), first + i * PER_OP);
        }
        let ops: alloc::vec::Vec<(u64, u64, u64)> = (0..n).map(|i| (p::WRITE_OP, first + i * PER_OP, PER_OP)).collect();
        ok &= s.batch(&ops).is_ok();
        for i in 0..n {
            ok &= s.wait(i) == p::DONE;
        }
        first += n * PER_OP;
    }
    c.check(ok, "write the pattern over the 48 MiB");

    // One batch of buffered reads of distinct blocks is one lookup call to the cache
    // (`LOOKUPS`), not one per operation: each call is two address-space switches.
    let firsts: alloc::vec::Vec<u64> = (0..8).map(|i| i * 37 * PER_OP).collect();
    let ops: alloc::vec::Vec<(u64, u64, u64)> = firsts.iter().map(|f| (p::READ_OP | p::BUFFERED, *f, PER_OP)).collect();
    let before = stats(cache)[12];
    let read = s.batch(&ops).is_ok()
        && firsts.iter().enumerate().all(|(i, f)| s.wait(i as u64) == p::DONE && wrong(s.data(i as u64), *f) == 0);
    let calls = stats(cache)[12] - before;
    c.check(read, "a batch of eight buffered reads reads right");
    c.eq(calls, 1, "a batch of eight buffered reads asks the cache once (lookup calls)");
    // The same batch again: every block is cached, and blk serves it from the cache's
    // tags without a call; the hits still count (the touch ring, drained at `STATS`).
    let (before, hits) = (stats(cache)[12], stats(cache)[0]);
    for i in 0..8 {
        s.data(i).fill(0);
    }
    let read = s.batch(&ops).is_ok()
        && firsts.iter().enumerate().all(|(i, f)| s.wait(i as u64) == p::DONE && wrong(s.data(i as u64), *f) == 0);
    let after = stats(cache);
    c.check(read, "the batch again reads right");
    c.eq(after[12] - before, 0, "the batch again is served without a call to the cache (lookup calls)");
    c.eq(after[0] - hits, 8 * PER_OP, "its blocks count as hits");
    // A block written around the cache (unbuffered) is never served from its old slot:
    // the write invalidates it, its tag goes, and the next read finds the new bytes.
    fill(s.data(0), firsts[1] + BLOCKS);
    let wrote = s.batch(&[(p::WRITE_OP, firsts[1], PER_OP)]).is_ok() && s.wait(0) == p::DONE;
    s.data(0).fill(0);
    let read = s.batch(&[(p::READ_OP | p::BUFFERED, firsts[1], PER_OP)]).is_ok() && s.wait(0) == p::DONE;
    c.check(
        wrote && read && wrong(s.data(0), firsts[1] + BLOCKS) == 0,
        "a buffered read after a write around the cache reads the new bytes",
    );
    // Put the pattern back for what follows.
    fill(s.data(0), firsts[1]);
    c.check(s.batch(&[(p::WRITE_OP, firsts[1], PER_OP)]).is_ok() && s.wait(0) == p::DONE, "write the old bytes back");
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let t0 = sys::now_us();
    let (mut failed, mut bad) = (0, 0);
    let mut most = s0;
    for round in 0..12 {
        let (f, b) = read_random(&s, &mut rng, OPS);
        failed += f;
        bad += b;
        let st = stats(cache);
        if st[8] > most[8] {
            most = st;
        }
        println!(
            "cache_test: round {}: {} blocks held ({} slots, {} resident), hits {} misses {} evictions {}",
            round, st[8], st[3], st[2], st[0], st[1], st[4]
        );
        if st[8] * st[11] >= BLOCKS {
            break;
        }
    }
    println!("cache_test: reads of the working set in {} ms", (sys::now_us() - t0) / 1000);
    c.eq((failed, bad), (0, 0), "every buffered read of the working set is right (failed, wrong blocks)");
    c.check(
        most[8] > s0[8] && most[3] > s0[3],
        &format!("the cache grew under the working set: {} → {} blocks, {} → {} slots", s0[8], most[8], s0[3], most[3]),
    );
    // As far as the working set: no constant kernel quota stops it first (root gives
    // the cache and blk the quota for the machine's frames: `lent` in the manifest).
    c.check(
        most[8] * most[11] >= BLOCKS,
        &format!(
            "the cache grew to hold the working set: {} blocks of {} pages for {} blocks",
            most[8], most[11], BLOCKS
        ),
    );

    // 2. Set aside 75% of the RAM, reading through the cache between the steps.
    let all = mib * 256 * 3 / 4;
    let t1 = sys::now_us();
    let (mut got, mut refused) = (0, None);
    let (mut failed, mut bad) = (0, 0);
    while got < all {
        let n = (all - got).min(STEP);
        match mem_api::client::reserve(abi::cap::PAGER, n, AT + got * PAGE) {
            Ok(()) => got += n,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
        let (f, b) = read_random(&s, &mut rng, 64);
        failed += f;
        bad += b;
    }
    for i in 0..got {
        // SAFETY: pages `AT ..` up to `got` were set aside for this program just above;
        // nothing else lives there.
        unsafe { core::ptr::write_volatile((AT + i * PAGE) as *mut u64, value(i, 7)) };
    }
    // SAFETY: as above: the pages were set aside and written.
    let kept = (0..got)
        .filter(|&i| unsafe { core::ptr::read_volatile((AT + i * PAGE) as *const u64) } == value(i, 7))
        .count() as u64;
    println!(
        "cache_test: {} of {} pages set aside ({:?}), touched and checked ({} right) in {} ms",
        got,
        all,
        refused,
        kept,
        (sys::now_us() - t1) / 1000
    );
    c.check(
        got == all && kept == all,
        &format!(
            "this program gets 75% of the RAM ({} MiB of {} MiB): {} pages, refused {:?}",
            all >> 8,
            mib,
            got,
            refused
        ),
    );
    c.eq((failed, bad), (0, 0), "every buffered read while it allocates is right (failed, wrong blocks)");
    let after = stats(cache);
    println!(
        "cache_test: the cache now: {} blocks ({} slots), {} taken and {} given back so far",
        after[8], after[3], after[9], after[10]
    );
    c.check(
        after[10] > 0 && after[8] < most[8],
        &format!("the cache gave frames back: {} → {} blocks", most[8], after[8]),
    );

    // 3. The working set again, all of it, through the smaller cache.
    let (f, b) = read_random(&s, &mut rng, OPS);
    c.eq((f, b), (0, 0), "every buffered read after is right (failed, wrong blocks)");
    let _ = s.close();
    c.finish("cache_test")
}
