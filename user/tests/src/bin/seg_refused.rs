//! Against a corrupt BAIO device: the block service refuses to mount it, and says so
//! to its clients with an error instead of serving bad data or vanishing.
#![no_std]
#![no_main]

use abi::Error;
use tests::Checks;
use blk_api::client as baio;
use rt::{env};

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "the block service is there");
    c.eq(baio::create(blk, "x", 8, 0), Err(Error::BadState), "but refuses to serve a corrupt device");
    c.eq(baio::stat(blk, "files").err(), Some(Error::BadState), "for every request");
    c.eq(baio::mount(blk).err(), Some(Error::BadState), "baio_mount says the device is not mounted");
    c.finish("seg_refused")
}
