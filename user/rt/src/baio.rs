//! The block service as programs use it: create, open, stat, list and delete disk
//! segments; batches of reads and writes through a segment capability — in one
//! message, or through the shared submission ring behind one doorbell — that return at
//! once and complete into status words in the shared area; sleeping until an
//! operation completes instead of polling.

use crate::ipc::{self, Msg};
use crate::proto::blk as p;
use abi::fpage::Fpage;
use abi::Error;
use alloc::string::String;

/// An open segment: its capability, the shared area mapped here, its length.
pub struct Segment {
    pub cap: u64,
    pub area: u64,
    pub blocks: u64,
    /// The next submission-ring entry this side writes.
    tail: core::cell::Cell<u64>,
}

/// The client-side convention of `batch` and `data`: slot i of the data area is
/// `SLOT_BYTES` long and operation i of a simple batch uses slot i and status word i.
pub const SLOT_BYTES: u64 = 16 * 1024;
pub const SLOTS: u64 = (p::AREA_BYTES - p::DATA) / SLOT_BYTES;

fn call(srv: u64, m: &mut Msg) -> Result<(), Error> {
    ipc::call(srv, m, ipc::FOREVER)?;
    abi::check(m.word(1))
}

fn named(label: u64, name: &str, words: &[u64]) -> Msg {
    ipc::set_send_string(name.as_bytes());
    Msg::new(label, words).with_string()
}

/// The device the service has mounted: (blocks, free blocks, segments, block size).
pub fn mount(srv: u64) -> Result<(u64, u64, u64, u64), Error> {
    let mut m = Msg::new(p::MOUNT, &[]);
    call(srv, &mut m)?;
    Ok((m.word(2), m.word(3), m.word(4), m.word(5)))
}

/// A segment of `blocks` blocks owned by the caller's principal; others get `others`.
pub fn create(srv: u64, name: &str, blocks: u64, others: u8) -> Result<(), Error> {
    call(srv, &mut named(p::CREATE, name, &[blocks, others as u64]))
}

/// Open with `rights` (READ 1, WRITE 2); the shared area lands at `area_va` (aligned
/// to its 2 MiB, unused).
pub fn open(srv: u64, name: &str, rights: u8, area_va: u64) -> Result<Segment, Error> {
    let cap = crate::alloc_slot();
    ipc::set_windows(Fpage::mem(area_va, 12 + p::AREA_LOG2, 7), Fpage::caps(cap, 0, 7), Fpage(0));
    let mut m = named(p::OPEN, name, &[rights as u64]);
    let r = call(srv, &mut m);
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    r?;
    Ok(Segment { cap, area: area_va, blocks: m.word(2), tail: core::cell::Cell::new(0) })
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
    fn word(&self, off: u64) -> u64 {
        // SAFETY: `off` is within the control page of the shared area, mapped here for
        // as long as the segment is open; the service writes it, we read whole words.
        unsafe { core::ptr::read_volatile((self.area + off) as *const u64) }
    }

    fn set_word(&self, off: u64, v: u64) {
        // SAFETY: as in `word`; these words (ring entries, the tail, status words about
        // to be handed over) are ours to write.
        unsafe { core::ptr::write_volatile((self.area + off) as *mut u64, v) }
    }

    /// Submit operations (`p::op` words) in one message (at most `MAX_REG_OPS`);
    /// `flags` = `WAIT_ALL` returns only when all of them completed.
    pub fn batch_ops(&self, ops: &[[u64; p::OP_WORDS]], flags: u64) -> Result<(), Error> {
        if ops.len() > p::MAX_REG_OPS {
            return Err(Error::TooLong);
        }
        let mut w = alloc::vec![flags, ops.len() as u64];
        for o in ops {
            self.set_word(p::STATUS + 8 * (o[2] >> 32), 0);
            w.extend_from_slice(o);
        }
        call(self.cap, &mut Msg::new(p::BATCH, &w))
    }

    /// Submit operations through the shared ring: one doorbell IPC per `SQ_ENTRIES`.
    pub fn submit(&self, ops: &[[u64; p::OP_WORDS]], flags: u64) -> Result<(), Error> {
        for chunk in ops.chunks(p::SQ_ENTRIES as usize) {
            let mut t = self.tail.get();
            for o in chunk {
                if o[2] >> 32 < p::STATUS_WORDS {
                    self.set_word(p::STATUS + 8 * (o[2] >> 32), 0);
                }
                let e = p::SQ + (t % p::SQ_ENTRIES) * 32;
                for (k, v) in o.iter().enumerate() {
                    self.set_word(e + 8 * k as u64, *v);
                }
                t += 1;
            }
            self.tail.set(t);
            self.set_word(p::SQ_TAIL, t);
            call(self.cap, &mut Msg::new(p::SUBMIT, &[flags]))?;
        }
        Ok(())
    }

    /// Submit up to `MAX_REG_OPS` operations (kind | flags, first block, blocks): the
    /// i-th uses slot i and status word i. Returns when they are accepted, not done.
    pub fn batch(&self, ops: &[(u64, u64, u64)]) -> Result<(), Error> {
        let w: alloc::vec::Vec<[u64; p::OP_WORDS]> =
            ops.iter().enumerate().map(|(i, (k, f, n))| p::op(*k, *f, *n, i as u64, p::DATA + i as u64 * SLOT_BYTES)).collect();
        self.batch_ops(&w, 0)
    }

    /// Status word `i`: 0 pending, `DONE`, or `FAILED | error`.
    pub fn status(&self, i: u64) -> u64 {
        self.word(p::STATUS + 8 * i)
    }

    /// Operations completed since the open.
    pub fn completed(&self) -> u64 {
        self.word(p::COMPLETED)
    }

    /// Sleep until the completion counter reaches `n`.
    pub fn wait_count(&self, n: u64) -> Result<u64, Error> {
        let mut m = Msg::new(p::WAIT, &[n]);
        call(self.cap, &mut m)?;
        Ok(m.word(2))
    }

    /// Wait (asleep in the service, not polling) for operation `i`; returns its status.
    pub fn wait(&self, i: u64) -> u64 {
        loop {
            // The counter is read before the status: the service writes the status first,
            // so if the status is still pending the counter will pass `c`.
            let c = self.completed();
            let s = self.status(i);
            if s != 0 {
                return s;
            }
            if self.wait_count(c + 1).is_err() {
                return p::FAILED | p::E_IO;
            }
        }
    }

    /// `len` bytes of the shared area's data at `offset`.
    #[allow(clippy::mut_from_ref)]
    pub fn bytes(&self, offset: u64, len: u64) -> &mut [u8] {
        assert!(offset >= p::DATA && offset + len <= p::AREA_BYTES, "outside the data area");
        // SAFETY: the range lies within the shared area's data, mapped here; the service
        // touches it only while an operation on it is pending, which the caller waits for.
        unsafe { core::slice::from_raw_parts_mut((self.area + offset) as *mut u8, len as usize) }
    }

    /// Slot `i` of the data area (`SLOT_BYTES` long).
    #[allow(clippy::mut_from_ref)]
    pub fn data(&self, i: u64) -> &mut [u8] {
        self.bytes(p::DATA + i * SLOT_BYTES, SLOT_BYTES)
    }

    /// Return once every write before it is on the disk.
    pub fn sync(&self) -> Result<(), Error> {
        call(self.cap, &mut Msg::new(p::SYNC, &[]))
    }

    pub fn close(self) -> Result<(), Error> {
        let r = call(self.cap, &mut Msg::new(p::CLOSE, &[]));
        crate::free_slot(self.cap);
        r
    }
}
