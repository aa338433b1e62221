//! A baiofs device over an open BAIO segment: how a library filesystem uses BAIO.
//! Plain reads and writes are buffered BAIO operations (through the shared cache
//! server); `read_direct`/`write_direct` go straight to the disk; `prefetch` starts
//! direct reads of up to `PREFETCH` blocks into the segment's shared area without
//! waiting, and a later read of such a block takes it from there.
//!
//! When the block service ends (root restarts it), the next operation finds the new
//! instance, opens the segment again and sends the operation again: a program over a
//! `SegDev` (the files server) rides through restarts of `blk` without losing an
//! acknowledged write (reads and writes of whole blocks can be repeated safely).
#![no_std]

extern crate alloc;

use baio::{BlockDev, BLOCK};
use blk_api as p;
use blk_api::client::Segment;

/// Blocks that may be prefetched at once (pages of the shared area after the first).
pub const PREFETCH: usize = 128;

pub struct SegDev {
    pub seg: Segment,
    /// The slot of the capability to the block service (found again after a restart).
    srv: u64,
    /// Times the segment was opened again after the service ended.
    pub reconnects: u64,
    /// Prefetch slots: the block each holds (or is reading), if any.
    slots: [Option<u64>; PREFETCH],
    next: usize,
    pub prefetch_hits: u64,
}

/// Status word 0 and data page `DATA` serve single operations; prefetch slot i uses
/// status word 1 + i and the page after.
fn slot_off(i: usize) -> u64 {
    p::DATA + (1 + i as u64) * BLOCK as u64
}

impl SegDev {
    /// `srv`: the slot `seg` was opened through.
    pub fn new(seg: Segment, srv: u64) -> SegDev {
        SegDev { seg, srv, reconnects: 0, slots: [None; PREFETCH], next: 0, prefetch_hits: 0 }
    }

    /// One operation on block `block` through data page `DATA`, waited for; `data`
    /// (for a write) is put in the page before each try, `out` (for a read) taken from
    /// it. The shared area is the service's memory: if the service dies it vanishes
    /// (and reads as fresh zero pages), so a status that is not `DONE` after the
    /// answer, or not `DONE` any more once the data is copied out, means the service
    /// is gone, and the operation is sent again to the new one.
    fn one(
        &mut self,
        kind: u64,
        block: u64,
        data: Option<&[u8; BLOCK]>,
        mut out: Option<&mut [u8; BLOCK]>,
    ) -> Result<(), baio::Error> {
        loop {
            if let Some(d) = data {
                self.seg.bytes(p::DATA, BLOCK as u64).copy_from_slice(d);
            }
            match self.seg.batch_ops(&[p::op(kind, block, 1, 0, p::DATA)], p::WAIT_ALL) {
                Ok(()) => match self.seg.status(0) {
                    p::DONE => {
                        if let Some(o) = out.as_deref_mut() {
                            o.copy_from_slice(self.seg.bytes(p::DATA, BLOCK as u64));
                        }
                        if self.seg.status(0) == p::DONE {
                            return Ok(());
                        }
                        self.reconnect()?;
                    }
                    0 => self.reconnect()?,
                    _ => return Err(baio::Error::Io),
                },
                Err(e) if rt::env::server_gone(e) => self.reconnect()?,
                Err(_) => return Err(baio::Error::Io),
            }
        }
    }

    /// The service is gone: open the segment again with the restarted one
    /// (`Segment::reopen`). Prefetches under way are forgotten.
    fn reconnect(&mut self) -> Result<(), baio::Error> {
        self.slots = [None; PREFETCH];
        self.seg.reopen(self.srv).map_err(|_| baio::Error::Io)?;
        self.reconnects += 1;
        Ok(())
    }

    /// Forget prefetched copies of `block` (it is being written).
    fn forget(&mut self, block: u64) {
        for i in 0..PREFETCH {
            if self.slots[i] == Some(block) {
                self.seg.wait(1 + i as u64);
                self.slots[i] = None;
            }
        }
    }
}

impl BlockDev for SegDev {
    fn blocks(&self) -> u64 {
        self.seg.blocks
    }

    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        if let Some(i) = self.slots.iter().position(|s| *s == Some(block)) {
            self.slots[i] = None;
            if self.seg.wait(1 + i as u64) == p::DONE {
                buf.copy_from_slice(self.seg.bytes(slot_off(i), BLOCK as u64));
                // Still DONE once copied: the area did not vanish with the service.
                if self.seg.status(1 + i as u64) == p::DONE {
                    self.prefetch_hits += 1;
                    return Ok(());
                }
            }
        }
        self.one(p::READ_OP | p::BUFFERED, block, None, Some(buf))
    }

    fn write(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.forget(block);
        self.one(p::WRITE_OP | p::BUFFERED, block, Some(buf), None)
    }

    /// The segment's `SYNC`: every write done so far (each waited for) is on stable
    /// storage when it returns — baiofs's barrier between dependent writes.
    fn flush(&mut self) -> Result<(), baio::Error> {
        loop {
            match self.seg.sync() {
                Ok(()) => return Ok(()),
                Err(e) if rt::env::server_gone(e) => self.reconnect()?,
                Err(_) => return Err(baio::Error::Io),
            }
        }
    }
}

impl baiofs::Dev for SegDev {
    fn prefetch(&mut self, first: u64, n: u64) {
        let mut ops = alloc::vec::Vec::new();
        for b in first..first + n.min(PREFETCH as u64) {
            if b >= self.seg.blocks || self.slots.contains(&Some(b)) {
                continue;
            }
            // Reuse the oldest slot; wait for it if a read is still under way there.
            let i = self.next;
            self.next = (self.next + 1) % PREFETCH;
            if self.slots[i].is_some() {
                self.seg.wait(1 + i as u64);
            }
            self.slots[i] = Some(b);
            ops.push(p::op(p::READ_OP, b, 1, 1 + i as u64, slot_off(i)));
        }
        if !ops.is_empty() && self.seg.submit(&ops, 0).is_err() {
            for o in &ops {
                self.slots[((o[2] >> 32) - 1) as usize] = None;
            }
        }
    }

    fn read_direct(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        self.one(p::READ_OP, block, None, Some(buf))
    }

    fn write_direct(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.forget(block);
        self.one(p::WRITE_OP, block, Some(buf), None)
    }
}
