//! Typing that nobody reads is not lost, and the console keeps a bounded part of it.
//! The scenario types `LINE` a hundred times (6,500 bytes) while this program sleeps
//! and neither reads nor writes: nothing on the serial line then makes QEMU's UART
//! raise its interrupt again, so an interrupt the kernel strands, or an edge it loses,
//! strands the rest of the typing in the UART. The console keeps 4,096 bytes and then
//! throttles the line (the rest waits in the UART and in QEMU); the program waits
//! until the console's interrupts have stopped for two seconds (if the host stalled
//! QEMU that long, the reading below still waits for the rest), then reads: every byte
//! typed, in order, those past the console's bound taken from the UART as reads make
//! room.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use rt::{console, sys};
use tests::Checks;

rt::entry!(main);

const LINE: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/\n";
const TYPED: usize = 100 * LINE.len();

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
    // Read it all: what the console kept at once, the rest as it comes out of the
    // UART (given up after ten seconds without a byte: a loaded host may stall QEMU).
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    let mut idle_since = sys::now_us();
    while got.len() < TYPED && sys::now_us() - idle_since < 10_000_000 {
        match console::poll(&mut buf) {
            Ok(n @ 1..) => {
                got.extend_from_slice(&buf[..n]);
                idle_since = sys::now_us();
            }
            _ => sys::sleep_us(10_000),
        }
    }
    rt::println!("typeahead_test: {} interrupts while typing; {} bytes read", last - before, got.len());
    c.eq(got.len(), TYPED, "every byte typed while nobody read arrives");
    let first_wrong = got.iter().enumerate().position(|(i, &b)| b != LINE[i % LINE.len()]);
    c.eq(first_wrong, None, "in order");
    c.finish("typeahead_test")
}
