//! Per-program memory limits from the manifest: `hog` (64 pages) touches 1024 pages;
//! its memory server refuses the page past the limit and root removes it.
#![no_std]
#![no_main]

use abi::Error;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, POLL};
use rt::sys;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let hog = rt::alloc_slot_pair();
    let hog_task = hog + 1;
    c.check(spawn("limit_hog", hog).is_ok(), "start hog (64 pages in its manifest entry)");
    let mut gone = false;
    for _ in 0..300 {
        let mut m = Msg::empty();
        if ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, POLL)).is_ok() {
            c.check(false, "hog never gets all it asks for");
            break;
        }
        if sys::cap_info(hog_task) == Err(Error::InvalidCap) {
            gone = true;
            break;
        }
        sys::sleep_us(10_000);
    }
    c.check(gone, "hog was stopped at its limit and removed");
    c.finish("limit_test")
}
