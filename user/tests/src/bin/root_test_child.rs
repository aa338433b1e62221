//! Started (many times) by root_test: ends at once.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

rt::entry!(main);

fn main() -> i32 {
    0
}
