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
    let ms = rt::sys::kernel_info().tsc_per_ms.max(1);
    // A request that held the cache past HELD_MS is named, with when it began (rdtsc: the
    // reader's slowest read says when it began too).
    let note = |what: &str, t: u64, d: u64| {
        if d > HELD_MS * ms {
            println!("verify_load: a {what} of {} bytes took {} ms, from {t}", f.len(), d / ms);
        }
    };
    for (k, piece) in f.chunks(g::PIECE).enumerate() {
        let t = rt::sys::rdtsc();
        g::client::put(srv, (k * g::PIECE) as u64, piece)?;
        let d = rt::sys::rdtsc() - t;
        *slowest = (*slowest).max(d);
        note("PUT", t, d);
    }
    let mut timed = |r: &mut dyn FnMut() -> Result<[u64; 2], g::Refusal>| {
        let t = rt::sys::rdtsc();
        let a = r();
        let d = rt::sys::rdtsc() - t;
        *slowest = (*slowest).max(d);
        *requests += 1;
        note("LOAD or MORE", t, d);
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

/// A signature well formed (its point on the curve, its scalar canonical) by a key that is
/// not the system's: a server hashes the whole file before it finds it wrong.
const WRONG_SIG: [u8; 64] = [
    55, 163, 67, 170, 87, 211, 249, 2, 67, 144, 22, 147, 73, 49, 138, 150, 233, 50, 240, 199, 77, 112, 58, 176, 83,
    248, 129, 100, 175, 97, 219, 80, 94, 159, 201, 172, 69, 112, 118, 117, 78, 120, 155, 115, 214, 32, 64, 59, 211,
    195, 5, 231, 231, 0, 38, 18, 201, 117, 94, 20, 41, 168, 146, 15,
];

fn leb(mut v: usize, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    leb(body.len(), out);
    out.extend_from_slice(body);
}

/// A valid WebAssembly graft of `bytes` (most of it `graft_run`'s body: `i32.const 1,
/// i32.const 2, i32.add, drop` over and over), which the validator must read whole.
fn wasm_max(bytes: usize) -> Vec<u8> {
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[2, 0x60, 0, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7e], &mut m);
    section(3, &[3, 0, 0, 1], &mut m);
    section(5, &[1, 0, 1], &mut m);
    let mut ex = alloc::vec![4];
    for (name, kind, idx) in [("memory", 2u8, 0u8), ("graft_input", 0, 0), ("graft_state", 0, 1), ("graft_run", 0, 2)] {
        ex.push(name.len() as u8);
        ex.extend_from_slice(name.as_bytes());
        ex.extend_from_slice(&[kind, idx]);
    }
    section(7, &ex, &mut m);
    let mut code = alloc::vec![3, 4, 0, 0x41, 0, 0x0b, 5, 0, 0x41, 0x80, 0x10, 0x0b];
    let mut run = alloc::vec![0u8];
    while run.len() + m.len() + 32 < bytes {
        run.extend_from_slice(&[0x41, 1, 0x41, 2, 0x6a, 0x1a]);
    }
    run.extend_from_slice(&[0x42, 0, 0x0b]);
    leb(run.len(), &mut code);
    code.extend_from_slice(&run);
    section(10, &code, &mut m);
    m
}

/// A rhai script of `bytes` (a statement over and over).
fn script(bytes: usize) -> Vec<u8> {
    let mut s = alloc::string::String::from("fn graft(input) { let x = 0;\n");
    while s.len() + 24 < bytes {
        s.push_str("x = x + 1 * 2 - 3;\n");
    }
    s.push_str("x }\n");
    s.into_bytes()
}

/// The script that costs rhai's parser the most a load may (docs/grafts.md, "A script's
/// compile"): `!x;` — a token a byte, the costliest statement measured — to 1,023 tokens
/// (`graft::engine::script::MAX_TOKENS` is 1,024).
fn worst_script() -> Vec<u8> {
    let mut s = alloc::string::String::from("fn graft(input) { let x = 0; ");
    for _ in 0..337 {
        s.push_str("!x;");
    }
    s.push_str("0 }");
    s.into_bytes()
}

