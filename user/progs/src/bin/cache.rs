//! The shared block cache (BAIO paper §3.4): one cache for every program's buffered
//! operations, so a block many programs read is cached once. The block service alone
//! moves data (it DMAs into the cache's frames, which this server maps to it); this
//! server decides what stays: it keeps the index and the replacement policy
//! (`baio::cache`, least recently used), which is the place a grafted policy goes.
#![no_std]
#![no_main]

use abi::fpage::Fpage;
use abi::{mem, Error};
use baio::cache::{Cache, Lookup};
use rt::ipc::{self, Msg};
use rt::proto::cache as p;
use rt::proto::sigma0 as s0;
use rt::println;

rt::entry!(main);

const AREA: u64 = 0x0000_5c00_0000_0000;
/// log2 of the cache's pages (1024 blocks: 4 MiB).
const LOG2: u64 = 10;

fn main() -> i32 {
    let s0slot = rt::alloc_slot();
    if rt::env::lookup("sigma0", s0slot).is_err() {
        println!("cache: the manifest must grant sigma0");
        return 1;
    }
    ipc::set_windows(Fpage::mem(AREA, 12 + LOG2, 7), Fpage(0), Fpage(0));
    let mut m = Msg::new(s0::ALLOC, &[LOG2, AREA]);
    let ok = ipc::call(s0slot, &mut m, ipc::FOREVER).is_ok() && m.word(1) == 0 && m.items() == 1;
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    if !ok {
        println!("cache: no memory for {} blocks", 1 << LOG2);
        return 1;
    }
    let phys = m.word(2);
    let mut c = Cache::new(1 << LOG2);
    println!("cache: {} blocks at {:#x}", c.slots(), phys);
    let mut reply = None;
    loop {
        let mut m = Msg::empty();
        if ipc::serve_next(reply.take(), &mut m).is_err() {
            continue;
        }
        reply = Some(match m.label() {
            p::ATTACH => {
                let mut r = Msg::new(0, &[0, phys, c.slots() as u64]);
                r.push_item(Fpage::mem(AREA, 12 + LOG2, mem::READ | mem::WRITE), 0);
                r
            }
            p::LOOKUP if m.word(2) <= p::MAX_LOOKUP => {
                // w[0] is MR1 (0: no error); MR2.. answer block by block.
                let mut w = [0u64; 1 + p::MAX_LOOKUP as usize];
                for k in 0..m.word(2) {
                    w[1 + k as usize] = match c.lookup(m.word(1).wrapping_add(k)) {
                        Lookup::Hit(s) => s as u64 | p::HIT << 32,
                        Lookup::Fill(s) => s as u64 | p::FILL << 32,
                        Lookup::Busy(s) => s as u64 | p::BUSY << 32,
                        Lookup::Full => u64::MAX,
                    };
                }
                Msg::new(0, &w[..1 + m.word(2) as usize])
            }
            p::FILLED => {
                let known = c.filled(m.word(1), m.word(2) == 1);
                Msg::new(0, &[if known { 0 } else { Error::InvalidArg as u64 }])
            }
            p::INVALIDATE => {
                c.invalidate(m.word(1), m.word(2));
                Msg::new(0, &[0])
            }
            p::STATS => {
                let s = c.stats();
                Msg::new(0, &[0, s.hits, s.misses, s.resident, c.slots() as u64, s.evictions])
            }
            _ => Msg::new(0, &[Error::InvalidArg as u64]),
        });
    }
}
