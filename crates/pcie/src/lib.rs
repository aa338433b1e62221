//! PCI Express without the hardware: what the kernel needs to give a user-level driver
//! its device and nothing more. The kernel reads and writes configuration space (ECAM
//! or the legacy ports) through [`Config`]; everything that decides something is here,
//! host-tested:
//!
//! - [`mcfg`]: the ACPI MCFG table's ECAM regions and a function's address in them;
//! - [`capabilities`]: a function's capability list, walked with every pointer checked
//!   (a loop or a pointer into the header ends the walk, never a hang);
//! - [`Msix`] and [`Msi`]: the message-signalled interrupt capabilities, the MSI-X
//!   table's place in its BAR checked against the BAR's size;
//! - [`message`]: the address and data of a message for a local APIC and vector;
//! - [`may_write`]: which configuration writes a driver may make (never the BARs,
//!   never the MSI/MSI-X capabilities, which the kernel programs on its behalf);
//! - [`Vectors`]: the allocator of message-signalled interrupt numbers.
#![cfg_attr(not(test), no_std)]

#[cfg(test)]
mod tests;

pub mod mcfg;
pub mod vtd;

/// A function's configuration space, 32 bits at a time (`off` 4-aligned, below 4096;
/// the legacy ports reach only the first 256 bytes and read the rest as all ones).
pub trait Config {
    fn read32(&self, off: u16) -> u32;
    fn write32(&mut self, off: u16, v: u32);
}

/// Bus, device, function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bdf {
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl Bdf {
    /// The 16-bit routing id (bus << 8 | dev << 3 | func), as in a VT-d source id.
    pub fn id(self) -> u16 {
        (self.bus as u16) << 8 | (self.dev as u16 & 31) << 3 | (self.func as u16 & 7)
    }

    pub fn from_id(id: u16) -> Bdf {
        Bdf { bus: (id >> 8) as u8, dev: ((id >> 3) & 31) as u8, func: (id & 7) as u8 }
    }
}

/// What is wrong with a device's configuration space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The capability list loops or points into the header.
    BadCapabilityList,
    /// The MSI-X table or pending-bit array names a BAR that is not a memory BAR.
    MsixBadBar,
    /// The MSI-X table (or its pending bits) reaches past the end of its BAR.
    MsixTableOutsideBar,
    /// An MSI-X table entry index past the table's size.
    NoSuchEntry,
}

/// Capability ids.
pub mod cap_id {
    pub const MSI: u8 = 0x05;
    pub const PCIE: u8 = 0x10;
    pub const MSIX: u8 = 0x11;
}

/// Command register bits a driver may set: I/O space, memory space, bus master,
/// INTx disable. The rest (SERR, parity, …) stay as the firmware left them.
pub const COMMAND_DRIVER_BITS: u16 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 10;
pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;

/// A function's capabilities: (id, offset) of each, in list order. The walk stops at
/// the end of the list, at a pointer into the header (below 0x40) or past 0xFF, and
/// after 48 entries (a 192-byte area holds no more): a list that loops yields at most 48.
pub fn capabilities(cfg: &impl Config) -> Capabilities<'_, impl Config> {
    let status = (cfg.read32(0x04) >> 16) as u16;
    let next = if status & (1 << 4) != 0 { (cfg.read32(0x34) & 0xfc) as u16 } else { 0 };
    Capabilities { cfg, next, left: 48, broken: false }
}

pub struct Capabilities<'a, C: Config> {
    cfg: &'a C,
    next: u16,
    left: u32,
    broken: bool,
}

impl<C: Config> Capabilities<'_, C> {
    /// Whether the walk stopped at a bad pointer or a loop (after it ended).
    pub fn broken(&self) -> bool {
        self.broken
    }
}

impl<C: Config> Iterator for Capabilities<'_, C> {
    type Item = (u8, u16);
    fn next(&mut self) -> Option<(u8, u16)> {
        if self.next == 0 {
            return None;
        }
        if !(0x40..=0xfc).contains(&self.next) || self.left == 0 {
            self.broken = true;
            self.next = 0;
            return None;
        }
        self.left -= 1;
        let at = self.next;
        let v = self.cfg.read32(at);
        self.next = ((v >> 8) & 0xfc) as u16;
        Some((v as u8, at))
    }
}

/// The offset of the first capability with `id`, or None; a broken list is an error.
pub fn find(cfg: &impl Config, id: u8) -> Result<Option<u16>, Error> {
    let mut caps = capabilities(cfg);
    let found = caps.by_ref().find(|c| c.0 == id).map(|c| c.1);
    if found.is_none() && caps.broken() {
        return Err(Error::BadCapabilityList);
    }
    Ok(found)
}

/// A base address register, decoded and sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// Memory: physical address, size in bytes, 64-bit (takes the next register too),
    /// prefetchable.
    Mem { base: u64, size: u64, wide: bool, prefetchable: bool },
    /// I/O ports: first port, number of ports.
    Io { base: u16, size: u16 },
    /// Not implemented (or the upper half of a 64-bit BAR).
    None,
}

