//! The program `cargo xtask run` starts: greets, shows what the kernel reports, and
//! makes a round of IPC with an echo server it asks root to start.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use rt::ipc::{self, Msg};
use rt::{println, sys};

rt::entry!(main);

fn main() -> i32 {
    let info = sys::kernel_info();
    println!(
        "hello from user mode: ABI {}, {} kHz TSC, {} free frames, quota {}/{} pages",
        info.abi_version, info.tsc_per_ms, info.free_frames, info.quota_used, info.quota_limit
    );
    let slot = rt::alloc_slot_pair();
    match rt::env::spawn("echo", slot) {
        Ok(id) => {
            let mut m = Msg::new(echo_api::ECHO, &[41]);
            let r = ipc::call(slot, &mut m, ipc::FOREVER);
            println!("hello: echo (program {}) answered {:?} with {:?}", id, r, m.words());
        }
        Err(e) => println!("hello: could not start echo: {:?}", e),
    }
    0
}
