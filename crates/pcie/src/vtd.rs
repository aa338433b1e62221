//! Intel VT-d (Virtualization Technology for Directed I/O, rev. 4.x) without the
//! hardware: the ACPI DMAR table's remapping units, the root and context entries, the
//! second-level page tables a device's DMA is translated through (`Tables`: map and
//! unmap over memory the caller provides), the register offsets the capability
//! registers give, and a fault record decoded.

/// Register offsets.
pub mod reg {
    pub const VER: usize = 0x00;
    pub const CAP: usize = 0x08;
    pub const ECAP: usize = 0x10;
    pub const GCMD: usize = 0x18;
    pub const GSTS: usize = 0x1c;
    pub const RTADDR: usize = 0x20;
    pub const CCMD: usize = 0x28;
    pub const FSTS: usize = 0x34;
    pub const FECTL: usize = 0x38;
    pub const FEDATA: usize = 0x3c;
    pub const FEADDR: usize = 0x40;
    pub const FEUADDR: usize = 0x44;
}

/// Global command / status bits.
pub const GCMD_TE: u32 = 1 << 31;
pub const GCMD_SRTP: u32 = 1 << 30;
/// Status bits that are one-shot commands, never written back through GCMD.
pub const GSTS_ONE_SHOT: u32 = 0x96ff_ffff;
/// Context-command: invalidate, globally.
pub const CCMD_ICC_GLOBAL: u64 = 1 << 63 | 1 << 61;
/// IOTLB invalidate: globally, draining reads and writes.
pub const IOTLB_IVT_GLOBAL: u64 = 1 << 63 | 1 << 60 | 1 << 49 | 1 << 48;

/// One DMA remapping hardware unit (DRHD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub base: u64,
    pub segment: u16,
    /// It covers every device of its segment not claimed by another unit.
    pub include_all: bool,
}

/// The remapping units of a DMAR table (`bytes`: the whole table); None for a table
/// that is not one. Structures of other kinds (reserved memory, ATSR, …) are skipped.
pub fn units(bytes: &[u8]) -> Option<impl Iterator<Item = Unit> + '_> {
    if bytes.len() < 48 || &bytes[..4] != b"DMAR" {
        return None;
    }
    let len = (u32::from_le_bytes(bytes[4..8].try_into().ok()?) as usize).min(bytes.len());
    let mut at = 48;
    Some(core::iter::from_fn(move || loop {
        if at + 4 > len {
            return None;
        }
        let kind = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let l = u16::from_le_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
        if l < 4 || at + l > len {
            return None;
        }
        let here = at;
        at += l;
        if kind == 0 && l >= 16 {
            let b = &bytes[here..here + l];
            return Some(Unit {
                include_all: b[4] & 1 != 0,
                segment: u16::from_le_bytes([b[6], b[7]]),
                base: u64::from_le_bytes(b[8..16].try_into().ok()?),
            });
        }
    }))
}

/// Offset of the IOTLB registers (the invalidate register is the second of the pair).
pub fn iotlb_invalidate_offset(ecap: u64) -> usize {
    (((ecap >> 8) & 0x3ff) * 16 + 8) as usize
}

/// Offset of the first fault recording register and how many there are.
pub fn fault_records(cap: u64) -> (usize, usize) {
    ((((cap >> 24) & 0x3ff) * 16) as usize, ((cap >> 40) & 0xff) as usize + 1)
}

/// Levels of second-level tables to use: 4 (48-bit) if the unit offers it, else 3
/// (39-bit); None if it offers neither (SAGAW, CAP bits 12:8).
pub fn levels(cap: u64) -> Option<u8> {
    let sagaw = (cap >> 8) & 0x1f;
    if sagaw & 0b100 != 0 {
        Some(4)
    } else if sagaw & 0b010 != 0 {
        Some(3)
    } else {
        None
    }
}

/// Whether the unit can pass a device's DMA through untranslated (ECAP.PT).
pub fn passthrough(ecap: u64) -> bool {
    ecap & (1 << 6) != 0
}

/// A root entry: the context table of its bus at `context_pa`.
pub fn root_entry(context_pa: u64) -> [u64; 2] {
    [context_pa & !0xfff | 1, 0]
}

/// A context entry translating through second-level tables at `table_pa` with
/// `levels` levels, in domain `domain`.
pub fn context_entry(table_pa: u64, levels: u8, domain: u16) -> [u64; 2] {
    [table_pa & !0xfff | 1, (levels as u64 - 2) | (domain as u64) << 8]
}