/// Decode and size BAR `i` (0..6): all ones are written and read back with memory and
/// I/O decoding off, then the original values are put back.
pub fn bar(cfg: &mut impl Config, i: u8) -> Bar {
    if i >= 6 {
        return Bar::None;
    }
    let off = 0x10 + 4 * i as u16;
    let cmd = cfg.read32(0x04);
    cfg.write32(0x04, cmd & 0xffff & !0b11);
    let lo = cfg.read32(off);
    cfg.write32(off, !0);
    let lo_mask = cfg.read32(off);
    cfg.write32(off, lo);
    let out = if lo & 1 == 1 {
        let mask = lo_mask & !0x3 & 0xffff;
        if mask == 0 {
            Bar::None
        } else {
            Bar::Io { base: (lo & !0x3) as u16, size: (!mask).wrapping_add(1) as u16 }
        }
    } else {
        let wide = (lo >> 1) & 3 == 2 && i < 5;
        let (base, mask) = if wide {
            let hi = cfg.read32(off + 4);
            cfg.write32(off + 4, !0);
            let hi_mask = cfg.read32(off + 4);
            cfg.write32(off + 4, hi);
            ((hi as u64) << 32 | (lo & !0xf) as u64, (hi_mask as u64) << 32 | (lo_mask & !0xf) as u64)
        } else {
            ((lo & !0xf) as u64, 0xffff_ffff_0000_0000 | (lo_mask & !0xf) as u64)
        };
        if mask & 0xffff_ffff == 0 && !wide || mask == 0 {
            Bar::None
        } else {
            Bar::Mem { base, size: (!mask).wrapping_add(1), wide, prefetchable: lo & 8 != 0 }
        }
    };
    cfg.write32(0x04, cmd & 0xffff);
    out
}

/// An MSI-X capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msix {
    /// Offset of the capability in configuration space.
    pub at: u16,
    /// Entries in the table.
    pub entries: u16,
    pub table_bar: u8,
    pub table_offset: u32,
    pub pba_bar: u8,
    pub pba_offset: u32,
}

/// Message control bits of MSI-X.
const MSIX_ENABLE: u32 = 1 << 31;
const MSIX_FUNCTION_MASK: u32 = 1 << 30;
/// Bytes per MSI-X table entry; the vector control word's offset and its mask bit.
pub const MSIX_ENTRY: u64 = 16;
pub const MSIX_VECTOR_CONTROL: u64 = 12;
pub const MSIX_MASKED: u32 = 1;

impl Msix {
    /// The function's MSI-X capability, if it has one.
    pub fn of(cfg: &impl Config) -> Result<Option<Msix>, Error> {
        let Some(at) = find(cfg, cap_id::MSIX)? else { return Ok(None) };
        let ctl = cfg.read32(at);
        let table = cfg.read32(at + 4);
        let pba = cfg.read32(at + 8);
        Ok(Some(Msix {
            at,
            entries: ((ctl >> 16) & 0x7ff) as u16 + 1,
            table_bar: (table & 7) as u8,
            table_offset: table & !7,
            pba_bar: (pba & 7) as u8,
            pba_offset: pba & !7,
        }))
    }

    /// Check the table and pending bits against their BARs (`bars[i]`, as [`bar`]
    /// sized them): the offset of the table in its BAR, or the error.
    pub fn check(&self, bars: &[Bar; 6]) -> Result<u64, Error> {
        let size_of = |b: u8| match bars.get(b as usize) {
            Some(Bar::Mem { size, .. }) => Ok(*size),
            _ => Err(Error::MsixBadBar),
        };
        let table_end = self.table_offset as u64 + self.entries as u64 * MSIX_ENTRY;
        if table_end > size_of(self.table_bar)? {
            return Err(Error::MsixTableOutsideBar);
        }
        let pba_end = self.pba_offset as u64 + (self.entries as u64).div_ceil(64) * 8;
        if pba_end > size_of(self.pba_bar)? {
            return Err(Error::MsixTableOutsideBar);
        }
        Ok(self.table_offset as u64)
    }

    /// Offset of entry `i` in the table's BAR.
    pub fn entry_offset(&self, i: u16) -> Result<u64, Error> {
        if i >= self.entries {
            return Err(Error::NoSuchEntry);
        }
        Ok(self.table_offset as u64 + i as u64 * MSIX_ENTRY)
    }

    /// Turn MSI-X on (every entry's own mask bit decides) and INTx off.
    pub fn enable(&self, cfg: &mut impl Config) {
        let ctl = cfg.read32(self.at);
        cfg.write32(self.at, (ctl | MSIX_ENABLE) & !MSIX_FUNCTION_MASK);
        let cmd = cfg.read32(0x04) & 0xffff;
        cfg.write32(0x04, cmd | COMMAND_INTX_DISABLE as u32);
    }

