//! A disk with a volatile write cache, served to QEMU over NBD, for the power-cut rounds.
//!
//! QEMU's own raw file is no such disk: what the guest writes reaches the host's page
//! cache at once, so a killed QEMU loses nothing it was told, and a missing flush in
//! Scion's storage stack could never show. This disk keeps every write since the last
//! flush in a cache of 512-byte sectors, in memory; NBD's `FLUSH` (the guest's virtio
//! flush, which QEMU passes on) makes them durable. When the connection ends without a
//! goodbye (QEMU killed: the power cut), [`CacheDisk::cut`] keeps a random subset of
//! the unflushed sector writes — per sector none, the last, or an earlier one, so that
//! later writes may be lost while earlier ones of other sectors survive, and a 4 KiB
//! write may be torn at any sector — and the result is written back to the image file
//! for the check and the next boot. The NBD protocol is the `nbd` crate's (fixed
//! newstyle handshake, `NBD_FLAG_SEND_FLUSH`); the cache is ours.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

pub const SECTOR: usize = 512;

/// The disk: durable bytes and the sectors written since the last flush.
pub struct CacheDisk {
    durable: Vec<u8>,
    /// Sector → every version written since the last flush, oldest first.
    cache: BTreeMap<u64, Vec<[u8; SECTOR]>>,
    pos: u64,
    pub flushes: u64,
}

/// What a cut kept: (sectors with unflushed writes, sectors left as before, sectors
/// kept at an earlier version than their last).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub unflushed: usize,
    pub lost: usize,
    pub older: usize,
}

impl CacheDisk {
    pub fn new(image: Vec<u8>) -> CacheDisk {
        CacheDisk { durable: image, cache: BTreeMap::new(), pos: 0, flushes: 0 }
    }

    pub fn len(&self) -> u64 {
        self.durable.len() as u64
    }

    fn sector(&self, s: u64) -> [u8; SECTOR] {
        match self.cache.get(&s).and_then(|v| v.last()) {
            Some(d) => *d,
            None => {
                let at = s as usize * SECTOR;
                self.durable[at..at + SECTOR].try_into().unwrap()
            }
        }
    }

    /// A power cut: each sector written since the last flush keeps nothing of it
    /// (1 in 2), its last write (1 in 4) or an earlier one (1 in 4; its last when it
    /// has one). Returns what was kept and the durable image.
    pub fn cut(mut self, mut rand: impl FnMut() -> u64) -> (Cut, Vec<u8>) {
        let mut c = Cut { unflushed: self.cache.len(), ..Cut::default() };
        for (s, versions) in std::mem::take(&mut self.cache) {
            let keep = match rand() % 4 {
                0 | 1 => None,
                2 => versions.last(),
                _ => versions.get((rand() % versions.len() as u64) as usize),
            };
            let Some(d) = keep else {
                c.lost += 1;
                continue;
            };
            if !std::ptr::eq(d, versions.last().unwrap()) {
                c.older += 1;
            }
            let at = s as usize * SECTOR;
            self.durable[at..at + SECTOR].copy_from_slice(&d[..]);
        }
        (c, self.durable)
    }
}

impl Read for CacheDisk {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.len().saturating_sub(self.pos)) as usize;
        let mut done = 0;
        while done < n {
            let p = self.pos + done as u64;
            let (s, at) = (p / SECTOR as u64, (p % SECTOR as u64) as usize);
            let k = (SECTOR - at).min(n - done);
            buf[done..done + k].copy_from_slice(&self.sector(s)[at..at + k]);
            done += k;
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for CacheDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pos + buf.len() as u64 > self.len() {
            return Err(io::Error::other("a write past the disk's end"));
        }
        let mut done = 0;
        while done < buf.len() {
            let p = self.pos + done as u64;
            let (s, at) = (p / SECTOR as u64, (p % SECTOR as u64) as usize);
            let k = (SECTOR - at).min(buf.len() - done);
            let mut d = self.sector(s);
            d[at..at + k].copy_from_slice(&buf[done..done + k]);
            let versions = self.cache.entry(s).or_default();
            // A sector rewritten many times between flushes keeps its first and last few
            // versions (a cut may keep any; memory stays bounded).
            if versions.len() >= 8 {
                versions.remove(1);
            }
            versions.push(d);
            done += k;
        }
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }

    /// NBD's `FLUSH`: everything written is durable.
    fn flush(&mut self) -> io::Result<()> {
        for (s, versions) in std::mem::take(&mut self.cache) {
            let at = s as usize * SECTOR;
            self.durable[at..at + SECTOR].copy_from_slice(&versions.last().unwrap()[..]);
        }
        self.flushes += 1;
        Ok(())
    }
}

impl Seek for CacheDisk {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.len().checked_add_signed(d).ok_or_else(|| io::Error::other("seek"))?,
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).ok_or_else(|| io::Error::other("seek"))?,
        };
        Ok(self.pos)
    }
}

/// A `CacheDisk` served on a Unix socket to one NBD client (one QEMU run).
pub struct Served {
    pub socket: PathBuf,
    thread: JoinHandle<io::Result<(bool, CacheDisk)>>,
}

