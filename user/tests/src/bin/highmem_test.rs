//! RAM above 4 GiB is used: on a machine with 5 GiB, sigma0 holds
//! more than 4 GiB, and a frame above 4 GiB can be had from it, written and read back,
//! and given back.
#![no_std]
#![no_main]

use abi::fpage::Fpage;
use rt::ipc::Msg;
use rt::shared::Area;
use sigma0_api as s0;
use tests::Checks;

rt::entry!(main);

const VA: u64 = rt::layout::SCRATCH;
/// A frame well above 4 GiB (QEMU puts RAM beyond the first 2 GiB of a 5 GiB q35 there).
const HIGH: u64 = 0x1_4000_0000;

fn main() -> i32 {
    let mut c = Checks::new();
    let s = rt::alloc_slot();
    c.eq(rt::env::lookup("sigma0", s), Ok(()), "sigma0, as the manifest grants");
    let mut m = Msg::new(s0::STATS, &[]);
    c.eq(tests::call_with_window(s, Fpage(0), &mut m), Ok(()), "sigma0's statistics");
    let mib = m.word(3) >> 8;
    rt::println!("  sigma0 holds {} MiB", mib);
    c.check(mib > 4096, "sigma0 holds more than 4 GiB");
    let mut m = Msg::new(s0::PHYS, &[HIGH, 0, VA]);
    c.eq(tests::call_with_window(s, Fpage::mem(VA, 12, abi::mem::RIGHTS_MASK), &mut m), Ok(()), "a frame at 5 GiB");
    // SAFETY: sigma0 just mapped the frame read-write at VA, a page no Rust data uses.
    let area = unsafe { Area::new(VA, 4096) };
    area.write(4088, 0x5EC0_0D00_0000_0005);
    c.eq(area.read(4088), 0x5EC0_0D00_0000_0005, "written and read back");
    let mut m = Msg::new(s0::FREE, &[HIGH, 0]);
    c.eq(tests::call_with_window(s, Fpage(0), &mut m).map(|_| m.word(2)), Ok(1), "and given back");
    c.finish("highmem_test")
}
