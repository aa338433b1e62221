//! What the block service makes of a damaged device. `refused`: it refuses to mount
//! it, and says so to its clients with an error instead of serving bad data or
//! vanishing. `mounted`: it mounted it (finishing an interrupted update) and serves it.
#![no_std]
#![no_main]

use abi::Error;
use blk_api::client as baio;
use rt::env;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "the block service is there");
    if rt::args().split(' ').nth(1) == Some("mounted") {
        c.check(baio::mount(blk).is_ok(), "baio_mount: the device is mounted");
        c.check(baio::stat(blk, "files").is_ok(), "the segment on it is there");
        c.check(baio::create(blk, "x", 8, 0).is_ok(), "and a new segment can be made");
    } else {
        c.eq(baio::create(blk, "x", 8, 0), Err(Error::BadState), "but refuses to serve a damaged device");
        c.eq(baio::stat(blk, "files").err(), Some(Error::BadState), "for every request");
        c.eq(baio::mount(blk).err(), Some(Error::BadState), "baio_mount says the device is not mounted");
    }
    c.finish("mount_test")
}
