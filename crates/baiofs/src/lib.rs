//! `baiofs`: a filesystem that lives inside one BAIO disk segment, as a library in the
//! program that owns the segment (BAIO paper §3.2: layout, naming, caching and
//! prefetching belong to the application, not the system).
//!
//! Layout (blocks of 4 KiB, numbered from 0 in the segment; `docs/baiofs.md`):
//! - block 0, the superblock: magic, version, blocks, inode count, where the bitmap,
//!   the inode table and the data start, and a checksum;
//! - the free-block bitmap (one bit per block of the segment);
//! - the inode table: 64-byte inodes (kind, size, up to `EXTENTS` extents of
//!   contiguous blocks); inode 1 is the root directory;
//! - data. A directory is a file of 64-byte entries (inode, kind, name).
//!
//! Files are extents of contiguous blocks: a file written in one go is one run on the
//! disk, so BAIO can move it with few large operations.
//!
//! Caching is the application's: the library keeps its own block cache (size set by
//! the program) and per-file policies — [`Policy::Normal`] (least recently used),
//! [`Policy::Keep`] (stays cached), [`Policy::NoCache`] (read and written around the
//! cache, straight to the device). [`Fs::prefetch`] tells the device which blocks will
//! be wanted so it can start reading them ahead (asynchronously on BAIO).
//! Metadata is written through at once; `sync` asks the device to make it durable.
//!
//! **Crash consistency.** The directory tree is the truth: an inode is in use when a
//! directory reachable from the root names it, and the free-block bitmap is derived
//! from the inodes so named. Every update is ordered so that one write commits it:
//! create writes the new inode, then the entry naming it (or, when the entry is
//! appended, the parent's inode with its new size); remove clears the entry, then frees
//! the inode and its blocks; growing a file zeroes the new blocks and records them in
//! the bitmap before the inode's extent, and the inode's size after the data. Where an
//! order matters a flush stands between (the device's barrier, `BlockDev::flush`: a disk
//! that caches writes keeps no order among unflushed ones): after a new inode, after
//! the zeros of new blocks, after a cleared entry. What an update writes is durable once
//! a later flush returns (the next update's, or `sync`). A crash
//! leaves at most an unnamed inode and a stale bitmap, which the next mount frees and
//! rebuilds ("an interrupted update, finished"). Inodes and directory entries carry
//! checksums (each lies inside one 512-byte sector, so a torn block write cannot tear
//! one); `repair` removes what cannot be trusted.
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;

pub mod handover;
pub mod session;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use baio::checksum;
pub use baio::{BlockDev, BLOCK};

pub const MAGIC: u64 = u64::from_le_bytes(*b"SCBFS001");
/// 2: checksums over inodes and directory entries (5 extents, names up to 48 bytes).
/// 3: an entry may be a rename's new name not yet committed (`PENDING`), which only a
/// mount that knows it can finish or undo. A version 2 filesystem has no such entry: it
/// mounts, and the mount writes its superblock as version 3 (older code then refuses it
/// by its version rather than misread an interrupted rename).
pub const VERSION: u32 = 3;
/// The oldest version a mount takes.
pub const OLDEST: u32 = 2;
/// An entry's byte 6: the entry is a rename's new name, not yet committed.
const PENDING: u8 = 1;
pub const INODE_SIZE: usize = 64;
pub const EXTENTS: usize = 5;
pub const NAME_MAX: usize = 48;
/// Where an inode's or a directory entry's checksum lies (it covers the bytes before).
const SUM: usize = 56;
pub const DIRENT: usize = 64;
pub const ROOT: u32 = 1;
const PER_BLOCK: u64 = (BLOCK / INODE_SIZE) as u64;

/// A block device with the hints a BAIO segment can act on.
pub trait Dev: BlockDev {
    /// Start reading these blocks ahead of use (a hint; by default nothing happens).
    fn prefetch(&mut self, _first: u64, _n: u64) {}
    /// Read around any shared cache (by default a plain read).
    fn read_direct(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        self.read(block, buf)
    }
    /// Write around any shared cache (by default a plain write).
    fn write_direct(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.write(block, buf)
    }
    /// Make every write so far durable (by default the device's flush: the barrier a
    /// disk that caches writes needs, `baio::BlockDev::flush`).
    fn sync(&mut self) -> Result<(), baio::Error> {
        self.flush()
    }
}

