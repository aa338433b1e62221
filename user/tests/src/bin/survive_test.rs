//! A server's restart does not take grafts from servers that did not die (issue 47,
//! item 4): a principal's stream graft in blk stays loaded, and is called, across three
//! kills of the shared cache. blk used to end when its cache went (fail-stop), root
//! restarted it, and every principal's grafts in it were gone; now blk serves on around
//! the cache and attaches to the new one. Buffered reads stay right throughout: one
//! that raced the cache's death may fail (`E_IO`), never return wrong bytes.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use blk_api as p;
use blk_api::client::{self as baio, Segment};
use graft_api as g;
use rt::{env, println, sys};
use tests::blocks::io;
use tests::Checks;

rt::entry!(main);

const SEG: &str = "survive";
const BLOCKS: u64 = 256;
const BUF: u64 = 0x5_0000_0000;
const GRAFT: &str = "/grafts/stream_wasmi_md5.graft";

/// A stream read of 8 blocks through the graft: whether it completed with the graft
/// called (DONE, not STREAM_ABORTED).
fn stream_read(seg: &Segment) -> (bool, u64) {
    let r = seg.batch_ops(&[p::op(p::READ_OP | p::STREAM, 0, 8, 0, p::DATA)], p::WAIT_ALL);
    (r.is_ok() && seg.status(0) == p::DONE, seg.status(0))
}

fn main() -> i32 {
    let mut c = Checks::new();
    let (blk, files) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(env::lookup("files", files), Ok(()), "find the files server");
    c.eq(baio::create(blk, SEG, BLOCKS, 0), Ok(()), "create a segment");
    let Ok(seg) = baio::open(blk, SEG, 3, BUF) else {
        c.check(false, "open it");
        return c.finish("survive_test");
    };
    c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "write every block's number into it");
    let file = files_api::client::read_all(files, GRAFT).unwrap_or_default();
    let id = match g::load(blk, &file) {
        Ok(id) => id,
        Err(r) => {
            c.check(false, &format!("load {GRAFT} into blk: {:?} {}", r.error, r.reason));
            return c.finish("survive_test");
        }
    };
    let (ok, st) = stream_read(&seg);
    c.check(ok, &format!("a stream read calls the graft ({st:#x})"));
    let calls0 = g::stats(blk, id).map_or(0, |s| s.calls);
    c.check(calls0 > 0, "the graft was called");
    let blk_id = tests::id_of("blk");
    for round in 0..3 {
        // Buffered reads fill the cache; then it is killed.
        c.check(io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true), &format!("round {round}: buffered reads"));
        let cache = tests::id_of("cache");
        c.check(cache.is_some_and(|i| env::kill(i).is_ok()), &format!("round {round}: kill the cache ({cache:?})"));
        // Reads go on, right: some may fail while blk finds the cache gone, none is
        // wrong (`io` checks every block's number), and then they all succeed.
        let mut failed = 0;
        let mut fine = false;
        for _ in 0..50 {
            if io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, false) {
                fine = io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true);
                break;
            }
            failed += 1;
            sys::sleep_us(100_000);
        }
        println!("survive_test: round {round}: {failed} batches of reads failed after the kill");
        c.check(fine, &format!("round {round}: buffered reads right after the cache's restart"));
        c.check(
            tests::wait_until(500, || tests::id_of("cache").is_some_and(|i| Some(i) != cache)),
            &format!("round {round}: root restarted the cache"),
        );
        c.eq(tests::id_of("blk"), blk_id, &format!("round {round}: blk is the same program (not restarted)"));
        let st = g::stats(blk, id);
        c.check(
            st.is_ok(),
            &format!("round {round}: the graft is still loaded in blk ({:?})", st.map_err(|r| r.error)),
        );
        let (ok, st) = stream_read(&seg);
        let calls = g::stats(blk, id).map_or(0, |s| s.calls);
        c.check(ok && calls > calls0, &format!("round {round}: and called ({st:#x}; {calls} calls)"));
    }
    // blk uses the new cache again: a second pass over the blocks hits it.
    c.check(
        tests::wait_until(500, || tests::ps_column("blk", 0) == blk_id && tests::id_of("cache").is_some()),
        "blk and the cache run",
    );
    c.check(io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true), "buffered reads through the new cache");
    c.check(g::unload(blk, id).is_ok(), "unload the graft");
    let _ = seg.close();
    c.finish("survive_test")
}
