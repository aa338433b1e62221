//! The stale-data attack: principal 1 (`stale_test writer`) fills a private
//! 512-block segment with its bytes, reads some of it through the cache, and deletes it;
//! principal 3 then creates a segment of the same size (on the same blocks: first fit
//! from the freed run) and must read zeros everywhere — direct and buffered — and, after
//! writing one block far in, its own bytes there and zeros around it.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use blk_api as p;
use blk_api::client::{self as baio, SLOT_BYTES};
use rt::env;
use tests::Checks;

rt::entry!(main);

const BLOCKS: u64 = 512;
/// Blocks per operation of a simple batch (one 16 KiB slot each).
const PER_OP: u64 = SLOT_BYTES / 4096;

/// Run `kind` over blocks `0..BLOCKS` in batches; `each(i, slot bytes)` sees what
/// operation i's slot holds afterwards. Returns whether every operation succeeded.
fn sweep(s: &baio::Segment, kind: u64, mut each: impl FnMut(u64, &mut [u8])) -> bool {
    let mut ok = true;
    let mut first = 0;
    while first < BLOCKS {
        let n = ((BLOCKS - first) / PER_OP).min(p::MAX_REG_OPS as u64).max(1);
        if kind & !p::BUFFERED == p::WRITE_OP {
            for i in 0..n {
                each(first / PER_OP + i, s.data(i));
            }
        }
        let ops: alloc::vec::Vec<(u64, u64, u64)> = (0..n).map(|i| (kind, first + i * PER_OP, PER_OP)).collect();
        ok &= s.batch(&ops).is_ok();
        for i in 0..n {
            ok &= s.wait(i) == p::DONE;
            if kind & !p::BUFFERED == p::READ_OP {
                each(first / PER_OP + i, s.data(i));
            }
        }
        first += n * PER_OP;
    }
    ok
}

fn writer(c: &mut Checks, blk: u64) {
    c.eq(baio::create(blk, "secret", BLOCKS, 0), Ok(()), "the writer makes a private segment");
    let Ok(s) = baio::open(blk, "secret", 3, rt::layout::SEGMENT_AREA) else {
        c.check(false, "open it");
        return;
    };
    c.check(sweep(&s, p::WRITE_OP, |_, d| d.fill(0xa5)), "fill it with its secret");
    c.check(sweep(&s, p::READ_OP | p::BUFFERED, |_, _| {}), "read it through the shared cache");
    c.eq(s.sync(), Ok(()), "on the disk");
    let _ = s.close();
    c.eq(baio::delete(blk, "secret"), Ok(()), "and delete it");
}

fn reader(c: &mut Checks, blk: u64) {
    // The writer's segment exists (private: STAT says NoRights), then is gone.
    c.check(
        tests::wait_until(3000, || baio::stat(blk, "secret") == Err(Error::NoRights)),
        "the writer's segment appears",
    );
    c.check(tests::wait_until(3000, || baio::stat(blk, "secret") == Err(Error::NotFound)), "and is deleted");
    c.eq(baio::create(blk, "mine", BLOCKS, 0), Ok(()), "another principal makes a segment of the same size");
    let Ok(s) = baio::open(blk, "mine", 3, rt::layout::SEGMENT_AREA) else {
        c.check(false, "open it");
        return;
    };
    let mut leaked = 0;
    c.check(sweep(&s, p::READ_OP, |_, d| leaked += d.iter().filter(|b| **b != 0).count()), "read all of it directly");
    c.eq(leaked, 0, "no byte of the deleted segment reads back (direct)");
    let mut leaked = 0;
    c.check(
        sweep(&s, p::READ_OP | p::BUFFERED, |_, d| leaked += d.iter().filter(|b| **b != 0).count()),
        "read all of it through the cache",
    );
    c.eq(leaked, 0, "nor through the cache");
    // One block written far in: its bytes there, zeros before and after it.
    s.data(0)[..4096].fill(0x5a);
    c.eq(s.batch(&[(p::WRITE_OP, 300, 1)]), Ok(()), "write block 300");
    c.eq(s.wait(0), p::DONE, "written");
    s.data(0).fill(0xff);
    s.data(1).fill(0xff);
    s.data(2).fill(0xff);
    c.eq(
        s.batch(&[(p::READ_OP, 300, 1), (p::READ_OP, 100, 1), (p::READ_OP, 400, 1)]),
        Ok(()),
        "read blocks 300, 100 and 400",
    );
    c.eq((s.wait(0), s.wait(1), s.wait(2)), (p::DONE, p::DONE, p::DONE), "read");
    c.check(s.data(0)[..4096].iter().all(|b| *b == 0x5a), "block 300 holds what was written");
    c.check(s.data(1)[..4096].iter().all(|b| *b == 0), "block 100 (below it, zeroed when the mark moved) reads zeros");
    c.check(s.data(2)[..4096].iter().all(|b| *b == 0), "block 400 (past the mark) reads zeros");
    let _ = s.close();
}

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    let as_writer = rt::args().split(' ').nth(1) == Some("writer");
    if as_writer {
        writer(&mut c, blk);
        c.finish("stale_writer")
    } else {
        reader(&mut c, blk);
        c.finish("stale_test")
    }
}
