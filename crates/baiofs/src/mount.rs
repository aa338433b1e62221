//! Making, mounting and repairing a filesystem: `format`, `mount` (which refuses any
//! inconsistency and finishes what an interrupted update left: unnamed inodes, a stale
//! bitmap, renames under way), `examine` (what a mount would find) and `repair`.

use super::check::{Fix, Pending};
use super::layout::{encode_entry, Geometry};
use super::{
    CacheStats, Dev, Error, Fs, Inode, Kind, BLOCK, DIRENT, INODE_SIZE, MAGIC, OLDEST, PER_BLOCK, ROOT, VERSION,
};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use baio::checksum;

/// What a look at a filesystem found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Examination {
    /// Inconsistencies a mount refuses (empty: it mounts).
    pub problems: Vec<String>,
    /// What interrupted updates left (unnamed inodes, a stale bitmap): a mount cleans it up.
    pub unfinished: Vec<String>,
}

impl<D: Dev> Fs<D> {
    /// Make an empty filesystem on the whole device (its root directory empty).
    pub fn format(mut dev: D) -> Result<Fs<D>, Error> {
        let blocks = dev.blocks();
        let geo = Geometry::new(blocks);
        if geo.data_start + 1 > blocks || blocks > u32::MAX as u64 {
            return Err(Error::NoSpace);
        }
        let zero = [0u8; BLOCK];
        for b in 1..geo.data_start {
            dev.write(b, &zero)?;
        }
        let mut fs = Fs::new(dev, geo);
        for b in 0..geo.data_start {
            fs.set_bit(b, true);
        }
        fs.inodes[ROOT as usize].kind = Kind::Dir as u16;
        fs.write_super()?;
        fs.write_bitmap_all()?;
        fs.write_inode(ROOT)?;
        Ok(fs)
    }

    pub(crate) fn new(dev: D, geo: Geometry) -> Fs<D> {
        Fs {
            dev,
            geo,
            bitmap: vec![0u8; (geo.bitmap_blocks as usize) * BLOCK],
            inodes: vec![Inode::default(); geo.inodes as usize],
            hint: geo.data_start,
            cache: BTreeMap::new(),
            capacity: 64,
            clock: 0,
            policies: BTreeMap::new(),
            stats: CacheStats::default(),
            finished: Vec::new(),
            upgrade: false,
        }
    }

    /// Read the superblock, bitmap and inode table (no checks beyond the superblock).
    /// With `rewrite` (repair: the device is meant to hold a filesystem), a damaged
    /// superblock — a bad checksum, size or geometry, but also a damaged or zeroed magic
    /// or another version — is written anew for the device's size (what the rest holds
    /// is then checked as this version); the sentence saying so comes back.
    fn load(mut dev: D, rewrite: bool) -> Result<(Fs<D>, Option<String>), Error> {
        let bad = |s: String| Err(Error::Corrupt(s));
        let mut b = [0u8; BLOCK];
        dev.read(0, &mut b)?;
        let u64at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
        let head = if u64at(&b, 0) != MAGIC {
            Some("bad magic: not a baiofs filesystem".to_string())
        } else if !(OLDEST..=VERSION).contains(&version) {
            Some(format!("unknown version {version} (this is version {VERSION}; {OLDEST} is taken too)"))
        } else {
            None
        };
        if let (Some(why), false) = (&head, rewrite) {
            return bad(why.clone());
        }
        let blocks = dev.blocks();
        let geo = Geometry::new(blocks);
        let older = head.is_none() && version < VERSION;
        let why = if head.is_some() {
            head
        } else if u64at(&b, 64) != checksum(&b[..64]) {
            Some("superblock checksum mismatch".to_string())
        } else if u64at(&b, 16) != blocks {
            Some(format!("superblock says {} blocks, the segment has {}", u64at(&b, 16), blocks))
        } else {
            let stored = Geometry {
                blocks,
                inodes: u64at(&b, 24),
                bitmap_start: u64at(&b, 32),
                bitmap_blocks: u64at(&b, 40),
                itable_start: u64at(&b, 48),
                itable_blocks: geo.itable_blocks,
                data_start: u64at(&b, 56),
            };
            (stored != geo).then(|| "the geometry in the superblock is not the one its size gives".to_string())
        };
        if geo.data_start > blocks || blocks > u32::MAX as u64 {
            return bad(format!("a segment of {blocks} blocks cannot hold a filesystem"));
        }
        let mut fs = Fs::new(dev, geo);
        fs.upgrade = older && why.is_none();
        let note = match why {
            Some(why) if rewrite => {
                fs.write_super()?;
                Some(format!("{why}: the superblock is rewritten for the segment's {blocks} blocks"))
            }
            Some(why) => return bad(why),
            None => None,
        };
        for i in 0..geo.bitmap_blocks {
            let mut blk = [0u8; BLOCK];
            fs.dev.read(geo.bitmap_start + i, &mut blk)?;
            fs.bitmap[i as usize * BLOCK..(i as usize + 1) * BLOCK].copy_from_slice(&blk);
        }
        for i in 0..geo.itable_blocks {
            let mut blk = [0u8; BLOCK];
            fs.dev.read(geo.itable_start + i, &mut blk)?;
            for k in 0..PER_BLOCK as usize {
                fs.inodes[(i * PER_BLOCK) as usize + k] = Inode::decode(&blk[k * INODE_SIZE..(k + 1) * INODE_SIZE]);
            }
        }
        Ok((fs, note))
    }

