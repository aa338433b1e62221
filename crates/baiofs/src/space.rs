//! The free-block bitmap, the superblock and the inode table written back, and the
//! allocation of blocks to files: runs of contiguous free blocks (`find_run`), a
//! file grown by new zeroed blocks at its end (`grow`).

use super::{Dev, Error, Fs, BLOCK, EXTENTS, INODE_SIZE, MAGIC, PER_BLOCK, VERSION};
use baio::checksum;

impl<D: Dev> Fs<D> {
    pub(crate) fn bit(&self, b: u64) -> bool {
        self.bitmap[(b / 8) as usize] & (1 << (b % 8)) != 0
    }

    pub(crate) fn set_bit(&mut self, b: u64, v: bool) {
        let m = 1u8 << (b % 8);
        if v {
            self.bitmap[(b / 8) as usize] |= m
        } else {
            self.bitmap[(b / 8) as usize] &= !m
        }
    }

    pub(crate) fn write_super(&mut self) -> Result<(), Error> {
        let g = self.geo;
        let mut b = [0u8; BLOCK];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        for (o, v) in [
            (16, g.blocks),
            (24, g.inodes),
            (32, g.bitmap_start),
            (40, g.bitmap_blocks),
            (48, g.itable_start),
            (56, g.data_start),
        ] {
            b[o..o + 8].copy_from_slice(&v.to_le_bytes());
        }
        let c = checksum(&b[..64]);
        b[64..72].copy_from_slice(&c.to_le_bytes());
        self.dev.write(0, &b)?;
        Ok(())
    }

    fn write_bitmap_block(&mut self, i: u64) -> Result<(), Error> {
        let blk: &[u8; BLOCK] = self.bitmap[i as usize * BLOCK..(i as usize + 1) * BLOCK].try_into().unwrap();
        let blk = *blk;
        self.dev.write(self.geo.bitmap_start + i, &blk)?;
        Ok(())
    }

    pub(crate) fn write_bitmap_all(&mut self) -> Result<(), Error> {
        for i in 0..self.geo.bitmap_blocks {
            self.write_bitmap_block(i)?;
        }
        Ok(())
    }

    pub(crate) fn write_inode(&mut self, ino: u32) -> Result<(), Error> {
        let first = ino as u64 / PER_BLOCK * PER_BLOCK;
        let mut blk = [0u8; BLOCK];
        for k in 0..PER_BLOCK as usize {
            self.inodes[first as usize + k].encode(&mut blk[k * INODE_SIZE..(k + 1) * INODE_SIZE]);
        }
        self.dev.write(self.geo.itable_start + first / PER_BLOCK, &blk)?;
        Ok(())
    }

    /// Free blocks in the segment.
    pub fn free_blocks(&self) -> u64 {
        (self.geo.data_start..self.geo.blocks).filter(|b| !self.bit(*b)).count() as u64
    }

    /// Find `n` contiguous free blocks, searching from the hint: their first block.
    pub(crate) fn find_run(&self, n: u64) -> Option<u64> {
        let g = self.geo;
        let span = g.blocks.saturating_sub(g.data_start);
        if n == 0 || n > span {
            return None; // also a filesystem without data blocks (mount accepts one)
        }
        let hint = if (g.data_start..g.blocks).contains(&self.hint) { self.hint } else { g.data_start };
        let mut run = 0;
        let mut start = 0;
        for k in 0..span + n {
            let b = g.data_start + (hint - g.data_start + k) % span;
            if b == g.data_start {
                run = 0; // runs do not wrap around the end
            }
            if self.bit(b) {
                run = 0;
                continue;
            }
            if run == 0 {
                start = b;
            }
            run += 1;
            if run == n {
                return Some(start);
            }
        }
        None
    }

