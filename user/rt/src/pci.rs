//! PCI for user-level drivers. A driver asks root for its device (`DeviceCap::get`): a
//! capability for that one function — its configuration space as the kernel allows,
//! its BARs, its MSI-X vectors, and the INTx line root says its pin is routed to —
//! never for the bus. The legacy ports 0xCF8/0xCFC (granted by the manifest, taken with
//! `init`) remain for programs that list the bus (`lspci`) and for drivers under an
//! older manifest; without them `devices` finds nothing rather than faulting.

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

/// Whether this program holds the configuration ports (`init` succeeded).
static PORTS: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The INTx line root said each function held by capability interrupts on (routing id,
/// line; `NO_LINE`: none).
static INTX: crate::sync::Lock<alloc::vec::Vec<(u16, u8)>> = crate::sync::Lock::new(alloc::vec::Vec::new());

/// In `GET_PCI`'s answer: the function has no INTx line Scion knows.
pub const NO_LINE: u64 = 0xff;

/// Ask root for the configuration ports.
pub fn init() -> Result<(), abi::Error> {
    let r = crate::env::io(0xCF8, 3);
    PORTS.store(r.is_ok(), core::sync::atomic::Ordering::Relaxed);
    r
}

/// Whether this program holds the configuration ports.
pub fn ports() -> bool {
    PORTS.load(core::sync::atomic::Ordering::Relaxed)
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
///
/// For a function held by capability, the line root said (it reads the bus); else
/// through the ports, if this program holds them.
pub fn interrupt_line(d: &Device) -> Option<u8> {
    if let Some(&(_, l)) = INTX.lock().iter().find(|(id, _)| *id == d.addr.id()) {
        return (l as u64 != NO_LINE).then_some(l);
    }
    if !ports() {
        return None;
    }
    interrupt_line_by(d, read32)
}

/// `interrupt_line` with configuration space read through `read` (root's: the IRQ
/// control capability).
pub fn interrupt_line_by(d: &Device, read: impl Fn(Addr, u8) -> u32) -> Option<u8> {
    let pin = (read(d.addr, 0x3c) >> 8) as u8;
    if !(1..=4).contains(&pin) || d.addr.bus != 0 {
        return None;
    }
    let x = (pin - 1) as u32;
    let device_at = |a: Addr| {
        let id = read(a, 0);
        (id & 0xffff != 0xffff).then_some((id as u16, (id >> 16) as u16))
    };
    let host = device_at(Addr { bus: 0, dev: 0, func: 0 })?;
    match host {
        Q35_HOST => Some(16 + 4 + ((d.addr.dev as u32 + x) % 4) as u8),
        I440FX_HOST => {
            let pirq = (d.addr.dev as u32 + 3 + x) % 4;
            let piix = Addr { bus: 0, dev: 1, func: 0 };
            if device_at(piix) != Some(PIIX3_ISA) {
                return None;
            }
            let route = (read(piix, 0x60) >> (8 * pirq)) as u8;
            (route & 0x80 == 0 && route < 16).then_some(route)
        }
        _ => None,
    }
}

/// Every function reachable from bus 0 through the ports: functions 1..8 only on
/// multi-function devices, buses behind PCI-to-PCI bridges followed.
/// Nothing without the ports (`init`).
pub fn devices() -> alloc::vec::Vec<Device> {
    if !ports() {
        return alloc::vec::Vec::new();
    }
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
            Ok([id, line]) => {
                let mut intx = INTX.lock();
                intx.retain(|(i, _)| *i != id as u16);
                intx.push((id as u16, line.min(NO_LINE) as u8));
                Ok(DeviceCap { slot, addr: addr_of(id as u16) })
            }
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
