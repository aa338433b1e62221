//! The on-disk layout and its encodings (`docs/baiofs.md`): where the bitmap, the
//! inode table and the data lie in a segment of a given size (`Geometry`), an inode's
//! 64 bytes (`Inode::encode`, `Inode::decode`), a directory entry's 64 bytes
//! (`encode_entry`, `decode_entry`, `decode_entry_flagged`) and the names an entry may
//! hold (`valid_name`).

use super::{Inode, Kind, BLOCK, DIRENT, EXTENTS, INODE_SIZE, NAME_MAX, PENDING, PER_BLOCK, SUM};
use alloc::format;
use alloc::string::{String, ToString};
use baio::checksum;

impl Inode {
    pub(crate) fn blocks(&self) -> u64 {
        self.ext.iter().map(|e| e.1 as u64).sum()
    }
    /// The device block holding file block `i`.
    pub(crate) fn map(&self, mut i: u64) -> Option<u64> {
        for (s, n) in self.ext {
            if i < n as u64 {
                return Some(s as u64 + i);
            }
            i -= n as u64;
        }
        None
    }
    pub(crate) fn encode(&self, b: &mut [u8]) {
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
    pub(crate) fn decode(b: &[u8]) -> Inode {
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
pub(crate) fn encode_entry(ino: u32, kind: Kind, name: &str, pending: bool) -> [u8; DIRENT] {
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
pub(crate) fn decode_entry_flagged(e: &[u8]) -> Result<Option<(u32, Kind, String, bool)>, String> {
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
pub(crate) fn decode_entry(e: &[u8]) -> Result<Option<(u32, Kind, String)>, String> {
    decode_entry_flagged(e).map(|o| o.map(|(i, k, n, _)| (i, k, n)))
}
