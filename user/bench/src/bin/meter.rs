//! The metering program of the `cue` suite (the Cue paper's "metering process"): it
//! does units of CPU-bound work (`meter_api::unit`) at the priority the manifest gives
//! it and counts them; between units it looks, without waiting, for a request
//! (`meter_api`: READ the count, START, STOP). Stopped, it sleeps in its receive and
//! takes no CPU. What it gets done beside a transfer, against what it gets done alone,
//! is the CPU the transfer leaves to others.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use meter_api as p;
use rt::ipc::{self, Msg};
use rt::server::{Args, Decode};

rt::entry!(main);

fn main() -> i32 {
    let (mut units, mut working, mut x) = (0u64, false, 0x9e37_79b9_7f4a_7c15u64);
    let mut m = Msg::empty();
    rt::println!("meter: ready");
    loop {
        // Working: look for a request without waiting; stopped: wait for one.
        // (Every 16 units while working: the look costs a system call.)
        let timeout = if working { ipc::timeouts(ipc::POLL, ipc::POLL) } else { ipc::FOREVER };
        if (!working || units % 16 == 0) && ipc::recv(ipc::RECV_ANY, &mut m, timeout).is_ok() {
            let r = match p::Request::decode(&Args { msg: &m, string: &[] }) {
                Ok(p::Request::Read) => Msg::new(0, &[0, units, working as u64]),
                Ok(p::Request::Start) => {
                    working = true;
                    Msg::new(0, &[0])
                }
                Ok(p::Request::Stop) => {
                    working = false;
                    Msg::new(0, &[0])
                }
                Err(e) => Msg::new(0, &[e as u64]),
            };
            let _ = ipc::reply(&r);
        }
        if working {
            x = p::unit(x);
            units += 1;
        }
        core::hint::black_box(x);
    }
}