/// Serve `image` (read now) on a new socket beside it.
pub fn serve(image: &Path) -> Result<Served, String> {
    let bytes = std::fs::read(image).map_err(|e| format!("{}: {e}", image.display()))?;
    let socket = image.with_extension("nbd.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    let thread = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept()?;
        let size = bytes.len() as u64;
        nbd::server::handshake(&mut conn, |_name| {
            Ok(nbd::Export { size, data: (), readonly: false, ..Default::default() })
        })?;
        let mut disk = CacheDisk::new(bytes);
        // The client's goodbye (`NBD_CMD_DISC`) is an orderly end; anything else (the
        // socket closed under a request read) is a cut.
        let orderly = nbd::server::transmission(&mut conn, &mut disk).is_ok();
        Ok((orderly, disk))
    });
    Ok(Served { socket, thread })
}

impl Served {
    /// After QEMU ended: the power cut (unless QEMU said goodbye, when the cache is
    /// flushed as a disk does at an orderly shutdown), written back to `image`.
    pub fn end(self, image: &Path, rand: impl FnMut() -> u64) -> Result<(Cut, u64), String> {
        let _ = std::fs::remove_file(&self.socket);
        let (orderly, mut disk) =
            self.thread.join().map_err(|_| "the NBD server panicked")?.map_err(|e| format!("NBD: {e}"))?;
        let flushes = disk.flushes;
        let (cut, bytes) = if orderly {
            disk.flush().map_err(|e| e.to_string())?;
            (Cut::default(), disk.durable)
        } else {
            disk.cut(rand)
        };
        std::fs::write(image, bytes).map_err(|e| format!("{}: {e}", image.display()))?;
        Ok((cut, flushes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unflushed_writes_are_read_back_and_a_cut_keeps_flushed_ones() {
        let mut d = CacheDisk::new(vec![0u8; 8 * SECTOR]);
        d.seek(SeekFrom::Start(100)).unwrap();
        d.write_all(&[1u8; 1000]).unwrap();
        d.flush().unwrap();
        d.seek(SeekFrom::Start(0)).unwrap();
        d.write_all(&[2u8; 4 * SECTOR]).unwrap();
        d.seek(SeekFrom::Start(SECTOR as u64)).unwrap();
        d.write_all(&[3u8; SECTOR]).unwrap();
        let mut b = vec![0u8; 8 * SECTOR];
        d.seek(SeekFrom::Start(0)).unwrap();
        d.read_exact(&mut b).unwrap();
        assert_eq!(&b[..SECTOR], &[2u8; SECTOR][..]);
        assert_eq!(&b[SECTOR..2 * SECTOR], &[3u8; SECTOR][..]);
        assert_eq!(&b[4 * SECTOR..4 * SECTOR + 10], &[0u8; 10][..]);
        // Every cut: a flushed sector as flushed; an unflushed one as before, or one
        // of its versions.
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..200u64 {
            let mut d2 = CacheDisk::new(d.durable.clone());
            d2.cache = d.cache.clone();
            let mut x = seed;
            let (c, img) = d2.cut(move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            });
            assert_eq!(c.unflushed, 4);
            let old: &[u8] = &d.durable[SECTOR..2 * SECTOR];
            let s1 = &img[SECTOR..2 * SECTOR];
            assert!(s1 == old || s1 == [2u8; SECTOR] || s1 == [3u8; SECTOR], "sector 1: {:?}", &s1[..4]);
            assert_eq!(&img[4 * SECTOR..], &d.durable[4 * SECTOR..], "nothing unflushed there");
            seen.insert((img[0], s1[0], img[2 * SECTOR]));
        }
        assert!(seen.len() > 4, "cuts differ: {seen:?}");
        assert!(seen.iter().any(|s| s.1 == 2), "an earlier version of a sector kept: {seen:?}");
    }

    #[test]
    fn a_client_over_nbd_reads_what_it_wrote_and_a_cut_loses_only_the_unflushed() {
        let dir = std::env::temp_dir().join(format!("scion-cachedisk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("disk.img");
        std::fs::write(&img, vec![0u8; 64 * 1024]).unwrap();
        let served = serve(&img).unwrap();
        {
            let mut s = std::os::unix::net::UnixStream::connect(&served.socket).unwrap();
            let e = nbd::client::handshake(&mut s, b"").unwrap();
            assert_eq!(e.size, 64 * 1024);
            assert!(e.send_flush, "the disk says it has a cache to flush");
            let mut c = nbd::client::NbdClient::new(&mut s, &e);
            c.seek(SeekFrom::Start(4096)).unwrap();
            c.write_all(&[7u8; 4096]).unwrap();
            c.flush().unwrap();
            c.seek(SeekFrom::Start(8192)).unwrap();
            c.write_all(&[9u8; 4096]).unwrap();
            let mut b = [0u8; 4096];
            c.seek(SeekFrom::Start(8192)).unwrap();
            c.read_exact(&mut b).unwrap();
            assert_eq!(b, [9u8; 4096]);
            // The client goes without a goodbye: the power is cut.
        }
        let (cut, flushes) = served.end(&img, || 0).unwrap();
        assert_eq!(flushes, 1);
        assert_eq!(cut, Cut { unflushed: 8, lost: 8, older: 0 });
        let after = std::fs::read(&img).unwrap();
        assert_eq!(&after[4096..8192], &[7u8; 4096][..], "flushed: kept");
        assert_eq!(&after[8192..12288], &[0u8; 4096][..], "not flushed: lost at this cut");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
