//! Typing that nobody reads is kept, up to the console's bound, and reaches a program
//! that reads it later, in order. The scenario types `LINE` a hundred times (6,500
//! bytes) while this program sleeps and neither reads nor writes: nothing on the
//! serial line then makes QEMU's UART raise its interrupt again, so an edge the
//! interrupt path loses strands the rest of the typing in the UART. The program
//! waits until the console's interrupts have stopped for two seconds (the typing has
//! all arrived, or stalled), then reads: exactly the first 4,096 bytes, in order; the
//! console says it dropped the other 2,404 (the scenario's `expect`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use rt::{console, sys};
use tests::Checks;

rt::entry!(main);

const LINE: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/\n";
/// The console's bound on unread typing.
const KEPT: usize = 4096;

/// Device interrupts taken so far, on every CPU.
fn interrupts() -> u64 {
    (0..sys::smp_info().cpus as u64).map(|c| sys::cpu_info(c).map_or(0, |i| i.irqs)).sum()
}

fn main() -> i32 {
    let mut c = Checks::new();
    let before = interrupts();
    rt::println!("typeahead_test: type now");
    // Neither read nor write until the typing has stopped coming in.
    let (mut last, mut quiet_since) = (before, sys::now_us());
    let start = sys::now_us();
    loop {
        sys::sleep_us(100_000);
        let (n, now) = (interrupts(), sys::now_us());
        if n != last {
            (last, quiet_since) = (n, now);
        } else if n > before && now - quiet_since >= 2_000_000 {
            break;
        }
        if now - start > 60_000_000 {
            break;
        }
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n @ 1..) = console::poll(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    rt::println!("typeahead_test: {} interrupts while typing, {} bytes kept", last - before, got.len());
    c.eq(got.len(), KEPT, "the console keeps 4096 bytes typed while nobody reads");
    let first_wrong = got.iter().enumerate().position(|(i, &b)| b != LINE[i % LINE.len()]);
    c.eq(first_wrong, None, "they are the first bytes typed, in order");
    c.eq(console::poll(&mut buf), Ok(0), "nothing more is kept");
    c.finish("typeahead_test")
}