    /// Mark `n` blocks from `s` used (or free) and write the bitmap blocks they touch.
    pub(crate) fn mark(&mut self, s: u64, n: u64, used: bool) -> Result<(), Error> {
        for b in s..s + n {
            self.set_bit(b, used);
        }
        let bits = 8 * BLOCK as u64;
        for i in s / bits..=(s + n - 1) / bits {
            self.write_bitmap_block(i)?;
        }
        Ok(())
    }

    /// Give inode `ino` `more` blocks at its end, contiguous with its last extent when
    /// that is free, else as few new runs as possible. New blocks are zeroed.
    pub(crate) fn grow(&mut self, ino: u32, mut more: u64) -> Result<(), Error> {
        while more > 0 {
            let n = self.inodes[ino as usize];
            let last = n.ext.iter().rposition(|e| e.1 > 0);
            // Extend the last run in place if the blocks after it are free.
            if let Some(l) = last {
                let end = n.ext[l].0 as u64 + n.ext[l].1 as u64;
                let mut k = 0;
                while k < more && end + k < self.geo.blocks && !self.bit(end + k) {
                    k += 1;
                }
                if k > 0 {
                    self.claim(ino, l, end, k)?;
                    more -= k;
                    continue;
                }
            }
            let slot = last.map_or(0, |l| l + 1);
            if slot >= EXTENTS {
                // Out of extents: the whole file moves to one run with room for the rest.
                return self.relocate(ino, more);
            }
            let mut want = more;
            let start = loop {
                if let Some(s) = self.find_run(want) {
                    break s;
                }
                if want == 1 {
                    return Err(Error::NoSpace);
                }
                want = want.div_ceil(2);
            };
            self.inodes[ino as usize].ext[slot] = (start as u32, 0);
            self.claim(ino, slot, start, want)?;
            more -= want;
        }
        Ok(())
    }

    /// Move file `ino` to one new run of its blocks and `more` (zeroed), when its extents
    /// are used up (a file grown by appends between other files' — a database beside its
    /// journal — gets there). In order, so that a power cut leaves the file where it was
    /// or where it went: the copy and the zeros are written and flushed, the inode naming
    /// the new run is written and flushed (the commit), and only then are the old runs
    /// free for others (blocks marked used that no inode names after a cut before that
    /// are freed by the next mount). `TooFragmented` when no free run is long enough.
    fn relocate(&mut self, ino: u32, more: u64) -> Result<(), Error> {
        let n = self.inodes[ino as usize];
        let have = n.blocks();
        let total = have + more;
        if total > u32::MAX as u64 {
            return Err(Error::TooFragmented);
        }
        let start = self.find_run(total).ok_or(Error::TooFragmented)?;
        let mut blk = [0u8; BLOCK];
        for i in 0..have {
            let from = n.map(i).ok_or(Error::Io)?;
            self.read_block(ino, from, &mut blk)?;
            self.dev.write(start + i, &blk)?;
            self.cache.remove(&(start + i));
        }
        let zero = [0u8; BLOCK];
        for b in start + have..start + total {
            self.dev.write(b, &zero)?;
            self.cache.remove(&b);
        }
        self.mark(start, total, true)?;
        self.dev.flush()?;
        let mut ext = [(0u32, 0u32); EXTENTS];
        ext[0] = (start as u32, total as u32);
        self.inodes[ino as usize].ext = ext;
        self.write_inode(ino)?;
        self.dev.flush()?;
        for (s, l) in n.ext {
            if l > 0 {
                for b in s as u64..s as u64 + l as u64 {
                    self.cache.remove(&b);
                }
                self.mark(s as u64, l as u64, false)?;
            }
        }
        self.hint = start + total;
        Ok(())
    }

    fn claim(&mut self, ino: u32, slot: usize, s: u64, n: u64) -> Result<(), Error> {
        let zero = [0u8; BLOCK];
        for b in s..s + n {
            self.dev.write(b, &zero)?;
            self.cache.remove(&b);
        }
        self.mark(s, n, true)?;
        self.inodes[ino as usize].ext[slot].1 += n as u32;
        self.hint = s + n;
        Ok(())
    }
}
