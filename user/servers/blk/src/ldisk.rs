//! Logical disks (`LDISK`, VINO §3.3): a segment whose blocks its owner's graft places,
//! one block at a time, each write a commit of the map (`baio::ldisk`).

use crate::area::{copy_bytes, copy_in};
use crate::{err, Blk};
use abi::Error;
use alloc::boxed::Box;
use alloc::vec::Vec;
use baio::{BlockDev as _, BLOCK, WRITE};
use blk_api as p;
use rt::ipc::Msg;

/// The largest segment that may be a logical disk (`LDISK`), in blocks: 256 MiB.
const MAX_LDISK_BLOCKS: u64 = 1 << 16;

/// A segment made a logical disk by its owner's graft (`LDISK`, VINO §3.3).
pub(crate) struct Ldisk {
    /// The graft (`None`: it is gone, and operations fail until the owner attaches one).
    graft: Option<u32>,
    owner: u32,
    /// The blocks it maps onto; the map's copies follow them.
    data: u64,
    log: baio::ldisk::MapLog,
    /// The map as last committed: the graft's state again when a write fails.
    committed: Vec<u8>,
}

impl Blk {
    /// `LDISK` through handle `hid`: make its segment a logical disk through the
    /// owner's graft `id` (0: no longer one).
    pub(crate) fn ldisk_attach(&mut self, hid: u64, id: u64) -> Msg {
        let h = &self.handles[&hid];
        if h.parent.is_some() {
            return err(Error::BadState);
        }
        if h.payer != h.owner || h.rights & WRITE == 0 {
            return err(Error::NoRights);
        }
        let (start, len, owner, written) = (h.start, h.len, h.owner, h.written);
        self.drain();
        if id == 0 {
            self.ldisks.remove(&start);
            return Msg::new(0, &[0, len]);
        }
        let Ok(id) = u32::try_from(id) else { return err(Error::InvalidArg) };
        let Some(g) = self.grafts.get(owner, id).filter(|g| g.point == graft::Point::Ldisk) else {
            return err(Error::NotFound);
        };
        let state_len = g.state().len();
        if self.ldisks.iter().any(|(s, l)| *s != start && l.graft == Some(id)) {
            return err(Error::SlotInUse);
        }
        // A logical disk's I/O is synchronous, and a new one is zeroed whole: bounded.
        if len <= p::MAP_BLOCKS || len > MAX_LDISK_BLOCKS || state_len > baio::ldisk::MAX_STATE {
            return err(Error::InvalidArg);
        }
        let data = len - p::MAP_BLOCKS;
        // The map on the segment (only where the segment wrote: past its written mark
        // lie another segment's old bytes), or a new one.
        let (mut log, map) = if written >= len {
            match baio::ldisk::MapLog::open(&mut self.disk, start + data, state_len) {
                Ok(m) => m,
                Err(_) => return err(Error::BadState),
            }
        } else {
            (baio::ldisk::MapLog::new(start + data), None)
        };
        let fresh = map.is_none();
        let map = map.unwrap_or_else(|| alloc::vec![0; state_len]);
        if let Some(g) = self.grafts.get(owner, id) {
            let _ = g.write_state(0, &map);
        }
        // The graft must take a segment of this size (a read of block 0 says so).
        let mut probe = [0u8; 24];
        probe[8..16].copy_from_slice(&data.to_le_bytes());
        if self.grafts.call_id(owner, id, &probe).is_none() {
            return err(Error::InvalidArg);
        }
        // A new logical disk's blocks are zeroed first (its graft may put a block
        // anywhere in it, and past the written mark lie other segments' old bytes).
        if written < len && self.extend(hid, len).is_err() {
            return err(Error::NoSpace);
        }
        if fresh && log.commit(&mut self.disk, &map).is_err() {
            return err(Error::BadState);
        }
        // Blocks of it the cache holds were read where they lie.
        self.cache_invalidate(start, len);
        self.ldisks.insert(start, Ldisk { graft: Some(id), owner, data, log, committed: map });
        Msg::new(0, &[0, data])
    }

    /// Logical disks whose graft went (unloaded, its program ended, failed too often)
    /// keep failing until their owner attaches one: a new graft that took the same id
    /// must not be handed the segment with an empty map.
    pub(crate) fn ldisk_sweep(&mut self) {
        for l in self.ldisks.values_mut() {
            if l.graft.is_some_and(|id| self.grafts.get(l.owner, id).is_none()) {
                l.graft = None;
            }
        }
    }

    /// Part of operation `id` on a logical disk: `count` logical blocks from `first`,
    /// each where the segment's graft says, one at a time (a block written is one
    /// commit: `baio::ldisk`). Nothing else is on the device meanwhile.
    /// `keep` as for `run`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ldisk_run(&mut self, hid: u64, id: u64, write: bool, first: u64, count: u64, data: u64, keep: u64) {
        self.drain();
        let start = self.handles[&hid].start;
        for k in 0..count {
            let keep = if k + 1 == count && keep != 0 { keep } else { BLOCK as u64 };
            if let Err(e) = self.ldisk_block(start, write, first + k, data + k * BLOCK as u64, keep) {
                if let Some(op) = self.ops.get_mut(&id) {
                    op.failed = true;
                    op.error = e;
                }
                return;
            }
        }
    }

    /// One logical block of segment `start` to or from the shared area at `buf` (a read:
    /// only its first `keep` bytes; the rest is zeroed).
    fn ldisk_block(&mut self, start: u64, write: bool, logical: u64, buf: u64, keep: u64) -> Result<(), u64> {
        let l = self.ldisks.get(&start).ok_or(p::E_GRAFT)?;
        let (id, owner, data) = (l.graft.ok_or(p::E_GRAFT)?, l.owner, l.data);
        let mut input = [0u8; 24];
        input[..8].copy_from_slice(&logical.to_le_bytes());
        input[8..16].copy_from_slice(&data.to_le_bytes());
        input[16] = write as u8;
        // `Point::Ldisk` took the answer only below `data` (a read: at most `data`).
        let Some(at) = self.grafts.call_id(owner, id, &input) else {
            self.ldisk_sweep();
            return Err(p::E_GRAFT);
        };
        let mut b = Box::new([0u8; BLOCK]);
        if !write {
            if at < data {
                self.disk.read(start + at, &mut b).map_err(|_| p::E_IO)?;
            }
            b[keep as usize..].fill(0);
            copy_in(&b[..], buf);
            return Ok(());
        }
        copy_bytes(buf, &mut b[..]);
        let state = self.grafts.get(owner, id).map(|g| g.state().to_vec()).ok_or(p::E_GRAFT)?;
        let l = self.ldisks.get_mut(&start).ok_or(p::E_GRAFT)?;
        match l.log.write_through(&mut self.disk, start, at, &b, &state) {
            Ok(()) => {
                l.committed = state;
                Ok(())
            }
            Err(_) => {
                // The map on the disk is the committed one: so is the graft's again.
                let c = l.committed.clone();
                if let Some(g) = self.grafts.get(owner, id) {
                    let _ = g.write_state(0, &c);
                }
                Err(p::E_IO)
            }
        }
    }
}
