//! The verification attack on a server's thread (started by verify_test, as another
//! principal): for the milliseconds its argument says, eBPF programs that cost the
//! verifier the most, loaded into the cache again and again — 200 JSET diamonds whose
//! sum is only returned (proven in a few instructions a test) and 200 whose sum is then
//! tested (every sum a state of its own: refused as too complex after a million
//! instructions followed) —; then an honest counted loop of 330,000 rounds (a million
//! instructions for the verifier to follow), loaded and run. Each `LOAD` is verified a slice
//! a request (`MORE`), paid from this principal's share of the cache's time. Prints
//! what it got.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use graft::{GraftFile, Point, Tech};
use graft_api as g;
use rt::{env, println};
use tests::bpf_ins as ins;

rt::entry!(main);

fn file(name: &str, code: &[[u8; 8]]) -> Vec<u8> {
    file_bytes(name, &code.concat())
}

fn file_bytes(name: &str, code: &[u8]) -> Vec<u8> {
    GraftFile { point: Point::Evict, tech: Tech::Ebpf, state_len: 0, name, code, sig: &[] }.to_bytes()
}

/// 200 JSET tests of the input's first word, each adding to (`tested`: or-ing into)
/// r0 on one way only; with `tested` the sum is then compared, else returned as the
/// answer (0: the first block).
fn diamonds(tested: bool) -> Vec<u8> {
    let mut v = alloc::vec![ins(0xb7, 0, 0, 0, 0), ins(0x79, 2, 1, 16, 0)];
    for k in 0..200 {
        v.push(ins(0x45, 2, 0, 1, 1 << (k % 31)));
        v.push(if tested { ins(0xa7, 0, 0, 0, 1 << (k % 31)) } else { ins(0x07, 0, 0, 0, k + 1) });
    }
    if tested {
        v.extend([ins(0x15, 0, 0, 1, 77), ins(0xb7, 0, 0, 0, 1)]);
    }
    v.push(ins(0xb7, 0, 0, 0, 0));
    v.push(ins(0x95, 0, 0, 0, 0));
    file(if tested { "diamonds_tested" } else { "diamonds" }, &v)
}

/// `graft_api::load`, by hand: each request's time noted (the slowest in `slowest`),
/// `MORE` after `MORE` while the verification goes on.
fn load(srv: u64, f: &[u8], slowest: &mut u64, requests: &mut u64) -> Result<u32, g::Refusal> {
    for (k, piece) in f.chunks(g::PIECE).enumerate() {
        g::client::put(srv, (k * g::PIECE) as u64, piece)?;
    }
    let mut timed = |r: &mut dyn FnMut() -> Result<[u64; 2], g::Refusal>| {
        let t = rt::sys::rdtsc();
        let a = r();
        *slowest = (*slowest).max(rt::sys::rdtsc() - t);
        *requests += 1;
        a
    };
    let mut r = timed(&mut || g::client::load_raw(srv, f.len() as u64, &[]))?;
    while r[0] == 0 {
        if r[1] > 0 {
            rt::sys::sleep_us(r[1].min(60_000) * 1000);
        }
        r = timed(&mut || g::client::more_raw(srv))?;
    }
    Ok(r[0] as u32)
}

fn main() -> i32 {
    let ms: u64 = rt::args().split(' ').nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let srv = rt::alloc_slot();
    if env::lookup("cache", srv).is_err() {
        println!("verify_load: needs the cache");
        return 1;
    }
    let input: Vec<u8> = (1u64..=8).flat_map(|b| b.to_le_bytes()).collect();
    // The counted loop of 330,000 rounds (`tests::bpf_counted_loop`).
    let counted = file_bytes("counted", &tests::bpf_counted_loop(330_000));
    let (hard, easy) = (diamonds(true), diamonds(false));
    let end = rt::sys::now_us() + ms * 1000;
    let (mut complex, mut loaded, mut later, mut other) = (0u64, 0u64, 0u64, 0u64);
    let (mut slowest, mut requests) = (0u64, 0u64);
    while rt::sys::now_us() < end {
        for f in [&easy, &hard] {
            match load(srv, f, &mut slowest, &mut requests) {
                Ok(id) => {
                    loaded += 1;
                    let _ = g::unload(srv, id);
                }
                Err(r) if r.reason.contains("too complex") => complex += 1,
                Err(r) if r.error == abi::Error::WouldBlock => {
                    later += 1;
                    rt::sys::sleep_us(5_000);
                }
                Err(r) => {
                    other += 1;
                    println!("verify_load: refused: {:?} {}", r.error, r.reason);
                }
            }
        }
    }
    println!(
        "verify_load: {complex} loads refused as too complex, {loaded} loaded, {later} told to wait, {other} else; {requests} LOAD and MORE requests, the slowest {slowest} ticks"
    );
    if complex > 0 && loaded > 0 && other == 0 {
        println!("verify_load: attacked the cache");
    }
    let t0 = rt::sys::rdtsc();
    // Its share spent by the attack, it is told to wait first: asked again until it may.
    match tests::load_graft(srv, &counted) {
        Ok(id) => {
            let t = rt::sys::rdtsc() - t0;
            match g::test_run(srv, id, &input, 1) {
                Ok(r) if r.calls == 1 && r.last == 0 => {
                    println!("verify_load: a counted loop of 330000 rounds loaded ({t} ticks) and run")
                }
                r => println!("verify_load: the counted loop ran wrong: {r:?}"),
            }
            let _ = g::unload(srv, id);
        }
        Err(r) => println!("verify_load: the counted loop refused: {:?} {}", r.error, r.reason),
    }
    0
}
