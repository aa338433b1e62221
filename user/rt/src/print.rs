//! `print!` and `println!`: each call formats into a buffer and writes it with one
//! system call, so lines from different threads do not interleave.

use core::fmt::{self, Write};

pub struct LineBuf {
    buf: [u8; 1024],
    len: usize,
}

impl LineBuf {
    pub const fn new() -> Self {
        LineBuf { buf: [0; 1024], len: 0 }
    }
    pub fn flush(&mut self) {
        if self.len > 0 {
            if crate::console::write(&self.buf[..self.len]).is_err() {
                let _ = crate::sys::debug_put(&self.buf[..self.len]);
            }
            self.len = 0;
        }
    }
}

impl Default for LineBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush();
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

pub fn _print(args: fmt::Arguments) {
    let mut b = LineBuf::new();
    let _ = b.write_fmt(args);
    b.flush();
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::print::_print(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::print::_print(format_args!("{}\n", format_args!($($arg)*))) };
}
