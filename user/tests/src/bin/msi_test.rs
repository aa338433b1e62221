//! MSI (not MSI-X) programmed by the kernel for a driver (`msi`): an Intel 82574 held by
//! capability, its MSI capability bound to a message-signalled interrupt
//! (`IRQ_CONTROL PCI_MSI`); the device is made to raise its link-change cause (a write
//! of ICS), and the message arrives as an IRQ message, twice (acknowledged between).
//! The kernel keeps the MSI capability from the driver's own writes.
#![no_std]
#![no_main]

extern crate alloc;

use rt::pci::DeviceCap;
use rt::{env, println, sys};
use tests::Checks;
use virtio_hal as virtio;

rt::entry!(main);

const ICR: usize = 0x00c0;
const ICS: usize = 0x00c8;
const IMS: usize = 0x00d0;
const LSC: u32 = 1 << 2;
const BADGE: u64 = 1 << 40;

fn main() -> i32 {
    let mut c = Checks::new();
    let s0 = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s0), Ok(()), "sigma0 for device registers");
    virtio::init(s0);
    let dev = DeviceCap::get(0x02_00_00, 0);
    c.check(dev.is_ok(), "a capability for the Ethernet controller");
    let Ok(dev) = dev else { return c.finish("msi_test") };
    let d = dev.device();
    println!("  {:04x}:{:04x} at {:02x}:{:02x}.{}", d.vendor, d.device, d.addr.bus, d.addr.dev, d.addr.func);
    // Its MSI capability, found by walking the list through the capability.
    let mut at = (dev.read32(0x34) & 0xfc) as u16;
    let mut msi = None;
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        let v = dev.read32(at);
        if v as u8 == 0x05 {
            msi = Some(at);
        }
        at = ((v >> 8) & 0xfc) as u16;
    }
    c.check(msi.is_some(), "the controller has MSI");
    if let Some(at) = msi {
        c.eq(dev.write32(at, 1 << 16), Err(abi::Error::NoRights), "its MSI capability is the kernel's");
    }
    c.eq(dev.enable(true), Ok(()), "memory decoding and bus mastering on");
    let (bar, size, _) = dev.bar(0).unwrap_or((0, 0, true));
    c.check(bar != 0 && size >= 0x1000, "BAR 0");
    let slot = rt::alloc_slot();
    let n = sys::pci_msi(dev.slot, slot);
    c.check(n.is_ok_and(|n| n >= abi::irq::MSI_FIRST), "MSI bound to a message-signalled interrupt");
    let Ok(n) = n else { return c.finish("msi_test") };
    if let Some(at) = msi {
        c.check(dev.read32(at) & 1 << 16 != 0, "MSI on");
        c.check(dev.read32(0x04) & 1 << 10 != 0, "INTx off");
    }
    c.eq(sys::irq_attach(slot, BADGE | n), Ok(()), "attach to it");
    let regs = virtio::Mmio::new(virtio::map_mmio(bar, 0x1000), 0x1000);
    let mut regs = regs;
    let _ = regs.read32(ICR);
    regs.write32(IMS, LSC);
    for round in 0..2 {
        regs.write32(ICS, LSC);
        let mut m = rt::ipc::Msg::new(0, &[]);
        let got = rt::ipc::recv(rt::ipc::RECV_ANY, &mut m, abi::ipc::timeouts(0, 2_000_000));
        c.check(
            got == Ok(BADGE | n) && m.label() == abi::ipc::label::IRQ && m.word(1) == n,
            &alloc::format!("interrupt {} as an IRQ message ({})", n, round + 1),
        );
        let icr = regs.read32(ICR);
        regs.write32(ICR, icr);
        c.eq(sys::irq_ack(slot), Ok(()), "acknowledged");
    }
    c.check(sys::irq_count(slot).is_ok_and(|k| k >= 2), "counted by the kernel");
    c.finish("msi_test")
}
