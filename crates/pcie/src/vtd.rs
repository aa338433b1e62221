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
    /// The invalidation queue's head, tail and address registers.
    pub const IQH: usize = 0x80;
    pub const IQT: usize = 0x88;
    pub const IQA: usize = 0x90;
    /// The interrupt remapping table's address register.
    pub const IRTA: usize = 0xb8;
}

/// Global command / status bits.
pub const GCMD_TE: u32 = 1 << 31;
pub const GCMD_SRTP: u32 = 1 << 30;
/// Queued invalidation on (status: QIES).
pub const GCMD_QIE: u32 = 1 << 26;
/// Interrupt remapping on (status: IRES).
pub const GCMD_IRE: u32 = 1 << 25;
/// Set the interrupt remapping table pointer (one-shot; status: IRTPS).
pub const GCMD_SIRTP: u32 = 1 << 24;
/// Compatibility-format interrupts let through (status: CFIS); Scion leaves it clear.
pub const GCMD_CFI: u32 = 1 << 23;
/// Fault status: an invalidation queue error.
pub const FSTS_IQE: u32 = 1 << 4;
/// Status bits that are one-shot commands, never written back through GCMD.
pub const GSTS_ONE_SHOT: u32 = 0x96ff_ffff;
/// Context-command: invalidate, globally.
pub const CCMD_ICC_GLOBAL: u64 = 1 << 63 | 1 << 61;
/// IOTLB invalidate: globally, draining reads and writes.
pub const IOTLB_IVT_GLOBAL: u64 = 1 << 63 | 1 << 60 | 1 << 49 | 1 << 48;

/// One DMA remapping hardware unit (DRHD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit<'a> {
    pub base: u64,
    pub segment: u16,
    /// It covers every device of its segment not claimed by another unit.
    pub include_all: bool,
    /// Its device scope entries, unparsed (`scopes` reads them).
    pub scope: &'a [u8],
}

impl<'a> Unit<'a> {
    /// The unit's device scopes; a broken entry ends the list.
    pub fn scopes(&self) -> impl Iterator<Item = Scope> + 'a {
        let b = self.scope;
        let mut at = 0;
        core::iter::from_fn(move || {
            let e = b.get(at..)?;
            let l = *e.get(1)? as usize;
            if l < 6 || l > e.len() || !l.is_multiple_of(2) {
                return None;
            }
            at += l;
            let mut s =
                Scope { kind: e[0], enumeration_id: e[4], start_bus: e[5], path: [(0, 0); SCOPE_PATH], hops: 0 };
            for hop in e[6..l].chunks_exact(2) {
                if s.hops as usize == SCOPE_PATH {
                    return None;
                }
                s.path[s.hops as usize] = (hop[0], hop[1]);
                s.hops += 1;
            }
            Some(s)
        })
    }
}

/// Device scope kinds.
pub const SCOPE_ENDPOINT: u8 = 1;
/// A bridge, and every device below it.
pub const SCOPE_BRIDGE: u8 = 2;
pub const SCOPE_IOAPIC: u8 = 3;
pub const SCOPE_HPET: u8 = 4;
/// Bridges a scope may go through at most, plus one.
pub const SCOPE_PATH: usize = 8;

/// One device scope entry of a remapping unit: a device named by the bus its path
/// starts on and the (device, function) hops from there, each hop but the last a
/// bridge whose secondary bus the next hop is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub kind: u8,
    /// The IOAPIC's or HPET's id (kinds 3 and 4).
    pub enumeration_id: u8,
    pub start_bus: u8,
    pub path: [(u8, u8); SCOPE_PATH],
    pub hops: u8,
}

impl Scope {
    /// The device the path leads to, following each bridge on it to its secondary bus
    /// (`buses(bridge)`: its secondary and subordinate bus, None if it is no bridge).
    pub fn device(&self, buses: &impl Fn(crate::Bdf) -> Option<(u8, u8)>) -> Option<crate::Bdf> {
        let (last, through) = self.path[..self.hops as usize].split_last()?;
        let mut bus = self.start_bus;
        for &(dev, func) in through {
            bus = buses(crate::Bdf { bus, dev, func })?.0;
        }
        Some(crate::Bdf { bus, dev: last.0, func: last.1 })
    }

    /// Whether `bdf` is in the scope: the endpoint itself, or a bridge and every bus
    /// from its secondary to its subordinate one.
    pub fn covers(&self, bdf: crate::Bdf, buses: &impl Fn(crate::Bdf) -> Option<(u8, u8)>) -> bool {
        let Some(d) = self.device(buses) else { return false };
        match self.kind {
            SCOPE_ENDPOINT => d == bdf,
            SCOPE_BRIDGE => d == bdf || buses(d).is_some_and(|(lo, hi)| (lo..=hi).contains(&bdf.bus)),
            _ => false,
        }
    }
}

/// Which unit remaps device `bdf` of `segment`: among `units` (segment, include-all,
/// scopes), the first whose scope covers it, else the segment's include-all unit; None
/// if none does (its DMA is not remapped). The index is in `units`' order.
pub fn unit_of<'s>(
    units: impl IntoIterator<Item = (u16, bool, &'s [Scope])> + Clone,
    segment: u16,
    bdf: crate::Bdf,
    buses: &impl Fn(crate::Bdf) -> Option<(u8, u8)>,
) -> Option<usize> {
    let mut all = None;
    for (i, (seg, include_all, scopes)) in units.into_iter().enumerate() {
        if seg != segment {
            continue;
        }
        if scopes.iter().any(|s| s.covers(bdf, buses)) {
            return Some(i);
        }
        if include_all && all.is_none() {
            all = Some(i);
        }
    }
    all
}

