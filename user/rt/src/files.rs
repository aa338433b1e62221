//! Files by path through the `files` server (`proto::files`).

use crate::ipc::{self, Msg};
use crate::proto::files as p;
use abi::Error;
use alloc::string::String;
use alloc::vec::Vec;

fn call(srv: u64, m: &mut Msg) -> Result<(), Error> {
    ipc::call(srv, m, ipc::FOREVER)?;
    abi::check(m.word(1))
}

fn named(label: u64, path: &str, words: &[u64]) -> Msg {
    ipc::set_send_string(path.as_bytes());
    Msg::new(label, words).with_string()
}

fn text(srv: u64, mut m: Msg, max: usize) -> Result<Vec<u8>, Error> {
    let mut buf = alloc::vec![0u8; max];
    ipc::set_recv_buffer(&mut buf);
    call(srv, &mut m)?;
    let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
    buf.truncate(n);
    Ok(buf)
}

/// An open file: (handle, size when opened).
pub fn open(srv: u64, path: &str, create: bool) -> Result<(u64, u64), Error> {
    let mut m = named(p::OPEN, path, &[if create { p::CREATE } else { 0 }]);
    call(srv, &mut m)?;
    Ok((m.word(2), m.word(3)))
}

pub fn read(srv: u64, h: u64, off: u64, len: u64) -> Result<Vec<u8>, Error> {
    let len = len.min(p::MAX_IO);
    text(srv, Msg::new(p::READ, &[h, off, len]), len as usize)
}

pub fn write(srv: u64, h: u64, off: u64, data: &[u8]) -> Result<u64, Error> {
    let mut done = 0;
    for chunk in data.chunks(p::MAX_IO as usize) {
        ipc::set_send_string(chunk);
        let mut m = Msg::new(p::WRITE, &[h, off + done]).with_string();
        call(srv, &mut m)?;
        done += m.word(2);
    }
    Ok(done)
}

pub fn close(srv: u64, h: u64) -> Result<(), Error> {
    call(srv, &mut Msg::new(p::CLOSE, &[h]))
}

/// The whole file.
pub fn read_all(srv: u64, path: &str) -> Result<Vec<u8>, Error> {
    let (h, size) = open(srv, path, false)?;
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        let chunk = read(srv, h, out.len() as u64, p::MAX_IO)?;
        if chunk.is_empty() {
            break;
        }
        out.extend_from_slice(&chunk);
    }
    close(srv, h)?;
    Ok(out)
}

/// "d|f size name" lines.
pub fn list(srv: u64, dir: &str) -> Result<String, Error> {
    text(srv, named(p::LIST, dir, &[]), 16 * 1024).map(|b| String::from_utf8_lossy(&b).into_owned())
}

pub fn remove(srv: u64, path: &str) -> Result<(), Error> {
    call(srv, &mut named(p::REMOVE, path, &[]))
}

pub fn mkdir(srv: u64, path: &str) -> Result<(), Error> {
    call(srv, &mut named(p::MKDIR, path, &[]))
}

/// (1 file | 2 directory, size)
pub fn stat(srv: u64, path: &str) -> Result<(u64, u64), Error> {
    let mut m = named(p::STAT, path, &[]);
    call(srv, &mut m)?;
    Ok((m.word(2), m.word(3)))
}

pub fn sync(srv: u64) -> Result<(), Error> {
    call(srv, &mut Msg::new(p::SYNC, &[]))
}
