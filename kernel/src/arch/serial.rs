//! The kernel's log: COM1, polled, and the firmware's screen when there is one
//! (`arch::screen`). The console proper is a user-level driver (the console server).

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

/// The log's second sink: what is written to COM1 goes to the screen too, gathered
/// so that one message is one drawing.
struct Both {
    buf: [u8; 256],
    len: usize,
}

impl Both {
    fn screen(&mut self) {
        crate::arch::screen::write(&self.buf[..self.len]);
        self.len = 0;
    }
}

impl Write for Both {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Serial::write_bytes(s.as_bytes());
        for chunk in s.as_bytes().chunks(self.buf.len()) {
            if self.len + chunk.len() > self.buf.len() {
                self.screen();
            }
            self.buf[self.len..self.len + chunk.len()].copy_from_slice(chunk);
            self.len += chunk.len();
        }
        Ok(())
    }
}

pub fn _print(args: fmt::Arguments) {
    let mut b = Both { buf: [0; 256], len: 0 };
    let _ = b.write_fmt(args);
    b.screen();
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
