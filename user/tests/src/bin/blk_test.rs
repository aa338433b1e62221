//! A user-level block driver at work — virtio-blk (`disk`) or NVMe (`disk_nvme`): the
//! PCI device found through the granted configuration ports, its registers mapped from
//! sigma0's device window, its rings or queues and buffers in DMA memory from sigma0 —
//! real DMA on the disk image QEMU gives it. The disk
//! is a BAIO device made by `cargo xtask mkimage`: it is mounted (every check), a
//! segment's bytes read, a segment written and read back, a segment created and the
//! device remounted.
#![no_std]
#![no_main]

extern crate alloc;

use baio::{BlockDev, Volume, BLOCK, READ, WRITE};
use rt::{env, pci, println};
use tests::Checks;
use virtio_hal as virtio;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(pci::init(), Ok(()), "configuration ports granted");
    let s0 = rt::alloc_slot();
    c.eq(env::lookup("sigma0", s0), Ok(()), "sigma0 for DMA memory and device registers");
    virtio::init(s0);
    let (d, mut disk) = match virtio::open_disk() {
        Ok(x) => x,
        Err(why) => {
            println!("  {}", why);
            c.check(false, "a virtio-blk device driven from user level");
            return c.finish("blk_test");
        }
    };
    println!("  {} at {:02x}:{:02x}.{}", disk.kind(), d.addr.bus, d.addr.dev, d.addr.func);
    c.eq(disk.sectors(), 64 * 1024 * 1024 / 512, "capacity: the 64 MiB image");

    let v = Volume::mount(&mut disk);
    c.check(v.is_ok(), "mount the BAIO device (every consistency check)");
    let Ok(mut v) = v else { return c.finish("blk_test") };
    let files = v.lookup("files").cloned();
    c.check(files.is_some(), "segment `files` is there");
    let mut b = [0u8; BLOCK];
    if let Some(f) = &files {
        c.eq(disk.read(f.start, &mut b), Ok(()), "read its first block by DMA");
        c.eq(&b[..12], b"hello scion\n", "with the bytes mkimage put there");
    }
    // Write a segment and read it back.
    let scratch = v.lookup("scratch").cloned().unwrap();
    let mut ok = true;
    for i in 0..8u64 {
        let mut w = [0u8; BLOCK];
        for (k, x) in w.iter_mut().enumerate() {
            *x = (i as usize * 31 + k) as u8;
        }
        ok &= disk.write(scratch.start + i, &w).is_ok();
    }
    c.check(ok, "write 8 blocks of `scratch`");
    let mut same = true;
    for i in 0..8u64 {
        let mut r = [0u8; BLOCK];
        same &= disk.read(scratch.start + i, &mut r).is_ok()
            && r.iter().enumerate().all(|(k, x)| *x == (i as usize * 31 + k) as u8);
    }
    c.check(same, "and read them back intact");
    // Metadata through the driver: create a segment, sync, remount.
    c.check(v.create("made-in-scion", 9, READ | WRITE, 0, 64, u64::MAX, 1).is_ok(), "create a segment");
    c.eq(v.sync(&mut disk), Ok(()), "write the metadata");
    let w = Volume::mount(&mut disk);
    c.check(
        w.as_ref().is_ok_and(|w| w.lookup("made-in-scion").is_some_and(|i| i.length == 64 && i.owner == 9)),
        "remount: the new segment is on disk",
    );
    c.check(disk.flush().is_ok(), "flush");
    c.finish("blk_test")
}
