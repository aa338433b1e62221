//! The boot image: a flat archive of named files, built by `cargo xtask` on the
//! host, loaded by QEMU as the PVH module (`-initrd`), mapped read-only into the
//! root task. The kernel takes `root` out of it; root takes everything else.
//!
//! Layout (little endian):
//! ```text
//! 0   magic "SCIONBFS"
//! 8   version: u32 (= 1)
//! 12  count: u32
//! 16  total length: u64
//! 24  reserved (8 bytes)
//! 32  entries[count]: name [u8; 48] NUL-padded, offset u64, size u64  (64 bytes each)
//! ... file data, each file at a 4096-aligned offset
//! ```
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;

use alloc::vec::Vec;

pub const MAGIC: &[u8; 8] = b"SCIONBFS";
pub const VERSION: u32 = 1;
pub const HEADER: usize = 32;
pub const ENTRY: usize = 64;
pub const NAME_LEN: usize = 48;
pub const MAX_FILES: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    TooShort,
    BadMagic,
    BadVersion,
    TooManyFiles,
    BadLength,
    BadName,
    FileOutOfBounds,
}

#[derive(Clone, Copy)]
pub struct BootFs<'a> {
    data: &'a [u8],
    count: usize,
}

#[derive(Clone, Copy, Debug)]
pub struct File<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

impl<'a> BootFs<'a> {
    /// Check the whole image (header, every entry) once; afterwards lookups cannot fail
    /// on malformed data.
    pub fn parse(data: &'a [u8]) -> Result<BootFs<'a>, Error> {
        if data.len() < HEADER {
            return Err(Error::TooShort);
        }
        if &data[0..8] != MAGIC {
            return Err(Error::BadMagic);
        }
        if u32_at(data, 8) != VERSION {
            return Err(Error::BadVersion);
        }
        let count = u32_at(data, 12) as usize;
        if count > MAX_FILES {
            return Err(Error::TooManyFiles);
        }
        let total = u64_at(data, 16);
        if total > data.len() as u64 || (total as usize) < HEADER + count * ENTRY {
            return Err(Error::BadLength);
        }
        let data = &data[..total as usize];
        let fs = BootFs { data, count };
        for i in 0..count {
            fs.entry(i)?;
        }
        Ok(fs)
    }

    fn entry(&self, i: usize) -> Result<File<'a>, Error> {
        let o = HEADER + i * ENTRY;
        let raw = &self.data[o..o + NAME_LEN];
        let len = raw.iter().position(|c| *c == 0).unwrap_or(NAME_LEN);
        let name = core::str::from_utf8(&raw[..len]).map_err(|_| Error::BadName)?;
        if name.is_empty() {
            return Err(Error::BadName);
        }
        let off = u64_at(self.data, o + NAME_LEN);
        let size = u64_at(self.data, o + NAME_LEN + 8);
        let end = off.checked_add(size).ok_or(Error::FileOutOfBounds)?;
        if end > self.data.len() as u64 {
            return Err(Error::FileOutOfBounds);
        }
        Ok(File { name, data: &self.data[off as usize..end as usize] })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn files(&self) -> impl Iterator<Item = File<'a>> + '_ {
        (0..self.count).filter_map(move |i| self.entry(i).ok())
    }

    pub fn find(&self, name: &str) -> Option<File<'a>> {
        self.files().find(|f| f.name == name)
    }
}

/// Builds an image (host side, and tests).
#[derive(Default)]
pub struct Builder {
    files: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    pub fn add(&mut self, name: &str, data: &[u8]) -> Result<(), Error> {
        if name.is_empty() || name.len() > NAME_LEN || name.as_bytes().contains(&0) {
            return Err(Error::BadName);
        }
        if self.files.len() == MAX_FILES {
            return Err(Error::TooManyFiles);
        }
        self.files.push((name.as_bytes().to_vec(), data.to_vec()));
        Ok(())
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = alloc::vec![0u8; HEADER + ENTRY * self.files.len()];
        out[0..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(self.files.len() as u32).to_le_bytes());
        for (i, (name, data)) in self.files.iter().enumerate() {
            let off = out.len().div_ceil(4096) * 4096;
            out.resize(off, 0);
            out.extend_from_slice(data);
            let e = HEADER + i * ENTRY;
            out[e..e + name.len()].copy_from_slice(name);
            out[e + NAME_LEN..e + NAME_LEN + 8].copy_from_slice(&(off as u64).to_le_bytes());
            out[e + NAME_LEN + 8..e + ENTRY].copy_from_slice(&(data.len() as u64).to_le_bytes());
        }
        let total = out.len() as u64;
        out[16..24].copy_from_slice(&total.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn roundtrip() {
        let mut b = Builder::new();
        b.add("root", b"\x7fELF...").unwrap();
        b.add("init", b"run hello\n").unwrap();
        let img = b.build();
        let fs = BootFs::parse(&img).unwrap();
        assert_eq!(fs.len(), 2);
        assert_eq!(fs.find("init").unwrap().data, b"run hello\n");
        assert!(fs.find("nope").is_none());
        assert_eq!(b.add("", b""), Err(Error::BadName));
    }

    #[test]
    fn corrupt_images_refused() {
        let mut b = Builder::new();
        b.add("a", &[1; 100]).unwrap();
        let img = b.build();
        assert_eq!(BootFs::parse(&img[..10]).err(), Some(Error::TooShort));
        let mut bad = img.clone();
        bad[0] = b'X';
        assert_eq!(BootFs::parse(&bad).err(), Some(Error::BadMagic));
        let mut bad = img.clone();
        bad[12] = 200;
        assert_eq!(BootFs::parse(&bad).err(), Some(Error::BadLength));
        let mut bad = img.clone();
        bad[HEADER + NAME_LEN + 8] = 0xff; // size far past the end
        bad[HEADER + NAME_LEN + 9] = 0xff;
        assert_eq!(BootFs::parse(&bad).err(), Some(Error::FileOutOfBounds));
        let mut bad = img.clone();
        bad[HEADER] = 0xff; // not UTF-8
        assert_eq!(BootFs::parse(&bad).err(), Some(Error::BadName));
    }

    #[test]
    fn fuzz_header_never_panics() {
        let mut b = Builder::new();
        b.add("x", &[7; 300]).unwrap();
        b.add("y", &[8; 5000]).unwrap();
        let img = b.build();
        let mut s = 99u64;
        for _ in 0..20_000 {
            let mut m = img.clone();
            for _ in 0..3 {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(11);
                let p = (s >> 24) as usize % (HEADER + 2 * ENTRY);
                m[p] = (s >> 56) as u8;
            }
            if let Ok(fs) = BootFs::parse(&m) {
                for f in fs.files() {
                    let _ = f.data.len();
                }
            }
        }
    }
}
