//! Interrupts follow their driver's CPU: with blk on CPU 1 (its manifest
//! entry's `cpu`), reads and writes of a segment complete, and the device interrupts
//! they raise are taken by CPU 1, none by CPU 0 (`KERNEL_INFO_CPU`).
#![no_std]
#![no_main]

extern crate alloc;

use blk_api as p;
use blk_api::client as baio;
use rt::{env, sys};
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    c.eq(sys::smp_info().cpus, 2, "two CPUs");
    c.eq(sys::cpu_info(2).map(|_| ()), Err(abi::Error::InvalidArg), "no CPU 2 to ask about");
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(baio::create(blk, "irq", 64, 0), Ok(()), "a segment");
    let seg = baio::open(blk, "irq", 3, rt::layout::SEGMENT_AREA);
    c.check(seg.is_ok(), "open it");
    let Ok(seg) = seg else { return c.finish("irq_cpu_test") };
    let (Ok(b0), Ok(b1)) = (sys::cpu_info(0), sys::cpu_info(1)) else {
        c.check(false, "KERNEL_INFO_CPU for CPUs 0 and 1");
        return c.finish("irq_cpu_test");
    };
    // Direct writes then reads, one block at a time (each completes by an interrupt).
    let mut done = 0;
    for round in 0..2 {
        let kind = if round == 0 { p::WRITE_OP } else { p::READ_OP };
        for b in 0..32u64 {
            if seg.batch_ops(&[p::op(kind, b, 1, 0, p::DATA)], p::WAIT_ALL).is_ok() && seg.status(0) == p::DONE {
                done += 1;
            }
        }
    }
    let (a0, a1) = (sys::cpu_info(0).unwrap_or_default(), sys::cpu_info(1).unwrap_or_default());
    rt::println!("irq_cpu_test: device interrupts CPU 0 {} -> {}, CPU 1 {} -> {}", b0.irqs, a0.irqs, b1.irqs, a1.irqs);
    c.eq(done, 64, "64 operations done by the driver on CPU 1");
    c.check(a1.irqs >= b1.irqs + 16, "the disk's interrupts arrive on CPU 1");
    c.eq(a0.irqs, b0.irqs, "CPU 0 takes none of them");
    c.finish("irq_cpu_test")
}
