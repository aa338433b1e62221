//! Where memory is (issue 47, item 7): restarts and live updates in a loop, with root's
//! accounting (`mem`, `memacct`) read after each round. Every round kills net (httpd
//! and ftpd end with it), the shared cache, files and blk (root restarts each), live-updates
//! files and the cache (and has two updates of files fail: the new program crashes,
//! or refuses the state), reads 12 MiB through the cache (which borrows frames from
//! sigma0 for it) and opens 64 connections at once through net (whose buffers are
//! frames from sigma0), checking the sum while they are open; then the rows must sum
//! to the machine (`unaccounted: 0`), no ended program may hold
//! a frame, and — after a warm-up round, which grows what a first restart or update
//! grows once (root's records, the kernel heap, the memory servers' pools) — the frames
//! in use may not grow round over round beyond `TOLERANCE`.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client::{self as baio, Segment};
use memacct::Summary;
use rt::{env, println, sys};
use tests::blocks::io;
use tests::Checks;

rt::entry!(main);

const ROUNDS: usize = 5;
/// A segment of 12 MiB: three times the cache's first block, so that reading it makes
/// the cache borrow frames from sigma0.
const SEG: &str = "memacct";
const BLOCKS: u64 = 3072;
const BUF: u64 = 0x5_0000_0000;
/// Frames in use may differ this much between rounds after the warm-up (64 pages,
/// 256 KiB): what moves between two readings without leaking — a restarted server's
/// heap is as large as its first requests after the restart made it (net's sockets,
/// files' open handles), and this program's own heap holds each round's report. A leak
/// of one restart's leftovers is far past it: a dead server's pages are hundreds of
/// frames (net alone holds over a thousand), its DMA buffers more.
const TOLERANCE: u64 = 64;

/// Kill the program `name` and wait until root has started a new one.
fn restart(c: &mut Checks, name: &str, round: usize) {
    let old = tests::id_of(name);
    c.check(old.is_some_and(|i| env::kill(i).is_ok()), &format!("round {round}: kill {name} ({old:?})"));
    c.check(
        tests::wait_until(300, || tests::id_of(name).is_some_and(|i| Some(i) != old)),
        &format!("round {round}: root restarted {name}"),
    );
}

fn update(c: &mut Checks, cmd: &str, round: usize) {
    // A server just restarted takes part once it serves: until then root hears
    // `Unsupported` from it (this is not what is tested here).
    let mut r = env::update(cmd);
    for _ in 0..50 {
        if !matches!(&r, Err((Error::Unsupported, _))) {
            break;
        }
        sys::sleep_us(100_000);
        r = env::update(cmd);
    }
    c.check(r.is_ok(), &format!("round {round}: update {cmd} ({r:?})"));
}

/// Read the whole segment through the shared cache, so that it grows into free memory
/// (blocks lent by sigma0), checking every block.
fn read_through_cache(c: &mut Checks, seg: &Segment, round: usize) {
    let mut ok = false;
    // Reads racing a restarted cache's first moments may fail (never return wrong
    // bytes: `io` checks each block's number).
    for _ in 0..50 {
        if io(seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true) {
            ok = true;
            break;
        }
        sys::sleep_us(100_000);
    }
    c.check(ok, &format!("round {round}: {BLOCKS} blocks read through the cache, right"));
}

/// Connections at once through net, each with its buffers (80 KiB from sigma0).
const CONNECTIONS: usize = 64;

