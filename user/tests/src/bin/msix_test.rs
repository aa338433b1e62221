//! An NVMe controller driven through a capability for that one PCI function, with an
//! I/O queue pair per CPU and an MSI-X vector per queue (`nvme_msix`, two CPUs). The
//! program holds no configuration ports: the bus is not its to read. It checks that
//! the kernel keeps the BARs and the MSI-X capability from it, that root grants only
//! the class its manifest names, that each queue's completions arrive as IRQ messages
//! on that queue's own vector, and that the vector follows the submitter to CPU 1.
#![no_std]
#![no_main]

extern crate alloc;

use rt::pci::DeviceCap;
use rt::{env, println, sys};
use tests::Checks;
use virtio_hal::{self as virtio, NvmeDisk};

rt::entry!(main);

const IRQ_BADGE: u64 = 1 << 40;

/// The next interrupt message within `us` microseconds: its interrupt number, after
/// acknowledging it.
fn next_irq(disk: &NvmeDisk, us: u32) -> Option<u64> {
    let mut m = rt::ipc::Msg::new(0, &[]);
    let badge = rt::ipc::recv(rt::ipc::RECV_ANY, &mut m, abi::ipc::timeouts(0, us)).ok()?;
    if m.label() != abi::ipc::label::IRQ || badge & IRQ_BADGE == 0 {
        return None;
    }
    let line = m.word(1);
    if let Some(&(slot, _)) = disk.vectors.iter().find(|v| v.1 == line) {
        let _ = sys::irq_ack(slot);
    }
    Some(line)
}