impl Dev for baio::MemDev {}
impl Dev for baio::crash::Recorder {}
impl Dev for baio::crash::Overlay<'_> {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Io,
    /// Mount refused: the text names the inconsistency.
    Corrupt(String),
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    BadName,
    NoSpace,
    NoInode,
    /// The file would need more than `EXTENTS` runs of blocks.
    TooFragmented,
}

impl Error {
    /// The system's error code for this (what the files server answers): a failing
    /// disk is `Io`, never a usage error such as `BadState`.
    pub fn code(&self) -> abi::Error {
        match self {
            Error::NotFound => abi::Error::NotFound,
            Error::Exists => abi::Error::Exists,
            Error::NotDir | Error::IsDir | Error::BadName => abi::Error::InvalidArg,
            Error::NotEmpty => abi::Error::BadState,
            Error::NoSpace | Error::NoInode | Error::TooFragmented => abi::Error::NoSpace,
            // The disk failed, or gave back bytes that fail their checksums (a mount
            // checked everything: damage found later is the device's).
            Error::Io | Error::Corrupt(_) => abi::Error::Io,
        }
    }
}

impl From<baio::Error> for Error {
    fn from(_: baio::Error) -> Error {
        Error::Io
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File = 1,
    Dir = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// Cached, least recently used first out.
    #[default]
    Normal,
    /// Cached and never evicted.
    Keep,
    /// Around the library's cache, straight to the device.
    NoCache,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Inode {
    kind: u16,
    size: u64,
    ext: [(u32, u32); EXTENTS],
    /// Read from the device with a checksum that does not hold (not stored).
    damaged: bool,
}

impl Inode {
    fn blocks(&self) -> u64 {
        self.ext.iter().map(|e| e.1 as u64).sum()
    }
    /// The device block holding file block `i`.
    fn map(&self, mut i: u64) -> Option<u64> {
        for (s, n) in self.ext {
            if i < n as u64 {
                return Some(s as u64 + i);
            }
            i -= n as u64;
        }
        None
    }
    fn encode(&self, b: &mut [u8]) {
        b.fill(0);
        b[0..2].copy_from_slice(&self.kind.to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        for (k, (s, n)) in self.ext.iter().enumerate() {
            b[16 + 8 * k..20 + 8 * k].copy_from_slice(&s.to_le_bytes());
            b[20 + 8 * k..24 + 8 * k].copy_from_slice(&n.to_le_bytes());
        }
        if self.kind != 0 {
            let c = checksum(&b[..SUM]);
            b[SUM..INODE_SIZE].copy_from_slice(&c.to_le_bytes());
        }
    }
    fn decode(b: &[u8]) -> Inode {
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let mut ext = [(0, 0); EXTENTS];
        for (k, e) in ext.iter_mut().enumerate() {
            *e = (u32at(16 + 8 * k), u32at(20 + 8 * k));
        }
        let kind = u16::from_le_bytes([b[0], b[1]]);
        let damaged = if kind == 0 {
            b.iter().any(|x| *x != 0)
        } else {
            checksum(&b[..SUM]) != u64::from_le_bytes(b[SUM..INODE_SIZE].try_into().unwrap())
        };
        Inode { kind, size: u64::from_le_bytes(b[8..16].try_into().unwrap()), ext, damaged }
    }
}

/// Where things are in a segment of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub blocks: u64,
    pub inodes: u64,
    pub bitmap_start: u64,
    pub bitmap_blocks: u64,
    pub itable_start: u64,
    pub itable_blocks: u64,
    pub data_start: u64,
}

impl Geometry {
    /// One inode per 4 blocks (at least 64), as many as fill whole blocks.
    pub fn new(blocks: u64) -> Geometry {
        let bitmap_blocks = blocks.div_ceil(8 * BLOCK as u64);
        let itable_blocks = (blocks / 4).max(64).div_ceil(PER_BLOCK);
        Geometry {
            blocks,
            inodes: itable_blocks * PER_BLOCK,
            bitmap_start: 1,
            bitmap_blocks,
            itable_start: 1 + bitmap_blocks,
            itable_blocks,
            data_start: 1 + bitmap_blocks + itable_blocks,
        }
    }
}

/// A directory entry as `list` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub ino: u32,
}

/// Names: 1..=48 bytes of UTF-8, not `.` or `..`, without `/` or control characters
/// (a listing is a line per entry).
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= NAME_MAX
        && n != "."
        && n != ".."
        && !n.contains('/')
        && !n.chars().any(char::is_control)
}

