//! An Intel 82574 (QEMU's `e1000e`) for the network server: the `e1000e` crate's driver
//! with its registers in BAR 0 and its rings in sigma0's DMA memory.

use crate::{dma_pages_for_driver, enable_device, map_mmio, Mmio};

/// PCI ids of the 82574 family (82574L, 82574LA).
const IDS: [(u16, u16); 2] = [(0x8086, 0x10d3), (0x8086, 0x10f6)];
/// The registers the driver uses end at RAH (0x5404).
const REGS: usize = 0x6000;
const SPINS: u64 = 10_000_000;

struct SigmaDma;

impl e1000e::Dma for SigmaDma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)> {
        dma_pages_for_driver(pages)
    }
}

impl e1000e::Regs for Mmio {
    fn read32(&self, off: usize) -> u32 {
        Mmio::read32(self, off)
    }
    fn write32(&mut self, off: usize, v: u32) {
        Mmio::write32(self, off, v)
    }
}

/// Ethernet controllers: class 02, subclass 00.
pub const CLASS: u32 = 0x02_00_00;

/// The first 82574 the manifest grants by capability (`pci = ["02:00:00"]`: its DMA
/// reaches only the memory taken here, with an IOMMU), else the first on the PCI bus
/// (the PCI ports and `init` must be done); brought up. Err says what failed.
pub fn open_e1000e() -> Result<(rt::pci::Device, e1000e::Nic<Mmio>, Option<rt::pci::DeviceCap>), &'static str> {
    for i in 0..8 {
        let Ok(dev) = rt::pci::DeviceCap::get(CLASS, i) else { break };
        let d = dev.device();
        if !IDS.contains(&(d.vendor, d.device)) {
            let _ = rt::sys::cap_delete(dev.slot);
            rt::free_slot(dev.slot);
            continue;
        }
        let (bar, size, io) = dev.bar(0).map_err(|_| "the e1000e's BAR 0 cannot be read")?;
        if io || bar == 0 || size < REGS as u64 {
            return Err("the e1000e has no memory BAR 0 of 24 KiB or more");
        }
        dev.enable(true).map_err(|_| "the kernel refused to enable the e1000e")?;
        crate::set_dma_device(dev.slot);
        return bring_up(bar).map(|n| (d, n, Some(dev)));
    }
    let d = rt::pci::devices()
        .into_iter()
        .find(|d| IDS.contains(&(d.vendor, d.device)))
        .ok_or("no virtio-net or e1000e device on the PCI bus")?;
    let bar = enable_device(&d, 0).ok_or("the e1000e has no memory BAR 0")?;
    bring_up(bar).map(|n| (d, n, None))
}

fn bring_up(bar: u64) -> Result<e1000e::Nic<Mmio>, &'static str> {
    let regs = Mmio::new(map_mmio(bar, REGS), REGS);
    let nic = e1000e::Nic::new(regs, &mut SigmaDma, SPINS).map_err(|e| match e {
        e1000e::Error::ResetTimeout => "the e1000e did not finish its reset",
        e1000e::Error::NoMac => "the e1000e has no MAC address",
        e1000e::Error::NoMemory => "no DMA memory for the e1000e's rings",
        _ => "the e1000e refused its bring-up",
    })?;
    Ok(nic)
}
