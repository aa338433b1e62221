//! The library's own block cache (BAIO §3.2: caching is the application's): its size,
//! the per-file policies (`Policy`), least recently used eviction, the reads and writes
//! that go through it or around it, and `prefetch`, the hint to the device.

use super::{CacheStats, Dev, Error, Fs, Kind, Policy, BLOCK};
use alloc::vec::Vec;

impl<D: Dev> Fs<D> {
    /// How many blocks the library caches (the application decides).
    pub fn set_cache_blocks(&mut self, n: usize) {
        self.capacity = n;
        self.evict();
    }

    /// The caching policy for a file from now on.
    pub fn set_policy(&mut self, path: &str, p: Policy) -> Result<(), Error> {
        let ino = self.lookup(path)?;
        self.policies.insert(ino, p);
        let n = self.inodes[ino as usize];
        for i in 0..n.blocks() {
            let b = n.map(i).unwrap();
            match p {
                Policy::NoCache => {
                    self.cache.remove(&b);
                }
                _ => {
                    if let Some(e) = self.cache.get_mut(&b) {
                        e.2 = p == Policy::Keep;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn cache_stats(&self) -> CacheStats {
        CacheStats { resident: self.cache.len() as u64, ..self.stats }
    }

    fn evict(&mut self) {
        while self.cache.len() > self.capacity {
            let Some(victim) = self.cache.iter().filter(|(_, e)| !e.2).min_by_key(|(_, e)| e.1).map(|(b, _)| *b) else {
                return;
            };
            self.cache.remove(&victim);
            self.stats.evictions += 1;
        }
    }

    fn policy(&self, ino: u32) -> Policy {
        self.policies.get(&ino).copied().unwrap_or_default()
    }

    /// Read device block `b` for inode `ino` (metadata: `ino` 0) through the cache.
    pub(crate) fn read_block(&mut self, ino: u32, b: u64, out: &mut [u8; BLOCK]) -> Result<(), Error> {
        let p = if ino == 0 { Policy::Keep } else { self.policy(ino) };
        self.clock += 1;
        if let Some(e) = self.cache.get_mut(&b) {
            e.1 = self.clock;
            out.copy_from_slice(&e.0[..]);
            self.stats.hits += 1;
            return Ok(());
        }
        self.stats.misses += 1;
        if p == Policy::NoCache {
            self.dev.read_direct(b, out)?;
            return Ok(());
        }
        self.dev.read(b, out)?;
        self.cache.insert(b, (alloc::boxed::Box::new(*out), self.clock, p == Policy::Keep && ino != 0));
        self.evict();
        Ok(())
    }

    pub(crate) fn write_block(&mut self, ino: u32, b: u64, data: &[u8; BLOCK]) -> Result<(), Error> {
        if ino != 0 && self.policy(ino) == Policy::NoCache {
            self.cache.remove(&b);
            self.dev.write_direct(b, data)?;
            return Ok(());
        }
        self.dev.write(b, data)?;
        if let Some(e) = self.cache.get_mut(&b) {
            e.0.copy_from_slice(data);
        }
        Ok(())
    }

    /// Tell the device that bytes `off..off + len` of `path` will be wanted soon.
    pub fn prefetch(&mut self, path: &str, off: u64, len: u64) -> Result<(), Error> {
        let ino = self.lookup(path)?;
        self.prefetch_ino(ino, off, len)
    }

    /// `prefetch` by inode (what an open file handle holds).
    pub fn prefetch_ino(&mut self, ino: u32, off: u64, len: u64) -> Result<(), Error> {
        let n = *self.inodes.get(ino as usize).ok_or(Error::NotFound)?;
        if n.kind != Kind::File as u16 {
            return Err(Error::IsDir);
        }
        let end = off.saturating_add(len).min(n.size).div_ceil(BLOCK as u64);
        let mut i = off / BLOCK as u64;
        while i < end {
            let b = n.map(i).unwrap();
            let mut k = 1;
            while i + k < end && n.map(i + k) == Some(b + k) {
                k += 1;
            }
            let missing: Vec<u64> = (b..b + k).filter(|x| !self.cache.contains_key(x)).collect();
            if let (Some(f), Some(l)) = (missing.first(), missing.last()) {
                self.dev.prefetch(*f, l - f + 1);
            }
            i += k;
        }
        Ok(())
    }
}
