//! A file's bytes: reading and writing them (by path or by inode, growing the file by
//! new blocks as it needs), where they lie on the device (`extents_of`), and making
//! them durable (`sync`, `sync_ino`).

use super::{Dev, Error, Fs, Kind, BLOCK};
use alloc::string::String;
use alloc::vec::Vec;

impl<D: Dev> Fs<D> {
    fn file_read(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.inodes[ino as usize];
        if off >= n.size {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(n.size - off) as usize;
        let mut done = 0;
        let mut blk = [0u8; BLOCK];
        while done < len {
            let pos = off + done as u64;
            let b = n.map(pos / BLOCK as u64).ok_or(Error::Io)?;
            self.read_block(ino, b, &mut blk)?;
            let at = (pos % BLOCK as u64) as usize;
            let k = (BLOCK - at).min(len - done);
            buf[done..done + k].copy_from_slice(&blk[at..at + k]);
            done += k;
        }
        Ok(len)
    }

    /// Ordered data, as ext4's `data=ordered`: the bytes (and the zeros of new blocks)
    /// reach the disk before the inode that names new blocks or a size that exposes new
    /// bytes — written, flushed, then the inode. After a power cut a file that grew is an
    /// earlier version of itself (its old size and bytes, or a later size with the bytes
    /// written up to it), never a size over zeros nor over another file's old bytes. A
    /// write within the size overwrites in place: after a cut before the next flush its
    /// blocks may hold the old bytes, the new ones, or (a disk tearing a block) a mix.
    pub(crate) fn file_write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        let end = off.checked_add(data.len() as u64).ok_or(Error::NoSpace)?;
        let have = self.inodes[ino as usize].blocks();
        let need = end.div_ceil(BLOCK as u64);
        let grew = need > have;
        if grew {
            if let Err(e) = self.grow(ino, need - have) {
                // What was claimed before the refusal is kept: its zeros durable before
                // the extent that names it.
                self.dev.flush()?;
                self.write_inode(ino)?;
                return Err(e);
            }
        }
        let n = self.inodes[ino as usize];
        // A write past the end over a gap: the gap's bytes in blocks the file held
        // already read as zeros, whatever a cut or a failed write left there (a
        // truncation's tail, zeroed after its commit; a growth's data never exposed) —
        // written before the flush that precedes the new size. Blocks `grow` gave are
        // zeros already.
        if off > n.size {
            self.zero_range(ino, n.size, off.min(have * BLOCK as u64))?;
        }
        let mut done = 0;
        let mut blk = [0u8; BLOCK];
        while done < data.len() {
            let pos = off + done as u64;
            let b = n.map(pos / BLOCK as u64).ok_or(Error::Io)?;
            let at = (pos % BLOCK as u64) as usize;
            let k = (BLOCK - at).min(data.len() - done);
            if k < BLOCK {
                self.read_block(ino, b, &mut blk)?;
            }
            blk[at..at + k].copy_from_slice(&data[done..done + k]);
            self.write_block(ino, b, &blk)?;
            done += k;
        }
        if grew || end > n.size {
            self.dev.flush()?;
            self.inodes[ino as usize].size = end.max(n.size);
            self.write_inode(ino)?;
        }
        Ok(data.len())
    }

    pub fn read(&mut self, path: &str, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let ino = self.lookup(path)?;
        self.read_ino(ino, off, buf)
    }

    pub fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<usize, Error> {
        let ino = self.lookup(path)?;
        self.write_ino(ino, off, data)
    }

    /// Make file `ino`'s size `size` (POSIX `ftruncate`). Longer: the new bytes read as
    /// zeros (written as any growth is: ordered, zeros before the size). Shorter: the
    /// inode with the new size and extents is written and flushed (the commit), then the
    /// bytes past `size` in its last block are zeroed, and only then are the blocks past
    /// it free for others — a power cut leaves the old file or the new (zeroing the tail
    /// before the commit left the old size over zeros after a cut), a tail a cut left
    /// unzeroed is zeroed by the next growth, and a block freed too early is never named
    /// by two files (a cut between the commit and the bitmap leaves blocks marked used
    /// that no inode names, which the next mount frees).
    pub fn truncate_ino(&mut self, ino: u32, size: u64) -> Result<(), Error> {
        let n = match self.inodes.get(ino as usize) {
            Some(n) if n.kind == Kind::File as u16 => *n,
            Some(n) if n.kind == Kind::Dir as u16 => return Err(Error::IsDir),
            _ => return Err(Error::NotFound),
        };
        if size >= n.size {
            // Every block the new size covers zeroed (new ones by `grow`, the old last
            // one's tail here) and flushed, then the size once: a cut leaves the old
            // size or the new, never one between.
            let (have, need) = (n.blocks(), size.div_ceil(BLOCK as u64));
            if need > have {
                if let Err(e) = self.grow(ino, need - have) {
                    self.dev.flush()?;
                    self.write_inode(ino)?;
                    return Err(e);
                }
            }
            if size > n.size {
                self.zero_range(ino, n.size, size.min(have * BLOCK as u64))?;
                self.dev.flush()?;
                self.inodes[ino as usize].size = size;
                self.write_inode(ino)?;
            }
            return Ok(());
        }
        let keep = size.div_ceil(BLOCK as u64);
        let mut left = keep;
        let mut ext = n.ext;
        let mut freed = Vec::new();
        for e in ext.iter_mut() {
            let take = (e.1 as u64).min(left);
            left -= take;
            if (take as u32) < e.1 {
                freed.push((e.0 as u64 + take, (e.1 as u64) - take));
                *e = if take == 0 { (0, 0) } else { (e.0, take as u32) };
            }
        }
        self.inodes[ino as usize].size = size;
        self.inodes[ino as usize].ext = ext;
        self.write_inode(ino)?;
        self.dev.flush()?;
        // The cut-off bytes of the last block kept, zeroed after the commit (before it,
        // a cut would leave the old size over zeros): tidy, not needed — a growth zeroes
        // them again before its size exposes them (`file_write`).
        let tidy = if size.is_multiple_of(BLOCK as u64) { Ok(()) } else { self.zero_tail(ino, size) };
        for (s, l) in freed {
            for b in s..s + l {
                self.cache.remove(&b);
            }
            self.mark(s, l, false)?;
        }
        // The truncation is committed and its blocks free whether or not the tidying
        // wrote: its error is said after.
        tidy
    }

