//! Early and debug log: COM1, polled. The kernel keeps only this path; the console
//! proper becomes a user-level driver (next issue).

use core::fmt::{self, Write};
use x86_64::instructions::port::Port;

const COM1: u16 = 0x3F8;

pub struct Serial;

impl Serial {
    pub fn init() {
        let init: [(u16, u8); 7] = [
            (1, 0x00), // no interrupts
            (3, 0x80), // DLAB
            (0, 0x01), // 115200 baud
            (1, 0x00),
            (3, 0x03), // 8N1
            (2, 0xC7), // FIFO
            (4, 0x0B),
        ];
        for (off, val) in init {
            // SAFETY: COM1's registers are the standard 16550 ports; writing them only
            // configures the UART, which the kernel owns during boot.
            unsafe { Port::<u8>::new(COM1 + off).write(val) };
        }
    }

    pub fn put(byte: u8) {
        let mut lsr = Port::<u8>::new(COM1 + 5);
        let mut data = Port::<u8>::new(COM1);
        // SAFETY: reading the line status and writing the data register of COM1 have no
        // effect beyond transmitting this byte.
        unsafe {
            for _ in 0..100_000 {
                if lsr.read() & 0x20 != 0 {
                    break;
                }
            }
            data.write(byte);
        }
    }

    pub fn write_bytes(bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                Self::put(b'\r');
            }
            Self::put(b);
        }
    }
}

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Serial::write_bytes(s.as_bytes());
        Ok(())
    }
}

pub fn _print(args: fmt::Arguments) {
    let _ = Serial.write_fmt(args);
}

/// Print to the serial log (`use crate::arch::serial::kprint`: the macros live here,
/// not at the crate root, so that every module's import of them names `arch`).
macro_rules! kprint {
    ($($arg:tt)*) => { $crate::arch::serial::_print(format_args!($($arg)*)) };
}

macro_rules! kprintln {
    () => { $crate::arch::serial::kprint!("\n") };
    ($($arg:tt)*) => { $crate::arch::serial::kprint!("{}\n", format_args!($($arg)*)) };
}

pub(crate) use {kprint, kprintln};
