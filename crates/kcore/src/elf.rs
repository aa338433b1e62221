//! ELF64 executable parsing with every check a loader needs before it trusts
//! the file: header fields, program header bounds, segment bounds within the
//! file and within user space, no overlap, sane alignment. Used by the kernel
//! (root task) and by root (every other program).

use abi::layout::{is_user_range, PAGE_SIZE};

pub const MAX_SEGMENTS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfError {
    TooShort,
    BadMagic,
    NotElf64,
    NotLittleEndian,
    NotX86_64,
    NotExecutable,
    BadPhdrTable,
    TooManySegments,
    SegmentOutsideFile,
    SegmentOutsideUser,
    FileSizeExceedsMemSize,
    Misaligned,
    Overlap,
    NoSegments,
    BadEntry,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub memsz: u64,
    pub offset: u64,
    pub filesz: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
}

impl Segment {
    /// First page and one past the last page the segment touches.
    pub fn page_range(&self) -> (u64, u64) {
        let start = self.vaddr & !(PAGE_SIZE - 1);
        let end = (self.vaddr + self.memsz).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        (start, end)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elf {
    pub entry: u64,
    pub segments: [Segment; MAX_SEGMENTS],
    pub count: usize,
}

impl Elf {
    pub fn segments(&self) -> &[Segment] {
        &self.segments[..self.count]
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;

pub fn parse(b: &[u8]) -> Result<Elf, ElfError> {
    if b.len() < 64 {
        return Err(ElfError::TooShort);
    }
    if &b[0..4] != b"\x7fELF" {
        return Err(ElfError::BadMagic);
    }
    if b[4] != 2 {
        return Err(ElfError::NotElf64);
    }
    if b[5] != 1 {
        return Err(ElfError::NotLittleEndian);
    }
    if u16_at(b, 18) != 62 {
        return Err(ElfError::NotX86_64);
    }
    if u16_at(b, 16) != 2 {
        return Err(ElfError::NotExecutable);
    }
    let entry = u64_at(b, 24);
    let phoff = u64_at(b, 32);
    let phentsize = u16_at(b, 54) as u64;
    let phnum = u16_at(b, 56) as u64;
    if phentsize < 56 {
        return Err(ElfError::BadPhdrTable);
    }
    let table_end = phnum.checked_mul(phentsize).and_then(|n| n.checked_add(phoff)).ok_or(ElfError::BadPhdrTable)?;
    if table_end > b.len() as u64 {
        return Err(ElfError::BadPhdrTable);
    }
    let mut elf = Elf { entry, segments: [Segment::default(); MAX_SEGMENTS], count: 0 };
    for i in 0..phnum {
        let o = (phoff + i * phentsize) as usize;
        if u32_at(b, o) != PT_LOAD {
            continue;
        }
        let flags = u32_at(b, o + 4);
        let s = Segment {
            offset: u64_at(b, o + 8),
            vaddr: u64_at(b, o + 16),
            filesz: u64_at(b, o + 32),
            memsz: u64_at(b, o + 40),
            read: flags & PF_R != 0,
            write: flags & PF_W != 0,
            exec: flags & PF_X != 0,
        };
        let align = u64_at(b, o + 48);
        if s.memsz == 0 {
            continue;
        }
        if elf.count == MAX_SEGMENTS {
            return Err(ElfError::TooManySegments);
        }
        if s.filesz > s.memsz {
            return Err(ElfError::FileSizeExceedsMemSize);
        }
        match s.offset.checked_add(s.filesz) {
            Some(end) if end <= b.len() as u64 => {}
            _ => return Err(ElfError::SegmentOutsideFile),
        }
        if !is_user_range(s.vaddr, s.memsz) {
            return Err(ElfError::SegmentOutsideUser);
        }
        if align > 1 && (!align.is_power_of_two() || s.vaddr % align != s.offset % align) {
            return Err(ElfError::Misaligned);
        }
        let (ps, pe) = s.page_range();
        for other in elf.segments() {
            let (os, oe) = other.page_range();
            if ps < oe && os < pe {
                return Err(ElfError::Overlap);
            }
        }
        elf.segments[elf.count] = s;
        elf.count += 1;
    }
    if elf.count == 0 {
        return Err(ElfError::NoSegments);
    }
    if !elf.segments().iter().any(|s| s.exec && entry >= s.vaddr && entry < s.vaddr + s.memsz) {
        return Err(ElfError::BadEntry);
    }
    Ok(elf)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::vec::Vec;

    /// Build a minimal ELF64 executable with the given (vaddr, memsz, filesz, flags) segments.
    pub fn build(entry: u64, segs: &[(u64, u64, u64, u32)]) -> Vec<u8> {
        let phoff = 64u64;
        let mut data_off = phoff + 56 * segs.len() as u64;
        data_off = data_off.div_ceil(4096) * 4096;
        let mut out = std::vec![0u8; data_off as usize];
        out[0..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[16..18].copy_from_slice(&2u16.to_le_bytes());
        out[18..20].copy_from_slice(&62u16.to_le_bytes());
        out[24..32].copy_from_slice(&entry.to_le_bytes());
        out[32..40].copy_from_slice(&phoff.to_le_bytes());
        out[54..56].copy_from_slice(&56u16.to_le_bytes());
        out[56..58].copy_from_slice(&(segs.len() as u16).to_le_bytes());
        let mut off = data_off;
        for (i, (vaddr, memsz, filesz, flags)) in segs.iter().enumerate() {
            let o = 64 + 56 * i;
            // keep offset congruent to vaddr modulo the page size
            let file_off = off + (vaddr % 4096);
            out[o..o + 4].copy_from_slice(&1u32.to_le_bytes());
            out[o + 4..o + 8].copy_from_slice(&flags.to_le_bytes());
            out[o + 8..o + 16].copy_from_slice(&file_off.to_le_bytes());
            out[o + 16..o + 24].copy_from_slice(&vaddr.to_le_bytes());
            out[o + 32..o + 40].copy_from_slice(&filesz.to_le_bytes());
            out[o + 40..o + 48].copy_from_slice(&memsz.to_le_bytes());
            out[o + 48..o + 56].copy_from_slice(&4096u64.to_le_bytes());
            out.resize((file_off + filesz) as usize, 0xAB);
            off = (file_off + filesz).div_ceil(4096) * 4096;
        }
        out
    }

    #[test]
    fn good_file() {
        let b = build(0x401000, &[(0x400000, 0x2000, 0x2000, PF_R | PF_X), (0x403000, 0x5000, 0x100, PF_R | PF_W)]);
        let e = parse(&b).unwrap();
        assert_eq!(e.count, 2);
        assert_eq!(e.entry, 0x401000);
        assert!(e.segments()[1].write && !e.segments()[1].exec);
    }

    #[test]
    fn every_defect_is_refused() {
        let good = build(0x401000, &[(0x400000, 0x2000, 0x2000, PF_R | PF_X)]);
        let mut b = good.clone();
        b[0] = 0;
        assert_eq!(parse(&b), Err(ElfError::BadMagic));
        let mut b = good.clone();
        b[4] = 1;
        assert_eq!(parse(&b), Err(ElfError::NotElf64));
        let mut b = good.clone();
        b[18] = 3;
        assert_eq!(parse(&b), Err(ElfError::NotX86_64));
        let mut b = good.clone();
        b[16] = 3;
        assert_eq!(parse(&b), Err(ElfError::NotExecutable));
        let mut b = good.clone();
        b[56..58].copy_from_slice(&0xffffu16.to_le_bytes());
        assert_eq!(parse(&b), Err(ElfError::BadPhdrTable));
        assert_eq!(parse(&good[..40]), Err(ElfError::TooShort));
        assert_eq!(parse(&good[..good.len() - 1]), Err(ElfError::SegmentOutsideFile));
        assert_eq!(
            parse(&build(0xffff_8000_0000_1000, &[(0xffff_8000_0000_0000, 0x2000, 0x10, PF_R | PF_X)])),
            Err(ElfError::SegmentOutsideUser)
        );
        assert_eq!(parse(&build(0x0, &[(0x0, 0x2000, 0x10, PF_R | PF_X)])), Err(ElfError::SegmentOutsideUser));
        assert_eq!(
            parse(&build(0x401000, &[(0x400000, 0x10, 0x20, PF_R | PF_X)])),
            Err(ElfError::FileSizeExceedsMemSize)
        );
        assert_eq!(
            parse(&build(0x400000, &[(0x400000, 0x2000, 0x10, PF_R | PF_X), (0x401000, 0x10, 0x10, PF_R)])),
            Err(ElfError::Overlap)
        );
        assert_eq!(parse(&build(0x900000, &[(0x400000, 0x2000, 0x10, PF_R | PF_X)])), Err(ElfError::BadEntry));
        assert_eq!(parse(&build(0x400000, &[(0x400000, 0x2000, 0x10, PF_R | PF_W)])), Err(ElfError::BadEntry));
        assert_eq!(parse(&build(0x400000, &[])), Err(ElfError::NoSegments));
    }

    #[test]
    fn fuzz_never_panics() {
        let good = build(0x401000, &[(0x400000, 0x2000, 0x2000, PF_R | PF_X), (0x403000, 0x5000, 0x100, PF_R | PF_W)]);
        let mut seed = 7u64;
        for _ in 0..20_000 {
            let mut b = good.clone();
            for _ in 0..4 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                let pos = (seed >> 20) as usize % 200;
                b[pos] = (seed >> 50) as u8;
            }
            if let Ok(e) = parse(&b) {
                for s in e.segments() {
                    assert!(s.offset + s.filesz <= b.len() as u64);
                    assert!(is_user_range(s.vaddr, s.memsz));
                }
            }
        }
    }
}
