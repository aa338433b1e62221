//! PCI for user-level drivers. A driver asks root for its device (`device`): a
//! capability for that one function — its configuration space as the kernel allows,
//! its BARs, its MSI-X vectors — never for the bus. The legacy ports 0xCF8/0xCFC
//! (granted by the manifest) remain for programs that list the bus (`lspci`) and the
//! virtio drivers, which still find their devices there.

use core::arch::asm;

fn outl(port: u16, v: u32) {
    // SAFETY: only meaningful when the ports were granted; otherwise the access faults
    // (the kernel's I/O bitmap refuses it) and the program's fault handler hears of it.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") v, options(nostack, nomem)) };
}

fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: as for outl.
    unsafe { asm!("in eax, dx", in("dx") port, out("eax") v, options(nostack, nomem)) };
    v
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr {
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

/// Ask root for the configuration ports.
pub fn init() -> Result<(), abi::Error> {
    crate::env::io(0xCF8, 3)
}

pub fn read32(a: Addr, off: u8) -> u32 {
    let addr =
        0x8000_0000 | ((a.bus as u32) << 16) | ((a.dev as u32) << 11) | ((a.func as u32) << 8) | (off as u32 & 0xfc);
    outl(0xCF8, addr);
    inl(0xCFC)
}

pub fn write32(a: Addr, off: u8, v: u32) {
    let addr =
        0x8000_0000 | ((a.bus as u32) << 16) | ((a.dev as u32) << 11) | ((a.func as u32) << 8) | (off as u32 & 0xfc);
    outl(0xCF8, addr);
    outl(0xCFC, v);
}

#[derive(Clone, Copy, Debug)]
pub struct Device {
    pub addr: Addr,
    pub vendor: u16,
    pub device: u16,
    pub class: u8,
    pub subclass: u8,
    pub prog_if: u8,
}

impl Device {
    /// Memory BAR `i` (physical address), if it is one.
    pub fn mem_bar(&self, i: u8) -> Option<u64> {
        let lo = read32(self.addr, 0x10 + 4 * i);
        if lo & 1 != 0 {
            return None;
        }
        let mut pa = (lo & !0xf) as u64;
        if (lo >> 1) & 3 == 2 {
            pa |= (read32(self.addr, 0x14 + 4 * i) as u64) << 32;
        }
        Some(pa)
    }
}

impl Device {
    /// The interrupt pin it uses: 1..=4 for INTA#..INTD#, 0 for none.
    pub fn interrupt_pin(&self) -> u8 {
        (read32(self.addr, 0x3c) >> 8) as u8
    }
}

/// The host bridges whose interrupt routing Scion knows: QEMU's q35 (ICH9) and pc
/// (i440fx with PIIX3).
const Q35_HOST: (u16, u16) = (0x8086, 0x29c0);
const I440FX_HOST: (u16, u16) = (0x8086, 0x1237);
/// PIIX3's ISA bridge, at 00:01.0 on pc: its PIRQ route registers.
const PIIX3_ISA: (u16, u16) = (0x8086, 0x7000);

/// The IOAPIC line (global system interrupt) a device on bus 0 interrupts on, as the
/// chipset routes its pin, or None (no pin, behind a bridge, an unknown chipset, or a
/// pin routing that is switched off).
///
/// - q35: ICH9 routes INTx of slot s to PIRQ (s + x) mod 4 + 4, i.e. PIRQ E..H, which
///   the chipset wires to IOAPIC lines 20..23 (QEMU's default routing, the one its
///   ACPI `_PRT` describes).
/// - pc: PIIX3 routes INTx of slot s to PIRQ (s - 1 + x) mod 4, and PIRQ n to the ISA
///   line in its configuration register 0x60 + n (set by the firmware; bit 7 = off),
///   which is the same IOAPIC line.
pub fn interrupt_line(d: &Device) -> Option<u8> {
    let pin = d.interrupt_pin();
    if !(1..=4).contains(&pin) || d.addr.bus != 0 {
        return None;
    }
    let x = (pin - 1) as u32;
    let host = device_at(Addr { bus: 0, dev: 0, func: 0 })?;
    match (host.vendor, host.device) {
        Q35_HOST => Some(16 + 4 + ((d.addr.dev as u32 + x) % 4) as u8),
        I440FX_HOST => {
            let pirq = (d.addr.dev as u32 + 3 + x) % 4;
            let piix = Addr { bus: 0, dev: 1, func: 0 };
            if device_at(piix).is_none_or(|p| (p.vendor, p.device) != PIIX3_ISA) {
                return None;
            }
            let route = (read32(piix, 0x60) >> (8 * pirq)) as u8;
            (route & 0x80 == 0 && route < 16).then_some(route)
        }
        _ => None,
    }
}

fn device_at(a: Addr) -> Option<Device> {
    let id = read32(a, 0);
    if id & 0xffff == 0xffff {
        return None;
    }
    let class = read32(a, 8);
    Some(Device {
        addr: a,
        vendor: id as u16,
        device: (id >> 16) as u16,
        class: (class >> 24) as u8,
        subclass: (class >> 16) as u8,
        prog_if: (class >> 8) as u8,
    })
}

/// Every function reachable from bus 0 through the ports: functions 1..8 only on
/// multi-function devices, buses behind PCI-to-PCI bridges followed.
pub fn devices() -> alloc::vec::Vec<Device> {
    devices_by(read32)
}

/// A capability for one PCI function (from root: `device`).
#[derive(Clone, Copy, Debug)]
pub struct DeviceCap {
    pub slot: u64,
    pub addr: Addr,
}

impl DeviceCap {
    /// The `index`-th function of class `class` (class << 16 | subclass << 8 |
    /// interface) the manifest grants this program; its capability in a new slot.
    pub fn get(class: u32, index: u64) -> Result<DeviceCap, abi::Error> {
        let slot = crate::alloc_slot();
        match crate::proto::client::get_pci(abi::cap::PARENT, class as u64, index, slot) {
            Ok([id]) => Ok(DeviceCap { slot, addr: addr_of(id as u16) }),
            Err(e) => {
                crate::free_slot(slot);
                Err(e)
            }
        }
    }

    pub fn read32(&self, off: u16) -> u32 {
        crate::sys::pci_read(self.slot, 0, off).unwrap_or(!0)
    }

    /// Write what the kernel lets a driver write (`NoRights` otherwise).
    pub fn write32(&self, off: u16, v: u32) -> Result<(), abi::Error> {
        crate::sys::pci_write(self.slot, off, v)
    }

    /// BAR `i`: (base, size, I/O ports), size 0 when there is none.
    pub fn bar(&self, i: u8) -> Result<(u64, u64, bool), abi::Error> {
        crate::sys::pci_bar(self.slot, i)
    }

    /// Memory decoding and bus mastering on (INTx as `intx` says).
    pub fn enable(&self, intx: bool) -> Result<(), abi::Error> {
        let cmd = self.read32(4) & 0xffff;
        let cmd = (cmd | 0b110) & !(1 << 10) | if intx { 0 } else { 1 << 10 };
        self.write32(4, cmd)
    }

    /// MSI-X entry `entry` as an IRQ capability in a new slot: (slot, interrupt number).
    pub fn msix(&self, entry: u16) -> Result<(u64, u64), abi::Error> {
        let slot = crate::alloc_slot();
        match crate::sys::pci_msix(self.slot, entry, slot) {
            Ok(n) => Ok((slot, n)),
            Err(e) => {
                crate::free_slot(slot);
                Err(e)
            }
        }
    }

    /// Its vendor, device and class, as `devices()` reports them.
    pub fn device(&self) -> Device {
        let id = self.read32(0);
        let class = self.read32(8);
        Device {
            addr: self.addr,
            vendor: id as u16,
            device: (id >> 16) as u16,
            class: (class >> 24) as u8,
            subclass: (class >> 16) as u8,
            prog_if: (class >> 8) as u8,
        }
    }
}

/// A routing id (bus << 8 | device << 3 | function) as an address.
pub fn addr_of(id: u16) -> Addr {
    Addr { bus: (id >> 8) as u8, dev: ((id >> 3) & 31) as u8, func: (id & 7) as u8 }
}

impl Addr {
    pub fn id(&self) -> u16 {
        (self.bus as u16) << 8 | (self.dev as u16 & 31) << 3 | (self.func as u16 & 7)
    }
}

/// Every function reachable from bus 0, read through `read` (root's: the IRQ control
/// capability), as `devices` finds them through the ports.
pub fn devices_by(read: impl Fn(Addr, u8) -> u32) -> alloc::vec::Vec<Device> {
    let at = |a: Addr| {
        let id = read(a, 0);
        if id & 0xffff == 0xffff {
            return None;
        }
        let class = read(a, 8);
        Some(Device {
            addr: a,
            vendor: id as u16,
            device: (id >> 16) as u16,
            class: (class >> 24) as u8,
            subclass: (class >> 16) as u8,
            prog_if: (class >> 8) as u8,
        })
    };
    let mut out = alloc::vec::Vec::new();
    let mut buses = alloc::vec![0u8];
    let mut seen = [false; 256];
    while let Some(bus) = buses.pop() {
        if core::mem::replace(&mut seen[bus as usize], true) {
            continue;
        }
        for dev in 0..32u8 {
            let Some(d0) = at(Addr { bus, dev, func: 0 }) else { continue };
            let multi = (read(d0.addr, 0x0c) >> 16) & 0x80 != 0;
            for func in 0..if multi { 8 } else { 1 } {
                let Some(d) = at(Addr { bus, dev, func }) else { continue };
                if d.class == 0x06 && d.subclass == 0x04 {
                    buses.push((read(d.addr, 0x18) >> 8) as u8);
                }
                out.push(d);
            }
        }
    }
    out
}
