//! Scion's boot information: what the UEFI loader (`boot/uefi`) hands the kernel, the
//! one home of its layout. The PVH path (`cargo xtask run`) gives the kernel QEMU's
//! `hvm_start_info` instead; the kernel tells the two apart by the first word.
//!
//! One block of memory, below 4 GiB (the kernel's boot stub keeps its address in 32 bits),
//! little endian:
//!
//! | offset | field |
//! |---|---|
//! | 0 | `MAGIC` (u64) |
//! | 8 | `VERSION` (u32) |
//! | 12 | the block's length in bytes, tables included (u32) |
//! | 16 | physical address of the ACPI RSDP (u64; 0: none) |
//! | 24, 32 | the boot image (`bootfs`): physical address, length (u64 each) |
//! | 40, 44 | the command line: offset in the block, length (u32 each) |
//! | 48, 52 | the memory map: offset in the block, entries (u32 each) |
//! | 56, 64 | the framebuffer: physical address, length in bytes (u64 each) |
//! | 72, 76, 80 | its width and height in pixels, pixels per row (u32 each) |
//! | 84 | its pixel format ([`PixelFormat`], u32; 0: no framebuffer) |
//!
//! A memory-map entry is 24 bytes: start, length (u64 each), kind (u32: [`RAM`],
//! [`RESERVED`], [`ACPI_RECLAIM`], [`ACPI_NVS`], e820's numbers), 4 bytes of zero.
//!
//! [`kernel_image`] reads what the loader needs of the kernel's ELF: where each loadable
//! segment goes in physical memory and the 64-bit entry, which the kernel names in an
//! ELF note of its own (name `Scion`, type [`NOTE_ENTRY64`], an 8-byte address).
#![no_std]
#![forbid(unsafe_code)]

/// `SCIONBI1`, little endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SCIONBI1");
pub const VERSION: u32 = 1;
/// Bytes before the tables.
pub const HEADER_LEN: usize = 88;
/// Bytes of one memory-map entry.
pub const ENTRY_LEN: usize = 24;
/// The most memory-map entries a block may carry (a PC's firmware gives a few hundred).
pub const MAX_ENTRIES: usize = 4096;
/// The longest command line.
pub const MAX_CMDLINE: usize = 4096;

/// Memory kinds (e820's numbers).
pub const RAM: u32 = 1;
pub const RESERVED: u32 = 2;
pub const ACPI_RECLAIM: u32 = 3;
pub const ACPI_NVS: u32 = 4;

/// The ELF note type of the kernel's 64-bit entry (note name `Scion`).
pub const NOTE_ENTRY64: u32 = 0x5301;
/// The note's name, as the note holds it (with its terminating zero).
pub const NOTE_NAME: &[u8] = b"Scion\0";

/// Why a block (or a kernel ELF) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than its header, or than the length it says it has.
    TooShort,
    BadMagic,
    BadVersion,
    /// A table (command line, memory map) reaches outside the block.
    TableOutside,
    /// More entries, or a longer command line, than allowed.
    TooMany,
    /// A framebuffer whose sizes do not fit together (a row shorter than its width,
    /// pixels beyond its length, an unknown format).
    BadFramebuffer,
    /// Not a 64-bit little-endian x86_64 ELF executable, or its tables are cut.
    BadElf,
    /// The kernel ELF names no 64-bit entry (no `Scion` note).
    NoEntry64,
    /// More loadable segments than [`MAX_LOADS`].
    TooManySegments,
}

/// How a framebuffer's 32-bit pixels hold their colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelFormat {
    /// Red in the lowest byte, then green, blue, one unused.
    Rgbx = 1,
    /// Blue in the lowest byte, then green, red, one unused (most PCs, QEMU's VGA).
    Bgrx = 2,
}

/// The firmware's framebuffer (UEFI GOP), 32 bits a pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framebuffer {
    pub addr: u64,
    pub len: u64,
    pub width: u32,
    pub height: u32,
    /// Pixels from one row's start to the next's.
    pub stride: u32,
    pub format: PixelFormat,
}

/// One memory-map entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub addr: u64,
    pub len: u64,
    pub kind: u32,
}

/// What a block holds, read from it (`parse`), or what a loader writes (`write`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info<'a> {
    pub rsdp: u64,
    pub bootfs_addr: u64,
    pub bootfs_len: u64,
    pub cmdline: &'a [u8],
    /// The memory map's entries as the block holds them (`regions` reads them).
    pub memmap: &'a [u8],
    pub framebuffer: Option<Framebuffer>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(w)
}

/// The length a block says it has, from its first `HEADER_LEN` bytes (the kernel reads
/// the header first, then the whole block).
pub fn block_len(header: &[u8]) -> Result<usize, Error> {
    if header.len() < HEADER_LEN {
        return Err(Error::TooShort);
    }
    if u64_at(header, 0) != MAGIC {
        return Err(Error::BadMagic);
    }
    if u32_at(header, 8) != VERSION {
        return Err(Error::BadVersion);
    }
    let len = u32_at(header, 12) as usize;
    if len < HEADER_LEN {
        return Err(Error::TooShort);
    }
    Ok(len)
}

