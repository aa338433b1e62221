//! Principal 2 against principal 1's segments: a private one cannot be opened, a
//! readable one only for reading, nobody else's can be deleted.
#![no_std]
#![no_main]

use abi::Error;
use blk_api as p;
use blk_api::client as baio;
use rt::env;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    // Wait for principal 1's segments.
    tests::wait_until(500, || baio::stat(blk, "shared").is_ok());
    c.eq(
        baio::open(blk, "mine", 1, rt::layout::SEGMENT_AREA).err(),
        Some(Error::NoRights),
        "another principal's private segment: refused",
    );
    c.eq(baio::stat(blk, "mine").err(), Some(Error::NoRights), "and STAT tells nothing of it, as LIST hides it");
    c.eq(
        baio::open(blk, "shared", 3, rt::layout::SEGMENT_AREA).err(),
        Some(Error::NoRights),
        "a readable segment cannot be opened for writing",
    );
    let s = baio::open(blk, "shared", 1, rt::layout::SEGMENT_AREA);
    c.check(s.is_ok(), "but for reading");
    if let Ok(s) = s {
        c.eq(s.batch(&[(p::READ_OP, 0, 1), (p::WRITE_OP, 0, 1)]), Ok(()), "a batch");
        c.eq((s.wait(0), s.wait(1)), (p::DONE, p::FAILED | p::E_RIGHTS), "reads, but cannot write");
        let _ = s.close();
    }
    c.eq(baio::delete(blk, "shared"), Err(Error::NoRights), "nor delete it");
    c.check(
        baio::list(blk).is_ok_and(|l| l.contains("shared") && !l.contains("mine")),
        "list shows only what it may open",
    );
    // Principal 2's quota is 24 blocks (blk's `quota.2=24`).
    c.eq(baio::create(blk, "p2a", 16, 0), Ok(()), "within the principal's quota");
    c.eq(baio::create(blk, "p2b", 16, 0), Err(Error::NoSpace), "over the principal's quota");
    c.eq(baio::delete(blk, "p2a"), Ok(()), "delete its own segment");
    // Keep "shared" open and end: the service must close it for us.
    let left = baio::open(blk, "shared", 1, rt::layout::SEGMENT_AREA);
    c.check(left.is_ok(), "open again and leave it open");
    c.eq(baio::create(blk, "peer-done", 1, 1), Ok(()), "say we are done");
    c.finish("seg_peer")
}
