//! The ACPI MCFG table (PCI Firmware Specification 3.0, 4.1.2): where each segment's
//! buses have their configuration space (ECAM: 4 KiB a function, 1 MiB a bus).

/// One ECAM region: segment `segment`, buses `bus_start..=bus_end`, at `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub base: u64,
    pub segment: u16,
    pub bus_start: u8,
    pub bus_end: u8,
}

/// What is wrong with a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Not "MCFG", or shorter than its header says.
    BadHeader,
    /// The entries do not fill the table in whole 16-byte entries.
    BadLength,
}

/// Header (36 bytes) and 8 reserved bytes before the entries.
const ENTRIES_AT: usize = 44;
const ENTRY: usize = 16;

/// The regions of a whole table (`bytes`: from its signature, its header's length).
pub fn regions(bytes: &[u8]) -> Result<impl Iterator<Item = Region> + '_, Error> {
    if bytes.len() < ENTRIES_AT || &bytes[..4] != b"MCFG" {
        return Err(Error::BadHeader);
    }
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if len > bytes.len() || len < ENTRIES_AT {
        return Err(Error::BadHeader);
    }
    if !(len - ENTRIES_AT).is_multiple_of(ENTRY) {
        return Err(Error::BadLength);
    }
    Ok(bytes[ENTRIES_AT..len].chunks_exact(ENTRY).filter_map(|e| {
        let base = u64::from_le_bytes(e[..8].try_into().ok()?);
        let r = Region { base, segment: u16::from_le_bytes([e[8], e[9]]), bus_start: e[10], bus_end: e[11] };
        (r.bus_start <= r.bus_end && base != 0).then_some(r)
    }))
}

impl Region {
    /// The physical address of `bus:dev.func`'s configuration space, if this region
    /// holds its bus (segment 0 is the only one Scion reaches).
    pub fn address(&self, bus: u8, dev: u8, func: u8) -> Option<u64> {
        if self.segment != 0 || bus < self.bus_start || bus > self.bus_end || dev > 31 || func > 7 {
            return None;
        }
        Some(self.base + (((bus - self.bus_start) as u64) << 20 | (dev as u64) << 15 | (func as u64) << 12))
    }

    /// Bytes of configuration space the region covers.
    pub fn bytes(&self) -> u64 {
        ((self.bus_end - self.bus_start) as u64 + 1) << 20
    }
}
