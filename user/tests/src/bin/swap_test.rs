//! Online reconfiguration (K42): the shared cache's replacement policy is
//! hot-swapped 10,000 times, LRU ↔ MRU, while client threads read through the cache
//! (every read checked: each block carries its number), interposers are attached and
//! detached between swaps, and the server swaps the policy itself when a stream comes
//! and goes. Every swap must end `Swapped` with the recency list moved (format 1), no
//! read may fail or come back wrong, and the interposers must have seen the calls.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use alloc::string::String;
use blk_api as p;
use blk_api::client as baio;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rt::{env, println};
use swap_api::client as sw;
use tests::blocks::io;
use tests::{Checks, Rng};

rt::entry!(main);

const SEG: &str = "sw";
/// More blocks than the cache's 1024 slots: random reads evict.
const BLOCKS: u64 = 1536;
const CLIENTS: usize = 3;
const SWAPS: u64 = 10_000;
/// The cache's one component.
const POLICY: usize = 0;
const LRU: usize = 0;
const MRU: usize = 1;
const AUTO: usize = 2;

static STOP: AtomicBool = AtomicBool::new(false);
static READS: [AtomicU64; CLIENTS] = [const { AtomicU64::new(0) }; CLIENTS];
static BAD: AtomicU64 = AtomicU64::new(0);
static ENDED: AtomicU64 = AtomicU64::new(0);

/// A client: random buffered reads of 1–8 blocks, each checked, until told to stop.
fn client(k: u64) {
    let blk = rt::alloc_slot();
    let seg = env::lookup("blk", blk)
        .ok()
        .and_then(|_| baio::open(blk, SEG, 1, rt::layout::SEGMENT_AREA + (k + 1) * (4 << 20)).ok());
    match seg {
        None => {
            println!("swap_test: client {} cannot open the segment", k);
            BAD.fetch_add(1, Ordering::Relaxed);
        }
        Some(seg) => {
            let mut r = Rng::new(k + 7);
            while !STOP.load(Ordering::Relaxed) {
                let n = 1 + r.below(8);
                if !io(&seg, p::READ_OP | p::BUFFERED, r.below(BLOCKS - n), n, true) {
                    BAD.fetch_add(1, Ordering::Relaxed);
                }
                READS[k as usize].fetch_add(1, Ordering::Relaxed);
            }
            let _ = seg.close();
        }
    }
    ENDED.fetch_add(1, Ordering::Relaxed);
}

fn reads() -> u64 {
    READS.iter().map(|r| r.load(Ordering::Relaxed)).sum()
}

