//! PCI configuration space for the kernel: through ECAM when the ACPI MCFG table
//! describes it (all 4 KiB of a function), else through the legacy ports 0xCF8/0xCFC
//! (the first 256 bytes). What to read and write, and whether a driver may, the
//! `pcie` crate decides (host-tested); this is only the access. The MSI-X table
//! entries the kernel programs for drivers are written here too.

use crate::arch::boot::{direct_map_end, phys_to_virt};
use crate::kcell::KCell;
use x86_64::instructions::port::Port;

/// The ECAM region of segment 0, if the MCFG gives one inside the direct map.
static ECAM: KCell<Option<pcie::mcfg::Region>> = KCell::new(None);

/// Find the configuration mechanism and say which it is.
pub fn init(rsdp_phys: u64) {
    let region = super::acpi::mcfg(rsdp_phys, |bytes| match pcie::mcfg::regions(bytes) {
        Ok(mut rs) => rs.find(|r| r.segment == 0),
        Err(e) => {
            crate::arch::serial::kprintln!("[pci] MCFG unreadable ({:?}): configuration through ports 0xCF8", e);
            None
        }
    })
    .flatten();
    match region {
        Some(r) if r.base.saturating_add(r.bytes()) <= direct_map_end() => {
            crate::arch::serial::kprintln!(
                "[pci] ECAM at {:#x} (buses {}..={}, from the ACPI MCFG)",
                r.base,
                r.bus_start,
                r.bus_end
            );
            *ECAM.get() = Some(r);
        }
        Some(r) => crate::arch::serial::kprintln!(
            "[pci] ECAM at {:#x} lies outside the direct map: configuration through ports 0xCF8",
            r.base
        ),
        None => crate::arch::serial::kprintln!("[pci] no ECAM (no ACPI MCFG): configuration through ports 0xCF8"),
    }
}

/// One function's configuration space.
pub struct Func(pub pcie::Bdf);

impl Func {
    fn ecam_ptr(&self, off: u16) -> Option<*mut u32> {
        let r = ECAM.get().as_ref()?;
        let pa = r.address(self.0.bus, self.0.dev, self.0.func)?;
        Some(phys_to_virt(pa + (off as u64 & 0xffc)) as *mut u32)
    }

    fn port_address(&self, off: u16) -> u32 {
        let b = self.0;
        0x8000_0000 | (b.bus as u32) << 16 | (b.dev as u32 & 31) << 11 | (b.func as u32 & 7) << 8 | (off as u32 & 0xfc)
    }

    /// Whether a function answers here.
    pub fn present(&self) -> bool {
        pcie::Config::read32(self, 0) & 0xffff != 0xffff
    }
}

impl pcie::Config for Func {
    fn read32(&self, off: u16) -> u32 {
        if let Some(p) = self.ecam_ptr(off) {
            // SAFETY: the ECAM region lies in the direct map (checked at init) and this
            // address is inside it (`Region::address`); a configuration read has no side
            // effect on memory the kernel owns.
            return unsafe { core::ptr::read_volatile(p) };
        }
        if off >= 256 {
            return !0;
        }
        // SAFETY: the configuration ports; the kernel holds its lock, so no other
        // kernel access comes between the address and the data (with ECAM present the
        // kernel never uses them).
        unsafe {
            Port::<u32>::new(0xCF8).write(self.port_address(off));
            Port::<u32>::new(0xCFC).read()
        }
    }

    fn write32(&mut self, off: u16, v: u32) {
        if let Some(p) = self.ecam_ptr(off) {
            // SAFETY: as in read32; what may be written was decided by the caller
            // (`pcie::may_write` for a driver's writes).
            unsafe { core::ptr::write_volatile(p, v) };
            return;
        }
        if off >= 256 {
            return;
        }
        // SAFETY: as in read32.
        unsafe {
            Port::<u32>::new(0xCF8).write(self.port_address(off));
            Port::<u32>::new(0xCFC).write(v);
        }
    }
}

/// Where a message-signalled interrupt is programmed: an MSI-X table entry at physical
/// `pa` (in a device's memory BAR, below the end of the direct map, which maps the top
/// GiB uncached), or a function's MSI capability; each with the function that sends it.
#[derive(Clone, Copy)]
pub enum Message {
    Msix(pcie::Bdf, u64),
    Msi(pcie::Bdf, pcie::Msi),
}

impl Message {
    fn word(pa: u64, i: u64) -> *mut u32 {
        phys_to_virt(pa + 4 * i) as *mut u32
    }

    /// Whether an MSI-X entry there can be reached by the kernel at all.
    pub fn reachable(pa: u64) -> bool {
        pa.is_multiple_of(16) && pa.saturating_add(16) <= direct_map_end()
    }

    /// The function whose messages these are (its requester id).
    pub fn source(self) -> pcie::Bdf {
        match self {
            Message::Msix(b, _) | Message::Msi(b, _) => b,
        }
    }

    /// Send the message for `vector` to local APIC `apic_id` (compatibility format).
    pub fn program(self, apic_id: u32, vector: u8) {
        let (addr, data) = pcie::message(apic_id, vector);
        self.write(addr, data);
    }

    /// Program the message's address and data as they are.
    pub fn write(self, addr: u64, data: u32) {
        match self {
            // SAFETY: the entry's 16 bytes lie in the device's BAR inside the direct map
            // (`reachable`, checked when the entry was handed out); only the kernel's
            // writes decide where the device's messages go.
            Message::Msix(_, pa) => unsafe {
                core::ptr::write_volatile(Self::word(pa, 0), addr as u32);
                core::ptr::write_volatile(Self::word(pa, 1), (addr >> 32) as u32);
                core::ptr::write_volatile(Self::word(pa, 2), data);
            },
            Message::Msi(bdf, m) => m.program(&mut Func(bdf), addr, data),
        }
    }

    /// Mask or unmask (an MSI without per-vector masking cannot be: it stays on).
    pub fn set_masked(self, masked: bool) {
        match self {
            Message::Msix(_, pa) => {
                let at = Self::word(pa, pcie::MSIX_VECTOR_CONTROL / 4);
                // SAFETY: as in program.
                unsafe {
                    let v = core::ptr::read_volatile(at);
                    let v = if masked { v | pcie::MSIX_MASKED } else { v & !pcie::MSIX_MASKED };
                    core::ptr::write_volatile(at, v);
                }
            }
            Message::Msi(bdf, m) => {
                m.set_masked(&mut Func(bdf), masked);
            }
        }
    }
}
