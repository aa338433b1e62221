//! The cost of mapping a buffer for DMA (`cargo xtask bench devices`): the driver's
//! `PCI_DMA_MAP` and `PCI_DMA_UNMAP` of 1, 2 (an 8 KiB request) and 16 pages for an NVMe
//! controller it holds by capability. With an IOMMU (QEMU's intel-iommu) a map writes
//! the device's second-level tables and an unmap clears them and invalidates the
//! IOTLB before it returns; without one both are the kernel's bookkeeping alone (the
//! driver is trusted). The controller itself is left alone.
//!
//! Prints `BENCH dma_map_<N>p` and `BENCH dma_unmap_<N>p` (ticks per call: instructions
//! under icount, guest cycles under plain TCG) and `bench_dma: confined=<0|1>`.
//! `smoke` as the argument: a few of each.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use rt::pci::DeviceCap;
use rt::{env, println, sys};
use virtio_hal as virtio;

rt::entry!(main);

fn report(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    if v.is_empty() {
        return;
    }
    println!(
        "BENCH {} median={} min={} max={} samples={} unit=ticks/op",
        name,
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

fn main() -> i32 {
    let n: usize = if rt::args().split(' ').nth(1) == Some("smoke") { 20 } else { 2000 };
    let s0 = rt::alloc_slot();
    if env::lookup("sigma0", s0).is_err() {
        println!("bench_dma: no sigma0");
        return 1;
    }
    virtio::init(s0);
    let dev = match DeviceCap::get(virtio::nvme::CLASS, 0) {
        Ok(d) => d,
        Err(e) => {
            println!("bench_dma: no NVMe controller: {:?}", e);
            return 1;
        }
    };
    let mut confined = false;
    for pages in [1u64, 2, 16] {
        // Not mapped for the device yet: no device is set for the HAL's memory.
        let Some((va, pa)) = virtio::dma_buffer(pages) else {
            println!("bench_dma: no memory for {} pages", pages);
            return 1;
        };
        let (mut map, mut unmap) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let t0 = sys::rdtsc_ordered();
            let r = sys::pci_dma_map(dev.slot, va, pages);
            let t1 = sys::rdtsc_ordered();
            let u = sys::pci_dma_unmap(dev.slot, pa, pages);
            let t2 = sys::rdtsc_ordered();
            match (r, u) {
                (Ok(c), Ok(())) => confined = c,
                (r, u) => {
                    println!("bench_dma: map {:?}, unmap {:?}", r, u);
                    return 1;
                }
            }
            map.push(t1 - t0);
            unmap.push(t2 - t1);
        }
        report(&alloc::format!("dma_map_{}p", pages), map);
        report(&alloc::format!("dma_unmap_{}p", pages), unmap);
    }
    println!("bench_dma: confined={}", u8::from(confined));
    println!("bench_dma: done");
    0
}
