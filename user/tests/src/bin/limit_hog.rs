//! Touches more memory than its manifest entry allows; its memory server must refuse
//! the page past the limit, and root (its fault handler) removes it. If it ever got
//! all of it, it tells its PEER.
#![no_std]
#![no_main]

use rt::ipc::{self, Msg};

rt::entry!(main);

fn main() -> i32 {
    sys_touch(0x0000_5600_0000_0000, 1024);
    let _ = ipc::send(abi::cap::PEER, &Msg::new(1, &[1024]), ipc::FOREVER);
    0
}

fn sys_touch(va: u64, pages: u64) {
    rt::sys::prefault(va, pages);
}
