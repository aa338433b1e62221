//! The console server as seen by programs: write bytes, read typed bytes. A program
//! whose manifest entry lists "console" finds it in `abi::cap::CONSOLE`; `print!`
//! then goes there, and to the kernel's debug log otherwise.

use crate::ipc::{self, Msg};
use crate::proto::console as p;
use abi::{cap, Error};
use core::sync::atomic::{AtomicU8, Ordering};

/// 0 = not looked at yet, 1 = no console, 2 = console in `cap::CONSOLE`.
static STATE: AtomicU8 = AtomicU8::new(0);

pub fn available() -> bool {
    match STATE.load(Ordering::Relaxed) {
        0 => {
            let yes = crate::sys::cap_info(cap::CONSOLE).is_ok_and(|i| i.0 == abi::cap::THREAD);
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        s => s == 2,
    }
}

/// Write to the console; Err if there is none (or it is gone).
pub fn write(bytes: &[u8]) -> Result<(), Error> {
    if !available() {
        return Err(Error::InvalidCap);
    }
    for chunk in bytes.chunks(1024) {
        ipc::set_send_string(chunk);
        // By hand, not `p::client::write`: only a failed call (no console) means there is
        // none, whatever a console answers.
        let mut m = Msg::new(p::WRITE, &[]).with_string();
        if let Err(e) = ipc::call(cap::CONSOLE, &mut m, ipc::FOREVER) {
            STATE.store(1, Ordering::Relaxed);
            return Err(e);
        }
    }
    Ok(())
}

/// Wait for typed bytes; returns how many landed in `buf`. A wait the console let go
/// of (`WouldBlock`: it keeps a bounded number of waiting reads) is asked for again.
pub fn read(buf: &mut [u8]) -> Result<usize, Error> {
    loop {
        ipc::set_recv_buffer(buf);
        match p::client::read(cap::CONSOLE, buf.len() as u64) {
            Err(Error::WouldBlock) => continue,
            r => r?,
        };
        return Ok(ipc::received_string_len().min(buf.len()));
    }
}

/// The bytes typed so far and not read yet (perhaps none), without waiting.
pub fn poll(buf: &mut [u8]) -> Result<usize, Error> {
    if !available() {
        return Err(Error::InvalidCap);
    }
    ipc::set_recv_buffer(buf);
    p::client::poll(cap::CONSOLE, buf.len() as u64)?;
    Ok(ipc::received_string_len().min(buf.len()))
}