/// Whether `b` begins with the boot information's magic.
pub fn is_bootinfo(b: &[u8]) -> bool {
    b.len() >= 8 && u64_at(b, 0) == MAGIC
}

/// `off..off + len` inside `total` bytes, or `TableOutside`.
fn table(total: usize, off: u32, len: usize) -> Result<core::ops::Range<usize>, Error> {
    let start = off as usize;
    let end = start.checked_add(len).ok_or(Error::TableOutside)?;
    if start < HEADER_LEN || end > total {
        return Err(Error::TableOutside);
    }
    Ok(start..end)
}

/// Read a block, checking every length and offset against it.
pub fn parse(b: &[u8]) -> Result<Info<'_>, Error> {
    let len = block_len(b)?;
    if b.len() < len {
        return Err(Error::TooShort);
    }
    let b = &b[..len];
    let (cl_off, cl_len) = (u32_at(b, 40), u32_at(b, 44) as usize);
    let (mm_off, mm_count) = (u32_at(b, 48), u32_at(b, 52) as usize);
    if cl_len > MAX_CMDLINE || mm_count > MAX_ENTRIES {
        return Err(Error::TooMany);
    }
    let cmdline = if cl_len == 0 { &b[..0] } else { &b[table(len, cl_off, cl_len)?] };
    let memmap = if mm_count == 0 { &b[..0] } else { &b[table(len, mm_off, mm_count * ENTRY_LEN)?] };
    let fb = match u32_at(b, 84) {
        0 => None,
        f => {
            let format = match f {
                1 => PixelFormat::Rgbx,
                2 => PixelFormat::Bgrx,
                _ => return Err(Error::BadFramebuffer),
            };
            let fb = Framebuffer {
                addr: u64_at(b, 56),
                len: u64_at(b, 64),
                width: u32_at(b, 72),
                height: u32_at(b, 76),
                stride: u32_at(b, 80),
                format,
            };
            let bytes = (fb.stride as u64 * fb.height as u64).saturating_mul(4);
            if fb.width == 0
                || fb.height == 0
                || fb.stride < fb.width
                || bytes > fb.len
                || fb.addr.checked_add(fb.len).is_none()
            {
                return Err(Error::BadFramebuffer);
            }
            Some(fb)
        }
    };
    Ok(Info {
        rsdp: u64_at(b, 16),
        bootfs_addr: u64_at(b, 24),
        bootfs_len: u64_at(b, 32),
        cmdline,
        memmap,
        framebuffer: fb,
    })
}

impl Info<'_> {
    /// The memory map's entries.
    pub fn regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.memmap.chunks_exact(ENTRY_LEN).map(|e| Region {
            addr: u64_at(e, 0),
            len: u64_at(e, 8),
            kind: u32_at(e, 16),
        })
    }
}

/// The bytes a block with `entries` memory-map entries and a command line of
/// `cmdline` bytes takes.
pub fn len_for(entries: usize, cmdline: usize) -> usize {
    HEADER_LEN + entries * ENTRY_LEN + cmdline
}

