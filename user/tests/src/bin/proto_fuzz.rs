//! `proto_fuzz SERVER SEED COUNT`: a hostile client of one server (every
//! server's protocol is fuzzed). COUNT random and mutated requests — the server's own
//! labels (and others) with random word counts and values biased to small numbers,
//! handles, block counts and extremes; strings of random bytes (not UTF-8, empty,
//! long); map and capability items offered, and garbage typed items — each with a
//! short receive timeout (a request the server keeps, such as a console READ or a
//! segment WAIT, is given up as a hostile client would). For `blk` a third of them go
//! to an open segment's capability, with its control page scribbled on. Then the
//! server must still serve a normal client correctly (`check`).
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::{mem, Error};
use alloc::format;
use alloc::vec::Vec;
use blk_api as bp;
use blk_api::client as baio;
use files_api::client as f;
use rt::ipc::{self, timeouts, Msg, INFINITE};
use rt::{env, println, sys};
use tests::{Checks, Rng};

rt::entry!(main);

/// A server's labels (the ones a hostile client would try first).
fn labels(server: &str) -> Vec<u64> {
    match server {
        // The graft protocol's labels (0xe0 ..= 0xe8) too: blk and the cache host points
        // (and LDISK, 0x8e; USAGE, 0x8f).
        "blk" => (0x80..=0x8f).chain(0xe0..=0xe8).chain([rt::server::GONE]).collect(),
        "files" => (0xa0..=0xaa).chain([rt::server::GONE]).collect(),
        "cache" => (0x90..=0x97).chain(0xe0..=0xe8).collect(),
        // Not EXIT (the caller's own exit) nor KILL (it may name the caller itself).
        "root" => (2..=11).filter(|l| *l != rt::proto::KILL).collect(),
        // The graft protocol's too: mem0 hosts the eviction point for its programs' pages.
        "mem0" => (0x60..=0x64).chain(0xe0..=0xe8).chain([abi::ipc::label::PAGE_FAULT]).collect(),
        "console" => [rt::proto::console::WRITE, rt::proto::console::READ].to_vec(),
        _ => Vec::new(),
    }
}

/// A word a hostile client might send.
fn word(r: &mut Rng) -> u64 {
    match r.below(10) {
        0..=3 => r.below(40),
        4 => r.below(5000),
        5 => [u64::MAX, u64::MAX - 1, 1 << 32, 1 << 63, 1 << 31, 4096, 0][r.below(7) as usize],
        6 => bp::AREA_BYTES - r.below(8) * 4096,
        7 => r.below(64) | (r.below(300) << 32),
        8 => rt::layout::POOL + r.below(1 << 20) * 4096,
        _ => r.next(),
    }
}

const AREA: u64 = rt::layout::SEGMENT_AREA;
/// blk: the segment of our own whose capability gets a share of the noise.
const SEGMENT: &str = "fuzzed";
/// A page of ours that may be offered in map items.
const OFFER: u64 = rt::layout::SCRATCH;