/// A directory entry's bytes (`pending`: a rename's new name, not yet committed).
fn encode_entry(ino: u32, kind: Kind, name: &str, pending: bool) -> [u8; DIRENT] {
    let mut e = [0u8; DIRENT];
    e[0..4].copy_from_slice(&ino.to_le_bytes());
    e[4] = name.len() as u8;
    e[5] = kind as u8;
    e[6] = if pending { PENDING } else { 0 };
    e[8..8 + name.len()].copy_from_slice(name.as_bytes());
    let c = checksum(&e[..SUM]);
    e[SUM..].copy_from_slice(&c.to_le_bytes());
    e
}

/// A directory entry: Ok(None) if free, Err(why) if it cannot be trusted; the bool says
/// whether it is a rename's pending new name.
fn decode_entry_flagged(e: &[u8]) -> Result<Option<(u32, Kind, String, bool)>, String> {
    let ino = u32::from_le_bytes(e[0..4].try_into().unwrap());
    if ino == 0 {
        return if e.iter().all(|x| *x == 0) { Ok(None) } else { Err("a free entry that is not zeroed".into()) };
    }
    if checksum(&e[..SUM]) != u64::from_le_bytes(e[SUM..DIRENT].try_into().unwrap()) {
        return Err("checksum mismatch".into());
    }
    let kind = match e[5] {
        1 => Kind::File,
        2 => Kind::Dir,
        k => return Err(format!("unknown kind {k}")),
    };
    if e[6] & !PENDING != 0 || e[7] != 0 {
        return Err(format!("unknown entry flags {:#x}", u16::from_le_bytes([e[6], e[7]])));
    }
    let n = e[4] as usize;
    let name =
        e.get(8..8 + n).filter(|_| n <= NAME_MAX).and_then(|b| core::str::from_utf8(b).ok()).filter(|s| valid_name(s));
    match name {
        Some(name) => Ok(Some((ino, kind, name.to_string(), e[6] == PENDING))),
        None => Err("an invalid name".into()),
    }
}

/// A directory entry as the running filesystem sees it: a pending one (a rename under
/// way) is the name it will have.
fn decode_entry(e: &[u8]) -> Result<Option<(u32, Kind, String)>, String> {
    decode_entry_flagged(e).map(|o| o.map(|(i, k, n, _)| (i, k, n)))
}

/// What a look at a filesystem found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Examination {
    /// Inconsistencies a mount refuses (empty: it mounts).
    pub problems: Vec<String>,
    /// What interrupted updates left (unnamed inodes, a stale bitmap): a mount cleans it up.
    pub unfinished: Vec<String>,
}

/// How `repair` gets rid of one problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fix {
    ClearInode(u32),
    CutSize(u32, u64),
    /// Directory, entry index.
    ClearEntry(u32, u64),
    EmptyRoot,
}

/// A rename's new name found pending (written, not yet made final): the rename
/// committed when no other entry names its inode any more (the old name was cleared),
/// and is then finished (an entry of the same name it replaces cleared, the flag
/// cleared); else it is undone (the pending entry cleared).
#[derive(Clone, Debug)]
struct Pending {
    dir: u32,
    at: u64,
    ino: u32,
    kind: Kind,
    name: String,
    commit: bool,
    /// (Committed) the entry of the same name in `dir` that the rename replaces.
    replaced: Option<u64>,
}

#[derive(Default)]
struct Scan {
    problems: Vec<(String, Fix)>,
    unfinished: Vec<String>,
    orphans: Vec<u32>,
    /// Interrupted renames, to finish or undo (before the orphans are freed).
    renames: Vec<Pending>,
    /// Per block: used by metadata or a named inode.
    used: Vec<bool>,
}

/// Cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub resident: u64,
}

pub struct Fs<D: Dev> {
    pub dev: D,
    pub geo: Geometry,
    bitmap: Vec<u8>,
    inodes: Vec<Inode>,
    /// Allocation hint: where the last search for free blocks ended.
    hint: u64,
    /// The library's block cache: device block → (data, last use, pinned).
    cache: BTreeMap<u64, (alloc::boxed::Box<[u8; BLOCK]>, u64, bool)>,
    capacity: usize,
    clock: u64,
    policies: BTreeMap<u32, Policy>,
    stats: CacheStats,
    /// What interrupted updates this mount cleaned up, if anything.
    pub finished: Vec<String>,
    /// The superblock says an older version (`OLDEST`..`VERSION`): a mount writes it anew.
    upgrade: bool,
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