    /// Mount: read and check everything (superblock, bitmap, inodes, the directory
    /// tree); refuse any inconsistency with an error that names it. What an
    /// interrupted update left (unnamed inodes, a stale bitmap) is cleaned up and
    /// written back; `finished` says what.
    pub fn mount(dev: D) -> Result<Fs<D>, Error> {
        let (mut fs, _) = Self::load(dev, false)?;
        let scan = fs.scan();
        if let Some((p, _)) = scan.problems.into_iter().next() {
            return Err(Error::Corrupt(p));
        }
        if fs.upgrade {
            fs.write_super()?;
            fs.upgrade = false;
        }
        fs.finish(&scan.renames, &scan.orphans, &scan.used)?;
        fs.finished = scan.unfinished;
        Ok(fs)
    }

    /// What a mount would find, without writing: inconsistencies and interrupted updates.
    pub fn examine(dev: D) -> Result<Examination, Error> {
        match Self::load(dev, false) {
            Ok((mut fs, _)) => {
                let s = fs.scan();
                Ok(Examination { problems: s.problems.into_iter().map(|p| p.0).collect(), unfinished: s.unfinished })
            }
            Err(Error::Corrupt(why)) => Ok(Examination { problems: vec![why], unfinished: Vec::new() }),
            Err(e) => Err(e),
        }
    }

    /// Make the filesystem mountable, keeping what can be trusted: a damaged
    /// superblock is rewritten (also one whose magic is damaged or zeroed, or which
    /// says another version: the caller says the device holds a filesystem), damaged or
    /// impossible inodes are freed (with the
    /// entries naming them), damaged, mistyped or repeated entries are cleared, sizes
    /// past an inode's blocks are cut, and what interrupted updates left is cleaned up.
    /// Returns the filesystem and one sentence per change.
    pub fn repair(dev: D) -> Result<(Fs<D>, Vec<String>), Error> {
        let (mut fs, note) = Self::load(dev, true)?;
        let mut changes: Vec<String> = note.into_iter().collect();
        // Each round fixes what it finds; a freed inode can leave an entry naming it
        // for the next round. Every fix frees or shrinks something, so this ends.
        for _ in 0..64 {
            let scan = fs.scan();
            if scan.problems.is_empty() {
                fs.finish(&scan.renames, &scan.orphans, &scan.used)?;
                changes.extend(scan.unfinished);
                return Ok((fs, changes));
            }
            for (why, fix) in scan.problems {
                let done = match fix {
                    Fix::ClearInode(i) => {
                        fs.inodes[i as usize] = Inode::default();
                        fs.write_inode(i)?;
                        "freed"
                    }
                    Fix::CutSize(i, size) => {
                        fs.inodes[i as usize].size = size;
                        fs.write_inode(i)?;
                        "size cut"
                    }
                    Fix::ClearEntry(d, at) => {
                        fs.file_write(d, at * DIRENT as u64, &[0u8; DIRENT])?;
                        "entry cleared"
                    }
                    Fix::EmptyRoot => {
                        fs.inodes[ROOT as usize] = Inode { kind: Kind::Dir as u16, ..Inode::default() };
                        fs.write_inode(ROOT)?;
                        "made an empty directory"
                    }
                };
                changes.push(format!("{why}: {done}"));
            }
            fs.cache.clear();
        }
        Err(Error::Corrupt("repair did not converge".into()))
    }

    /// Finish or undo interrupted renames, free the unnamed inodes and write the
    /// bitmap the inodes give, if they differ.
    fn finish(&mut self, renames: &[Pending], orphans: &[u32], used: &[bool]) -> Result<(), Error> {
        // The names first (each step one entry write, flushed before the next, so a cut
        // during a mount leaves what the next mount resolves the same way); the inodes
        // a finished rename left unnamed are among the orphans.
        for r in renames {
            if r.commit {
                if let Some(at) = r.replaced {
                    self.file_write(r.dir, at * DIRENT as u64, &[0u8; DIRENT])?;
                    self.dev.flush()?;
                }
                self.file_write(r.dir, r.at * DIRENT as u64, &encode_entry(r.ino, r.kind, &r.name, false))?;
            } else {
                self.file_write(r.dir, r.at * DIRENT as u64, &[0u8; DIRENT])?;
            }
            self.dev.flush()?;
        }
        for &i in orphans {
            self.inodes[i as usize] = Inode::default();
            self.write_inode(i)?;
        }
        if (0..self.geo.blocks).any(|b| self.bit(b) != used[b as usize]) {
            for (b, u) in used.iter().enumerate() {
                self.set_bit(b as u64, *u);
            }
            self.write_bitmap_all()?;
        }
        Ok(())
    }
}
