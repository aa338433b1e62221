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
//!
//! The code, by concern: `layout` (the on-disk encodings: geometry, inodes, entries),
//! `mount` (format, mount, examine, repair) and `check` (the look at a whole filesystem
//! they share), `space` (the bitmap, metadata written back, block allocation), `cache`
//! (the library's cache and prefetch), `dir` (names: lookup, create, remove, rename),
//! `file` (a file's bytes, its extents, sync) and `error`.
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;

mod cache;
mod check;
mod dir;
mod error;
mod file;
pub mod handover;
mod layout;
mod mount;
pub mod session;
mod space;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
pub use baio::{BlockDev, BLOCK};
pub use error::Error;
pub use layout::{valid_name, Geometry};
pub use mount::Examination;

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

/// A directory entry as `list` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub ino: u32,
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

#[cfg(test)]
mod tests;
