//! net_test's other client: it listens on port 90 (its handle 1) and waits, so that
//! net_test can try to reach a socket of another program by its handle number.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use net_api::client::Net;
use rt::println;

rt::entry!(main);

fn main() -> i32 {
    let slot = rt::alloc_slot();
    let Ok(net) = rt::env::lookup("net", slot).and_then(|_| Net::attach(slot)) else {
        println!("net_peer: no net server");
        return 1;
    };
    match net.listen(90, 1) {
        Ok(h) => println!("net_peer: listening on port 90 as handle {}", h),
        Err(e) => println!("net_peer: cannot listen: {}", e.name()),
    }
    loop {
        rt::sys::sleep_us(1_000_000_000);
    }
}
