//! Lists PCI devices (configuration ports from the manifest): address, ids, class (by
//! name where the class is a common one), memory BARs, its message-signalled interrupts
//! (MSI-X with its table's size, MSI; "on" once the kernel programmed them for a driver),
//! and the Scion driver that takes the device, if there is one.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use rt::{pci, println};

rt::entry!(main);

fn main() -> i32 {
    if let Err(e) = pci::init() {
        println!("lspci: no access to the PCI configuration ports: {:?}", e);
        return 1;
    }
    for d in pci::devices() {
        let mut bars = alloc::string::String::new();
        let mut i = 0;
        while i < 6 {
            let raw = pci::read32(d.addr, 0x10 + 4 * i);
            if raw != 0 && raw & 1 == 0 {
                if let Some(pa) = d.mem_bar(i) {
                    bars.push_str(&alloc::format!(" bar{}={:#x}", i, pa));
                }
            }
            // A 64-bit BAR takes two slots.
            i += if raw & 1 == 0 && (raw >> 1) & 3 == 2 { 2 } else { 1 };
        }
        println!(
            "{:02x}:{:02x}.{} {:04x}:{:04x} class {:02x}.{:02x}.{:02x} ({}){}{}{}",
            d.addr.bus,
            d.addr.dev,
            d.addr.func,
            d.vendor,
            d.device,
            d.class,
            d.subclass,
            d.prog_if,
            class_name(d.class, d.subclass, d.prog_if),
            bars,
            messages(&d),
            match driver(&d) {
                Some(w) => alloc::format!(" driver: {w}"),
                None => alloc::string::String::new(),
            }
        );
    }
    0
}

/// " MSI-X(N entries, on|off)" and " MSI(on|off)", from the capability list (walked
/// with every pointer checked: at most 48 steps, never into the header).
fn messages(d: &pci::Device) -> alloc::string::String {
    let mut out = alloc::string::String::new();
    if (pci::read32(d.addr, 0x04) >> 16) & (1 << 4) == 0 {
        return out;
    }
    let mut at = (pci::read32(d.addr, 0x34) & 0xfc) as u8;
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        let v = pci::read32(d.addr, at);
        let on = |bit: u32| if v & (1 << bit) != 0 { "on" } else { "off" };
        match v as u8 {
            0x11 => out.push_str(&alloc::format!(" MSI-X({} entries, {})", ((v >> 16) & 0x7ff) + 1, on(31))),
            0x05 => out.push_str(&alloc::format!(" MSI({})", on(16))),
            _ => {}
        }
        at = ((v >> 8) & 0xfc) as u8;
    }
    out
}

/// The PCI class's name (PCI Code and ID Assignment), for the common ones.
fn class_name(class: u8, sub: u8, prog_if: u8) -> &'static str {
    match (class, sub, prog_if) {
        (0x01, 0x08, 0x02) => "NVM Express controller",
        (0x01, 0x06, 0x01) => "SATA controller (AHCI)",
        (0x01, 0x01, _) => "IDE controller",
        (0x01, 0x00, _) => "SCSI controller",
        (0x01, _, _) => "storage controller",
        (0x02, 0x00, _) => "Ethernet controller",
        (0x02, _, _) => "network controller",
        (0x03, 0x00, _) => "VGA controller",
        (0x03, _, _) => "display controller",
        (0x06, 0x00, _) => "host bridge",
        (0x06, 0x01, _) => "ISA bridge",
        (0x06, 0x04, _) => "PCI bridge",
        (0x06, _, _) => "bridge",
        (0x0c, 0x03, _) => "USB controller",
        (0x0c, 0x05, _) => "SMBus controller",
        (0x08, _, _) => "system peripheral",
        (0xff, _, _) => "unassigned class",
        _ => "other",
    }
}

/// The Scion driver (server) that drives a device of this kind.
fn driver(d: &pci::Device) -> Option<&'static str> {
    match (d.vendor, d.device, d.class, d.subclass, d.prog_if) {
        (0x1af4, 0x1001 | 0x1042, ..) => Some("blk (virtio-blk)"),
        (0x1af4, 0x1000 | 0x1041, ..) => Some("net (virtio-net)"),
        (0x8086, 0x10d3 | 0x10f6, ..) => Some("net (e1000e)"),
        (_, _, 0x01, 0x08, 0x02) => Some("blk (NVMe)"),
        _ => None,
    }
}
