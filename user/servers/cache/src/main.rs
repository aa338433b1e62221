//! The shared block cache (BAIO paper §3.4): one cache for every program's buffered
//! operations, so a block many programs read is cached once. The block service alone
//! moves data (it DMAs into the cache's frames, which this server maps to it); this
//! server decides what stays: it keeps the index and the replacement policy
//! (`baio::cache`, least recently used), which is the place a grafted policy goes.
//!
//! It serves one client, the block service: the first program to `ATTACH` is bound,
//! and every other program's requests but `STATS` are refused (`NoRights`) — the
//! frames hold every principal's blocks, so no one else may map them or steer what
//! they hold. When the bound program ends (root's `GONE`), its mapping of the frames
//! is revoked, the cache starts empty, and the next `ATTACH` binds again (a restarted
//! block service).
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use abi::fpage::Fpage;
use abi::{mem, Error};
use baio::cache::{Cache, Lookup};
use cache_api::{self as p, Request};
use rt::ipc::Msg;
use rt::println;
use rt::server::{self, Answer, Badge, Server};
use sigma0_api as s0;

rt::entry!(main);

const AREA: u64 = rt::layout::CACHE_FRAMES;
/// log2 of the cache's pages (1024 blocks: 4 MiB).
const LOG2: u64 = 10;

fn main() -> i32 {
    let s0slot = rt::alloc_slot();
    if rt::env::lookup("sigma0", s0slot).is_err() {
        println!("cache: the manifest must grant sigma0");
        return 1;
    }
    let mut m = Msg::new(s0::ALLOC, &[LOG2, AREA]);
    let ok = rt::server::request_mapping(s0slot, [Fpage::mem(AREA, 12 + LOG2, 7), Fpage(0), Fpage(0)], &mut m).is_ok() && m.items() == 1;
    if !ok {
        println!("cache: no memory for {} blocks", 1 << LOG2);
        return 1;
    }
    let phys = m.word(2);
    let c = Cache::new(1 << LOG2);
    println!("cache: {} blocks at {:#x}", c.slots(), phys);
    let mut buf = [0u8; 64];
    server::run(&mut CacheServer { c, phys, client: None }, &mut buf)
}

struct CacheServer {
    c: Cache,
    /// Physical address of the frames (contiguous).
    phys: u64,
    /// The program bound by the first ATTACH (the block service).
    client: Option<u32>,
}

impl Server for CacheServer {
    type Request<'a> = Request;

    fn gone(&mut self, who: Badge) {
        if self.client == Some(who.program()) {
            println!("cache: client {} is gone: the frames are taken back, the cache starts empty", who.program());
            let _ = rt::sys::revoke(Fpage::mem(AREA, 12 + LOG2, 0));
            self.c = Cache::new(self.c.slots());
            self.client = None;
        }
    }

    fn handle(&mut self, from: Badge, req: Request) -> Answer {
        let me = from.program();
        match (req, self.client) {
            (Request::Stats, _) => {}
            (Request::Attach, None) if me != 0 => self.client = Some(me),
            (_, Some(c)) if c == me => {}
            _ => return Answer::err(Error::NoRights),
        }
        let c = &mut self.c;
        match req {
            Request::Attach => {
                let mut r = server::ok_msg(&[self.phys, c.slots() as u64]);
                r.push_item(Fpage::mem(AREA, 12 + LOG2, mem::READ | mem::WRITE), 0);
                Answer::Reply(r)
            }
            Request::Lookup { first, n } => {
                let mut w = [0u64; p::MAX_LOOKUP as usize];
                for k in 0..n {
                    w[k as usize] = match c.lookup(first.wrapping_add(k)) {
                        Lookup::Hit(s) => s as u64 | p::HIT << 32,
                        Lookup::Fill(s) => s as u64 | p::FILL << 32,
                        Lookup::Busy(s) => s as u64 | p::BUSY << 32,
                        Lookup::Full => u64::MAX,
                    };
                }
                Answer::ok(&w[..n as usize])
            }
            Request::Filled { block, ok } => {
                if c.filled(block, ok) {
                    Answer::ok(&[])
                } else {
                    Answer::err(Error::InvalidArg)
                }
            }
            Request::Invalidate { first, n } => {
                c.invalidate(first, n);
                Answer::ok(&[])
            }
            Request::Stats => {
                let s = c.stats();
                Answer::ok(&[s.hits, s.misses, s.resident, c.slots() as u64, s.evictions])
            }
        }
    }
}
