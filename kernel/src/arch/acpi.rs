//! The machine's ACPI tables (through the `acpi` crate), read once at boot for what
//! the kernel needs of them, all in the MADT: the interrupt source overrides, which say
//! which IOAPIC line an ISA interrupt arrives on and with which polarity and trigger,
//! and the processors (their local APIC ids) for `smp`.

use crate::arch::boot::{direct_map_end, phys_to_virt};
use acpi::madt::{Madt, MadtEntry};
use acpi::{AcpiHandler, AcpiTable, AcpiTables, PhysicalMapping};
use alloc::vec::Vec;
use core::ptr::NonNull;

/// ACPI tables are read through the direct map.
#[derive(Clone)]
struct DirectMap;

impl AcpiHandler for DirectMap {
    unsafe fn map_physical_region<T>(&self, pa: usize, size: usize) -> PhysicalMapping<Self, T> {
        // Tables the firmware put beyond the direct map cannot be read: point at the
        // first page (the parser then finds a bad signature or checksum and stops).
        let pa = if (pa as u64).saturating_add(size as u64) <= direct_map_end() { pa } else { 0 };
        let va = NonNull::new(phys_to_virt(pa as u64) as *mut T).expect("the direct map is not at 0");
        // SAFETY: `pa..pa + size` lies in the direct map (checked above), which maps all
        // physical memory below direct_map_end(); the tables are only read.
        unsafe { PhysicalMapping::new(pa, va, size, size, self.clone()) }
    }

    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
}

/// One interrupt source override: ISA line `isa` arrives on IOAPIC line `gsi`.
#[derive(Clone, Copy, Debug)]
pub struct Override {
    pub isa: u8,
    pub gsi: u32,
    pub level: bool,
    pub active_low: bool,
}

/// The MADT's entries, mapped by `f` (nothing when there is no RSDP or MADT).
fn madt_entries<T>(rsdp_phys: u64, f: impl Fn(MadtEntry) -> Option<T>) -> Vec<T> {
    if rsdp_phys == 0 {
        return Vec::new();
    }
    // SAFETY: the RSDP address comes from the boot information, and every table is
    // read through `DirectMap`, which never points outside the direct map.
    let Ok(tables) = (unsafe { AcpiTables::from_rsdp(DirectMap, rsdp_phys as usize) }) else {
        crate::arch::serial::kprintln!("[acpi] unreadable tables at {:#x}", rsdp_phys);
        return Vec::new();
    };
    let Ok(madt) = tables.find_table::<Madt>() else { return Vec::new() };
    madt.get().entries().filter_map(f).collect()
}

/// Whether the firmware describes an IOMMU (Intel VT-d: an ACPI DMAR table).
pub fn has_dmar(rsdp_phys: u64) -> bool {
    if rsdp_phys == 0 {
        return false;
    }
    // SAFETY: as in madt_entries.
    let Ok(tables) = (unsafe { AcpiTables::from_rsdp(DirectMap, rsdp_phys as usize) }) else { return false };
    tables.headers().any(|h| h.signature == acpi::sdt::Signature::DMAR)
}

/// The MCFG table's bytes (header included) handed to `f`, or None without one.
pub fn mcfg<T>(rsdp_phys: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    table_bytes::<acpi::mcfg::Mcfg, T>(rsdp_phys, f)
}

/// The DMAR table (Intel VT-d), as `mcfg`.
#[repr(transparent)]
struct Dmar {
    header: acpi::sdt::SdtHeader,
}

// SAFETY: the struct is the table's header, which is all the parser reads of it.
unsafe impl AcpiTable for Dmar {
    const SIGNATURE: acpi::sdt::Signature = acpi::sdt::Signature::DMAR;
    fn header(&self) -> &acpi::sdt::SdtHeader {
        &self.header
    }
}

pub fn dmar<T>(rsdp_phys: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    table_bytes::<Dmar, T>(rsdp_phys, f)
}

fn table_bytes<A: AcpiTable, T>(rsdp_phys: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    if rsdp_phys == 0 {
        return None;
    }
    // SAFETY: as in madt_entries.
    let tables = unsafe { AcpiTables::from_rsdp(DirectMap, rsdp_phys as usize) }.ok()?;
    let t = tables.find_table::<A>().ok()?;
    let len = t.get().header().length as usize;
    let pa = t.physical_start() as u64;
    if pa.saturating_add(len as u64) > direct_map_end() {
        return None;
    }
    // SAFETY: the table's `len` bytes (its header's length) lie in the direct map
    // (checked above) and are only read.
    let bytes = unsafe { core::slice::from_raw_parts(phys_to_virt(pa) as *const u8, len) };
    Some(f(bytes))
}

/// The MADT's interrupt source overrides.
pub fn interrupt_overrides(rsdp_phys: u64) -> Vec<Override> {
    madt_entries(rsdp_phys, |e| match e {
        MadtEntry::InterruptSourceOverride(o) => {
            let flags = o.flags;
            Some(Override {
                isa: o.irq,
                gsi: o.global_system_interrupt,
                // MPS INTI flags: trigger in bits 2..4, polarity in bits 0..2 (0b11 =
                // level, active low); "as the bus" is ISA's edge, active high.
                level: (flags >> 2) & 3 == 3,
                active_low: flags & 3 == 3,
            })
        }
        _ => None,
    })
}

/// The local APIC ids of the processors the MADT says are enabled (bit 0 of the
/// entry's flags), the boot processor among them, in the table's order.
pub fn processors(rsdp_phys: u64) -> Vec<u32> {
    madt_entries(rsdp_phys, |e| match e {
        MadtEntry::LocalApic(l) if l.flags & 1 != 0 => Some(l.apic_id as u32),
        MadtEntry::LocalX2Apic(l) if l.flags & 1 != 0 => Some(l.x2apic_id),
        _ => None,
    })
}
