//! The spin-reload attack on a server's graft time (started by share_test, as another
//! principal): for the milliseconds its first argument says, load the signed spin graft
//! (`/grafts/evict_signed_spin.graft`, readable by everyone), have it called — it spins
//! until the server's watchdog stops it and unloads it — and load it again at once, a
//! few milliseconds after each refusal. Where: the cache's eviction point (a `TEST_RUN`
//! calls it), or with `mem` its memory server's reclaim point (it runs past its
//! resident limit through a read-only table of its own, so mem0 asks the graft which
//! page to take back). Prints what it got: loads, calls stopped, loads refused for a
//! back-off or for the principal's spent share.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use graft_api as g;
use rt::{env, println};

rt::entry!(main);

/// More than it may keep resident (its limit: what it holds and 16 pages more).
const PAGES: usize = 192;

/// Clean pages its memory server may take back.
static TABLE: tests::CleanPages<PAGES> = tests::CleanPages::new();

/// Read every page of the table (faults past the resident limit: reclaims): how many
/// read right.
fn touch() -> usize {
    (0..PAGES).filter(|&p| TABLE.read(p)).count()
}

fn main() -> i32 {
    let mut args = rt::args().split(' ').skip(1);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mem = args.next() == Some("mem");
    let (srv, files) = (rt::alloc_slot(), rt::alloc_slot());
    let server = if mem { "mem0" } else { "cache" };
    if env::lookup(server, srv).is_err() || env::lookup("files", files).is_err() {
        println!("share_spin: needs {server} and files");
        return 1;
    }
    let Ok(file) = files_api::client::read_all(files, "/grafts/evict_signed_spin.graft") else {
        println!("share_spin: no /grafts/evict_signed_spin.graft");
        return 1;
    };
    if mem {
        // A resident limit a little above what it holds: the table's pages cycle.
        let held = mem_api::client::usage(srv, u64::MAX).map_or(0, |u| u.pages);
        if mem_api::client::usage(srv, held.max(mem_api::MIN_RESIDENT) + 16).is_err() {
            println!("share_spin: no resident limit");
            return 1;
        }
    }
    let input: alloc::vec::Vec<u8> = (1u64..=8).flat_map(|b| b.to_le_bytes()).collect();
    let end = rt::sys::now_us() + ms * 1000;
    let (mut loads, mut stopped, mut backoff, mut share, mut other) = (0u64, 0u64, 0u64, 0u64, 0u64);
    while rt::sys::now_us() < end {
        match g::load(srv, &file) {
            Ok(id) => {
                loads += 1;
                if mem {
                    for _ in 0..2 {
                        core::hint::black_box(touch());
                    }
                    match g::stats(srv, id) {
                        Err(r) if r.error == Error::NotFound => stopped += 1,
                        _ => other += 1,
                    }
                } else {
                    match g::test_run(srv, id, &input, 1) {
                        Ok(r) if r.calls == 1 && r.last == u64::MAX => stopped += 1,
                        Ok(r) if r.calls == 0 => share += 1,
                        _ => other += 1,
                    }
                }
                let _ = g::unload(srv, id);
            }
            Err(r) => {
                match r.error {
                    Error::WouldBlock if r.reason.contains("misbehaving") => backoff += 1,
                    Error::WouldBlock => share += 1,
                    _ => {
                        other += 1;
                        println!("share_spin: load refused: {:?} {}", r.error, r.reason);
                    }
                }
                rt::sys::sleep_us(5_000);
            }
        }
    }
    println!(
        "share_spin: at {server}: {loads} loads, {stopped} calls stopped, {backoff} loads refused for a back-off, {share} for the share, {other} else"
    );
    // The attack happened: the spin ran and was stopped more than once, and refused between.
    if stopped >= 2 && backoff > 0 {
        println!("share_spin: attacked {server}");
    }
    0
}