    pub fn enabled(&self, cfg: &impl Config) -> bool {
        cfg.read32(self.at) & MSIX_ENABLE != 0
    }
}

/// An MSI capability (one vector used: multiple-message enable left at 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msi {
    pub at: u16,
    /// 64-bit message address.
    pub wide: bool,
    /// Per-vector masking.
    pub maskable: bool,
}

const MSI_ENABLE: u32 = 1 << 16;

impl Msi {
    pub fn of(cfg: &impl Config) -> Result<Option<Msi>, Error> {
        let Some(at) = find(cfg, cap_id::MSI)? else { return Ok(None) };
        let ctl = cfg.read32(at);
        Ok(Some(Msi { at, wide: ctl & (1 << 23) != 0, maskable: ctl & (1 << 24) != 0 }))
    }

    /// Bytes of the capability (what a driver may not write).
    pub fn bytes(&self) -> u16 {
        match (self.wide, self.maskable) {
            (false, false) => 12,
            (true, false) => 16,
            (false, true) => 20,
            (true, true) => 24,
        }
    }

    fn data_at(&self) -> u16 {
        self.at + if self.wide { 12 } else { 8 }
    }

    /// Program one message (`address`, `data`) and turn MSI on, INTx off.
    pub fn program(&self, cfg: &mut impl Config, address: u64, data: u32) {
        let ctl = cfg.read32(self.at);
        cfg.write32(self.at, ctl & !MSI_ENABLE & !(7 << 20));
        cfg.write32(self.at + 4, address as u32);
        if self.wide {
            cfg.write32(self.at + 8, (address >> 32) as u32);
        }
        let d = self.data_at();
        let keep = cfg.read32(d) & 0xffff_0000;
        cfg.write32(d, keep | (data & 0xffff));
        if self.maskable {
            cfg.write32(d + 4, 0);
        }
        cfg.write32(self.at, (ctl & !(7 << 20)) | MSI_ENABLE);
        let cmd = cfg.read32(0x04) & 0xffff;
        cfg.write32(0x04, cmd | COMMAND_INTX_DISABLE as u32);
    }

    /// Mask or unmask its one vector, if it can be masked (returns whether it could).
    pub fn set_masked(&self, cfg: &mut impl Config, masked: bool) -> bool {
        if !self.maskable {
            return false;
        }
        cfg.write32(self.data_at() + 4, masked as u32);
        true
    }
}

/// The address and data of a message to local APIC `apic_id`, vector `vector`
/// (fixed delivery, edge, physical destination): Intel SDM vol. 3, 11.11.
pub fn message(apic_id: u32, vector: u8) -> (u64, u32) {
    (0xFEE0_0000 | ((apic_id as u64 & 0xff) << 12), vector as u32)
}

/// Whether a driver may write the 4 bytes at `off` (4-aligned) of its function's
/// configuration space, and with what value: the command register's driver bits
/// (`COMMAND_DRIVER_BITS`; the status half is written as zeros, which clears
/// nothing), and the device-specific area from 0x40 on but for the MSI and MSI-X
/// capabilities (`protected`: (offset, length) of each, which the kernel programs).
/// Everything else of the header (BARs, the expansion ROM, bus numbers of a bridge,
/// the interrupt line) is the kernel's: None.
pub fn may_write(off: u16, value: u32, old: u32, protected: &[(u16, u16)]) -> Option<u32> {
    if off & 3 != 0 || off >= 4096 {
        return None;
    }
    if off == 0x04 {
        let keep = old as u16 & !COMMAND_DRIVER_BITS;
        return Some((keep | value as u16 & COMMAND_DRIVER_BITS) as u32);
    }
    if off < 0x40 {
        return None;
    }
    let inside = protected.iter().any(|&(at, len)| off + 4 > at && off < at + len);
    (!inside).then_some(value)
}

/// Message-signalled interrupt numbers: `N` of them (at most 64), each owned by one
/// (device, MSI-X entry) — the same pair asking again gets the same number back, so a
/// driver that restarts takes up its vectors again instead of using up more.
pub struct Vectors<const N: usize> {
    owner: [Option<(u16, u16)>; N],
}

impl<const N: usize> Default for Vectors<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Vectors<N> {
    pub const fn new() -> Self {
        Vectors { owner: [None; N] }
    }

    /// The number for entry `entry` of device `bdf`: the one it had, or a free one.
    pub fn get(&mut self, bdf: u16, entry: u16) -> Option<usize> {
        if let Some(i) = self.owner.iter().position(|o| *o == Some((bdf, entry))) {
            return Some(i);
        }
        let i = self.owner.iter().position(|o| o.is_none())?;
        self.owner[i] = Some((bdf, entry));
        Some(i)
    }

    /// Who holds number `i`.
    pub fn owner(&self, i: usize) -> Option<(u16, u16)> {
        self.owner.get(i).copied().flatten()
    }

    pub fn in_use(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }
}
