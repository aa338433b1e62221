//! Started (many times) by root_test: ends at once. With `chain N` it first starts
//! `root_test_child chain N-1` (SPAWN), and with `chain 0` it waits to be killed: a
//! chain of programs that each start the next and end.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

rt::entry!(main);

fn main() -> i32 {
    let mut words = rt::args().split(' ').skip(1);
    if words.next() == Some("chain") {
        match words.next().and_then(|n| n.parse::<u32>().ok()) {
            Some(0) => loop {
                rt::sys::sleep_us(1_000_000);
            },
            Some(n) => {
                let pair = rt::alloc_slot_pair();
                if let Err(e) = rt::env::spawn(&alloc::format!("root_test_child chain {}", n - 1), pair) {
                    rt::println!("root_test_child: chain {}: SPAWN failed: {:?}", n, e);
                    return 1;
                }
            }
            None => return 1,
        }
    }
    0
}
