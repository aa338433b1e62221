//! What a program asks root for: servers by name, I/O ports, interrupt lines, and
//! the system-wide views the shell shows.

use crate::ipc::{self, Msg};
use crate::proto;
use abi::cap;
use abi::fpage::Fpage;
use abi::Error;
use alloc::string::String;

/// A SEND capability to the server `name` in `slot` (if the manifest allows it).
pub fn lookup(name: &str, slot: u64) -> Result<(), Error> {
    proto::client::lookup(cap::PARENT, slot, name)
}

/// Look server `name` up again into `slot`, whose capability names an instance that is
/// gone (root restarts servers marked `restart`; their clients reconnect this way).
pub fn reconnect(name: &str, slot: u64) -> Result<(), Error> {
    // The string of the request being retried stays what it was.
    let u = ipc::utcb();
    let (addr, len) = (u.send_buf_addr, u.send_buf_len);
    let _ = crate::sys::cap_delete(slot);
    let r = lookup(name, slot);
    let u = ipc::utcb();
    u.send_buf_addr = addr;
    u.send_buf_len = len;
    r
}

/// Whether a call's error says the server is gone (its thread died: a restart may follow).
pub fn server_gone(e: Error) -> bool {
    matches!(e, Error::InvalidCap | Error::NoPartner)
}

/// A request to server `name` through `slot`, as `server::request`; if the server is
/// gone, it is looked up again and the request sent once more (to the new instance:
/// what the old one held for this client, such as open handles, is gone with it).
pub fn request_reconnecting(name: &str, slot: u64, m: &mut Msg) -> Result<(), Error> {
    reconnecting(name, slot, m, |m| crate::server::request(slot, m))
}

/// `request_reconnecting` to the server's thread on the caller's CPU
/// (`server::request_routed`).
pub fn request_routed_reconnecting(name: &str, slot: u64, m: &mut Msg) -> Result<(), Error> {
    reconnecting(name, slot, m, |m| crate::server::request_routed(slot, m))
}

/// `server::request_mapping` (receive windows open for what the answer maps), finding
/// a restarted server `name` again as `request_reconnecting` does.
pub fn request_mapping_reconnecting(name: &str, slot: u64, windows: [Fpage; 3], m: &mut Msg) -> Result<(), Error> {
    reconnecting(name, slot, m, |m| crate::server::request_mapping(slot, windows, m))
}

fn reconnecting(
    name: &str,
    slot: u64,
    m: &mut Msg,
    mut send: impl FnMut(&mut Msg) -> Result<(), Error>,
) -> Result<(), Error> {
    let again = m.clone();
    match send(m) {
        Err(e) if server_gone(e) => {
            reconnect(name, slot)?;
            *m = again;
            send(m)
        }
        r => r,
    }
}

/// Ports `first .. first + 2^log2` (if the manifest grants them).
pub fn io(first: u64, log2: u64) -> Result<(), Error> {
    ipc::set_windows(Fpage(0), Fpage(0), Fpage::io(0, 16));
    let r = proto::client::get_io(cap::PARENT, first, log2);
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    r
}

/// An IRQ capability for `line` in `slot` (if the manifest grants it).
pub fn irq(line: u64, slot: u64) -> Result<(), Error> {
    proto::client::get_irq(cap::PARENT, line, slot)
}

/// The string of the answer to `ask` (at most 4 KiB).
fn text(ask: fn(u64) -> Result<Msg, Error>) -> Result<String, Error> {
    let mut buf = alloc::vec![0u8; 4096];
    ipc::set_recv_buffer(&mut buf);
    ask(cap::PARENT)?;
    let n = ipc::received_string_len().min(buf.len());
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

pub fn ps() -> Result<String, Error> {
    text(proto::client::ps)
}

pub fn meminfo() -> Result<String, Error> {
    text(proto::client::meminfo)
}

pub fn kill(id: u64) -> Result<(), Error> {
    proto::client::kill(cap::PARENT, id)
}

/// Live update (`proto::UPDATE`): "NAME PROGRAM [ARGS]"; on failure the error and why.
pub fn update(text: &str) -> Result<(), (Error, String)> {
    let mut buf = alloc::vec![0u8; 256];
    ipc::set_send_string(text.as_bytes());
    ipc::set_recv_buffer(&mut buf);
    // By hand, not `proto::client::update`: the reason is read from the answer.
    let mut m = Msg::new(proto::UPDATE, &[]).with_string();
    match crate::server::request(cap::PARENT, &mut m) {
        Ok(()) => Ok(()),
        Err(e) => {
            let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
            Err((e, String::from_utf8_lossy(&buf[..n]).into_owned()))
        }
    }
}

/// (the new program of an update) The state is taken (`true`): root moves the endpoint
/// and answers, granting what the old server handed over (memory, capabilities) into
/// `windows` (memory, capabilities, ports); or refused.
pub fn update_done(ok: bool, windows: [Fpage; 3]) -> Result<(), Error> {
    ipc::set_windows(windows[0], windows[1], windows[2]);
    let r = proto::client::update_done(cap::PARENT, ok as u64);
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    r
}

pub fn halt() -> Result<(), Error> {
    proto::client::halt(cap::PARENT)
}

/// Ask root to start `cmdline`; the new program's thread capability lands in `slot`
/// (SEND) and its task capability in `slot + 1` (CONTROL), so take `slot` from
/// `rt::alloc_slot_pair`. Returns its id.
pub fn spawn(cmdline: &str, slot: u64) -> Result<u64, Error> {
    Ok(proto::client::spawn(cap::PARENT, slot, cmdline)?[0])
}

/// Root's free capability slots, the number of programs it keeps a record of and the
/// number it has started.
pub fn root_slots() -> Result<(u64, u64, u64), Error> {
    let [free, programs, started] = proto::client::slots(cap::PARENT)?;
    Ok((free, programs, started))
}
