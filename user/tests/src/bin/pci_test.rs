//! Drivers' memory: PCI configuration through granted ports; device memory (the AHCI
//! controller's register BAR) mapped from sigma0 and read; DMA-able memory from sigma0
//! whose physical address the driver learns, handed out once per client.
#![no_std]
#![no_main]

use abi::fpage::Fpage;
use abi::Error;
use rt::ipc::Msg;
use rt::{env, pci, println};
use sigma0_api as s0;
use tests::Checks;

rt::entry!(main);

const MMIO_VA: u64 = rt::layout::SCRATCH;
const DMA_VA: u64 = rt::layout::SCRATCH2;

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(pci::init(), Ok(()), "configuration ports granted");
    let devs = pci::devices();
    c.check(devs.iter().any(|d| d.vendor == 0x8086 && d.device == 0x29c0), "the q35 host bridge is there");
    let Some(ahci) = devs.iter().find(|d| d.class == 1 && d.subclass == 6) else {
        c.check(false, "an AHCI controller to drive");
        return c.finish("pci_test");
    };
    let abar = ahci.mem_bar(5).unwrap_or(0);
    println!(
        "  AHCI {:04x}:{:04x} at {:02x}:{:02x}.{}, registers at {:#x}",
        ahci.vendor, ahci.device, ahci.addr.bus, ahci.addr.dev, ahci.addr.func, abar
    );
    c.check(
        (abi::layout::MMIO_START..abi::layout::MMIO_END).contains(&abar),
        "its register BAR lies in the device window",
    );
    let s = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s), Ok(()), "sigma0, as the manifest grants");

    // Device memory.
    let mut m = Msg::new(s0::MMIO, &[abar & !0xfff, 0, MMIO_VA]);
    c.eq(
        tests::call_with_window(s, Fpage::mem(MMIO_VA, 12, abi::mem::RIGHTS_MASK), &mut m),
        Ok(()),
        "map the register page",
    );
    let regs = MMIO_VA + (abar & 0xfff);
    // SAFETY: the page was just mapped (uncached) from the controller's BAR.
    let (cap, vs) = unsafe {
        (core::ptr::read_volatile(regs as *const u32), core::ptr::read_volatile((regs + 0x10) as *const u32))
    };
    println!("  AHCI CAP {:#010x}, version {:#010x}", cap, vs);
    c.eq(vs, 0x0001_0000, "read the controller's version register (AHCI 1.0)");
    c.eq((cap & 0x1f) + 1, 6, "its capabilities: six ports, as QEMU's ICH9 AHCI has");
    let mut m = Msg::new(s0::MMIO, &[0x1000_0000, 0, MMIO_VA]);
    c.eq(
        tests::call_with_window(s, Fpage::mem(MMIO_VA, 12, abi::mem::RIGHTS_MASK), &mut m),
        Err(Error::BadAddress),
        "RAM is not device memory",
    );

    // DMA memory: physically contiguous, physical address told.
    let mut m = Msg::new(s0::ALLOC, &[2, DMA_VA]);
    c.eq(
        tests::call_with_window(s, Fpage::mem(DMA_VA, 14, abi::mem::RIGHTS_MASK), &mut m),
        Ok(()),
        "four contiguous pages for DMA",
    );
    let pa = m.word(2);
    println!("  DMA buffer at physical {:#x}", pa);
    c.check(pa != 0 && pa.is_multiple_of(0x4000), "its physical address, aligned to its size");
    // SAFETY: the four pages were just mapped read-write.
    unsafe {
        core::ptr::write_volatile((DMA_VA + 0x3ff8) as *mut u64, 0xD3A);
        c.eq(core::ptr::read_volatile((DMA_VA + 0x3ff8) as *const u64), 0xD3A, "usable");
    }
    let mut m = Msg::new(s0::PHYS, &[pa, 2, DMA_VA]);
    c.eq(
        tests::call_with_window(s, Fpage::mem(DMA_VA, 14, abi::mem::RIGHTS_MASK), &mut m),
        Ok(()),
        "asking for the same frames again is idempotent",
    );
    // SAFETY: as above (the same frames are mapped again at the same place).
    c.eq(unsafe { core::ptr::read_volatile((DMA_VA + 0x3ff8) as *const u64) }, 0xD3A, "and they are the same frames");
    let mut m = Msg::new(s0::PHYS, &[0x10_0000, 0, DMA_VA]);
    c.eq(
        tests::call_with_window(s, Fpage::mem(DMA_VA, 14, abi::mem::RIGHTS_MASK), &mut m),
        Err(Error::NoRights),
        "frames that are not sigma0's to give",
    );
    // Giving back frames that are not there (past the end of RAM, or wrapping around the
    // address space) gives back nothing; sigma0 goes on serving.
    for pa in [1u64 << 50, !0xfffu64] {
        let mut m = Msg::new(s0::FREE, &[pa, 4]);
        c.eq(rt::server::request(s, &mut m).map(|_| m.word(2)), Ok(0), "frames past the end of RAM: none given back");
    }
    let mut m = Msg::new(s0::STATS, &[]);
    c.check(rt::server::request(s, &mut m).is_ok() && m.word(3) > 0, "and sigma0 still serves");
    // I/O ports come from root as the manifest grants them, never from sigma0 directly.
    let mut m = Msg::new(s0::IO, &[0x3f8, 3]);
    c.eq(
        rt::server::request_mapping(s, [Fpage(0), Fpage(0), Fpage::io(0, 16)], &mut m),
        Err(Error::NoRights),
        "COM1's ports straight from sigma0: refused",
    );
    c.finish("pci_test")
}