    fn new(dev: D, geo: Geometry) -> Fs<D> {
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

    /// Every inconsistency, and then every trace of an interrupted update, one
    /// sentence each (empty: consistent and clean).
    pub fn check(&mut self) -> Vec<String> {
        let s = self.scan();
        s.problems.into_iter().map(|p| p.0).chain(s.unfinished).collect()
    }

    /// Look at everything: what a mount must refuse (with the fix `repair` makes), and
    /// what an interrupted update left.
    fn scan(&mut self) -> Scan {
        let g = self.geo;
        let mut s = Scan { used: vec![false; g.blocks as usize], ..Scan::default() };
        let nodes = self.inodes.clone();
        if nodes[0].kind != 0 || nodes[0].damaged {
            s.problems.push(("inode 0 is in use".to_string(), Fix::ClearInode(0)));
        }
        if nodes[ROOT as usize].kind != Kind::Dir as u16 || nodes[ROOT as usize].damaged {
            s.problems.push(("the root inode is not a sound directory".to_string(), Fix::EmptyRoot));
            return s;
        }
        for (ino, n) in nodes.iter().enumerate().skip(1) {
            let ino32 = ino as u32;
            if n.damaged {
                let what = if n.kind == 0 { "a free inode that is not zeroed" } else { "checksum mismatch" };
                s.problems.push((format!("inode {ino}: {what}"), Fix::ClearInode(ino32)));
                continue;
            }
            if n.kind == 0 {
                continue;
            }
            if n.kind != Kind::File as u16 && n.kind != Kind::Dir as u16 {
                s.problems.push((format!("inode {ino} has unknown kind {}", n.kind), Fix::ClearInode(ino32)));
                continue;
            }
            if let Some((a, l)) = n
                .ext
                .iter()
                .map(|(a, l)| (*a as u64, *l as u64))
                .find(|(a, l)| *l > 0 && (*a < g.data_start || a + l > g.blocks))
            {
                s.problems.push((
                    format!("inode {ino}: extent {a}+{l} lies outside the data blocks"),
                    Fix::ClearInode(ino32),
                ));
                continue;
            }
            let cap = n.blocks() * BLOCK as u64;
            if n.size > cap {
                s.problems.push((
                    format!("inode {ino}: size {} is past its {} blocks", n.size, n.blocks()),
                    Fix::CutSize(ino32, cap),
                ));
            } else if n.kind == Kind::Dir as u16 && n.size % DIRENT as u64 != 0 {
                s.problems.push((
                    format!("directory {ino}: size {} is not a whole number of entries", n.size),
                    Fix::CutSize(ino32, n.size / DIRENT as u64 * DIRENT as u64),
                ));
            }
        }
        if !s.problems.is_empty() {
            return s;
        }
        s.renames = self.pending_renames(&nodes);
        let mut skip: Vec<(u32, u64)> = Vec::new();
        for r in &s.renames {
            let (d, i, name) = (r.dir, r.at, &r.name);
            if r.commit {
                s.unfinished.push(format!("directory {d}, entry {i}: an interrupted rename to `{name}`: finished"));
                skip.extend(r.replaced.map(|at| (d, at)));
            } else {
                s.unfinished.push(format!("directory {d}, entry {i}: an interrupted rename to `{name}`: undone"));
                skip.push((d, i));
            }
        }
        // Walk the tree: every entry sound and naming a live inode of its kind, once.
        let mut named = vec![false; nodes.len()];
        named[ROOT as usize] = true;
        let mut dirs = vec![ROOT];
        let mut owner: BTreeMap<u64, u32> = BTreeMap::new();
        while let Some(d) = dirs.pop() {
            for (a, l) in nodes[d as usize].ext {
                for b in a as u64..a as u64 + l as u64 {
                    if let Some(o) = owner.insert(b, d) {
                        s.problems
                            .push((format!("block {b} belongs to inodes {o} and {d}"), Fix::ClearInode(d.max(o))));
                    }
                }
            }
            let mut raw = vec![0u8; nodes[d as usize].size as usize];
            if self.file_read_meta(d, &mut raw).is_err() {
                s.problems.push((
                    format!("directory {d} cannot be read"),
                    if d == ROOT { Fix::EmptyRoot } else { Fix::ClearInode(d) },
                ));
                continue;
            }
            let mut names: Vec<String> = Vec::new();
            for (i, e) in raw.chunks(DIRENT).enumerate() {
                if skip.contains(&(d, i as u64)) {
                    continue;
                }
                let clear = Fix::ClearEntry(d, i as u64);
                let (ino, kind, name) = match decode_entry(e) {
                    Ok(None) => continue,
                    Ok(Some(x)) => x,
                    Err(why) => {
                        s.problems.push((format!("directory {d}, entry {i}: {why}"), clear));
                        continue;
                    }
                };
                if ino as u64 >= g.inodes || ino == ROOT {
                    s.problems.push((
                        format!("directory {d}: entry `{name}` names inode {ino}: out of range, or the root"),
                        clear,
                    ));
                } else if nodes[ino as usize].kind != kind as u16 {
                    s.problems
                        .push((format!("directory {d}: entry `{name}` disagrees with inode {ino} on its kind"), clear));
                } else if named[ino as usize] {
                    s.problems.push((format!("inode {ino} is named twice"), clear));
                } else if names.contains(&name) {
                    s.problems.push((format!("directory {d}: the name `{name}` is there twice"), clear));
                } else {
                    named[ino as usize] = true;
                    names.push(name);
                    if kind == Kind::Dir {
                        dirs.push(ino);
                    } else {
                        for (a, l) in nodes[ino as usize].ext {
                            for b in a as u64..a as u64 + l as u64 {
                                if let Some(o) = owner.insert(b, ino) {
                                    s.problems.push((
                                        format!("block {b} belongs to inodes {o} and {ino}"),
                                        Fix::ClearInode(ino.max(o)),
                                    ));
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
        if s.problems.len() > 1 && s.problems.iter().any(|p| matches!(p.1, Fix::EmptyRoot)) {
            s.problems.retain(|p| matches!(p.1, Fix::EmptyRoot));
        }
        // What an interrupted update leaves: unnamed inodes, a stale bitmap.
        for (ino, n) in nodes.iter().enumerate() {
            if n.kind != 0 && !named[ino] {
                s.unfinished.push(format!("inode {ino} is in use but no directory names it: freed"));
                s.orphans.push(ino as u32);
            }
        }
        for b in 0..g.blocks {
            s.used[b as usize] = b < g.data_start || owner.contains_key(&b);
        }
        let stale = (0..g.blocks).filter(|b| self.bit(*b) != s.used[*b as usize]).count();
        if stale > 0 {
            s.unfinished.push(format!("the bitmap disagrees with the inodes on {stale} blocks: rebuilt"));
        }
        s
    }

    /// The pending entries (renames under way when the power went) in the tree, and
    /// whether each committed: its old name is gone when no entry that is not pending
    /// names its inode.
    fn pending_renames(&mut self, nodes: &[Inode]) -> Vec<Pending> {
        let mut out = Vec::new();
        let mut named = vec![false; nodes.len()];
        let mut seen = vec![false; nodes.len()];
        // Per directory: (index, inode, name, pending).
        let mut listing: BTreeMap<u32, Vec<(u64, u32, String, bool)>> = BTreeMap::new();
        let mut dirs = vec![ROOT];
        seen[ROOT as usize] = true;
        while let Some(d) = dirs.pop() {
            let mut raw = vec![0u8; nodes[d as usize].size as usize];
            if self.file_read_meta(d, &mut raw).is_err() {
                continue;
            }
            let l = listing.entry(d).or_default();
            for (i, e) in raw.chunks(DIRENT).enumerate() {
                let Ok(Some((ino, kind, name, pending))) = decode_entry_flagged(e) else { continue };
                if ino as usize >= nodes.len() || ino == ROOT {
                    continue;
                }
                if pending {
                    out.push(Pending {
                        dir: d,
                        at: i as u64,
                        ino,
                        kind,
                        name: name.clone(),
                        commit: false,
                        replaced: None,
                    });
                } else {
                    named[ino as usize] = true;
                }
                if kind == Kind::Dir && nodes[ino as usize].kind == Kind::Dir as u16 && !seen[ino as usize] {
                    seen[ino as usize] = true;
                    dirs.push(ino);
                }
                l.push((i as u64, ino, name, pending));
            }
        }
        for p in &mut out {
            p.commit = !named[p.ino as usize];
            if p.commit {
                p.replaced = listing[&p.dir].iter().find(|e| !e.3 && e.2 == p.name && e.1 != p.ino).map(|e| e.0);
            }
        }
        out
    }

    fn bit(&self, b: u64) -> bool {
        self.bitmap[(b / 8) as usize] & (1 << (b % 8)) != 0
    }

    fn set_bit(&mut self, b: u64, v: bool) {
        let m = 1u8 << (b % 8);
        if v {
            self.bitmap[(b / 8) as usize] |= m
        } else {
            self.bitmap[(b / 8) as usize] &= !m
        }
    }

    fn write_super(&mut self) -> Result<(), Error> {
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

    fn write_bitmap_all(&mut self) -> Result<(), Error> {
        for i in 0..self.geo.bitmap_blocks {
            self.write_bitmap_block(i)?;
        }
        Ok(())
    }

    fn write_inode(&mut self, ino: u32) -> Result<(), Error> {
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
    fn find_run(&self, n: u64) -> Option<u64> {
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
    fn mark(&mut self, s: u64, n: u64, used: bool) -> Result<(), Error> {
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
    fn grow(&mut self, ino: u32, mut more: u64) -> Result<(), Error> {
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
                return Err(Error::TooFragmented);
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

    // ---- the library's cache ----

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
    fn read_block(&mut self, ino: u32, b: u64, out: &mut [u8; BLOCK]) -> Result<(), Error> {
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

    fn write_block(&mut self, ino: u32, b: u64, data: &[u8; BLOCK]) -> Result<(), Error> {
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

    // ---- files and directories ----

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

    fn file_write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        let end = off.checked_add(data.len() as u64).ok_or(Error::NoSpace)?;
        let have = self.inodes[ino as usize].blocks();
        let need = end.div_ceil(BLOCK as u64);
        if need > have {
            let r = self.grow(ino, need - have);
            // The new blocks' zeros are durable before the extent that names them (a
            // disk caching writes could otherwise keep the extent over a freed file's
            // old bytes, or over stale directory entries).
            self.dev.flush()?;
            self.write_inode(ino)?;
            r?;
        }
        let n = self.inodes[ino as usize];
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
        if end > n.size {
            self.inodes[ino as usize].size = end;
            self.write_inode(ino)?;
        }
        Ok(data.len())
    }

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

    fn file_read_meta(&mut self, d: u32, buf: &mut [u8]) -> Result<(), Error> {
        let n = self.inodes[d as usize];
        let mut blk = [0u8; BLOCK];
        for (i, chunk) in buf.chunks_mut(BLOCK).enumerate() {
            let b = n.map(i as u64).ok_or(Error::Io)?;
            self.read_block(0, b, &mut blk)?;
            chunk.copy_from_slice(&blk[..chunk.len()]);
        }
        Ok(())
    }

    /// Resolve `path` ("/a/b", or "a/b" from the root) to (parent, name, inode if any).
    fn resolve(&mut self, path: &str) -> Result<(u32, String, Option<u32>), Error> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let Some((last, dirs)) = parts.split_last() else { return Ok((ROOT, String::new(), Some(ROOT))) };
        let mut d = ROOT;
        for p in dirs {
            let e = self.entries(d)?.into_iter().find(|(_, e)| e.name == *p).ok_or(Error::NotFound)?.1;
            if e.kind != Kind::Dir {
                return Err(Error::NotDir);
            }
            d = e.ino;
        }
        let found = self.entries(d)?.into_iter().find(|(_, e)| e.name == *last).map(|(_, e)| e.ino);
        Ok((d, last.to_string(), found))
    }

    pub fn lookup(&mut self, path: &str) -> Result<u32, Error> {
        self.resolve(path)?.2.ok_or(Error::NotFound)
    }

    /// (kind, size)
    pub fn stat(&mut self, path: &str) -> Result<(Kind, u64), Error> {
        let ino = self.lookup(path)?;
        let n = self.inodes[ino as usize];
        Ok((if n.kind == Kind::Dir as u16 { Kind::Dir } else { Kind::File }, n.size))
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

    pub fn read(&mut self, path: &str, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let ino = self.lookup(path)?;
        self.read_ino(ino, off, buf)
    }

    pub fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<usize, Error> {
        let ino = self.lookup(path)?;
        self.write_ino(ino, off, data)
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

#[cfg(test)]
mod tests;
