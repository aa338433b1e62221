//! Started by arena_test (another principal's program) once the hostile memory grafts
//! have run in the cache, blk, net and mem0: it loads and runs grafts of its own there
//! as any principal may, and writes and reads blocks of its own segment buffered
//! through the cache. Reports its failures to PEER (label 1, MR1).
#![no_std]
#![no_main]

extern crate alloc;

use abi::cap;
use alloc::format;
use blk_api as p;
use blk_api::client as baio;
use graft_api as g;
use rt::{env, ipc};
use tests::blocks::io;
use tests::Checks;

rt::entry!(main);

const SEG: &str = "ap";
const BLOCKS: u64 = 256;

fn main() -> i32 {
    let mut c = Checks::new();
    let [cache, blk, net, files] = [(); 4].map(|_| rt::alloc_slot());
    for (name, slot) in [("cache", cache), ("blk", blk), ("net", net), ("files", files)] {
        c.eq(env::lookup(name, slot), Ok(()), &format!("peer: find {name}"));
    }
    // A graft of each technology that allocates, where each server hosts it.
    for (srv, what, file, input) in [
        (cache, "cache", "/grafts/evict_rhai_hotlist.graft", &[0u8; 16][..]),
        (cache, "cache", "/grafts/evict_wasmi_hotlist.graft", &[0u8; 16][..]),
        (blk, "blk", "/grafts/stream_rhai_md5.graft", &[7u8; 64][..]),
        (net, "net", "/grafts/stream_wasmi_md5.graft", &[7u8; 64][..]),
    ] {
        let Ok(bytes) = files_api::client::read_all(files, file) else {
            c.check(false, &format!("peer: {file} is in the files filesystem"));
            continue;
        };
        match tests::load_graft(srv, &bytes) {
            Ok(id) => {
                let r = g::test_run(srv, id, input, 4);
                c.check(
                    // TEST_RUN stops its loop at a turn's time (plain TCG: the host's clock), so a
                    // loaded host may see fewer than the 4 calls; each must be whole.
                    r.as_ref().is_ok_and(|r| r.calls >= 1 && r.aborts == 0),
                    &format!("peer: {file} runs in {what} ({r:?})"),
                );
                c.check(g::unload(srv, id).is_ok(), &format!("peer: unload {file} from {what}"));
            }
            Err(r) => {
                c.check(false, &format!("peer: load {file} into {what}: {:?} {}", r.error, r.reason));
            }
        }
    }
    // Blocks of its own, through the cache.
    let _ = baio::delete(blk, SEG);
    c.eq(baio::create(blk, SEG, BLOCKS, 0), Ok(()), "peer: create a segment");
    match baio::open(blk, SEG, 3, rt::layout::SEGMENT_AREA) {
        Ok(seg) => {
            c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "peer: write its blocks");
            for round in 0..3 {
                c.check(
                    io(&seg, p::READ_OP | p::BUFFERED, 0, BLOCKS, true),
                    &format!("peer: its blocks read right, buffered through the cache (round {round})"),
                );
            }
            let _ = seg.close();
        }
        Err(e) => {
            c.check(false, &format!("peer: open its segment: {e:?}"));
        }
    }
    let failed = c.finish("arena_peer");
    let mut m = ipc::Msg::new(1, &[c.failed as u64]);
    let _ = ipc::call(cap::PEER, &mut m, ipc::FOREVER);
    failed
}
