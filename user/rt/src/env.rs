//! What a program asks root for: servers by name, I/O ports, interrupt lines, and
//! the system-wide views the shell shows.

use crate::ipc::{self, Msg};
use crate::proto;
use abi::cap;
use abi::fpage::Fpage;
use abi::Error;
use alloc::string::String;

fn call(m: &mut Msg) -> Result<(), Error> {
    crate::server::request(cap::PARENT, m)
}

/// A SEND capability to the server `name` in `slot` (if the manifest allows it).
pub fn lookup(name: &str, slot: u64) -> Result<(), Error> {
    ipc::set_send_string(name.as_bytes());
    call(&mut Msg::new(proto::LOOKUP, &[slot]).with_string())
}

/// Ports `first .. first + 2^log2` (if the manifest grants them).
pub fn io(first: u64, log2: u64) -> Result<(), Error> {
    crate::server::request_mapping(cap::PARENT, [Fpage(0), Fpage(0), Fpage::io(0, 16)], &mut Msg::new(proto::GET_IO, &[first, log2]))
}

/// An IRQ capability for `line` in `slot` (if the manifest grants it).
pub fn irq(line: u64, slot: u64) -> Result<(), Error> {
    call(&mut Msg::new(proto::GET_IRQ, &[line, slot]))
}

fn text(label: u64) -> Result<String, Error> {
    let mut buf = alloc::vec![0u8; 4096];
    ipc::set_recv_buffer(&mut buf);
    call(&mut Msg::new(label, &[]))?;
    let n = ipc::received_string_len().min(buf.len());
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

pub fn ps() -> Result<String, Error> {
    text(proto::PS)
}

pub fn meminfo() -> Result<String, Error> {
    text(proto::MEMINFO)
}

pub fn kill(id: u64) -> Result<(), Error> {
    call(&mut Msg::new(proto::KILL, &[id]))
}

pub fn halt() -> Result<(), Error> {
    call(&mut Msg::new(proto::HALT, &[]))
}

/// Ask root to start `cmdline`; the new program's thread capability lands in `slot`
/// (SEND) and its task capability in `slot + 1` (CONTROL), so take `slot` from
/// `rt::alloc_slot_pair`. Returns its id.
pub fn spawn(cmdline: &str, slot: u64) -> Result<u64, Error> {
    ipc::set_send_string(cmdline.as_bytes());
    let mut m = Msg::new(proto::SPAWN, &[slot]).with_string();
    call(&mut m)?;
    Ok(m.word(2))
}

/// Root's free capability slots and the number of programs it keeps a record of.
pub fn root_slots() -> Result<(u64, u64), Error> {
    let mut m = Msg::new(proto::SLOTS, &[]);
    call(&mut m)?;
    Ok((m.word(2), m.word(3)))
}
