//! The hostile driver on an Intel 82574 (`dma_hostile_nic`, QEMU's e1000e under its
//! intel-iommu): it holds the NIC by capability and programs it by hand to reach memory
//! it did not map for DMA — a receive descriptor at a page it gave back
//! (`PCI_DMA_UNMAP`), then at a kernel page (physical 1 MiB), and a transmit descriptor
//! at the kernel page. Each frame is an ARP request for QEMU's gateway, whose answer is
//! the frame the device receives. The kernel reports a DMA fault on the console for each
//! (the scenario expects them), the page it gave back is unchanged, and frames through
//! mapped memory go on. Without an IOMMU the device writes the answer into the page:
//! the test fails.
//!
//! Then its interrupts (QEMU's `intremap=on`): it can write its MSI-X table (BAR 3), so
//! it rewrites its entry to send through the remapping table entry of another device's
//! interrupt (an NVMe controller's, which it also holds, as the victim) and raises an
//! interrupt cause: the unit checks the requester against the entry and drops the
//! message; the victim's count does not move, while its own entry, restored, still
//! delivers. A compatibility-format message aimed straight at the victim's vector is
//! tried and what happens is said (VT-d hardware blocks it with CFI clear; QEMU 7.2's
//! intel-iommu lets it through). Without interrupt remapping the kernel's entry is in
//! compatibility format and the test fails.
#![no_std]
#![no_main]

extern crate alloc;

use rt::{env, println, sys};
use tests::Checks;
use virtio_hal as virtio;

rt::entry!(main);

/// A kernel page: the kernel image is loaded at 1 MiB.
const KERNEL_PAGE: u64 = 0x10_0000;
/// Spins bounding each wait for the device.
const SPINS: u64 = 50_000_000;

fn page(va: u64) -> &'static mut [u8] {
    // SAFETY: `va` is a 4096-byte DMA buffer of ours from `dma_buffer`, mapped for life.
    unsafe { core::slice::from_raw_parts_mut(va as *mut u8, 4096) }
}

/// An ARP request from `mac` (10.0.2.15) for 10.0.2.2, QEMU's gateway, into `buf`: its
/// length.
fn arp_request(buf: &mut [u8], mac: [u8; 6]) -> usize {
    let mut f = [0u8; 42];
    f[0..6].fill(0xff);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    // Ethernet, IPv4, 6 and 4 bytes, a request.
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&[10, 0, 2, 15]);
    f[38..42].copy_from_slice(&[10, 0, 2, 2]);
    buf[..42].copy_from_slice(&f);
    42
}

fn main() -> i32 {
    let mut c = Checks::new();
    let s0 = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s0), Ok(()), "sigma0 for DMA memory and device registers");
    virtio::init(s0);
    let nic = virtio::open_e1000e();
    if let Err(why) = &nic {
        println!("  {}", why);
    }
    let Ok((_, mut nic, Some(dev))) = nic else {
        c.check(false, "an 82574 held by capability, brought up through the IOMMU");
        return c.finish("dma_hostile_nic");
    };
    c.check(virtio::dma_confined(), "the kernel says the NIC's DMA is confined");
    let mut up = false;
    for _ in 0..SPINS {
        if nic.link_up() {
            up = true;
            break;
        }
        core::hint::spin_loop();
    }
    c.check(up, "the link comes up");
    let (Some(tx), Some(b), Some(rx)) = (virtio::dma_buffer(1), virtio::dma_buffer(1), virtio::dma_buffer(1)) else {
        c.check(false, "three DMA buffers");
        return c.finish("dma_hostile_nic");
    };
    let mac = nic.mac_address();
    // Send an ARP request from `pa` (None: no transmit completion in time).
    let send = |nic: &mut e1000e::Nic<virtio::Mmio>, pa: u64| -> Option<bool> {
        let len = arp_request(page(tx.0), mac);
        let t = nic.transmit_begin(pa, len).ok()?;
        for _ in 0..SPINS {
            if nic.poll_transmit() == Some(t) {
                return Some(nic.transmit_complete(t).is_ok());
            }
            core::hint::spin_loop();
        }
        None
    };
    // The next received frame: its length (None: none in time).
    let receive = |nic: &mut e1000e::Nic<virtio::Mmio>| -> Option<Result<usize, e1000e::Error>> {
        for _ in 0..SPINS {
            if let Some(t) = nic.poll_receive() {
                return Some(nic.receive_complete(t));
            }
            core::hint::spin_loop();
        }
        None
    };

    // 1. The device writes a received frame into a page the driver gave back.
    page(b.0).fill(0x11);
    c.eq(sys::pci_dma_unmap(dev.slot, b.1, 1), Ok(()), "give page B back (no longer the device's)");
    c.check(nic.receive_begin(b.1, 4096).is_ok(), "a receive descriptor at page B");
    c.eq(send(&mut nic, tx.1), Some(true), "an ARP request sent from mapped memory");
    let r = receive(&mut nic);
    println!("  received into page B: {:?}", r);
    c.check(r.is_some(), "the answer's descriptor is written back");
    c.check(page(b.0).iter().all(|x| *x == 0x11), "page B is unchanged (the device wrote nothing into it)");

    // 2. The device writes a received frame into a kernel page, and 3. reads one to send.
    c.check(nic.receive_begin(KERNEL_PAGE, 4096).is_ok(), "a receive descriptor at a kernel page");
    c.eq(send(&mut nic, tx.1), Some(true), "another ARP request");
    let r = receive(&mut nic);
    println!("  received into a kernel page: {:?}", r);
    c.check(r.is_some(), "the descriptor is written back; the kernel runs on");
    let r = send(&mut nic, KERNEL_PAGE);
    println!("  sent from a kernel page: {:?}", r);
    c.check(r.is_some(), "the transmit descriptor is written back");

    // Frames through mapped memory still go both ways after the faults.
    page(rx.0).fill(0);
    c.check(nic.receive_begin(rx.1, 4096).is_ok(), "a receive descriptor at mapped memory");
    c.eq(send(&mut nic, tx.1), Some(true), "an ARP request");
    let r = receive(&mut nic);
    c.check(matches!(r, Some(Ok(n)) if n >= 42), "its answer arrives");
    let f = page(rx.0);
    c.check(f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2], "an ARP reply");
    c.check(f[0..6] == mac && f[28..32] == [10, 0, 2, 2], "to us, from the gateway");
    interrupts(&mut c, &mut nic, &dev);
    c.finish("dma_hostile_nic")
}

