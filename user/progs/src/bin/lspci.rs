//! Lists PCI devices (configuration ports from the manifest).
#![no_std]
#![no_main]

use rt::{pci, println};

rt::entry!(main);

fn main() -> i32 {
    if let Err(e) = pci::init() {
        println!("lspci: no access to the PCI configuration ports: {:?}", e);
        return 1;
    }
    for d in pci::devices() {
        println!(
            "{:02x}:{:02x}.{} {:04x}:{:04x} class {:02x}.{:02x}.{:02x}",
            d.addr.bus, d.addr.dev, d.addr.func, d.vendor, d.device, d.class, d.subclass, d.prog_if
        );
    }
    0
}
