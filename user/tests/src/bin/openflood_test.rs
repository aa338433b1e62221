//! The open flood: a principal that opened a readable segment about
//! 180 times made every other principal's open fail with `NoMemory`, and its exit
//! panicked the kernel (task teardown needed one 2 MiB allocation). Now `blk` holds at
//! most `MAX_OPEN_PER_PRINCIPAL` opens per principal; `open_hog` (another principal,
//! this program with `hog`) opens until refused and waits; this program's opens work
//! beside it, and after it is killed with all its opens, the kernel and `blk` go on.
#![no_std]
#![no_main]

use abi::Error;
use blk_api::client as baio;
use rt::{env, println, sys};
use tests::Checks;

rt::entry!(main);

const AREA: u64 = rt::layout::SEGMENT_AREA;
const TWO_MIB: u64 = 2 << 20;

fn hog(blk: u64) -> i32 {
    let mut held = alloc_vec();
    let mut end = Ok(());
    for i in 0..200u64 {
        match baio::open(blk, "shared-of", 1, AREA + i * TWO_MIB) {
            Ok(s) => held.push(s),
            Err(e) => {
                end = Err(e);
                break;
            }
        }
    }
    println!("open_hog: {} opens, then {:?}", held.len(), end);
    loop {
        sys::sleep_us(1_000_000);
    }
}

extern crate alloc;
fn alloc_vec() -> alloc::vec::Vec<baio::Segment> {
    alloc::vec::Vec::new()
}

fn main() -> i32 {
    let blk = rt::alloc_slot();
    if env::lookup("blk", blk).is_err() {
        println!("openflood: no blk");
        return 1;
    }
    if rt::args().split(' ').nth(1) == Some("hog") {
        return hog(blk);
    }
    let mut c = Checks::new();
    c.eq(baio::create(blk, "shared-of", 8, 1), Ok(()), "a segment others may read");
    let h = rt::alloc_slot_pair();
    let id = env::spawn("open_hog", h);
    c.check(id.is_ok(), "start open_hog (another principal)");
    // Give it time to open all it can.
    sys::sleep_us(3_000_000);
    let mine = baio::open(blk, "shared-of", 3, AREA);
    c.check(mine.is_ok(), "our open works while the hog holds all it may");
    if let Ok(s) = mine {
        c.eq(s.close(), Ok(()), "close it");
    }
    if let Ok(id) = id {
        c.eq(env::kill(id), Ok(()), "kill the hog with its opens");
    }
    c.check(tests::wait_until(3000, || sys::cap_info(h + 1).is_err()), "it ends (the kernel tears it down)");
    let again = baio::open(blk, "shared-of", 3, AREA);
    c.check(again.is_ok(), "and blk still serves");
    if let Ok(s) = again {
        let _ = s.close();
    }
    c.eq(baio::delete(blk, "shared-of"), Ok(()), "delete the segment (no open is left)");
    c.eq(baio::open(blk, "nope", 1, AREA).err(), Some(Error::NotFound), "blk answers");
    c.finish("openflood_test")
}
