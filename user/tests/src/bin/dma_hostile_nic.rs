//! The hostile driver on an Intel 82574 (`dma_hostile_nic`, QEMU's e1000e under its
//! intel-iommu): it holds the NIC by capability and programs it by hand to reach memory
//! it did not map for DMA — a receive descriptor at a page it gave back
//! (`PCI_DMA_UNMAP`), then at a kernel page (physical 1 MiB), and a transmit descriptor
//! at the kernel page. Each frame is an ARP request for QEMU's gateway, whose answer is
//! the frame the device receives. The kernel reports a DMA fault on the console for each
//! (the scenario expects them), the page it gave back is unchanged, and frames through
//! mapped memory go on. Without an IOMMU the device writes the answer into the page:
//! the test fails.
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
    c.finish("dma_hostile_nic")
}
