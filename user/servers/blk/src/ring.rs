//! Batches: the operations of a `BATCH` message or of the submission ring behind a
//! `SUBMIT` doorbell, accepted at once (status words pending), then completed into
//! their status words and the segment's completion counter; sleepers (`WAIT`, a
//! `WAIT_ALL` batch) woken when theirs are done.

use crate::area::{copy_bytes, get, put};
use crate::{err, Blk};
use abi::Error;
use alloc::vec::Vec;
use blk_api as p;
use rt::ipc::{self, Msg};

/// An accepted operation, done when its last device request is.
pub(crate) struct Op {
    pub(crate) hid: u64,
    pub(crate) status: u64,
    pub(crate) remaining: u32,
    pub(crate) failed: bool,
    pub(crate) batch: u64,
    /// A read through the reader's stream graft: (principal, bytes' address, length).
    pub(crate) stream: Option<(u32, u64, u64)>,
    /// Why it failed, when not the device (`E_GRAFT`).
    pub(crate) error: u64,
}

/// A client asleep in `WAIT` (until its segment's counter reaches n) or in a
/// `WAIT_ALL` batch; `slot` holds the right to answer it.
pub(crate) enum Wake {
    Count(u64),
    Batch(u64),
}

pub(crate) struct Waiter {
    pub(crate) slot: u64,
    pub(crate) hid: u64,
    pub(crate) wake: Wake,
}

impl Blk {
    /// One part of operation `id` ended.
    pub(crate) fn op_step(&mut self, id: u64, ok: bool) {
        let Some(op) = self.ops.get_mut(&id) else { return };
        op.failed |= !ok;
        op.remaining -= 1;
        if op.remaining == 0 {
            let op = self.ops.remove(&id).unwrap();
            let mut done = match (op.failed, op.error) {
                (false, _) => p::DONE,
                (true, 0) => p::FAILED | p::E_IO,
                (true, e) => p::FAILED | e,
            };
            if let (Some((principal, at, len)), false, true) =
                (op.stream, op.failed, self.handles.contains_key(&op.hid))
            {
                if !self.stream(principal, at, len) {
                    done |= p::STREAM_ABORTED;
                }
            }
            self.finish(op.hid, op.status, done, op.batch);
        }
    }