/// Write a block into `out`: the header, the memory map `regions`, then the command
/// line. Returns its length; `TooShort` when `out` cannot hold it, `TooMany` past the
/// limits.
pub fn write(out: &mut [u8], info: &Info<'_>, regions: &[Region]) -> Result<usize, Error> {
    if regions.len() > MAX_ENTRIES || info.cmdline.len() > MAX_CMDLINE {
        return Err(Error::TooMany);
    }
    let len = len_for(regions.len(), info.cmdline.len());
    if out.len() < len {
        return Err(Error::TooShort);
    }
    let out = &mut out[..len];
    out.fill(0);
    let mm_off = HEADER_LEN;
    let cl_off = mm_off + regions.len() * ENTRY_LEN;
    let put32 = |o: &mut [u8], at: usize, v: u32| o[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |o: &mut [u8], at: usize, v: u64| o[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put64(out, 0, MAGIC);
    put32(out, 8, VERSION);
    put32(out, 12, len as u32);
    put64(out, 16, info.rsdp);
    put64(out, 24, info.bootfs_addr);
    put64(out, 32, info.bootfs_len);
    put32(out, 40, cl_off as u32);
    put32(out, 44, info.cmdline.len() as u32);
    put32(out, 48, mm_off as u32);
    put32(out, 52, regions.len() as u32);
    if let Some(fb) = info.framebuffer {
        put64(out, 56, fb.addr);
        put64(out, 64, fb.len);
        put32(out, 72, fb.width);
        put32(out, 76, fb.height);
        put32(out, 80, fb.stride);
        put32(out, 84, fb.format as u32);
    }
    for (i, r) in regions.iter().enumerate() {
        let at = mm_off + i * ENTRY_LEN;
        put64(out, at, r.addr);
        put64(out, at + 8, r.len);
        put32(out, at + 16, r.kind);
    }
    out[cl_off..cl_off + info.cmdline.len()].copy_from_slice(info.cmdline);
    Ok(len)
}

/// Add `r` to a sorted map kept in `map[..n]`, merged with the entry before it when
/// they touch and are of one kind; returns the new count (`None`: no room).
pub fn push_region(map: &mut [Region], n: usize, r: Region) -> Option<usize> {
    if r.len == 0 {
        return Some(n);
    }
    if let Some(last) = n.checked_sub(1).map(|i| &mut map[i]) {
        if last.kind == r.kind && last.addr.checked_add(last.len) == Some(r.addr) {
            last.len += r.len;
            return Some(n);
        }
    }
    *map.get_mut(n)? = r;
    Some(n + 1)
}

/// Where the loader puts a 64-bit BAR of `size` bytes (a power of two: its alignment too)
/// that the firmware placed above 4 GiB: the lowest address in `window` (start, end)
/// clear of every range in `used` (start, end), or `None` when it does not fit.
pub fn place_bar(used: &[(u64, u64)], size: u64, window: (u64, u64)) -> Option<u64> {
    if size == 0 || !size.is_power_of_two() {
        return None;
    }
    let mut at = window.0.checked_next_multiple_of(size)?;
    // Each step passes one range for good (`at` only grows), so this ends.
    while let Some(&(_, end)) = used.iter().find(|&&(s, e)| s < at.saturating_add(size) && at < e) {
        at = end.checked_next_multiple_of(size)?;
    }
    (at.checked_add(size)? <= window.1).then_some(at)
}

/// The most loadable segments `kernel_image` reads.
pub const MAX_LOADS: usize = 8;

/// One loadable segment: `filesz` bytes from `offset` in the file to physical address
/// `paddr`, then zeros up to `memsz`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    pub paddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
}

/// What a loader needs of the kernel's ELF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelImage {
    pub loads: [Load; MAX_LOADS],
    pub count: usize,
    /// The 64-bit entry's physical address (the `Scion` note).
    pub entry64: u64,
}

impl KernelImage {
    pub fn loads(&self) -> &[Load] {
        &self.loads[..self.count]
    }
}

/// Read the kernel ELF's loadable segments (at their physical addresses) and its 64-bit
/// entry, checking every offset against the file.
pub fn kernel_image(elf: &[u8]) -> Result<KernelImage, Error> {
    if elf.len() < 64 || &elf[0..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(Error::BadElf);
    }
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]);
    if u16_at(18) != 62 || u16_at(16) != 2 {
        return Err(Error::BadElf);
    }
    let phoff = u64_at(elf, 32);
    let (phentsize, phnum) = (u16_at(54) as u64, u16_at(56) as u64);
    let end = phnum.checked_mul(phentsize).and_then(|n| n.checked_add(phoff)).ok_or(Error::BadElf)?;
    if phentsize < 56 || end > elf.len() as u64 {
        return Err(Error::BadElf);
    }
    let mut img = KernelImage { loads: [Load::default(); MAX_LOADS], count: 0, entry64: 0 };
    for i in 0..phnum {
        let o = (phoff + i * phentsize) as usize;
        let kind = u32_at(elf, o);
        let (offset, paddr, filesz, memsz) =
            (u64_at(elf, o + 8), u64_at(elf, o + 24), u64_at(elf, o + 32), u64_at(elf, o + 40));
        let file_end = offset.checked_add(filesz).ok_or(Error::BadElf)?;
        if file_end > elf.len() as u64 || filesz > memsz || paddr.checked_add(memsz).is_none() {
            return Err(Error::BadElf);
        }
        match kind {
            1 if memsz > 0 => {
                if img.count == MAX_LOADS {
                    return Err(Error::TooManySegments);
                }
                img.loads[img.count] = Load { paddr, offset, filesz, memsz };
                img.count += 1;
            }
            4 => {
                if let Some(e) = entry_note(&elf[offset as usize..file_end as usize]) {
                    img.entry64 = e;
                }
            }
            _ => {}
        }
    }
    if img.entry64 == 0 {
        return Err(Error::NoEntry64);
    }
    Ok(img)
}

/// The entry address in a run of ELF notes, if one is the `Scion` entry note.
fn entry_note(mut notes: &[u8]) -> Option<u64> {
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (u32_at(notes, 0) as usize, u32_at(notes, 4) as usize, u32_at(notes, 8));
        let name_end = 12usize.checked_add(namesz)?;
        let desc_at = name_end.checked_next_multiple_of(4)?;
        let desc_end = desc_at.checked_add(descsz)?;
        if desc_end > notes.len() {
            return None;
        }
        if kind == NOTE_ENTRY64 && &notes[12..name_end] == NOTE_NAME && descsz == 8 {
            return Some(u64_at(notes, desc_at));
        }
        notes = &notes[desc_end.checked_next_multiple_of(4)?.min(notes.len())..];
    }
    None
}

#[cfg(test)]
mod tests;
