//! Scion's side of the `net` suite's request/response latency: a TCP echo server on
//! port 7 (the host sends 64 bytes and waits for them, over and over). httpd serves the
//! downloads.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use net_api::client::Net;
use net_api::READABLE;
use rt::println;

rt::entry!(main);

fn main() -> i32 {
    let slot = rt::alloc_slot();
    let net = match rt::env::lookup("net", slot).and_then(|_| Net::attach(slot)) {
        Ok(n) => n,
        Err(e) => {
            println!("bench_net: no net server: {}", e.name());
            return 1;
        }
    };
    let l = match net.listen(7, 4) {
        Ok(l) => l,
        Err(e) => {
            println!("bench_net: cannot listen on port 7: {}", e.name());
            return 1;
        }
    };
    println!("bench_net: echo on port 7");
    loop {
        let Ok((h, _, _)) = net.accept(l) else { continue };
        // Echo: what comes in at offset 0 goes out from there.
        loop {
            match net.recv_area(h, 0, 16 * 1024) {
                Ok(0) => break,
                Ok(n) => {
                    if net.send_area_all(h, 0, n).is_err() {
                        break;
                    }
                }
                Err(Error::WouldBlock) => {
                    if net.wait(&[(h, READABLE)], u64::MAX).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = net.close(h);
    }
}
