//! A graft's time is its principal's (`graft::share`): while another principal loads a
//! spinning graft into a server, has it called and loads it again in a loop
//! (`share_spin`), this program's requests to that server take no more than twice as
//! long as they did before the attack (the mean over the attack against the mean
//! alone, a ratio of two figures of this one run: no absolute time is judged). Two
//! servers: the cache (this program's buffered reads, each a miss, so each asks it) and
//! mem0 (this program's page faults: it runs past its resident limit through a
//! read-only table, so every read of the table is a fault mem0 serves). Without the
//! charge and the back-off, each of the attacker's calls held the server for the
//! watchdog's two seconds, and loading it again at once kept it held.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use blk_api as p;
use blk_api::client as baio;
use mem_api::client as mem;
use rt::{env, println};
use tests::blocks::io;
use tests::Checks;

rt::entry!(main);

const SEG: &str = "share";
/// More than the cache's 1,024 blocks: read in a cycle, every read misses.
const BLOCKS: u64 = 4096;
/// Blocks one read takes (16 KiB: a small file's download).
const READ: u64 = 4;
/// How long this program measures beside each attack (which lasts 6 s: the attackers'
/// manifest argument). Guest time: the scenario runs under icount, so that the ratio
/// is of guest instructions, whatever else the host runs.
const MEASURE_US: u64 = 5_000_000;

const PAGES: usize = 128;

/// Clean pages mem0 may take back.
static TABLE: tests::CleanPages<PAGES> = tests::CleanPages::new();

/// Buffered reads of `READ` blocks each, from block `*next` on (cycling through the
/// segment), for `count` reads or until `until_us`: (reads, ticks, all right).
fn reads(seg: &baio::Segment, next: &mut u64, count: u64, until_us: u64) -> (u64, u64, bool) {
    let (mut n, mut ok) = (0u64, true);
    let t0 = rt::sys::rdtsc();
    while n < count && rt::sys::now_us() < until_us {
        ok &= io(seg, p::READ_OP | p::BUFFERED, *next, READ, true);
        *next = (*next + READ) % BLOCKS;
        n += 1;
    }
    (n, rt::sys::rdtsc() - t0, ok)
}

/// Reads of the table's pages in a cycle (past the resident limit: a fault each), for
/// `count` pages or until `until_us`: (pages, ticks, all right).
fn faults(next: &mut usize, count: u64, until_us: u64) -> (u64, u64, bool) {
    let (mut n, mut ok) = (0u64, true);
    let t0 = rt::sys::rdtsc();
    while n < count && rt::sys::now_us() < until_us {
        ok &= TABLE.read(*next);
        *next = (*next + 1) % PAGES;
        n += 1;
    }
    (n, rt::sys::rdtsc() - t0, ok)
}

/// Start attacker `name`, measure `work` alone and beside it: the ratio × 100.
fn beside(c: &mut Checks, name: &str, what: &str, mut work: impl FnMut(u64, u64) -> (u64, u64, bool)) -> u64 {
    let _ = work(20, u64::MAX);
    let (n0, t0, ok0) = work(200, u64::MAX);
    c.check(ok0 && n0 == 200, &format!("{what}: 200 alone, right"));
    let alone = t0 / n0.max(1);
    let slot = rt::alloc_slot_pair();
    c.check(env::spawn(name, slot).is_ok(), &format!("{what}: start {name} (another principal)"));
    rt::sys::sleep_us(300_000);
    let (n1, t1, ok1) = work(u64::MAX, rt::sys::now_us() + MEASURE_US);
    c.check(ok1 && n1 > 0, &format!("{what}: {n1} beside the attack, right"));
    let with = t1 / n1.max(1);
    let ratio = with * 100 / alone.max(1);
    println!(
        "share_test: {what} takes {alone} ticks alone, {with} beside {name}'s spin-reload loop: {}.{:02}x",
        ratio / 100,
        ratio % 100
    );
    // The attacker's report (the scenario expects it) before the next.
    tests::wait_until(1000, || tests::id_of(name).is_none());
    ratio
}

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(baio::create(blk, SEG, BLOCKS, 0), Ok(()), "create a segment");
    let Ok(seg) = baio::open(blk, SEG, 3, rt::layout::SEGMENT_AREA) else {
        c.check(false, "open it");
        return c.finish("share_test");
    };
    c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "write every block");
    let mut next = 0;
    let r = beside(&mut c, "share_spin", "a 16 KiB buffered read", |n, until| reads(&seg, &mut next, n, until));
    c.check(
        r <= 200,
        "beside another principal's spin-reload loop in the cache, a read takes at most 2x its time alone",
    );
    let _ = seg.close();
    let _ = baio::delete(blk, SEG);

    let mem0 = rt::alloc_slot();
    c.eq(env::lookup("mem0", mem0), Ok(()), "find my memory server");
    let held = mem::usage(mem0, u64::MAX).map_or(0, |u| u.pages);
    c.check(
        mem::usage(mem0, held.max(mem_api::MIN_RESIDENT) + 16).is_ok(),
        "a resident limit a little above what I hold",
    );
    let mut page = 0;
    let r = beside(&mut c, "share_spin_mem", "a page fault", |n, until| faults(&mut page, n, until));
    c.check(r <= 200, "beside another principal's spin-reload loop in mem0, a fault takes at most 2x its time alone");
    c.finish("share_test")
}