/// Open `CONNECTIONS` connections at once through net (to the host's discard port: they
/// need not be answered), read the accounting while they are open, and close them:
/// net's socket buffers are frames it takes from sigma0, and they must show in its row.
fn connections(c: &mut Checks, round: usize) {
    let slot = rt::alloc_slot();
    let net = env::lookup("net", slot).and_then(|_| net_api::client::Net::attach(slot));
    let Ok(net) = net else {
        c.check(false, &format!("round {round}: attach to net ({:?})", net.err()));
        rt::free_slot(slot);
        return;
    };
    // A restarted net has its address once DHCP has answered.
    tests::wait_until(100, || net.info().is_ok_and(|i| i.ip != 0));
    let before = env::meminfo().ok().and_then(|t| memacct::row_of(&t, "net"));
    let mut open = Vec::new();
    for _ in 0..CONNECTIONS {
        match net.connect_start(net_api::ipv4(10, 0, 2, 2), 9) {
            Ok(h) => open.push(h),
            Err(_) => break,
        }
    }
    // (Root gives a report again within 100 ms of making it.)
    sys::sleep_us(150_000);
    let text = env::meminfo().unwrap_or_default();
    let during = memacct::row_of(&text, "net");
    let s = Summary::parse(&text);
    c.check(s.is_some_and(|s| s.unaccounted == 0), &format!("round {round}: the sum, {} connections open", open.len()));
    println!("memacct_test: round {round}: net's row before {before:?}, with {} connections {during:?}", open.len());
    c.check(!open.is_empty(), &format!("round {round}: connections through net"));
    for h in open {
        let _ = net.close(h);
    }
    rt::free_slot(slot);
}

/// Root's accounting once the machine is quiet: the summary, read until two readings
/// a while apart agree on what is in use (a restarted server is still faulting its
/// first pages in), at most a few seconds.
fn settled(round: usize) -> Option<Summary> {
    let mut last: Option<Summary> = None;
    for _ in 0..20 {
        sys::sleep_us(300_000);
        let text = env::meminfo().ok()?;
        let s = Summary::parse(&text)?;
        if last.is_some_and(|l| l.used == s.used) {
            println!("memacct_test: round {round}:\n{text}");
            return Some(s);
        }
        last = Some(s);
    }
    let text = env::meminfo().ok()?;
    println!("memacct_test: round {round} (not settled):\n{text}");
    Summary::parse(&text)
}

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(baio::create(blk, SEG, BLOCKS, 0), Ok(()), "create a segment");
    let Ok(mut seg) = baio::open(blk, SEG, 3, BUF) else {
        c.check(false, "open it");
        return c.finish("memacct_test");
    };
    c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "write every block's number into it");
    read_through_cache(&mut c, &seg, 0);
    let Some(first) = settled(0) else {
        c.check(false, "root's accounting reads");
        return c.finish("memacct_test");
    };
    c.eq(first.unaccounted, 0, "before any restart, every frame is accounted for");
    let mut used: Vec<u64> = Vec::new();
    for round in 1..=ROUNDS {
        restart(&mut c, "net", round);
        restart(&mut c, "cache", round);
        restart(&mut c, "files", round);
        restart(&mut c, "blk", round);
        // The new blk knows the segment's old capability no more.
        c.check(seg.reopen(blk).is_ok(), &format!("round {round}: open the segment at the new blk"));
        update(&mut c, "files files", round);
        update(&mut c, "cache cache", round);
        // Updates that fail: the new program crashes, or refuses the state; the old
        // server goes on, and the new one's frames must all come back.
        for cmd in ["files fault_crasher", "files files formats=2"] {
            let r = env::update(cmd);
            c.check(matches!(r, Err((Error::BadState, _))), &format!("round {round}: update {cmd} fails ({r:?})"));
        }
        read_through_cache(&mut c, &seg, round);
        connections(&mut c, round);
        let Some(s) = settled(round) else {
            c.check(false, &format!("round {round}: root's accounting reads"));
            break;
        };
        c.eq(s.machine, first.machine, &format!("round {round}: the machine"));
        c.eq(s.unaccounted, 0, &format!("round {round}: the rows sum to the machine"));
        c.eq(s.ended, 0, &format!("round {round}: no ended program holds a frame"));
        println!(
            "memacct_test: round {round}: used {} (+{} since boot), free {}, lent {}, ended {}",
            s.used,
            s.used as i64 - first.used as i64,
            s.free,
            s.lent,
            s.ended
        );
        used.push(s.used);
    }
    // After the warm-up round, nothing grows.
    if let Some((&base, rest)) = used.split_first() {
        for (k, &u) in rest.iter().enumerate() {
            c.check(
                u <= base + TOLERANCE,
                &format!(
                    "round {}: {} frames in use, {} after the warm-up round (at most {} more)",
                    k + 2,
                    u,
                    base,
                    TOLERANCE
                ),
            );
        }
    }
    c.finish("memacct_test")
}