fn main() -> i32 {
    let mut c = Checks::new();
    let mut args = rt::args().split(' ').skip(1);
    let server = args.next().unwrap_or("");
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let count: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    println!("proto_fuzz: {} with seed {} ({} hostile requests)", server, seed, count);
    let labels = labels(server);
    // Root is every program's parent; the others are looked up by name.
    let srv = if server == "root" { abi::cap::PARENT } else { rt::alloc_slot() };
    if labels.is_empty() || (server != "root" && env::lookup(server, srv).is_err()) {
        c.check(false, &format!("find server `{server}`"));
        return c.finish("proto_fuzz");
    }
    sys::prefault(OFFER, 1);
    // blk: a segment of our own, whose capability gets a share of the noise.
    let mut seg = None;
    if server == "blk" {
        let _ = baio::create(srv, SEGMENT, 64, 1);
        seg = baio::open(srv, SEGMENT, 3, AREA).ok();
        c.check(seg.is_some(), "open a segment of our own");
    }
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ server.len() as u64 | 1);
    let mut strbuf = alloc::vec![0u8; 70_000];
    let mut recvbuf = alloc::vec![0u8; 70_000];
    let (mut answered, mut ok, mut refused, mut kept) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..count {
        let to_seg = seg.is_some() && r.below(3) == 0;
        let label = if r.below(10) < 8 {
            if to_seg {
                [bp::BATCH, bp::SUBMIT, bp::WAIT, bp::SYNC, bp::CLOSE, bp::DELEGATE, bp::ATTACH, bp::REVOKE, bp::LDISK]
                    [r.below(9) as usize]
            } else {
                labels[r.below(labels.len() as u64) as usize]
            }
        } else {
            r.next() >> 40
        };
        let n = if r.below(20) == 0 { r.below(60) } else { r.below(7) };
        let words: Vec<u64> = (0..n).map(|_| word(&mut r)).collect();
        let mut m = Msg::new(label, &words);
        if r.below(2) == 0 {
            let len = match r.below(8) {
                0 => 0,
                1 => 60_000 + r.below(10_000) as usize,
                2 => 4096,
                _ => r.below(300) as usize,
            };
            for b in strbuf[..len].iter_mut() {
                *b = match r.below(4) {
                    0 => b'/',
                    1 => b'a' + r.below(4) as u8,
                    _ => r.next() as u8,
                };
            }
            ipc::set_send_string(&strbuf[..len]);
            m = m.with_string();
        }
        if r.below(25) == 0 && n < 50 {
            let fp = match r.below(4) {
                0 => Fpage::mem(OFFER, 12, mem::READ),
                1 => Fpage::caps(srv, 0, abi::rights::ALL),
                // A capability blk minted (an ATTACH to the service brings one).
                2 => Fpage::caps(seg.as_ref().map_or(srv, |s| s.cap), 0, abi::rights::ALL),
                _ => Fpage(r.next()),
            };
            m.push_item(fp, r.next() & !0xfff);
        }
        if let Some(s) = &seg {
            if r.below(50) == 0 {
                // Scribble on our own control page: the service must read it as hostile.
                let off = r.below(4096 / 8) * 8;
                s.shared().write(off, word(&mut r));
            }
        }
        ipc::set_recv_buffer(&mut recvbuf);
        let dest = match &seg {
            Some(s) if to_seg => s.cap,
            _ => srv,
        };
        // The console keeps every READ until a key is typed: give those up quickly.
        let wait_us = if server == "console" { 1_000 } else { 20_000 };
        match ipc::call(dest, &mut m, timeouts(INFINITE, wait_us)) {
            Ok(()) => {
                answered += 1;
                if m.word(1) == 0 {
                    ok += 1;
                }
            }
            Err(Error::Timeout) => kept += 1,
            // The kernel refused the message itself (malformed items, a capability
            // revoked by a CLOSE the noise sent): not the server's doing.
            Err(_) => refused += 1,
        }
        if to_seg && label == bp::CLOSE {
            // Whatever that did, go on with a fresh open.
            if let Some(s) = seg.take() {
                let _ = s.close();
            }
            seg = baio::open(srv, SEGMENT, 3, AREA).ok();
        }
        if i % 10_000 == 9_999 {
            println!(
                "proto_fuzz: {} requests, {} answered ({} successes), {} kept, {} refused by the kernel",
                i + 1,
                answered,
                ok,
                kept,
                refused
            );
        }
    }
    println!("proto_fuzz: {} answered, {} successes, {} kept, {} refused by the kernel", answered, ok, kept, refused);
    c.check(answered * 2 >= count, "the server answered most requests");
    if let Some(s) = seg.take() {
        let _ = s.close();
    }
    check(&mut c, server, srv);
    c.finish("proto_fuzz")
}

