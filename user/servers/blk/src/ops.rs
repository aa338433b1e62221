//! One operation of a batch: its checks, the runs of the segment it covers, and how it
//! moves its blocks — direct (device requests into the shared area) or buffered
//! (through the cache's slots, misses filled by the device), a view's last block read
//! apart so that bytes past its limit never reach the holder.

use crate::area::{copy_block, copy_part, zero_bytes};
use crate::cached::CACHE_VA;
use crate::ring::Op;
use crate::Blk;
use alloc::vec::Vec;
use baio::{BLOCK, READ, WRITE};
use blk_api as p;
use cache_api as pc;

impl Blk {
    /// Why operation `w` on handle `hid` fails before it starts (`E_BAD`, `E_RANGE`,
    /// `E_RIGHTS`), or None.
    pub(crate) fn op_error(&self, hid: u64, w: &[u64; 4]) -> Option<u64> {
        let h = &self.handles[&hid];
        let (len, rights, bytes, mapped) = (h.len, h.rights, h.bytes, h.mapped);
        let (kind, first, count, off) = (w[0], w[1], w[2] & 0xffff_ffff, w[3]);
        let stream = kind & p::STREAM != 0;
        let kind = kind & !(p::BUFFERED | p::STREAM);
        let bad = count == 0
            || (stream && kind != p::READ_OP)
            || count > p::MAX_OP_BLOCKS
            || kind > p::WRITE_OP
            || off % BLOCK as u64 != 0
            || off < p::DATA
            || off.checked_add(count * BLOCK as u64).is_none_or(|e| e > mapped);
        if bad {
            Some(p::E_BAD)
        } else if first.checked_add(count).is_none_or(|e| e > len) {
            Some(p::E_RANGE)
        } else if kind == p::WRITE_OP && (first + count) * BLOCK as u64 > bytes {
            // A view's bytes past its limit are not the holder's to see, nor to write.
            Some(p::E_RANGE)
        } else if rights & if kind == p::READ_OP { READ } else { WRITE } == 0 {
            Some(p::E_RIGHTS)
        } else {
            None
        }
    }

    /// The handle's blocks `first .. first + count`, as runs of the segment's blocks.
    pub(crate) fn pieces(&self, hid: u64, first: u64, count: u64) -> Vec<(u64, u64)> {
        let mut pieces: Vec<(u64, u64)> = Vec::new();
        let (mut skip, mut want) = (first, count);
        for &(s, n) in &self.handles[&hid].view {
            if want == 0 {
                break;
            }
            if skip >= n {
                skip -= n;
                continue;
            }
            let take = (n - skip).min(want);
            pieces.push((s + skip, take));
            want -= take;
            skip = 0;
        }
        pieces
    }

    /// Check one operation and start it: direct ones become device requests into the
    /// shared area; buffered ones are served from the cache, misses filled by requests
    /// into cache slots. It completes into its status word.
    pub(crate) fn op(&mut self, hid: u64, w: [u64; 4], batch: u64) {
        let h = &self.handles[&hid];
        let (area, bytes) = (h.area, h.bytes);
        let (kind, first, count, off) = (w[0], w[1], w[2] & 0xffff_ffff, w[3]);
        let status = area + p::STATUS + 8 * (w[2] >> 32);
        let buffered = kind & p::BUFFERED != 0;
        let stream = kind & p::STREAM != 0;
        let kind = kind & !(p::BUFFERED | p::STREAM);
        if let Some(e) = self.op_error(hid, &w) {
            return self.finish(hid, status, p::FAILED | e, batch);
        }
        let id = self.next_op;
        self.next_op += 1;
        let stream = stream.then(|| (self.handles[&hid].payer, area + off, count * BLOCK as u64));
        // One extra part keeps the operation open while its requests are queued.
        self.ops.insert(id, Op { hid, status, remaining: 1, failed: false, batch, stream, error: 0 });
        // A read past a view's bytes: those are zeros, and never reach memory the holder
        // maps, not even for a moment while the read is under way. Blocks wholly past
        // them are not read at all; the block the limit falls in is read into memory of
        // this service's own, and only its bytes up to the limit are copied (`keep`).
        let (count, keep) = if kind == p::READ_OP && (first + count) * BLOCK as u64 > bytes {
            let seen = bytes.div_ceil(BLOCK as u64).saturating_sub(first).min(count);
            zero_bytes(area + off + seen * BLOCK as u64, (count - seen) * BLOCK as u64);
            (seen, if seen > 0 { bytes % BLOCK as u64 } else { 0 })
        } else {
            (count, 0)
        };
        let pieces = self.pieces(hid, first, count);
        let mut data = area + off;
        let logical = self.ldisks.contains_key(&self.handles[&hid].start);
        let last = pieces.len().wrapping_sub(1);
        for (i, (f, n)) in pieces.into_iter().enumerate() {
            let keep = if i == last { keep } else { 0 };
            if logical {
                self.ldisk_run(hid, id, kind == p::WRITE_OP, f, n, data, keep);
            } else {
                self.run(hid, id, kind == p::WRITE_OP, buffered, f, n, data, keep);
            }
            data += n * BLOCK as u64;
        }
        self.op_step(id, true);
    }

