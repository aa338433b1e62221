//! The BAIO device format (BAIO paper §3.3): a superblock in block 0, a free-block
//! bitmap searched from a hint for contiguous runs, and an inode table with one inode
//! per 1000 data blocks, each naming a disk segment in a flat namespace: its name,
//! owner principal, rights for the owner and for others, first block, length,
//! creation time, generation and its written mark. Segments are contiguous runs of data
//! blocks.
//!
//! **Freed blocks are never read by the next owner.** A segment's blocks at or past its
//! written mark have never been written by it, so they read as zeros whatever the
//! device holds (the block service answers such reads without the device); a write
//! past the mark first zeroes the blocks up to the new mark on the device and records
//! the mark (a flush between: a disk that caches writes may otherwise keep the mark and
//! lose the zeros), and only then writes its data, so after a crash at any point the
//! mark never covers a block holding another segment's bytes. Deleting a segment
//! scrubs nothing; creating one is free.
//!
//! **Every metadata update is one commit write, ordered by flushes.** The inode table
//! is the truth: each create, delete and written-mark move changes one inode, and the
//! write of the inode table block holding it is the update's commit point (inodes are
//! 128 bytes, so a block torn at any 512-byte sector boundary still holds every inode
//! whole, and each inode carries its own checksum). The bitmap, the superblock's free
//! count and its next generation number are derived from the inodes; a crash may leave
//! them stale, and the next mount rebuilds them from the inodes and writes them back
//! ("an interrupted update, finished"). No update relies on the device keeping write
//! order (`sync`): blocks a delete frees are cleared in the bitmap and flushed before
//! the inode write, the inode write is flushed before the bitmap marks new blocks used,
//! and `sync` returns only once the commit is durable. So every state a power cut can
//! leave — any subset of the writes since the last flush ([`crash`]) — mounts, with
//! the old or the new segment table, and a used block that no segment holds is damage
//! (refused), never an interrupted update.
//!
//! Everything here works on a [`BlockDev`], so the same code formats and checks
//! images on the host (`cargo xtask mkimage`, `cargo xtask fsck`) and mounts them in
//! the block service. A mount checks the whole device and refuses any inconsistency
//! with an error naming it; `check` lists every inconsistency; `repair` removes what
//! cannot be trusted and says what it changed.
//! The layout is documented in `docs/baio-format.md`.
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;

pub mod cache;
pub mod crash;
pub mod ldisk;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

pub const BLOCK: usize = 4096;
pub const MAGIC: u64 = u64::from_le_bytes(*b"SCBAIO01");
/// 2: inodes carry the written mark (version 1 images are refused: their segments
/// would read as zeros). 3: each inode carries a checksum.
pub const VERSION: u32 = 3;
pub const INODE_SIZE: usize = 128;
pub const INODES_PER_BLOCK: u64 = (BLOCK / INODE_SIZE) as u64;
pub const NAME_MAX: usize = 64;
/// One inode per this many data blocks (the paper's 1/1000).
pub const BLOCKS_PER_INODE: u64 = 1000;

/// Generation numbers stay below this (a hostile image cannot make them wrap).
pub const GENERATION_LIMIT: u64 = 1 << 62;

/// Rights bits for the owner and for others.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

/// A disk. Its writes may be cached and reach stable storage in any order (a power cut
/// may keep any subset of the writes since the last flush, `crash`): code that needs
/// one write on the disk before another puts a `flush` between them.
pub trait BlockDev {
    fn blocks(&self) -> u64;
    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), Error>;
    fn write(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), Error>;
    /// Returns once every write before it is on stable storage (a barrier: a device
    /// with a volatile write cache may otherwise make later writes durable first).
    fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Write zeros over blocks `first .. first + n` (a device may do it in larger pieces).
    fn write_zeros(&mut self, first: u64, n: u64) -> Result<(), Error> {
        let z = [0u8; BLOCK];
        for b in first..first + n {
            self.write(b, &z)?;
        }
        Ok(())
    }
}

/// A device in memory (host tools and tests).
pub struct MemDev(pub Vec<u8>);

