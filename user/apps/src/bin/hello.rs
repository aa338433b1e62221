//! The program `cargo xtask run` starts: greets, shows what the kernel reports, and
//! makes a round of IPC with an echo server it asks root to start.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

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
        Ok(id) => match echo_api::client::echo(slot, &[41]) {
            Ok(m) => println!("hello: echo (program {}) answered Ok(()) with {:?}", id, m.words()),
            Err(e) => println!("hello: echo (program {}) answered {:?}", id, e),
        },
        Err(e) => println!("hello: could not start echo: {:?}", e),
    }
    0
}