    /// Part of operation `id`: `count` blocks from the segment's block `first`, to or
    /// from `data` in the shared area. `keep` (a read, not 0): only the first `keep`
    /// bytes of the last block may reach the area (a view's limit falls in it).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        hid: u64,
        id: u64,
        write: bool,
        buffered: bool,
        first: u64,
        mut count: u64,
        data: u64,
        keep: u64,
    ) {
        // The segment's written mark: blocks at or past it read as zeros (another
        // segment's bytes may lie there); a write past it moves it first.
        let (start, written, owner) = (self.handles[&hid].start, self.handles[&hid].written, self.handles[&hid].owner);
        if write && first + count > written {
            if self.extend(hid, first + count).is_err() {
                if let Some(op) = self.ops.get_mut(&id) {
                    op.failed = true;
                }
                return;
            }
        } else if !write && first + count > written {
            let mine = written.saturating_sub(first).min(count);
            zero_bytes(data + mine * BLOCK as u64, (count - mine) * BLOCK as u64);
            if mine == 0 {
                return;
            }
            count = mine;
        } else if !write && keep != 0 {
            // The last block, whose bytes past `keep` are not the reader's: read apart.
            if count > 1 {
                self.run(hid, id, false, buffered, first, count - 1, data, 0);
            }
            let last = data + (count - 1) * BLOCK as u64;
            return self.read_part(id, buffered, start + first + count - 1, owner, last, keep);
        }
        let block = start + first;
        if !buffered {
            if write {
                self.cache_invalidate(block, count);
            }
            self.queue(write, block, data, count, id);
            return;
        }
        let mut k = 0;
        // Whether hits were copied out of the cache's frames (checked once at the end,
        // against the cache attached now).
        let mut copied_out = false;
        let attached = self.attached;
        while k < count {
            let n = (count - k).min(pc::MAX_LOOKUP);
            let found = self.lookup(block + k, n, owner, write);
            let mut retry = false;
            for (j, f) in found.iter().take(n as usize).enumerate() {
                let (b, buf) = (block + k + j as u64, data + (k + j as u64) * BLOCK as u64);
                let slot = CACHE_VA + (f & 0xffff_ffff) * BLOCK as u64;
                match (f >> 32, write) {
                    _ if *f == u64::MAX => {
                        if !write {
                            self.queue(false, b, buf, 1, id);
                        }
                    }
                    (pc::HIT, false) => {
                        copy_block(slot, buf);
                        copied_out = true;
                    }
                    (pc::FILL, false) => self.queue_copy(b, slot, id, Some(b), buf, BLOCK as u64),
                    (pc::HIT, true) => copy_block(buf, slot),
                    (pc::FILL, true) => {
                        copy_block(buf, slot);
                        self.cache_filled(b, true);
                    }
                    _ => {
                        // Busy: an earlier operation is filling it; let it finish and
                        // look again from this block on (the cache looked up nothing
                        // behind it).
                        self.drain();
                        k += j as u64;
                        retry = true;
                        break;
                    }
                }
            }
            if !retry {
                k += n;
            }
        }
        if copied_out && !self.cache_alive(attached) {
            if let Some(op) = self.ops.get_mut(&id) {
                op.failed = true;
            }
        }
        if write {
            self.queue(true, block, data, count, id);
        }
    }

    /// Part of read `id`: device block `block`, of which only the first `keep` bytes go
    /// to `to` in the shared area (the rest is zeroed there). The block itself lands
    /// only in memory the reader cannot see: a cache slot, or a bounce block.
    fn read_part(&mut self, id: u64, buffered: bool, block: u64, owner: u32, to: u64, keep: u64) {
        zero_bytes(to + keep, BLOCK as u64 - keep);
        let mut looking = buffered;
        while looking {
            let f = self.lookup(block, 1, owner, false)[0];
            let attached = self.attached;
            let slot = CACHE_VA + (f & 0xffff_ffff) * BLOCK as u64;
            match f >> 32 {
                _ if f == u64::MAX => looking = false,
                pc::HIT => {
                    copy_part(slot, to, keep);
                    if !self.cache_alive(attached) {
                        if let Some(op) = self.ops.get_mut(&id) {
                            op.failed = true;
                        }
                    }
                    return;
                }
                pc::FILL => return self.queue_copy(block, slot, id, Some(block), to, keep),
                // Busy: an earlier operation fills it; let it finish and look again.
                _ => self.drain(),
            }
        }
        match self.bounce_block() {
            Some(b) => self.queue_copy(block, b, id, None, to, keep),
            None => {
                if let Some(op) = self.ops.get_mut(&id) {
                    op.failed = true;
                }
            }
        }
    }
}