/// The remapping units of a DMAR table (`bytes`: the whole table); None for a table
/// that is not one. Structures of other kinds (reserved memory, ATSR, …) are skipped.
pub fn units(bytes: &[u8]) -> Option<impl Iterator<Item = Unit<'_>> + '_> {
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
                scope: &b[16..],
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

/// Whether the unit offers queued invalidation (ECAP.QI) and interrupt remapping
/// (ECAP.IR); the interrupt entry cache can only be invalidated through the queue.
pub fn interrupt_remapping(ecap: u64) -> bool {
    ecap & (1 << 1) != 0 && ecap & (1 << 3) != 0
}

/// The DMAR table's flags: bit 0, the platform supports interrupt remapping.
pub fn dmar_intr_remap(bytes: &[u8]) -> bool {
    bytes.len() >= 48 && bytes[37] & 1 != 0
}

/// Entries of the interrupt remapping table Scion uses (one 4 KiB page of 16-byte
/// entries, handle = interrupt number).
pub const IRT_ENTRIES: usize = 256;

/// The IRTA register: the table at `table_pa`, `IRT_ENTRIES` entries (2^(S+1)), xAPIC
/// destinations (EIME clear).
pub fn irta(table_pa: u64) -> u64 {
    table_pa & !0xfff | (IRT_ENTRIES.trailing_zeros() as u64 - 1)
}

/// The IQA register: a queue of 256 128-bit descriptors (one page) at `queue_pa`.
pub fn iqa(queue_pa: u64) -> u64 {
    queue_pa & !0xfff
}

/// Descriptors the invalidation queue holds (one 4 KiB page of 16-byte ones).
pub const QUEUE_ENTRIES: usize = 256;

/// Invalidation descriptors (two 64-bit words, low first).
pub mod inv {
    /// Every context-cache entry (type 1, global granularity).
    pub const CONTEXT_GLOBAL: [u64; 2] = [1 | 1 << 4, 0];
    /// Every IOTLB entry (type 2, global, draining reads and writes).
    pub const IOTLB_GLOBAL: [u64; 2] = [2 | 1 << 4 | 1 << 6 | 1 << 7, 0];
    /// Every interrupt entry cache entry (type 4, global granularity).
    pub const IEC_GLOBAL: [u64; 2] = [4, 0];

    /// A wait descriptor (type 5) that writes `data` to the 4-byte-aligned `status_pa`
    /// once every descriptor before it is done.
    pub fn wait(status_pa: u64, data: u32) -> [u64; 2] {
        [5 | 1 << 5 | (data as u64) << 32, status_pa & !3]
    }
}

/// Where an interrupt remapping table entry sends its interrupt, and who may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Irte {
    pub vector: u8,
    /// The local APIC id (xAPIC, physical destination).
    pub apic_id: u8,
    pub level: bool,
    /// The only requester (bus << 8 | device << 3 | function) whose messages may use
    /// the entry; a message through it from anyone else is blocked by the unit.
    pub source: u16,
}

impl Irte {
    /// The entry's two words (present, fixed delivery, physical destination; the
    /// requester id verified in full: SVT 01, SQ 00).
    pub fn encode(&self) -> [u64; 2] {
        let lo = 1 | (self.level as u64) << 4 | (self.vector as u64) << 16 | (self.apic_id as u64) << 40;
        let hi = self.source as u64 | 1 << 18;
        [lo, hi]
    }

    /// The entry back from its words, if present and in the form `encode` makes.
    pub fn decode(e: [u64; 2]) -> Option<Irte> {
        if e[0] & 1 == 0 || (e[1] >> 16) & 0xf != 0b0100 {
            return None;
        }
        Some(Irte {
            vector: (e[0] >> 16) as u8,
            apic_id: (e[0] >> 40) as u8,
            level: e[0] & 1 << 4 != 0,
            source: e[1] as u16,
        })
    }
}

/// The address and data of a message in remappable format through entry `handle`
/// (VT-d 5.1.5.2: interrupt format bit 4, handle bits 19:5 and 2, no subhandle).
pub fn remappable_message(handle: u16) -> (u64, u32) {
    let h = handle as u64;
    (0xFEE0_0000 | (h & 0x7fff) << 5 | 1 << 4 | (h >> 15) << 2, 0)
}

/// What a message's address says: Some(handle) for the remappable format, None for
/// the compatibility format.
pub fn message_handle(address: u64, data: u32) -> Option<u16> {
    if address & 1 << 4 == 0 {
        return None;
    }
    let h = ((address >> 5) & 0x7fff | ((address >> 2) & 1) << 15) as u16;
    // With SHV (bit 3) the data's low 16 bits are added.
    Some(if address & 1 << 3 != 0 { h.wrapping_add(data as u16) } else { h })
}

/// The high half of an IOAPIC redirection entry in remappable format through entry
/// `handle` (bit 48: format, bits 63:49: handle 14:0); the low half keeps the vector,
/// trigger, polarity and mask, with handle bit 15 at bit 11.
pub fn ioapic_remappable_high(handle: u16) -> u32 {
    1 << 16 | ((handle as u32) & 0x7fff) << 17
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

    /// An interrupt remapping fault (reasons 0x20..=0x27: a message through an entry
    /// that is absent, malformed, or not the requester's; a compatibility-format one
    /// blocked), rather than a DMA one.
    pub fn is_interrupt(&self) -> bool {
        (0x20..=0x27).contains(&self.reason)
    }

    /// The remapping table entry an interrupt fault names (the fault info's top bits).
    pub fn entry(&self) -> u16 {
        (self.page >> 48) as u16
    }
}
