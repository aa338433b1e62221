//! Directories and names: the entries of a directory, paths resolved to inodes
//! (`lookup`, `stat`, `list`), and the operations on names: `create`, `remove` and the
//! crash-safe `rename`.

use super::layout::{decode_entry, encode_entry, valid_name};
use super::{Dev, Entry, Error, Fs, Inode, Kind, BLOCK, DIRENT, ROOT};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

impl<D: Dev> Fs<D> {
    /// The entries of directory `d`: (index, entry).
    fn entries(&mut self, d: u32) -> Result<Vec<(u64, Entry)>, Error> {
        let size = self.inodes[d as usize].size;
        let mut raw = vec![0u8; size as usize];
        self.file_read_meta(d, &mut raw)?;
        let mut out = Vec::new();
        for (i, e) in raw.chunks(DIRENT).enumerate() {
            // The mount checked every entry; one that fails now is the device's fault.
            let Some((ino, kind, name)) =
                decode_entry(e).map_err(|why| Error::Corrupt(format!("directory {d}, entry {i}: {why}")))?
            else {
                continue;
            };
            let size = self.inodes.get(ino as usize).map_or(0, |n| n.size);
            out.push((i as u64, Entry { name, kind, size, ino }));
        }
        Ok(out)
    }

    pub(crate) fn file_read_meta(&mut self, d: u32, buf: &mut [u8]) -> Result<(), Error> {
        let n = self.inodes[d as usize];
        let mut blk = [0u8; BLOCK];
        for (i, chunk) in buf.chunks_mut(BLOCK).enumerate() {
            let b = n.map(i as u64).ok_or(Error::Io)?;
            self.read_block(0, b, &mut blk)?;
            chunk.copy_from_slice(&blk[..chunk.len()]);
        }
        Ok(())
    }

    /// The inode and kind of the entry `name` of directory `d`, if there is one: the
    /// first such entry, as `entries` orders them. Only that entry is decoded (and its
    /// checksum checked): a lookup allocates nothing and sums no other entry's bytes
    /// (the mount checked every entry).
    fn find_in(&mut self, d: u32, name: &str) -> Result<Option<(u32, Kind)>, Error> {
        let n = self.inodes[d as usize];
        let mut blk = [0u8; BLOCK];
        for i in 0..n.size.div_ceil(BLOCK as u64) {
            let b = n.map(i).ok_or(Error::Io)?;
            self.read_block(0, b, &mut blk)?;
            let len = (n.size - i * BLOCK as u64).min(BLOCK as u64) as usize;
            for (j, e) in blk[..len].chunks(DIRENT).enumerate() {
                if e.len() < 8 + name.len() || e[4] as usize != name.len() || &e[8..8 + name.len()] != name.as_bytes() {
                    continue;
                }
                let at = i as usize * (BLOCK / DIRENT) + j;
                match decode_entry(e).map_err(|why| Error::Corrupt(format!("directory {d}, entry {at}: {why}")))? {
                    Some((ino, kind, _)) => return Ok(Some((ino, kind))),
                    None => continue,
                }
            }
        }
        Ok(None)
    }

    /// Resolve `path` ("/a/b", or "a/b" from the root) to (parent, name, inode if any).
    fn resolve(&mut self, path: &str) -> Result<(u32, String, Option<u32>), Error> {
        let (d, last, found) = self.walk(path)?;
        Ok((d, last.to_string(), found))
    }

