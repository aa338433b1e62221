//! The block service as programs use it: create, open, stat, list and delete disk
//! segments; batches of reads and writes through a segment capability that return at
//! once and complete into status words in the shared buffer.

use crate::ipc::{self, Msg};
use crate::proto::blk as p;
use abi::fpage::Fpage;
use abi::Error;
use alloc::string::String;

/// An open segment: its capability, the shared buffer mapped here, its length.
pub struct Segment {
    pub cap: u64,
    pub buf: u64,
    pub blocks: u64,
}

fn call(srv: u64, m: &mut Msg) -> Result<(), Error> {
    ipc::call(srv, m, ipc::FOREVER)?;
    abi::check(m.word(1))
}

fn named(label: u64, name: &str, words: &[u64]) -> Msg {
    ipc::set_send_string(name.as_bytes());
    Msg::new(label, words).with_string()
}

/// A segment of `blocks` blocks owned by the caller's principal; others get `others`.
pub fn create(srv: u64, name: &str, blocks: u64, others: u8) -> Result<(), Error> {
    call(srv, &mut named(p::CREATE, name, &[blocks, others as u64]))
}

/// Open with `rights` (READ 1, WRITE 2); the shared buffer lands at `buf_va` (aligned
/// to 256 KiB, unused).
pub fn open(srv: u64, name: &str, rights: u8, buf_va: u64) -> Result<Segment, Error> {
    let cap = crate::alloc_slot();
    ipc::set_windows(Fpage::mem(buf_va, 18, 7), Fpage::caps(cap, 0, 7), Fpage(0));
    let mut m = named(p::OPEN, name, &[rights as u64]);
    let r = call(srv, &mut m);
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    r?;
    Ok(Segment { cap, buf: buf_va, blocks: m.word(2) })
}

/// (length, owner, owner's rights, others' rights)
pub fn stat(srv: u64, name: &str) -> Result<(u64, u64, u64, u64), Error> {
    let mut m = named(p::STAT, name, &[]);
    call(srv, &mut m)?;
    Ok((m.word(2), m.word(3), m.word(4), m.word(5)))
}

pub fn delete(srv: u64, name: &str) -> Result<(), Error> {
    call(srv, &mut named(p::DELETE, name, &[]))
}

pub fn list(srv: u64) -> Result<String, Error> {
    let mut buf = alloc::vec![0u8; 4096];
    ipc::set_recv_buffer(&mut buf);
    call(srv, &mut Msg::new(p::LIST, &[]))?;
    let n = ipc::received_string_len().min(buf.len());
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

impl Segment {
    /// Submit up to `MAX_OPS` operations (kind | flags, first block, blocks); returns
    /// when they are accepted, not when they are done.
    pub fn batch(&self, ops: &[(u64, u64, u64)]) -> Result<(), Error> {
        if ops.len() as u64 > p::MAX_OPS {
            return Err(Error::TooLong);
        }
        let mut w = alloc::vec![ops.len() as u64];
        for (k, f, n) in ops {
            w.extend_from_slice(&[*k, *f, *n]);
        }
        call(self.cap, &mut Msg::new(p::BATCH, &w))
    }

    /// Operation `i`'s status word: 0 pending, `DONE`, or `FAILED | error`.
    pub fn status(&self, i: u64) -> u64 {
        // SAFETY: the status page is the last page of the shared buffer, mapped here for
        // as long as the segment is open; the service writes it, we only read.
        unsafe { core::ptr::read_volatile((self.buf + p::MAX_OPS * p::OP_BYTES + 8 * i) as *const u64) }
    }

    /// Wait (yielding) for operation `i` to complete; returns its status.
    pub fn wait(&self, i: u64) -> u64 {
        loop {
            let s = self.status(i);
            if s != 0 {
                return s;
            }
            crate::sys::yield_now();
        }
    }

    /// Operation slot `i` of the shared buffer (`OP_BYTES` long).
    #[allow(clippy::mut_from_ref)]
    pub fn data(&self, i: u64) -> &mut [u8] {
        // SAFETY: slot i lies within the shared buffer mapped here; the service touches
        // it only while an operation on it is pending, which the caller waits for.
        unsafe { core::slice::from_raw_parts_mut((self.buf + i * p::OP_BYTES) as *mut u8, p::OP_BYTES as usize) }
    }

    /// Return once every write before it is on the disk.
    pub fn sync(&self) -> Result<(), Error> {
        call(self.cap, &mut Msg::new(p::SYNC, &[]))
    }

    pub fn close(self) -> Result<(), Error> {
        call(self.cap, &mut Msg::new(p::CLOSE, &[]))
    }
}