    /// Zero file `ino`'s bytes from `size` (not a multiple of the block) to the end of
    /// the block that holds it.
    fn zero_tail(&mut self, ino: u32, size: u64) -> Result<(), Error> {
        self.zero_range(ino, size, size.next_multiple_of(BLOCK as u64))
    }

    /// Zero file `ino`'s bytes `from..to`, in blocks it holds.
    fn zero_range(&mut self, ino: u32, from: u64, to: u64) -> Result<(), Error> {
        let n = self.inodes[ino as usize];
        let mut blk = [0u8; BLOCK];
        let mut at = from;
        while at < to {
            let b = n.map(at / BLOCK as u64).ok_or(Error::Io)?;
            let s = (at % BLOCK as u64) as usize;
            let e = (to - (at - s as u64)).min(BLOCK as u64) as usize;
            if s > 0 || e < BLOCK {
                self.read_block(ino, b, &mut blk)?;
            }
            blk[s..e].fill(0);
            self.write_block(ino, b, &blk)?;
            at += (e - s) as u64;
        }
        Ok(())
    }

    /// Read by inode (what an open file handle holds).
    pub fn read_ino(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        match self.inodes.get(ino as usize).map(|n| n.kind) {
            Some(k) if k == Kind::File as u16 => self.file_read(ino, off, buf),
            Some(k) if k == Kind::Dir as u16 => Err(Error::IsDir),
            _ => Err(Error::NotFound),
        }
    }

    pub fn write_ino(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        match self.inodes.get(ino as usize).map(|n| n.kind) {
            Some(k) if k == Kind::File as u16 => self.file_write(ino, off, data),
            Some(k) if k == Kind::Dir as u16 => Err(Error::IsDir),
            _ => Err(Error::NotFound),
        }
    }

    /// Where file `ino`'s bytes lie: its size and the runs of device blocks holding
    /// them, in file order (`(first block, blocks)`; only the blocks the size covers).
    /// What `files` delegates when a program has the system send a file (Cue).
    pub fn extents_of(&self, ino: u32) -> Result<(u64, Vec<(u64, u64)>), Error> {
        let n = self.inodes.get(ino as usize).filter(|n| n.kind != 0).ok_or(Error::NotFound)?;
        if n.kind != Kind::File as u16 {
            return Err(Error::IsDir);
        }
        let mut left = n.size.div_ceil(BLOCK as u64);
        let mut runs = Vec::new();
        for (s, c) in n.ext {
            if left == 0 {
                break;
            }
            let take = (c as u64).min(left);
            if take > 0 {
                runs.push((s as u64, take));
            }
            left -= take;
        }
        if left != 0 {
            return Err(Error::Corrupt(String::from("a file's size is past its extents")));
        }
        Ok((n.size, runs))
    }

    pub fn size_of(&self, ino: u32) -> Option<u64> {
        self.inodes.get(ino as usize).filter(|n| n.kind != 0).map(|n| n.size)
    }

    /// Make everything written so far durable.
    pub fn sync(&mut self) -> Result<(), Error> {
        self.dev.sync()?;
        Ok(())
    }

    /// Make file `ino`'s bytes, size and name durable (fsync). Everything the library
    /// writes reaches the device at once, so this is the device's flush (which makes
    /// other files' writes durable too: a disk's write cache has one flush); what a
    /// caller saves over [`Fs::sync`] is above the library (the files server writes
    /// only this file's kept-back appends first).
    pub fn sync_ino(&mut self, ino: u32) -> Result<(), Error> {
        if self.inodes.get(ino as usize).is_none_or(|n| n.kind == 0) {
            return Err(Error::NotFound);
        }
        self.sync()
    }
}