/// Write and read back one block on the disk's current queue, each request finished
/// by an interrupt message: the numbers of the interrupts that came.
fn round(c: &mut Checks, disk: &mut NvmeDisk, buf: (u64, u64), sector: u64, fill: u8) -> alloc::vec::Vec<u64> {
    // Interrupts of earlier work (the bring-up's admin commands complete on vector 0).
    while next_irq(disk, 0).is_some() {}
    let mut seen = alloc::vec::Vec::new();
    for write in [true, false] {
        // SAFETY: the buffer is 4096 bytes of DMA memory from `dma_buffer`, ours alone.
        let b = unsafe { core::slice::from_raw_parts_mut(buf.0 as *mut u8, 4096) };
        b.fill(if write { fill } else { 0 });
        let Ok(t) = disk.submit(write, sector, b) else {
            c.check(false, "a request taken by the controller");
            return seen;
        };
        // Its completion comes with an interrupt message.
        let mut done = None;
        for _ in 0..8 {
            let Some(line) = next_irq(disk, 2_000_000) else { break };
            seen.push(line);
            if disk.peek_used() == Some(t) {
                done = Some(disk.complete(t));
                break;
            }
        }
        c.eq(done, Some(true), "the request finished well, told by an interrupt message");
    }
    // SAFETY: as above.
    let b = unsafe { core::slice::from_raw_parts(buf.0 as *const u8, 4096) };
    c.check(b.iter().all(|x| *x == fill), "the block read back is the one written");
    seen
}

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(sys::smp_info().cpus, 2, "two CPUs");
    c.check(rt::pci::init().is_err(), "no configuration ports: the bus is not ours");
    let s0 = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s0), Ok(()), "sigma0 for DMA memory and device registers");
    virtio::init(s0);
    c.eq(DeviceCap::get(0x02_00_00, 0).map(|_| ()), Err(abi::Error::NoRights), "no network controller: not granted");
    c.eq(DeviceCap::get(virtio::nvme::CLASS, 1).map(|_| ()), Err(abi::Error::NotFound), "one NVMe controller only");
    let dev = DeviceCap::get(virtio::nvme::CLASS, 0);
    c.check(dev.is_ok(), "a capability for the NVMe controller, from root");
    let Ok(dev) = dev else { return c.finish("msix_test") };
    let d = dev.device();
    println!("  NVMe {:04x}:{:04x} at {:02x}:{:02x}.{}", d.vendor, d.device, d.addr.bus, d.addr.dev, d.addr.func);
    c.eq((d.class, d.subclass, d.prog_if), (1, 8, 2), "its class, read through the capability");
    // The kernel keeps the BARs and the MSI-X capability.
    let bar0 = dev.read32(0x10);
    c.eq(dev.write32(0x10, 0), Err(abi::Error::NoRights), "BAR 0 is not the driver's to move");
    c.eq(dev.read32(0x10), bar0, "and it stays where it was");
    let mut at = (dev.read32(0x34) & 0xfc) as u16;
    let mut msix = None;
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        let v = dev.read32(at);
        if v as u8 == 0x11 {
            msix = Some(at);
        }
        at = ((v >> 8) & 0xfc) as u16;
    }
    c.check(msix.is_some(), "the controller has MSI-X");
    if let Some(at) = msix {
        c.eq(dev.write32(at, 0), Err(abi::Error::NoRights), "its MSI-X capability is the kernel's");
    }
    let (base, size, io) = dev.bar(0).unwrap_or((0, 0, true));
    println!("  BAR 0: {:#x}, {} KiB", base, size / 1024);
    c.check(!io && base != 0 && size >= 0x2000, "BAR 0 sized by the kernel");
    c.eq(dev.read32(0x10) & !0xf, base as u32 & !0xf, "BAR 0 restored after sizing");

    let disk = NvmeDisk::open_cap(dev, 2, &|n| IRQ_BADGE | n);
    if let Err(why) = &disk {
        println!("  {}", why);
    }
    c.check(disk.is_ok(), "bring-up with two I/O queue pairs");
    let Ok(mut disk) = disk else { return c.finish("msix_test") };
    c.eq(disk.queues(), 2, "one queue pair per CPU");
    let vectors = disk.vectors.clone();
    c.eq(vectors.len(), 2, "an MSI-X vector for each queue");
    if vectors.len() != 2 {
        return c.finish("msix_test");
    }
    let nums: alloc::vec::Vec<u64> = vectors.iter().map(|v| v.1).collect();
    println!("  queues' interrupts: {:?}", nums);
    c.check(nums.iter().all(|n| *n >= abi::irq::MSI_FIRST && *n < abi::irq::ALL), "message-signalled numbers");
    c.check(nums[0] != nums[1], "each queue its own");
    let buf = virtio::dma_buffer(1);
    c.check(buf.is_some(), "a DMA buffer");
    let Some(buf) = buf else { return c.finish("msix_test") };

    // On CPU 0: queue 0, its vector, taken by CPU 0.
    c.eq(sys::thread_cpu(abi::cap::SELF_THREAD), Ok(0), "running on CPU 0");
    disk.set_cpu(0);
    let before = (sys::cpu_info(0).unwrap_or_default(), sys::cpu_info(1).unwrap_or_default());
    let seen0 = round(&mut c, &mut disk, buf, 8 * 100, 0xa5);
    c.check(!seen0.is_empty() && seen0.iter().all(|n| *n == nums[0]), "queue 0's completions on queue 0's vector");
    let mid = (sys::cpu_info(0).unwrap_or_default(), sys::cpu_info(1).unwrap_or_default());
    c.check(mid.0.irqs >= before.0.irqs + 2, "taken by CPU 0");
    c.eq(mid.1.irqs, before.1.irqs, "none by CPU 1");

    // Moved to CPU 1: queue 1, its vector (following the driver), taken by CPU 1.
    c.eq(sys::thread_set_cpu(abi::cap::SELF_THREAD, 1), Ok(()), "move to CPU 1");
    c.eq(sys::thread_cpu(abi::cap::SELF_THREAD), Ok(1), "running on CPU 1");
    disk.set_cpu(1);
    let seen1 = round(&mut c, &mut disk, buf, 8 * 200, 0x3c);
    c.check(!seen1.is_empty() && seen1.iter().all(|n| *n == nums[1]), "queue 1's completions on queue 1's vector");
    let after = (sys::cpu_info(0).unwrap_or_default(), sys::cpu_info(1).unwrap_or_default());
    c.check(after.1.irqs >= mid.1.irqs + 2, "taken by CPU 1");
    println!(
        "  commands per queue {:?}; interrupts per vector {:?}; CPU 0 {} -> {}, CPU 1 {} -> {}",
        disk.completed(),
        vectors.iter().map(|v| sys::irq_count(v.0).unwrap_or(0)).collect::<alloc::vec::Vec<_>>(),
        before.0.irqs,
        after.0.irqs,
        before.1.irqs,
        after.1.irqs
    );
    c.check(disk.completed().iter().all(|n| *n >= 2), "both queues carried I/O");
    for (slot, n) in &vectors {
        c.check(sys::irq_count(*slot).is_ok_and(|k| k >= 2), &alloc::format!("interrupt {} counted by the kernel", n));
    }
    c.finish("msix_test")
}
