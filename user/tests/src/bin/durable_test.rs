//! `durable write`: create a segment, write a pattern, sync, and say so — the test
//! harness kills the machine at that moment. `durable read`: after the next boot, the
//! pattern must be there.
#![no_std]
#![no_main]

use blk_api as p;
use blk_api::client as baio;
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

const BUF: u64 = rt::layout::SEGMENT_AREA;

fn pattern(k: usize) -> u8 {
    (k * 13 % 251) as u8
}

fn main() -> i32 {
    let mut c = Checks::new();
    let write = rt::args().split(' ').nth(1) == Some("write");
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    if write {
        // QEMU runs the disk with a write cache (cache=writeback): blk must flush it at
        // every ordering point of a metadata update, and at SYNC.
        let flushes = || baio::flushes(blk).map_or(0, |f| f.0);
        c.eq(baio::flushes(blk).map(|f| f.1), Ok(true), "the device has a write cache to flush");
        let f0 = flushes();
        c.eq(baio::create(blk, "durable", 8, 0), Ok(()), "create a segment");
        let f1 = flushes();
        let s = baio::open(blk, "durable", 3, BUF).expect("open");
        for (k, b) in s.data(0).iter_mut().enumerate() {
            *b = pattern(k);
        }
        c.eq(s.batch(&[(p::WRITE_OP, 0, 4)]), Ok(()), "write four blocks");
        c.eq(s.wait(0), p::DONE, "written");
        let f2 = flushes();
        c.eq(s.batch(&[(p::WRITE_OP, 0, 4)]), Ok(()), "write them again (under the mark now)");
        c.eq(s.wait(0), p::DONE, "written");
        let f3 = flushes();
        c.eq(f1 - f0, 1, "a create: one flush (after its inode)");
        c.eq(f2 - f1, 2, "a first write: its mark moves (a flush after the zeros, one after the inode)");
        c.eq(f3 - f2, 0, "a write under the mark: no flush");
        c.eq(s.sync(), Ok(()), "sync acknowledged");
        c.eq(flushes() - f3, 1, "a sync: one flush");
        println!("DURABLE synced");
        // The harness kills the machine now; nothing after this line is needed.
        loop {
            rt::sys::sleep_us(1_000_000);
        }
    }
    let s = baio::open(blk, "durable", 1, BUF);
    c.check(s.is_ok(), "after the kill and a new boot, the segment is there");
    if let Ok(s) = s {
        c.eq(s.batch(&[(p::READ_OP, 0, 4)]), Ok(()), "read it");
        c.eq(s.wait(0), p::DONE, "read");
        c.check(
            s.data(0).iter().enumerate().all(|(k, b)| *b == pattern(k)),
            "every byte written before the sync survived the kill",
        );
    }
    c.finish("durable")
}