    /// The stream graft point: the bytes a read brought into a shared area, through the
    /// reader's stream graft in pieces of the point's size. False if the reader has
    /// none or it aborted (then it saw only part of them).
    fn stream(&mut self, principal: u32, at: u64, len: u64) -> bool {
        let piece = graft::Point::Stream.max_input() as u64;
        let mut buf = [0u8; 1024];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(piece) as usize;
            // A copy: the client may write its area while the graft reads it.
            copy_bytes(at + off, &mut buf[..n]);
            if self.grafts.call(graft::Point::Stream, principal, &buf[..n]).is_none() {
                return false;
            }
            off += n as u64;
        }
        true
    }

    /// An operation completed: its status word, the segment's counter, sleepers.
    pub(crate) fn finish(&mut self, hid: u64, status: u64, value: u64, batch: u64) {
        if let Some(h) = self.handles.get_mut(&hid) {
            put(status, value);
            h.completed += 1;
            put(h.area + p::COMPLETED, h.completed);
        }
        if let Some(n) = self.batches.get_mut(&batch) {
            *n -= 1;
        }
        self.wake();
    }

    fn wake(&mut self) {
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            let completed = self.handles.get(&w.hid).map_or(0, |h| h.completed);
            let ready = match w.wake {
                Wake::Count(n) => completed >= n,
                Wake::Batch(b) => self.batches.get(&b).is_none_or(|n| *n == 0),
            };
            if !ready {
                i += 1;
                continue;
            }
            let w = self.waiters.swap_remove(i);
            if let Wake::Batch(b) = w.wake {
                self.batches.remove(&b);
            }
            let _ = ipc::send(w.slot, &Msg::new(0, &[0, completed]), 0);
            rt::free_slot(w.slot);
        }
    }

    /// Accept a batch from `hid` (operations already read from the message or the
    /// ring): status words to pending, answer now (or sleep the caller until all are
    /// done, with `WAIT_ALL`: `slot` is the one `sleep_slot` took for that), then start
    /// them.
    fn batch(&mut self, hid: u64, ops: Vec<[u64; 4]>, slot: Option<u64>) -> Option<Msg> {
        if ops.iter().any(|w| w[2] >> 32 >= p::STATUS_WORDS) {
            slot.into_iter().for_each(rt::free_slot);
            return Some(err(Error::InvalidArg));
        }
        let area = self.handles[&hid].area;
        for w in &ops {
            put(area + p::STATUS + 8 * (w[2] >> 32), 0);
        }
        let b = self.next_batch;
        self.next_batch += 1;
        if let Some(slot) = slot {
            if ipc::save_reply(slot).is_err() {
                rt::free_slot(slot);
                return Some(err(Error::NoPartner));
            }
            self.batches.insert(b, ops.len() as u32);
            self.waiters.push(Waiter { slot, hid, wake: Wake::Batch(b) });
        } else {
            let _ = ipc::reply(&Msg::new(0, &[0, ops.len() as u64]));
        }
        self.prefetch(hid, &ops);
        for w in ops {
            self.op(hid, w, b);
        }
        self.drop_looked();
        self.submit();
        if self.irqs.is_empty() {
            self.drain();
        }
        self.wake();
        None
    }

    /// A `WAIT_ALL` batch sleeps holding a slot here, charged to the handle's payer.
    fn sleep_slot(&self, payer: u32, flags: u64) -> Result<Option<u64>, Error> {
        if flags & p::WAIT_ALL == 0 {
            return Ok(None);
        }
        self.slot_for(payer).map(Some)
    }

    /// Take the entries the client put in the submission ring since the last doorbell.
    fn ring(&mut self, hid: u64) -> Result<Vec<[u64; 4]>, Error> {
        let h = &self.handles[&hid];
        let tail = get(h.area + p::SQ_TAIL);
        let n = tail.wrapping_sub(h.head);
        if n > p::SQ_ENTRIES {
            return Err(Error::InvalidArg);
        }
        let mut ops = Vec::with_capacity(n as usize);
        for i in 0..n {
            let e = h.area + p::SQ + ((h.head + i) % p::SQ_ENTRIES) * 32;
            ops.push([get(e), get(e + 8), get(e + 16), get(e + 24)]);
        }
        // A batch `batch` would refuse is refused before the entries are taken: a
        // refusal consumes nothing (SQ_HEAD stays).
        if ops.iter().any(|w| w[2] >> 32 >= p::STATUS_WORDS) {
            return Err(Error::InvalidArg);
        }
        let h = self.handles.get_mut(&hid).unwrap();
        h.head = tail;
        put(h.area + p::SQ_HEAD, tail);
        Ok(ops)
    }

    /// `BATCH` through handle `hid` (paid by `payer`): the operations in the message.
    pub(crate) fn batch_in_msg(&mut self, hid: u64, payer: u32, flags: u64, ops: &[u64]) -> Option<Msg> {
        let slot = match self.sleep_slot(payer, flags) {
            Ok(s) => s,
            Err(e) => return Some(err(e)),
        };
        let ops = ops.chunks_exact(p::OP_WORDS).map(|o| core::array::from_fn(|k| o[k])).collect();
        self.batch(hid, ops, slot)
    }

    /// `SUBMIT` through handle `hid` (paid by `payer`): the operations in its ring.
    pub(crate) fn batch_in_ring(&mut self, hid: u64, payer: u32, flags: u64) -> Option<Msg> {
        // (Before the ring is read: a refusal takes none of its entries.)
        let slot = match self.sleep_slot(payer, flags) {
            Ok(s) => s,
            Err(e) => return Some(err(e)),
        };
        match self.ring(hid) {
            Ok(ops) => self.batch(hid, ops, slot),
            Err(e) => {
                slot.into_iter().for_each(rt::free_slot);
                Some(err(e))
            }
        }
    }

    /// `WAIT` through handle `hid` (paid by `payer`): answer once its segment's counter
    /// reaches `n` (now, or later from `wake`).
    pub(crate) fn wait(&mut self, hid: u64, payer: u32, n: u64) -> Option<Msg> {
        let done = self.handles[&hid].completed;
        if done >= n {
            return Some(Msg::new(0, &[0, done]));
        }
        // The sleep holds a slot here: the handle's payer's.
        let slot = match self.slot_for(payer) {
            Ok(s) => s,
            Err(e) => return Some(err(e)),
        };
        if ipc::save_reply(slot).is_ok() {
            self.waiters.push(Waiter { slot, hid, wake: Wake::Count(n) });
        } else {
            rt::free_slot(slot);
        }
        None
    }
}
