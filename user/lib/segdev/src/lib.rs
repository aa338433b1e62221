//! A baiofs device over an open BAIO segment: how a library filesystem uses BAIO.
//! Plain reads and writes are buffered BAIO operations (through the shared cache
//! server); `read_direct`/`write_direct` go straight to the disk; `prefetch` starts
//! direct reads of up to `PREFETCH` blocks into the segment's shared area without
//! waiting, and a later read of such a block takes it from there.
#![no_std]

extern crate alloc;

use baio::{BlockDev, BLOCK};
use blk_api::client::Segment;
use blk_api as p;

/// Blocks that may be prefetched at once (pages of the shared area after the first).
pub const PREFETCH: usize = 128;

pub struct SegDev {
    pub seg: Segment,
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
    pub fn new(seg: Segment) -> SegDev {
        SegDev { seg, slots: [None; PREFETCH], next: 0, prefetch_hits: 0 }
    }

    fn one(&mut self, kind: u64, block: u64) -> Result<(), baio::Error> {
        self.seg.batch_ops(&[p::op(kind, block, 1, 0, p::DATA)], p::WAIT_ALL).map_err(|_| baio::Error::Io)?;
        if self.seg.status(0) == p::DONE { Ok(()) } else { Err(baio::Error::Io) }
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
                self.prefetch_hits += 1;
                buf.copy_from_slice(self.seg.bytes(slot_off(i), BLOCK as u64));
                return Ok(());
            }
        }
        self.one(p::READ_OP | p::BUFFERED, block)?;
        buf.copy_from_slice(self.seg.bytes(p::DATA, BLOCK as u64));
        Ok(())
    }

    fn write(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.forget(block);
        self.seg.bytes(p::DATA, BLOCK as u64).copy_from_slice(buf);
        self.one(p::WRITE_OP | p::BUFFERED, block)
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
        self.one(p::READ_OP, block)?;
        buf.copy_from_slice(self.seg.bytes(p::DATA, BLOCK as u64));
        Ok(())
    }

    fn write_direct(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.forget(block);
        self.seg.bytes(p::DATA, BLOCK as u64).copy_from_slice(buf);
        self.one(p::WRITE_OP, block)
    }

    fn sync(&mut self) -> Result<(), baio::Error> {
        self.seg.sync().map_err(|_| baio::Error::Io)
    }
}