    /// `resolve` without an allocation: (parent, the last name, inode if any).
    fn walk<'p>(&mut self, path: &'p str) -> Result<(u32, &'p str, Option<u32>), Error> {
        let mut parts = path.split('/').filter(|s| !s.is_empty()).peekable();
        let mut d = ROOT;
        while let Some(p) = parts.next() {
            if parts.peek().is_none() {
                return Ok((d, p, self.find_in(d, p)?.map(|(ino, _)| ino)));
            }
            match self.find_in(d, p)? {
                Some((ino, Kind::Dir)) => d = ino,
                Some(_) => return Err(Error::NotDir),
                None => return Err(Error::NotFound),
            }
        }
        Ok((ROOT, "", Some(ROOT)))
    }

    pub fn lookup(&mut self, path: &str) -> Result<u32, Error> {
        self.walk(path)?.2.ok_or(Error::NotFound)
    }

    /// (inode, kind, size) of what `path` names: `lookup` and `stat` in one walk.
    pub fn find(&mut self, path: &str) -> Result<(u32, Kind, u64), Error> {
        let ino = self.lookup(path)?;
        let n = self.inodes[ino as usize];
        Ok((ino, if n.kind == Kind::Dir as u16 { Kind::Dir } else { Kind::File }, n.size))
    }

    /// (kind, size)
    pub fn stat(&mut self, path: &str) -> Result<(Kind, u64), Error> {
        self.find(path).map(|(_, k, size)| (k, size))
    }

    /// Make a file or directory; its parent must exist.
    pub fn create(&mut self, path: &str, kind: Kind) -> Result<u32, Error> {
        let (parent, name, found) = self.resolve(path)?;
        if found.is_some() {
            return Err(Error::Exists);
        }
        if !valid_name(&name) {
            return Err(Error::BadName);
        }
        let ino =
            (ROOT as usize + 1..self.inodes.len()).find(|i| self.inodes[*i].kind == 0).ok_or(Error::NoInode)? as u32;
        // The inode first: until the entry naming it is written it is unnamed, and a
        // mount after a crash frees it.
        self.inodes[ino as usize] = Inode { kind: kind as u16, ..Inode::default() };
        self.write_inode(ino)?;
        // Durable before the entry that names it (else a cut may keep an entry naming
        // a free inode: a filesystem the mount refuses).
        self.dev.flush()?;
        let e = encode_entry(ino, kind, &name, false);
        // Reuse a free entry, else append.
        let size = self.inodes[parent as usize].size;
        let mut raw = vec![0u8; size as usize];
        self.file_read_meta(parent, &mut raw)?;
        let at = raw.chunks(DIRENT).position(|c| c[0..4] == [0; 4]).map_or(size, |i| (i * DIRENT) as u64);
        if let Err(err) = self.file_write(parent, at, &e) {
            self.inodes[ino as usize] = Inode::default();
            self.write_inode(ino)?;
            return Err(err);
        }
        Ok(ino)
    }

    /// Remove a file, or an empty directory; its blocks become free.
    pub fn remove(&mut self, path: &str) -> Result<(), Error> {
        let (parent, name, found) = self.resolve(path)?;
        let ino = found.ok_or(Error::NotFound)?;
        if ino == ROOT {
            return Err(Error::BadName);
        }
        if self.inodes[ino as usize].kind == Kind::Dir as u16 && !self.entries(ino)?.is_empty() {
            return Err(Error::NotEmpty);
        }
        let idx = self.entries(parent)?.into_iter().find(|(_, e)| e.name == name).ok_or(Error::NotFound)?.0;
        // The entry first (the commit), then the inode and its blocks: a crash between
        // leaves an unnamed inode that the next mount frees.
        self.file_write(parent, idx * DIRENT as u64, &[0u8; DIRENT])?;
        // The cleared entry is durable before the inode goes.
        self.dev.flush()?;
        self.free_inode(ino)
    }

    /// Free inode `ino` (no entry names it any more) and its blocks.
    fn free_inode(&mut self, ino: u32) -> Result<(), Error> {
        let n = self.inodes[ino as usize];
        self.inodes[ino as usize] = Inode::default();
        self.write_inode(ino)?;
        for (s, l) in n.ext {
            if l > 0 {
                for b in s as u64..s as u64 + l as u64 {
                    self.cache.remove(&b);
                }
                self.mark(s as u64, l as u64, false)?;
            }
        }
        self.policies.remove(&ino);
        Ok(())
    }

    /// Give `from` the name `to` (in the same directory or another), replacing what
    /// `to` names, as POSIX `rename` does: a file replaces a file, a directory an empty
    /// directory (`NotDir`, `IsDir`, `NotEmpty` otherwise); renaming a name to itself
    /// changes nothing; a directory cannot move into itself or below (`BadName`).
    ///
    /// Crash-safe: after a power cut at any write, `from` and `to` are as before or
    /// as after, never both names nor neither. The new name is written first as a
    /// pending entry (flushed); clearing the old name is the commit (flushed); then
    /// the replaced entry is cleared and the new one made final (each flushed), and the
    /// replaced inode freed. A mount that finds a pending entry finishes the rename if
    /// no other entry names its inode, else undoes it. Durable when it returns.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), Error> {
        let (sp, sname, found) = self.resolve(from)?;
        let s = found.ok_or(Error::NotFound)?;
        if s == ROOT {
            return Err(Error::BadName);
        }
        let (dp, dname, target) = self.resolve(to)?;
        if target == Some(ROOT) || !valid_name(&dname) {
            return Err(Error::BadName);
        }
        let dir = |fs: &Self, i: u32| fs.inodes[i as usize].kind == Kind::Dir as u16;
        let kind = if dir(self, s) { Kind::Dir } else { Kind::File };
        if kind == Kind::Dir && self.parents(to)?.contains(&s) {
            return Err(Error::BadName);
        }
        if let Some(t) = target {
            if t == s {
                return Ok(());
            }
            match (kind, dir(self, t)) {
                (Kind::Dir, false) => return Err(Error::NotDir),
                (Kind::File, true) => return Err(Error::IsDir),
                (Kind::Dir, true) if !self.entries(t)?.is_empty() => return Err(Error::NotEmpty),
                _ => {}
            }
        }
        let from_at = self.entries(sp)?.into_iter().find(|(_, e)| e.name == sname).ok_or(Error::NotFound)?.0;
        let to_at = match target {
            Some(t) => Some(self.entries(dp)?.into_iter().find(|(_, e)| e.ino == t).ok_or(Error::NotFound)?.0),
            None => None,
        };
        // 1. The new name, pending, in a free entry of the directory (or appended).
        let size = self.inodes[dp as usize].size;
        let mut raw = vec![0u8; size as usize];
        self.file_read_meta(dp, &mut raw)?;
        let at = raw.chunks(DIRENT).position(|c| c.iter().all(|x| *x == 0)).map_or(size, |i| (i * DIRENT) as u64);
        self.file_write(dp, at, &encode_entry(s, kind, &dname, true))?;
        self.dev.flush()?;
        // 2. The commit: the old name goes.
        self.file_write(sp, from_at * DIRENT as u64, &[0u8; DIRENT])?;
        self.dev.flush()?;
        // 3. The name it replaces goes, and the new one is final.
        if let Some(i) = to_at {
            self.file_write(dp, i * DIRENT as u64, &[0u8; DIRENT])?;
            self.dev.flush()?;
        }
        self.file_write(dp, at, &encode_entry(s, kind, &dname, false))?;
        self.dev.flush()?;
        // 4. What it replaced, now unnamed, is freed (a cut before leaves an orphan
        // the next mount frees).
        if let Some(t) = target {
            self.free_inode(t)?;
        }
        Ok(())
    }

    /// The directories `path`'s last name lies under, from the root down.
    fn parents(&mut self, path: &str) -> Result<Vec<u32>, Error> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut out = vec![ROOT];
        for p in parts.iter().take(parts.len().saturating_sub(1)) {
            let d = *out.last().unwrap();
            let e = self.entries(d)?.into_iter().find(|(_, e)| e.name == *p).ok_or(Error::NotFound)?.1;
            out.push(e.ino);
        }
        Ok(out)
    }

    pub fn list(&mut self, path: &str) -> Result<Vec<Entry>, Error> {
        let ino = self.lookup(path)?;
        if self.inodes[ino as usize].kind != Kind::Dir as u16 {
            return Err(Error::NotDir);
        }
        Ok(self.entries(ino)?.into_iter().map(|(_, e)| e).collect())
    }
}