/// The largest graft file of every technology a principal without the system's key can
/// send, each costing its server the most to load: a WebAssembly module of 256 KiB, a
/// script of 256 KiB, one of 4 KiB (2,150 tokens: refused), the costliest one a server
/// compiles (`worst_script`), signed Rust and
/// compiled WebAssembly of 256 KiB with a signature by another key, eBPF of 20,000
/// instructions (verified, then compiled by the JIT) and the 200 diamonds.
fn every() -> Vec<(&'static str, Vec<u8>)> {
    let code = graft::format::MAX_CODE;
    let f = |tech, name, code: &[u8], sig: &[u8]| {
        GraftFile { point: Point::Evict, tech, state_len: 8, name, code, sig }.to_bytes()
    };
    let mut image = alloc::vec![0x90u8; code - 8];
    image[0..8].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    let long: Vec<u8> =
        (0..20_000).map(|_| ins(0xb7, 0, 0, 0, 0)).chain([ins(0x95, 0, 0, 0, 0)]).collect::<Vec<_>>().concat();
    alloc::vec![
        ("wasmi", f(Tech::Wasmi, "wasm_max", &wasm_max(code), &[])),
        ("rhai 256 KiB", f(Tech::Script, "rhai_max", &script(code), &[])),
        ("rhai 4 KiB", f(Tech::Script, "rhai_4k", &script(4096), &[])),
        ("rhai 1,023 tokens", f(Tech::Script, "rhai_worst", &worst_script(), &[])),
        ("signed", f(Tech::SignedRust, "signed_max", &image, &WRONG_SIG)),
        ("wasmaot", f(Tech::WasmAot, "aot_max", &image, &WRONG_SIG)),
        ("ebpf 20000", file_bytes("ebpf_long", &long)),
        ("ebpf diamonds", diamonds(true)),
    ]
}

/// `every` technology's costliest file loaded into `srv` again and again for `ms`: what
/// each got, and its slowest request.
fn attack_every(srv: u64, ms: u64) {
    let files = every();
    let mut got = alloc::vec![(0u64, 0u64, 0u64, 0u64); files.len()];
    let mut unloads = alloc::vec![0u64; files.len()];
    let end = rt::sys::now_us() + ms * 1000;
    let mut requests = 0;
    while rt::sys::now_us() < end {
        for (k, (_, f)) in files.iter().enumerate() {
            let g = &mut got[k];
            match load(srv, f, &mut g.3, &mut requests) {
                Ok(id) => {
                    g.0 += 1;
                    let t = rt::sys::rdtsc();
                    let _ = g::unload(srv, id);
                    unloads[k] = unloads[k].max(rt::sys::rdtsc() - t);
                }
                Err(r) if r.error == abi::Error::WouldBlock => {
                    g.2 += 1;
                    rt::sys::sleep_us(5_000);
                }
                Err(_) => g.1 += 1,
            }
        }
    }
    let ms = rt::sys::kernel_info().tsc_per_ms.max(1);
    for (((name, f), (loaded, refused, later, slowest)), unload) in files.iter().zip(&got).zip(&unloads) {
        println!(
            "verify_load: {name} ({} bytes): {loaded} loaded, {refused} refused, {later} told to wait; the slowest request {} ticks ({} ms), unload {} ms",
            f.len(),
            slowest,
            slowest / ms,
            unload / ms
        );
    }
    if got.iter().all(|g| g.0 + g.1 > 0) {
        println!("verify_load: attacked the cache with every technology ({requests} requests)");
    }
    // What the cache spent on one request of this program's, as it waited for it: guest
    // time, the cache's own work (no disk), so the same from run to run under icount.
    let worst = got.iter().map(|g| g.3).chain(unloads.iter().copied()).max().unwrap_or(0);
    if worst <= HELD_MS * ms {
        println!("verify_load: no request held the cache past {HELD_MS} ms (the longest {} ms)", worst / ms);
    } else {
        println!("verify_load: a request held the cache {} ms, past {HELD_MS}", worst / ms);
    }
}

/// The longest one request of the attack may hold the cache (3.9 ms measured: the
/// costliest script a load may compile, `worst_script`; 7 ms when a script was bounded
/// only by its 4 KiB, compiled with rhai's optimizer; 13 ms when the static checks of
/// 20,000 eBPF instructions were made in the first request, now 3 ms; 110 ms when only
/// eBPF was checked in slices: the 256 KiB script compiled in one go).
const HELD_MS: u64 = 5;

fn main() -> i32 {
    let ms: u64 = rt::args().split(' ').nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let srv = rt::alloc_slot();
    if env::lookup("cache", srv).is_err() {
        println!("verify_load: needs the cache");
        return 1;
    }
    if rt::args().split(' ').nth(2) == Some("every") {
        attack_every(srv, ms);
        return 0;
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