impl BlockDev for MemDev {
    fn blocks(&self) -> u64 {
        (self.0.len() / BLOCK) as u64
    }
    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), Error> {
        let at = block as usize * BLOCK;
        let src = self.0.get(at..at + BLOCK).ok_or(Error::Io)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), Error> {
        let at = block as usize * BLOCK;
        self.0.get_mut(at..at + BLOCK).ok_or(Error::Io)?.copy_from_slice(buf);
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Io,
    TooSmall,
    /// Mount refused: the device is not a consistent BAIO device (the text says why).
    Corrupt(String),
    BadName,
    NameTaken,
    NoSpace,
    NoInode,
    OverQuota,
    NotFound,
}

/// Where things are on a device of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub total_blocks: u64,
    pub bitmap_start: u64,
    pub bitmap_blocks: u64,
    pub inode_start: u64,
    pub inode_blocks: u64,
    pub inode_count: u64,
    pub data_start: u64,
    pub data_blocks: u64,
}

impl Layout {
    /// The layout for `total` blocks, or None if the device is too small.
    pub fn for_blocks(total: u64) -> Option<Layout> {
        if total < 8 {
            return None;
        }
        // Solve for data blocks: total = 1 + bitmap + inode blocks + data.
        let mut data = total - 1;
        loop {
            let bitmap_blocks = data.div_ceil(BLOCK as u64 * 8);
            let inode_count = (data / BLOCKS_PER_INODE).max(1);
            let inode_blocks = inode_count.div_ceil(INODES_PER_BLOCK);
            // Checked: a hostile superblock may claim up to 2^64 - 1 blocks.
            let need = 1u64.checked_add(bitmap_blocks)?.checked_add(inode_blocks)?.checked_add(data)?;
            if need <= total {
                return Some(Layout {
                    total_blocks: total,
                    bitmap_start: 1,
                    bitmap_blocks,
                    inode_start: 1 + bitmap_blocks,
                    inode_blocks,
                    inode_count,
                    data_start: 1 + bitmap_blocks + inode_blocks,
                    data_blocks: total - (1 + bitmap_blocks + inode_blocks),
                });
            }
            data -= (need - total).max(1);
            if data == 0 {
                return None;
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub name: String,
    pub owner: u32,
    pub rights_owner: u8,
    pub rights_other: u8,
    /// First block (absolute block number on the device).
    pub start: u64,
    pub length: u64,
    pub ctime: u64,
    pub generation: u64,
    /// Blocks `0..written` of the segment may hold its data; the rest read as zeros.
    pub written: u64,
}

impl Inode {
    /// Rights `principal` has on this segment.
    pub fn rights_for(&self, principal: u32) -> u8 {
        if principal == self.owner {
            self.rights_owner
        } else {
            self.rights_other
        }
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn encode_inode(i: &Inode, out: &mut [u8]) {
    out.fill(0);
    out[0..4].copy_from_slice(&1u32.to_le_bytes()); // in use
    out[4..8].copy_from_slice(&i.owner.to_le_bytes());
    out[8] = i.rights_owner;
    out[9] = i.rights_other;
    out[10] = i.name.len() as u8;
    out[16..16 + i.name.len()].copy_from_slice(i.name.as_bytes());
    out[80..88].copy_from_slice(&i.start.to_le_bytes());
    out[88..96].copy_from_slice(&i.length.to_le_bytes());
    out[96..104].copy_from_slice(&i.ctime.to_le_bytes());
    out[104..112].copy_from_slice(&i.generation.to_le_bytes());
    out[112..120].copy_from_slice(&i.written.to_le_bytes());
    let c = checksum(&out[..INODE_SUM]);
    out[INODE_SUM..INODE_SIZE].copy_from_slice(&c.to_le_bytes());
}

/// Where an inode's checksum lies (it covers the bytes before it).
const INODE_SUM: usize = 120;

/// Decode one inode slot: Ok(None) if free (all zeros), Err(why) if malformed.
fn decode_inode(b: &[u8]) -> Result<Option<Inode>, String> {
    match u32_at(b, 0) {
        0 if b.iter().all(|x| *x == 0) => return Ok(None),
        0 => return Err("a free inode that is not all zeros".into()),
        1 => {}
        f => return Err(format!("unknown inode flags {f:#x}")),
    }
    if checksum(&b[..INODE_SUM]) != u64_at(b, INODE_SUM) {
        return Err("checksum mismatch (a damaged inode: its owner, rights or extent cannot be trusted)".into());
    }
    let n = b[10] as usize;
    if n == 0 || n > NAME_MAX {
        return Err(format!("name length {n}"));
    }
    let name = core::str::from_utf8(&b[16..16 + n]).map_err(|_| "name is not UTF-8".to_string())?;
    if !valid_name(name) {
        return Err(format!("invalid name {name:?}"));
    }
    if b[8] & !(READ | WRITE) != 0 || b[9] & !(READ | WRITE) != 0 {
        return Err("unknown rights bits".into());
    }
    Ok(Some(Inode {
        name: name.to_string(),
        owner: u32_at(b, 4),
        rights_owner: b[8],
        rights_other: b[9],
        start: u64_at(b, 80),
        length: u64_at(b, 88),
        ctime: u64_at(b, 96),
        generation: u64_at(b, 104),
        written: u64_at(b, 112),
    }))
}

/// Segment names: 1..=64 bytes of printable ASCII other than space and '/'.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= NAME_MAX && n.bytes().all(|c| c.is_ascii_graphic() && c != b'/')
}

/// FNV-1a 64 over `b`: the format's checksum (superblock, inodes), also what tests
/// use to name a block's contents in a line of text.
pub fn checksum(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A mounted BAIO device: layout, bitmap and inodes in memory.
pub struct Volume {
    pub layout: Layout,
    bitmap: Vec<u8>,
    inodes: Vec<Option<Inode>>,
    names: BTreeMap<String, usize>,
    pub hint: u64,
    pub next_generation: u64,
    dirty_inodes: Vec<usize>,
    /// The bitmap as the device holds it (what `sync` last wrote or the mount read):
    /// `sync` writes the blocks that differ, frees before the inodes, the rest after.
    disk_bitmap: Vec<u8>,
    /// Interrupted updates this mount finished (derived metadata rebuilt), if any.
    pub finished: Vec<String>,
}

/// What `Volume::examine` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Examination {
    /// Inconsistencies a mount refuses (empty: the device mounts).
    pub problems: Vec<String>,
    /// Derived metadata left stale by an interrupted update: a mount rebuilds it.
    pub unfinished: Vec<String>,
}

impl Volume {
    /// Write an empty BAIO device.
    pub fn format(dev: &mut impl BlockDev) -> Result<Volume, Error> {
        let l = Layout::for_blocks(dev.blocks()).ok_or(Error::TooSmall)?;
        let v = Volume {
            layout: l,
            bitmap: vec![0u8; (l.bitmap_blocks as usize) * BLOCK],
            inodes: vec![None; l.inode_count as usize],
            names: BTreeMap::new(),
            hint: 0,
            next_generation: 1,
            dirty_inodes: (0..l.inode_count as usize).collect(),
            // Whatever the device holds: every bitmap block is written (as frees).
            disk_bitmap: vec![0xff; (l.bitmap_blocks as usize) * BLOCK],
            finished: Vec::new(),
        };
        let mut v = v;
        v.sync(dev)?;
        Ok(v)
    }

    fn superblock(&self) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        let l = &self.layout;
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(BLOCK as u32).to_le_bytes());
        let fields = [
            l.total_blocks,
            l.inode_count,
            l.bitmap_start,
            l.bitmap_blocks,
            l.inode_start,
            l.inode_blocks,
            l.data_start,
            l.data_blocks,
            self.hint,
            self.free_blocks(),
            self.next_generation,
        ];
        for (i, f) in fields.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&f.to_le_bytes());
        }
        let end = 16 + 8 * fields.len();
        let c = checksum(&b[..end]);
        b[end..end + 8].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Write what changed, in an order that a disk caching writes cannot undo: the
    /// bitmap blocks whose blocks were freed (freed only: a segment's blocks are free
    /// on the device before its inode goes), a flush, the inode-table blocks (the
    /// commit), a flush, then the bitmap's newly used blocks and the superblock (derived:
    /// a cut may lose them, and the next mount rebuilds them). When it returns, every
    /// update made before it is durable. So a block marked used on the device always
    /// belongs to a segment whose inode is durable: a mount that finds one no segment
    /// holds finds damage, not an interrupted update.
    pub fn sync(&mut self, dev: &mut impl BlockDev) -> Result<(), Error> {
        let mut freed = false;
        for k in 0..self.layout.bitmap_blocks as usize {
            let r = k * BLOCK..(k + 1) * BLOCK;
            if self.disk_bitmap[r.clone()].iter().zip(&self.bitmap[r.clone()]).any(|(d, n)| d & !n != 0) {
                let mut b = [0u8; BLOCK];
                for (i, x) in b.iter_mut().enumerate() {
                    *x = self.disk_bitmap[r.start + i] & self.bitmap[r.start + i];
                }
                dev.write(self.layout.bitmap_start + k as u64, &b)?;
                self.disk_bitmap[r].copy_from_slice(&b);
                freed = true;
            }
        }
        if freed {
            dev.flush()?;
        }
        let mut blocks: Vec<u64> = self.dirty_inodes.iter().map(|i| *i as u64 / INODES_PER_BLOCK).collect();
        blocks.sort_unstable();
        blocks.dedup();
        for &ib in &blocks {
            let mut b = [0u8; BLOCK];
            for k in 0..INODES_PER_BLOCK as usize {
                let idx = ib as usize * INODES_PER_BLOCK as usize + k;
                if let Some(Some(i)) = self.inodes.get(idx) {
                    encode_inode(i, &mut b[k * INODE_SIZE..(k + 1) * INODE_SIZE]);
                }
            }
            dev.write(self.layout.inode_start + ib, &b)?;
        }
        if !blocks.is_empty() {
            dev.flush()?;
        }
        self.dirty_inodes.clear();
        for k in 0..self.layout.bitmap_blocks as usize {
            let r = k * BLOCK..(k + 1) * BLOCK;
            if self.disk_bitmap[r.clone()] != self.bitmap[r.clone()] {
                let b: &[u8; BLOCK] = self.bitmap[r.clone()].try_into().unwrap();
                dev.write(self.layout.bitmap_start + k as u64, b)?;
                self.disk_bitmap[r].copy_from_slice(b);
            }
        }
        dev.write(0, &self.superblock())
    }

    fn used(&self, data_idx: u64) -> bool {
        self.bitmap[(data_idx / 8) as usize] & (1 << (data_idx % 8)) != 0
    }

    fn set(&mut self, data_idx: u64, used: bool) {
        let (b, bit) = ((data_idx / 8) as usize, data_idx % 8);
        if used {
            self.bitmap[b] |= 1 << bit;
        } else {
            self.bitmap[b] &= !(1 << bit);
        }
    }

    pub fn free_blocks(&self) -> u64 {
        (0..self.layout.data_blocks).filter(|i| !self.used(*i)).count() as u64
    }

    /// Mount: read and check everything; refuse an inconsistent device. Derived
    /// metadata left stale by an interrupted update (bitmap, free count, next
    /// generation) is rebuilt from the inodes and written back; `finished` says what.
    pub fn mount(dev: &mut impl BlockDev) -> Result<Volume, Error> {
        let (mut v, problems, unfinished) = Self::load(dev, false)?;
        if let Some(p) = problems.first() {
            return Err(Error::Corrupt(p.clone()));
        }
        if !unfinished.is_empty() {
            v.sync(dev)?;
            v.finished = unfinished;
        }
        Ok(v)
    }

    /// Every inconsistency on the device that a mount refuses (empty: it mounts).
    pub fn check(dev: &mut impl BlockDev) -> Vec<String> {
        Self::examine(dev).problems
    }

    /// What a look at the device finds: inconsistencies, and interrupted updates.
    pub fn examine(dev: &mut impl BlockDev) -> Examination {
        match Self::load(dev, false) {
            Ok((_, problems, unfinished)) => Examination { problems, unfinished },
            Err(Error::Corrupt(why)) => Examination { problems: vec![why], unfinished: Vec::new() },
            Err(e) => Examination { problems: vec![format!("{e:?}")], unfinished: Vec::new() },
        }
    }

    /// Make the device mountable, keeping every segment that can be trusted: a
    /// damaged superblock is rewritten from the device's size (when the magic and
    /// version are right), damaged inodes and segments outside the data area are
    /// removed, of two segments that share blocks or a name the later slot is removed,
    /// a written mark past the end is cut to the segment's length, and the derived
    /// metadata is rebuilt. Returns the volume and one sentence per change.
    pub fn repair(dev: &mut impl BlockDev) -> Result<(Volume, Vec<String>), Error> {
        let (mut v, mut changes, unfinished) = Self::load(dev, true)?;
        changes.extend(unfinished);
        if !changes.is_empty() {
            v.dirty_inodes = (0..v.inodes.len()).collect();
            v.sync(dev)?;
        }
        Ok((v, changes))
    }

    /// Read the device. Returns the volume (derived metadata rebuilt from the
    /// inodes), the inconsistencies (with `repair`: the changes made to get rid of
    /// them, in memory), and the interrupted updates found.
    fn load(dev: &mut impl BlockDev, repair: bool) -> Result<(Volume, Vec<String>, Vec<String>), Error> {
        let mut sb = [0u8; BLOCK];
        if dev.blocks() < 8 {
            return Err(Error::Corrupt(format!("device of {} blocks is too small", dev.blocks())));
        }
        dev.read(0, &mut sb)?;
        if u64_at(&sb, 0) != MAGIC {
            return Err(Error::Corrupt("bad magic: not a BAIO device".into()));
        }
        if u32_at(&sb, 8) != VERSION {
            return Err(Error::Corrupt(format!("unknown version {} (this is version {VERSION})", u32_at(&sb, 8))));
        }
        let mut problems = Vec::new();
        let mut unfinished = Vec::new();
        let (l, hint, free_recorded, next_generation) = match Self::superblock_fields(&sb, dev.blocks()) {
            Ok(x) => x,
            Err(why) if repair => {
                let l = Layout::for_blocks(dev.blocks()).ok_or(Error::TooSmall)?;
                problems.push(format!("{why}: the superblock is rewritten for the device's {} blocks", dev.blocks()));
                (l, 0, None, 1)
            }
            Err(why) => return Err(Error::Corrupt(why)),
        };
        let mut bitmap = vec![0u8; (l.bitmap_blocks as usize) * BLOCK];
        let mut b = [0u8; BLOCK];
        for k in 0..l.bitmap_blocks as usize {
            dev.read(l.bitmap_start + k as u64, &mut b)?;
            bitmap[k * BLOCK..(k + 1) * BLOCK].copy_from_slice(&b);
        }
        let mut inodes: Vec<Option<Inode>> = vec![None; l.inode_count as usize];
        for ib in 0..l.inode_blocks {
            dev.read(l.inode_start + ib, &mut b)?;
            for k in 0..INODES_PER_BLOCK as usize {
                let idx = ib as usize * INODES_PER_BLOCK as usize + k;
                if idx >= inodes.len() {
                    break;
                }
                match decode_inode(&b[k * INODE_SIZE..(k + 1) * INODE_SIZE]) {
                    Ok(i) => inodes[idx] = i,
                    Err(why) if repair => problems.push(format!("inode {idx}: {why}: removed")),
                    Err(why) => problems.push(format!("inode {idx}: {why}")),
                }
            }
        }
        let mut v = Volume {
            layout: l,
            disk_bitmap: bitmap.clone(),
            bitmap,
            inodes,
            names: BTreeMap::new(),
            hint: if hint < l.data_blocks { hint } else { 0 },
            next_generation,
            dirty_inodes: Vec::new(),
            finished: Vec::new(),
        };
        if hint >= l.data_blocks {
            unfinished.push(format!("free-list hint {hint} is past the data area"));
        }
        // Segments: names unique, ranges in the data area, no overlaps. With `repair`
        // a segment that breaks one of these is dropped (or its mark cut).
        let drop = |v: &mut Volume, idx: usize| {
            v.inodes[idx] = None;
        };
        let mut claimed = vec![false; l.data_blocks as usize];
        let mut max_generation = 0;
        for idx in 0..v.inodes.len() {
            let Some(i) = v.inodes[idx].clone() else { continue };
            let gone = if repair { ": removed" } else { "" };
            if v.names.contains_key(&i.name) {
                problems.push(format!("inode {idx}: name {:?} used twice{gone}", i.name));
                if repair {
                    drop(&mut v, idx);
                    continue;
                }
            }
            let end = i.start.checked_add(i.length);
            if i.length == 0 || i.start < l.data_start || end.is_none_or(|e| e > l.total_blocks) {
                problems.push(format!(
                    "segment {:?}: blocks {}+{} lie outside the data area{gone}",
                    i.name, i.start, i.length
                ));
                if repair {
                    drop(&mut v, idx);
                }
                continue;
            }
            let d0 = (i.start - l.data_start) as usize;
            if let Some(k) = claimed[d0..d0 + i.length as usize].iter().position(|c| *c) {
                problems.push(format!(
                    "segment {:?}: block {} belongs to another segment too{gone}",
                    i.name,
                    i.start + k as u64
                ));
                if repair {
                    drop(&mut v, idx);
                    continue;
                }
            }
            if i.written > i.length {
                if repair {
                    problems.push(format!(
                        "segment {:?}: written mark {} past its {} blocks: cut to its length",
                        i.name, i.written, i.length
                    ));
                    v.inodes[idx].as_mut().unwrap().written = i.length;
                } else {
                    problems
                        .push(format!("segment {:?}: written mark {} past its {} blocks", i.name, i.written, i.length));
                }
            }
            if i.generation >= GENERATION_LIMIT {
                problems.push(format!("inode {idx}: generation {} is out of range{gone}", i.generation));
                if repair {
                    drop(&mut v, idx);
                    continue;
                }
            }
            v.names.insert(i.name.clone(), idx);
            if i.generation < GENERATION_LIMIT {
                max_generation = max_generation.max(i.generation);
            }
            if i.generation >= next_generation && i.generation < GENERATION_LIMIT {
                unfinished.push(format!(
                    "inode {idx}: generation {} not below the next one ({next_generation})",
                    i.generation
                ));
            }
            let free = (i.start..i.start + i.length).filter(|blk| !v.used(blk - l.data_start)).count();
            if free > 0 {
                unfinished.push(format!("segment {:?}: {free} of its blocks are free in the bitmap", i.name));
            }
            claimed[d0..d0 + i.length as usize].fill(true);
        }
        // A delete frees its blocks in the bitmap before its inode goes (`sync`), so no
        // interrupted update leaves a used block no segment holds: it is damage (an
        // inode-table block zeroed or lost looks just like that). A mount refuses it
        // rather than free what may be segments it cannot see; repair frees them.
        let stray = (0..l.data_blocks).filter(|d| v.used(*d) && !claimed[*d as usize]).count();
        if stray > 0 {
            let why = format!("{stray} blocks are used in the bitmap but belong to no segment (no interrupted update leaves that: a damaged inode table?)");
            problems.push(if repair { format!("{why}: freed") } else { why });
        }
        let free = claimed.iter().filter(|c| !**c).count() as u64;
        if let Some(free_recorded) = free_recorded.filter(|r| *r != free) {
            unfinished.push(format!("superblock records {free_recorded} free blocks, the inodes leave {free}"));
        }
        // The derived metadata, from the inodes.
        if !unfinished.is_empty() || repair {
            for (d, c) in claimed.iter().enumerate() {
                v.set(d as u64, *c);
            }
            // Below GENERATION_LIMIT (out-of-range generations were refused above).
            v.next_generation = v.next_generation.max(max_generation + 1);
        }
        Ok((v, problems, unfinished))
    }

    /// The superblock's layout, hint, free count and next generation, or why not.
    fn superblock_fields(sb: &[u8], device_blocks: u64) -> Result<(Layout, u64, Option<u64>, u64), String> {
        if u32_at(sb, 12) as usize != BLOCK {
            return Err(format!("block size {} (expected {BLOCK})", u32_at(sb, 12)));
        }
        let f = |i: usize| u64_at(sb, 16 + 8 * i);
        let end = 16 + 8 * 11;
        if checksum(&sb[..end]) != u64_at(sb, end) {
            return Err("superblock checksum mismatch".into());
        }
        let total = f(0);
        if total > device_blocks {
            return Err(format!("superblock says {} blocks, the device has {}", total, device_blocks));
        }
        let expect = Layout::for_blocks(total).ok_or_else(|| format!("total of {total} blocks is too small"))?;
        let got = Layout {
            total_blocks: total,
            inode_count: f(1),
            bitmap_start: f(2),
            bitmap_blocks: f(3),
            inode_start: f(4),
            inode_blocks: f(5),
            data_start: f(6),
            data_blocks: f(7),
        };
        if got != expect {
            return Err("superblock layout is inconsistent".into());
        }
        if f(10) > GENERATION_LIMIT {
            return Err(format!("next generation {} is out of range", f(10)));
        }
        // A stale count is an interrupted update; one past the data area, damage.
        let (free, data) = (f(9), expect.data_blocks);
        if free > data {
            return Err(format!("superblock records {free} free blocks, more than its {data} data blocks"));
        }
        Ok((expect, f(8), Some(f(9)), f(10)))
    }
    pub fn lookup(&self, name: &str) -> Option<&Inode> {
        self.names.get(name).and_then(|i| self.inodes[*i].as_ref())
    }

    pub fn list(&self) -> impl Iterator<Item = &Inode> {
        self.inodes.iter().flatten()
    }

    /// Blocks held by `owner`'s segments.
    pub fn usage(&self, owner: u32) -> u64 {
        self.list().filter(|i| i.owner == owner).map(|i| i.length).sum()
    }

    /// First fit from the hint (wrapping once) for `len` contiguous free data blocks.
    fn find_run(&self, len: u64) -> Option<u64> {
        let n = self.layout.data_blocks;
        if len == 0 || len > n {
            return None;
        }
        let mut start = self.hint;
        let mut scanned = 0;
        while scanned < n + len {
            if start + len > n {
                scanned += n - start;
                start = 0;
                continue;
            }
            match (start..start + len).find(|d| self.used(*d)) {
                None => return Some(start),
                Some(u) => {
                    scanned += u + 1 - start;
                    start = u + 1;
                }
            }
        }
        None
    }

    /// Create a segment of `len` blocks. `quota`: the most blocks `owner` may hold.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        name: &str,
        owner: u32,
        rights_owner: u8,
        rights_other: u8,
        len: u64,
        quota: u64,
        now: u64,
    ) -> Result<&Inode, Error> {
        if !valid_name(name) || (rights_owner | rights_other) & !(READ | WRITE) != 0 {
            return Err(Error::BadName);
        }
        if self.names.contains_key(name) {
            return Err(Error::NameTaken);
        }
        if self.usage(owner).saturating_add(len) > quota {
            return Err(Error::OverQuota);
        }
        let slot = self.inodes.iter().position(|i| i.is_none()).ok_or(Error::NoInode)?;
        if self.next_generation >= GENERATION_LIMIT {
            return Err(Error::NoInode);
        }
        let d = self.find_run(len).ok_or(Error::NoSpace)?;
        for k in d..d + len {
            self.set(k, true);
        }
        self.hint = if d + len >= self.layout.data_blocks { 0 } else { d + len };
        let ino = Inode {
            name: name.to_string(),
            owner,
            rights_owner,
            rights_other,
            start: self.layout.data_start + d,
            length: len,
            ctime: now,
            generation: self.next_generation,
            written: 0,
        };
        self.next_generation += 1;
        self.inodes[slot] = Some(ino);
        self.names.insert(name.to_string(), slot);
        self.dirty_inodes.push(slot);
        Ok(self.inodes[slot].as_ref().unwrap())
    }