/// The MSI-X table of a function held by capability: (BAR, offset), from its capability.
fn msix_table(dev: &rt::pci::DeviceCap) -> Option<(u8, u64)> {
    let mut at = dev.read32(0x34) & 0xfc;
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        let h = dev.read32(at as u16);
        if h & 0xff == 0x11 {
            let t = dev.read32(at as u16 + 4);
            return Some(((t & 7) as u8, (t & !7) as u64));
        }
        at = (h >> 8) & 0xfc;
    }
    None
}

/// The hostile driver aims its MSI-X entry at another device's interrupt.
fn interrupts(c: &mut Checks, nic: &mut e1000e::Nic<virtio::Mmio>, dev: &rt::pci::DeviceCap) {
    let victim = rt::pci::DeviceCap::get(0x01_08_02, 0);
    let Ok((vs, v)) = victim.as_ref().map_err(|_| ()).and_then(|d| d.msix(0).map_err(|_| ())) else {
        c.check(false, "the victim: an NVMe controller's MSI-X entry 0, held by capability");
        return;
    };
    let (Ok((own, a)), Some((bir, off))) = (dev.msix(0), msix_table(dev)) else {
        c.check(false, "its own MSI-X entry 0 and table");
        return;
    };
    let Ok((base, size, false)) = dev.bar(bir) else {
        c.check(false, "the MSI-X table's BAR");
        return;
    };
    let table = virtio::map_mmio(base, size as usize) + off;
    let word = |i: u64| (table + 4 * i) as *mut u32;
    // SAFETY: entry 0 of the NIC's MSI-X table, in its BAR mapped just above.
    let rd = |i: u64| unsafe { core::ptr::read_volatile(word(i)) };
    // SAFETY: as above; writing it is the attack.
    let wr = |i: u64, x: u32| unsafe { core::ptr::write_volatile(word(i), x) };
    let saved = [rd(0), rd(1), rd(2)];
    println!("  its MSI-X entry 0 as the kernel wrote it: address {:#x}, data {:#x}", saved[0], saved[2]);
    let handle = (saved[0] >> 5) & 0x7fff | ((saved[0] >> 2) & 1) << 15;
    c.check(saved[0] & 1 << 4 != 0, "in remappable format (interrupt remapping on)");
    c.eq(handle as u64, a, "through the remapping table entry of its own interrupt");
    let count = |s: u64| sys::irq_count(s).unwrap_or(u64::MAX);
    nic.use_msix(0);
    // Unmask the entry (the kernel masks it until a thread attaches: the driver writes
    // the vector control itself), raise the link and "other" causes, let it arrive.
    let fire = |nic: &mut e1000e::Nic<virtio::Mmio>, until: &dyn Fn() -> bool| {
        wr(3, 0);
        nic.enable_interrupts();
        nic.raise(1 << 2 | 1 << 24);
        for _ in 0..SPINS / 10 {
            if until() {
                break;
            }
            core::hint::spin_loop();
        }
        nic.ack_interrupt();
    };
    let a0 = count(own);
    fire(nic, &|| count(own) > a0);
    c.check(count(own) > a0, "a raised cause arrives as its own interrupt");

    // Through the victim's table entry: the unit finds another requester's entry.
    let (a1, v1) = (count(own), count(vs));
    wr(0, 0xFEE0_0000 | ((v as u32) & 0x7fff) << 5 | 1 << 4);
    wr(1, 0);
    wr(2, 0);
    fire(nic, &|| count(vs) > v1);
    println!("  through the NVMe's entry {}: its interrupt taken {} more times", v, count(vs) - v1);
    c.eq(count(vs), v1, "a message through another device's remapping entry does not reach its interrupt");
    c.eq(count(own), a1, "nor its own");

    // Compatibility format, straight at the victim's vector on the boot CPU.
    let v2 = count(vs);
    let vector = 0x50 + (v as u32 - abi::irq::MSI_FIRST as u32);
    wr(0, 0xFEE0_0000);
    wr(2, vector);
    fire(nic, &|| count(vs) > v2);
    let reached = count(vs) > v2;
    println!(
        "  a compatibility-format message at the NVMe's vector {:#x}: {}",
        vector,
        if reached {
            "delivered (QEMU 7.2's intel-iommu lets compatibility-format messages through although the kernel left CFI clear; VT-d hardware blocks them)"
        } else {
            "blocked"
        }
    );

    // Restored as the kernel wrote it, its own interrupts arrive again.
    wr(0, saved[0]);
    wr(1, saved[1]);
    wr(2, saved[2]);
    let a3 = count(own);
    fire(nic, &|| count(own) > a3);
    c.check(count(own) > a3, "its own entry restored, its interrupt arrives again");
    wr(3, 1);
}