/// What a normal client of `server` does, afterwards: it must work.
fn check(c: &mut Checks, server: &str, srv: u64) {
    match server {
        "blk" | "cache" => {
            let blk = if server == "blk" { srv } else { lookup(c, "blk") };
            let _ = baio::create(blk, "after", 16, 0);
            let s = baio::open(blk, "after", 3, AREA);
            c.check(s.is_ok(), "blk: open a segment");
            if let Ok(s) = s {
                // Block 0 from slot 0 (direct), block 1 from slot 1 (buffered).
                for (k, b) in s.data(0)[..4096].iter_mut().enumerate() {
                    *b = (k % 251) as u8;
                }
                for (k, b) in s.data(1)[..4096].iter_mut().enumerate() {
                    *b = ((k + 4096) % 251) as u8;
                }
                let w = s.batch(&[(bp::WRITE_OP, 0, 1), (bp::WRITE_OP | bp::BUFFERED, 1, 1)]);
                c.check(
                    w.is_ok() && s.wait(0) == bp::DONE && s.wait(1) == bp::DONE,
                    "blk: a direct and a buffered write",
                );
                s.data(0)[..2 * 4096].fill(0);
                let rd = s.batch(&[(bp::READ_OP | bp::BUFFERED, 0, 2)]);
                let st = s.wait(0);
                let bad = s.data(0)[..2 * 4096].iter().enumerate().position(|(k, b)| *b != (k % 251) as u8);
                if rd.is_err() || st != bp::DONE || bad.is_some() {
                    println!("proto_fuzz: read back: {:?}, status {:#x}, first wrong byte {:?}", rd, st, bad);
                }
                c.check(rd.is_ok() && st == bp::DONE && bad.is_none(), "blk: both read back through the cache");
                c.eq(s.close(), Ok(()), "blk: close");
            }
            c.eq(baio::delete(blk, "after"), Ok(()), "blk: delete");
        }
        "files" => {
            // First take away what the noise made (the image holds only hello.txt), as
            // a program cleans up after itself: it may have filled the filesystem.
            let removed = clean(srv, "");
            println!("proto_fuzz: removed {} files and directories the noise made", removed);
            let data: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
            let h = f::open(srv, "/after.txt", true);
            c.check(h.is_ok(), "files: create a file");
            if let Ok((h, _)) = h {
                c.eq(f::write(srv, h, 0, &data), Ok(data.len() as u64), "files: write it");
                c.eq(f::close(srv, h), Ok(()), "files: close it");
            }
            c.check(f::read_all(srv, "/after.txt").is_ok_and(|b| b == data), "files: read it back");
            c.eq(f::remove(srv, "/after.txt"), Ok(()), "files: remove it");
        }
        "root" => {
            c.check(env::ps().is_ok_and(|p| p.contains("proto_fuzz")), "root: ps lists us");
            let e = rt::alloc_slot_pair();
            c.check(env::spawn("echo", e).is_ok(), "root: spawn echo");
            let mut m = Msg::new(echo_api::ECHO, &[5]);
            c.eq(ipc::call(e, &mut m, rt::ipc::FOREVER), Ok(()), "root: echo answers");
        }
        "mem0" => {
            // Our own pages come from mem0: new ones still do, zeroed and ours.
            let at = rt::layout::POOL + (1 << 30);
            sys::prefault(at, 64);
            // SAFETY: the 64 pages at `at` were just faulted in for us; nothing else uses them.
            let page = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, 64 * 4096) };
            c.check(page.iter().all(|b| *b == 0), "mem0: 64 new pages, zeroed");
            page.fill(0x5a);
            c.check(page.iter().all(|b| *b == 0x5a), "mem0: and ours");
            let mut m = Msg::new(mem_api::STATS, &[]);
            c.eq(ipc::call(srv, &mut m, rt::ipc::FOREVER), Ok(()), "mem0: STATS answers");
        }
        "console" => {
            println!("proto_fuzz: the console still prints");
            c.eq(
                tests::raw_request(srv, rt::proto::console::WRITE, &[], Some(b"proto_fuzz: a WRITE after the noise\n")),
                Ok(()),
                "console: WRITE",
            );
        }
        _ => {}
    }
}

/// Remove everything under `dir` but /hello.txt, deepest first: how many were removed.
fn clean(srv: u64, dir: &str) -> u64 {
    let mut n = 0;
    let listing = f::list(srv, if dir.is_empty() { "/" } else { dir }).unwrap_or_default();
    for l in listing.lines() {
        let mut w = l.splitn(3, ' ');
        let (Some(kind), Some(_), Some(name)) = (w.next(), w.next(), w.next()) else { continue };
        let path = format!("{dir}/{name}");
        if path == "/hello.txt" {
            continue;
        }
        if kind == "d" {
            n += clean(srv, &path);
        }
        if f::remove(srv, &path).is_ok() {
            n += 1;
        }
    }
    n
}

fn lookup(c: &mut Checks, name: &str) -> u64 {
    let s = rt::alloc_slot();
    c.eq(env::lookup(name, s), Ok(()), &format!("find {name}"));
    s
}