    /// Move segment `name`'s written mark up to `blocks` (never down, never past its
    /// length). The caller must have zeroed (or written) the blocks from the old mark on
    /// the device first; `sync` records it.
    pub fn set_written(&mut self, name: &str, blocks: u64) -> Result<(), Error> {
        let slot = *self.names.get(name).ok_or(Error::NotFound)?;
        let ino = self.inodes[slot].as_mut().ok_or(Error::NotFound)?;
        let w = blocks.min(ino.length);
        if w > ino.written {
            ino.written = w;
            self.dirty_inodes.push(slot);
        }
        Ok(())
    }

    /// Move segment `name`'s written mark to at least `end` (and `ahead` blocks past the
    /// old mark, within the segment): zero the blocks from the old mark on the device,
    /// flush, then record the mark. In this order a power cut at any moment, even on a
    /// disk that caches writes, leaves the mark over no block that still holds an
    /// earlier segment's bytes. Returns the new mark.
    pub fn extend_written(&mut self, dev: &mut impl BlockDev, name: &str, end: u64, ahead: u64) -> Result<u64, Error> {
        let i = self.lookup(name).ok_or(Error::NotFound)?;
        let (start, len, written) = (i.start, i.length, i.written);
        if end <= written {
            return Ok(written);
        }
        let to = end.max(written.saturating_add(ahead)).min(len);
        dev.write_zeros(start + written, to - written)?;
        dev.flush()?;
        self.set_written(name, to)?;
        self.sync(dev)?;
        Ok(to)
    }

    pub fn delete(&mut self, name: &str) -> Result<Inode, Error> {
        let slot = self.names.remove(name).ok_or(Error::NotFound)?;
        let ino = self.inodes[slot].take().ok_or(Error::NotFound)?;
        for b in ino.start..ino.start + ino.length {
            self.set(b - self.layout.data_start, false);
        }
        let d = ino.start - self.layout.data_start;
        if d < self.hint {
            self.hint = d;
        }
        self.dirty_inodes.push(slot);
        Ok(ino)
    }
}

#[cfg(test)]
mod tests;
