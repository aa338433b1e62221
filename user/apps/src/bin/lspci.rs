//! Lists PCI devices (configuration ports from the manifest).
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
            "{:02x}:{:02x}.{} {:04x}:{:04x} class {:02x}.{:02x}.{:02x}{}",
            d.addr.bus, d.addr.dev, d.addr.func, d.vendor, d.device, d.class, d.subclass, d.prog_if, bars
        );
    }
    0
}
