//! A hostile driver under the IOMMU (`dma_hostile`, QEMU's intel-iommu): it holds an
//! NVMe controller by capability and programs it by hand to reach memory it did not map
//! for DMA — a page it gave back (`PCI_DMA_UNMAP`), and a kernel page (physical 1 MiB)
//! — for the device to write into and read from. The kernel reports a DMA fault on the
//! console for each (the scenario expects them), the page it gave back is unchanged,
//! and neither its bytes nor the kernel's reach the disk. I/O through mapped memory
//! works all along. On a machine without an IOMMU the device reaches both pages: the
//! test fails.
#![no_std]
#![no_main]

extern crate alloc;

use rt::pci::DeviceCap;
use rt::{env, println, sys};
use tests::Checks;
use virtio_hal::{self as virtio, NvmeDisk};

rt::entry!(main);

/// A kernel page: the kernel image is loaded at 1 MiB.
const KERNEL_PAGE: u64 = 0x10_0000;

fn page(va: u64) -> &'static mut [u8] {
    // SAFETY: `va` is a 4096-byte DMA buffer of ours from `dma_buffer`, mapped for life.
    unsafe { core::slice::from_raw_parts_mut(va as *mut u8, 4096) }
}

/// Submit and spin for the completion: whether the request succeeded (None: no
/// completion within the bound).
fn run(disk: &mut NvmeDisk, write: bool, sector: u64, pa: u64) -> Option<bool> {
    let t = disk.submit_phys(write, sector, pa, 4096).ok()?;
    for _ in 0..20_000_000u64 {
        if disk.peek_used() == Some(t) {
            return Some(disk.complete(t));
        }
        core::hint::spin_loop();
    }
    None
}

fn main() -> i32 {
    let mut c = Checks::new();
    let s0 = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s0), Ok(()), "sigma0 for DMA memory and device registers");
    virtio::init(s0);
    let dev = DeviceCap::get(virtio::nvme::CLASS, 0);
    c.check(dev.is_ok(), "a capability for the NVMe controller");
    let Ok(dev) = dev else { return c.finish("dma_hostile") };
    let disk = NvmeDisk::open_cap(dev, 1, &|n| n);
    if let Err(why) = &disk {
        println!("  {}", why);
    }
    c.check(disk.is_ok(), "bring-up through the IOMMU (its queues mapped for DMA)");
    let Ok(mut disk) = disk else { return c.finish("dma_hostile") };
    c.check(virtio::dma_confined(), "the kernel says the controller's DMA is confined");
    let (Some(a), Some(b)) = (virtio::dma_buffer(1), virtio::dma_buffer(1)) else {
        c.check(false, "two DMA buffers");
        return c.finish("dma_hostile");
    };
    // Mapped memory works: blocks 100 and 101 written and read back.
    page(a.0).fill(0x5a);
    c.eq(run(&mut disk, true, 800, a.1), Some(true), "write a block from mapped memory");
    page(a.0).fill(0x77);
    c.eq(run(&mut disk, true, 808, a.1), Some(true), "and another");
    page(a.0).fill(0);
    c.eq(run(&mut disk, false, 800, a.1), Some(true), "read it back into mapped memory");
    c.check(page(a.0).iter().all(|x| *x == 0x5a), "with its bytes");

    // (QEMU's NVMe model completes a command whose DMA the IOMMU refused as if it had
    // gone well, moving zeros; a controller on a real bus gets an abort and fails it.
    // So what is checked is where the bytes went, and the faults on the console.)
    // 1. The device writes into a page the driver gave back.
    page(b.0).fill(0x11);
    c.eq(sys::pci_dma_unmap(dev.slot, b.1, 1), Ok(()), "give page B back (no longer the device's)");
    let r = run(&mut disk, false, 800, b.1);
    println!("  read into page B: {:?}", r);
    c.check(r.is_some(), "the command ends");
    c.check(page(b.0).iter().all(|x| *x == 0x11), "page B is unchanged (the device wrote nothing into it)");

    // 2. The device reads that page, to write it to disk.
    let r = run(&mut disk, true, 808, b.1);
    println!("  write from page B: {:?}", r);
    page(a.0).fill(0);
    c.eq(run(&mut disk, false, 808, a.1), Some(true), "read the block back");
    c.check(!page(a.0).contains(&0x11), "no byte of page B reached the disk");
    println!("  the block now starts {:x?}", &page(a.0)[..8]);

    // 3. The device reads a kernel page, to write it to disk, and 4. writes into one.
    let r = run(&mut disk, true, 808, KERNEL_PAGE);
    println!("  write from a kernel page: {:?}", r);
    page(a.0).fill(0x33);
    c.eq(run(&mut disk, false, 808, a.1), Some(true), "read the block back");
    let first = page(a.0)[0];
    c.check(
        page(a.0).iter().all(|x| *x == first),
        "the block holds one byte value over and over, not the kernel's code",
    );
    let r = run(&mut disk, false, 800, KERNEL_PAGE);
    println!("  read into a kernel page: {:?}", r);
    c.check(r.is_some(), "the command ends; the kernel runs on");

    // Mapped memory still works after the faults.
    page(a.0).fill(0);
    c.eq(run(&mut disk, false, 800, a.1), Some(true), "I/O through mapped memory goes on");
    c.check(page(a.0).iter().all(|x| *x == 0x5a), "with the right bytes");
    c.finish("dma_hostile")
}