/// The policy's line in the cache's list.
fn line(cache: u64) -> String {
    let mut buf = [0u8; 1024];
    let n = sw::list(cache, &mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").into()
}

fn main() -> i32 {
    let mut c = Checks::new();
    let (blk, cache) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(env::lookup("cache", cache), Ok(()), "find the cache");
    c.eq(baio::create(blk, SEG, BLOCKS, 1), Ok(()), "create a segment others may read");
    let Ok(seg) = baio::open(blk, SEG, 3, rt::layout::SEGMENT_AREA) else {
        c.check(false, "open it");
        return c.finish("swap_test");
    };
    c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "write every block's number into it");
    let l = line(cache);
    c.check(l.starts_with("policy lru lru,mru,auto"), &format!("the cache lists its policy, LRU to begin with: {l}"));

    // Bad requests get clear errors and change nothing.
    let mut why = [0u8; 128];
    c.eq(
        sw::swap(cache, POLICY, 9, &mut why).map_err(|e| e.0).err(),
        Some(Error::InvalidArg),
        "an implementation it does not have",
    );
    c.eq(
        sw::swap(cache, 5, LRU, &mut why).map_err(|e| e.0).err(),
        Some(Error::NotFound),
        "a component it does not have",
    );
    c.eq(sw::interpose(cache, POLICY, 17), Err(Error::InvalidArg), "an interposer kind it does not have");
    c.eq(
        tests::raw_request(cache, swap_api::SWAP, &[0], None),
        Err(Error::Malformed),
        "a swap without its implementation",
    );

    let prio = rt::thread::my_priority();
    for k in 0..CLIENTS {
        c.check(rt::thread::spawn(client, k as u64, prio).is_ok(), &format!("start client {k}"));
    }
    c.check(tests::wait_until(2000, || READS.iter().all(|r| r.load(Ordering::Relaxed) > 0)), "every client reads");

    let (mut ok, mut moved, mut first_bad) = (0u64, 0u64, None);
    let reads0 = reads();
    let each0: [u64; CLIENTS] = core::array::from_fn(|k| READS[k].load(Ordering::Relaxed));
    let kinds = [swap_api::COUNTER, swap_api::TRACE, swap_api::TIMER, swap_api::NONE];
    for i in 0..SWAPS {
        if i % 1000 == 500 {
            let _ = sw::interpose(cache, POLICY, kinds[(i / 1000) as usize % kinds.len()]);
        }
        match sw::swap(cache, POLICY, if i % 2 == 0 { MRU } else { LRU }, &mut why) {
            Ok((format, _)) => {
                ok += 1;
                moved += (format == ::baio::cache::RECENCY_MOVED as u64) as u64;
            }
            Err((e, n)) => {
                first_bad.get_or_insert((i, e, String::from_utf8_lossy(&why[..n]).into_owned()));
            }
        }
        if i % 2000 == 0 {
            println!("swap_test: {} swaps, {} reads", i, reads() - reads0);
        }
    }
    let during = reads() - reads0;
    c.eq(first_bad, None, "no swap failed");
    c.eq((ok, moved), (SWAPS, SWAPS), "10,000 swaps, each moving the recency list (format 1)");
    let each: [u64; CLIENTS] = core::array::from_fn(|k| READS[k].load(Ordering::Relaxed) - each0[k]);
    c.check(
        each.iter().all(|n| *n > 0),
        &format!("every client kept reading through the swaps ({during} reads: {each:?})"),
    );
    let l = line(cache);
    c.check(l.contains(&format!("swaps={SWAPS} aborts=0")), &format!("the cache counts them: {l}"));

    // Interposers see the policy's calls while clients run.
    c.eq(sw::interpose(cache, POLICY, swap_api::COUNTER), Ok(()), "attach a counter");
    let r0 = reads();
    tests::wait_until(2000, || reads() > r0 + 20);
    let l = line(cache);
    let touched =
        l.split("touched=").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    c.check(touched > 0 && l.contains("first="), &format!("the counter saw the calls: {l}"));
    c.eq(sw::interpose(cache, POLICY, swap_api::TRACE), Ok(()), "replace it with a trace");
    let r1 = reads();
    tests::wait_until(2000, || reads() > r1 + 10);
    let l = line(cache);
    c.check(l.contains("trace: ") && l.contains(">touched@"), &format!("the trace saw the calls: {l}"));
    c.eq(sw::interpose(cache, POLICY, swap_api::NONE), Ok(()), "detach it");
    c.check(line(cache).ends_with(" -"), "nothing interposed");

    STOP.store(true, Ordering::Relaxed);
    c.check(tests::wait_until(5000, || ENDED.load(Ordering::Relaxed) == CLIENTS as u64), "the clients end");
    c.eq(BAD.load(Ordering::Relaxed), 0, "every read the clients made came back right");

    // The server swaps by itself: a sequential stream makes it MRU, random reads LRU.
    let r = sw::swap(cache, POLICY, AUTO, &mut why);
    c.check(r.is_ok(), "let the server choose again");
    c.check(io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true), "stream the whole segment through the cache");
    let l = line(cache);
    c.check(
        l.starts_with("policy mru(auto)") && !l.contains("adapted=0 "),
        &format!("a stream: the server swapped to MRU ({l})"),
    );
    // The detector sees a hit blk served alone only at the cache's next request (the
    // tags ring is drained then), so how many of a fixed number of reads it has seen
    // when asked varies with how many hit: read on (at most 96) until it has swapped.
    let mut rng = Rng::new(99);
    let mut l = String::new();
    for i in 0..96 {
        let b = rng.below(BLOCKS);
        c.check(io(&seg, p::READ_OP | p::BUFFERED, b, 1, true), "a random read");
        if i >= 31 {
            l = line(cache);
            if l.starts_with("policy lru(auto)") {
                break;
            }
        }
    }
    c.check(l.starts_with("policy lru(auto)"), &format!("random reads: back to LRU ({l})"));

    let _ = seg.close();
    c.finish("swap_test")
}