/// A context entry passing the device's DMA through untranslated (a trusted device).
pub fn context_passthrough(levels: u8, domain: u16) -> [u64; 2] {
    [1 | 2 << 2, (levels as u64 - 2) | (domain as u64) << 8]
}

/// Second-level entry bits.
pub const READ: u64 = 1;
pub const WRITE: u64 = 2;
const ADDR: u64 = 0x000f_ffff_ffff_f000;

/// Memory holding translation tables: 4 KiB tables named by physical address.
pub trait Tables {
    /// A zeroed table, or None when there is no memory for one.
    fn alloc(&mut self) -> Option<u64>;
    fn read(&self, table: u64, i: usize) -> u64;
    fn write(&mut self, table: u64, i: usize, v: u64);
}

/// Why a mapping was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// An address past what `levels` translate, or not page-aligned.
    BadAddress,
    NoMemory,
}

fn index(iova: u64, level: u8) -> usize {
    ((iova >> (12 + 9 * (level as u64 - 1))) & 0x1ff) as usize
}

/// Map the 4 KiB page at `iova` to `pa` with `rights` (READ | WRITE) in the tables
/// rooted at `root` (`levels` levels), making the tables between as needed.
pub fn map(t: &mut impl Tables, root: u64, levels: u8, iova: u64, pa: u64, rights: u64) -> Result<(), MapError> {
    if iova & 0xfff != 0 || pa & 0xfff != 0 || iova >> (12 + 9 * levels as u64) != 0 {
        return Err(MapError::BadAddress);
    }
    let mut table = root;
    for level in (2..=levels).rev() {
        let i = index(iova, level);
        let e = t.read(table, i);
        table = if e & (READ | WRITE) != 0 {
            e & ADDR
        } else {
            let next = t.alloc().ok_or(MapError::NoMemory)?;
            t.write(table, i, next | READ | WRITE);
            next
        };
    }
    t.write(table, index(iova, 1), pa & ADDR | rights & (READ | WRITE));
    Ok(())
}

/// Take the page at `iova` out; the frame it named, if it was mapped.
pub fn unmap(t: &mut impl Tables, root: u64, levels: u8, iova: u64) -> Option<u64> {
    if iova >> (12 + 9 * levels as u64) != 0 {
        return None;
    }
    let mut table = root;
    for level in (2..=levels).rev() {
        let e = t.read(table, index(iova, level));
        if e & (READ | WRITE) == 0 {
            return None;
        }
        table = e & ADDR;
    }
    let i = index(iova, 1);
    let e = t.read(table, i);
    if e & (READ | WRITE) == 0 {
        return None;
    }
    t.write(table, i, 0);
    Some(e & ADDR)
}

/// What `iova` translates to now: (frame, rights).
pub fn translate(t: &impl Tables, root: u64, levels: u8, iova: u64) -> Option<(u64, u64)> {
    let mut table = root;
    for level in (1..=levels).rev() {
        let e = t.read(table, index(iova, level));
        if e & (READ | WRITE) == 0 {
            return None;
        }
        if level == 1 {
            return Some((e & ADDR, e & (READ | WRITE)));
        }
        table = e & ADDR;
    }
    None
}

/// Every table below `root` (not `root` itself), deepest first, for freeing.
pub fn tables_below(t: &impl Tables, root: u64, levels: u8, out: &mut impl FnMut(u64)) {
    fn walk(t: &impl Tables, table: u64, level: u8, out: &mut impl FnMut(u64)) {
        if level == 1 {
            return;
        }
        for i in 0..512 {
            let e = t.read(table, i);
            if e & (READ | WRITE) != 0 {
                walk(t, e & ADDR, level - 1, out);
                out(e & ADDR);
            }
        }
    }
    walk(t, root, levels, out);
}

/// A fault record (its two 64-bit halves, low first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The page the device reached for.
    pub page: u64,
    /// The requester (bus << 8 | device << 3 | function).
    pub source: u16,
    /// The reason code (VT-d appendix A; 0x05: a write to a page mapped read-only or
    /// not, 0x06: a read).
    pub reason: u8,
    /// A write (else a read).
    pub write: bool,
}

impl Fault {
    /// The record if its fault bit is set.
    pub fn decode(lo: u64, hi: u64) -> Option<Fault> {
        if hi >> 63 == 0 {
            return None;
        }
        Some(Fault {
            page: lo & !0xfff,
            source: hi as u16,
            reason: (hi >> 32) as u8,
            // T: 0 = write request, 1 = read request (the field is "type").
            write: (hi >> 62) & 1 == 0,
        })
    }
}
