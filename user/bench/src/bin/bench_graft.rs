//! The `grafts` suite's Scion side (VINO Tables 1–3 and Figure 1, at the cache's
//! eviction point): per-call cost of every technology on the null graft and on the
//! 64-entry hot list, run by the cache itself (`graft_api::TEST_RUN`, as Linux's
//! `BPF_PROG_TEST_RUN`: no IPC in the figure, only the graft call as the eviction point
//! makes it — the transaction with its undo copy included); the upcall (one IPC to a
//! thread of this program per call); the time to load each graft; and what a cache miss
//! costs (a buffered one-block read that goes to the disk: busy ticks, the CPU's idle
//! time taken out), the cost a graft must save to break even.
//!
//! The stream point (Tables 4–5): MD5 of 1 KiB in each technology, run by blk
//! (`graft_stream_<technology>_md5`, ticks per KiB), and the time to read 1 MiB from
//! the disk (`graft_disk_1m`: elapsed ticks, idle included — the time the paper
//! compares the fingerprint with; `graft_disk_1m_busy`: the CPU's part of it).
//!
//! The memory server's reclaim point: the hot list run by mem0 on page addresses
//! (`graft_reclaim_<technology>_hotlist`).
//!
//! The logical-disk point (Table 6): a block's lookup in each technology, run by blk
//! (`graft_ldisk_<technology>_read` / `_write`), and one block read or written through
//! blk on a plain segment and on a logical disk (`graft_ldisk_io_<plain|ldisk>_<op>`,
//! busy ticks).
//!
//! Prints `BENCH graft_evict_<technology>_<graft> median=… min=… max=… samples=…`
//! (ticks per call: instructions under icount), `BENCH graft_load_<technology> …`,
//! `BENCH graft_evict_miss …`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client as baio;
use core::sync::atomic::{AtomicBool, Ordering};
use graft::format::Tech;
use graft_api as g;
use rt::{env, println, sys};

rt::entry!(main);

const SAMPLES: usize = 5;
/// `smoke` among the arguments (`cargo xtask bench --smoke`): two samples of a tenth of
/// the calls, to check that each figure is printed and parsed, not to measure.
static SMOKE: AtomicBool = AtomicBool::new(false);

/// Samples per figure: `SAMPLES`, 2 in a smoke run.
fn samples() -> usize {
    if SMOKE.load(Ordering::Relaxed) {
        2
    } else {
        SAMPLES
    }
}
const BUF: u64 = rt::layout::SEGMENT_AREA;

fn report(name: &str, mut v: Vec<u64>) {
    if v.is_empty() {
        return;
    }
    v.sort_unstable();
    println!(
        "BENCH {} median={} min={} max={} samples={} unit=ticks/call",
        name,
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

/// The hot list: 64 blocks, none of them a candidate (so the graft searches all of it,
/// as the paper's 64-element search does), and eight candidates.
fn hot_state() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&(graft_examples::HOT_MAX as u64).to_le_bytes());
    for b in 0..graft_examples::HOT_MAX as u64 {
        s.extend_from_slice(&(1_000_000 + b).to_le_bytes());
    }
    s
}

fn candidates() -> Vec<u8> {
    (0..8u64).flat_map(|b| (5000 + b).to_le_bytes()).collect()
}

/// The upcall hot list's state, in this program (VINO: the user-level server's memory),
/// laid out as the other technologies' (a count, then the blocks).
static HOT: rt::sync::Lock<[u8; graft_examples::HOT_STATE]> = rt::sync::Lock::new([0; graft_examples::HOT_STATE]);

fn upcall_hotlist(_p: graft::Point, input: &[u8]) -> u64 {
    graft_examples::hotlist(input, &mut *HOT.lock())
}

fn upcall_null(_p: graft::Point, _input: &[u8]) -> u64 {
    0
}

fn serve_hotlist(_: u64) {
    g::upcall::serve(upcall_hotlist)
}

static UP_MD5: rt::sync::Lock<[u8; graft_examples::MD5_STATE]> = rt::sync::Lock::new([0; graft_examples::MD5_STATE]);
static UP_LDISK: rt::sync::Lock<[u8; graft_examples::LD_STATE]> = rt::sync::Lock::new([0; graft_examples::LD_STATE]);

fn serve_md5(_: u64) {
    g::upcall::serve(|_, input| graft_examples::md5(input, &mut *UP_MD5.lock()))
}

fn serve_ldisk(_: u64) {
    g::upcall::serve(|_, input| graft_examples::ldisk(input, &mut *UP_LDISK.lock()))
}

/// Graft `name` at `point` in technology `tech` into `srv`: its file from /grafts, or
/// (upcall) served by a new thread of this program running `up`.
fn load_in(srv: u64, files: u64, point: graft::Point, tech: Tech, name: &str, up: fn(u64)) -> Option<u32> {
    let r = if !tech.is_file() {
        let t = rt::thread::spawn(up, 0, rt::thread::my_priority()).ok()?;
        g::load_upcall(srv, name, point, t.slot)
    } else {
        let path = format!("/grafts/{}_{}_{name}.graft", point.name(), tech.name());
        let file = files_api::client::read_all(files, &path).ok()?;
        g::load(srv, &file)
    };
    r.map_err(|r| println!("bench_graft: {} {name}: {:?} {}", tech.name(), r.error, r.reason)).ok()
}

/// Load `file` into `srv` and the ticks the load took; a load refused because this
/// principal's share of the server's time is spent (`graft::share`) is asked again
/// once time has passed, and only the load that went through is timed.
fn load_timed(srv: u64, file: &[u8]) -> (Result<u32, g::Refusal>, u64) {
    let mut tries = 0;
    loop {
        let t0 = sys::rdtsc();
        let r = g::load(srv, file);
        let t = sys::rdtsc() - t0;
        match r {
            Err(ref e) if e.error == abi::Error::WouldBlock && tries < 200 => {
                tries += 1;
                sys::sleep_us(20_000);
            }
            r => return (r, t),
        }
    }
}

fn serve_null(_: u64) {
    g::upcall::serve(upcall_null)
}

/// Per-call ticks of graft `id` at server `srv`: `samples()` runs of `repeat` calls.
fn per_call(srv: u64, id: u32, input: &[u8], repeat: u32) -> Option<Vec<u64>> {
    let mut v = Vec::new();
    let repeat = if SMOKE.load(Ordering::Relaxed) { repeat.div_ceil(10) } else { repeat };
    for _ in 0..samples() {
        // A test run stops when the request has had the server's turn of graft time:
        // the calls it made are what the ticks are divided by.
        match g::test_run(srv, id, input, repeat) {
            Ok(r) if r.aborts == 0 && r.last != u64::MAX && r.calls > 0 => v.push(r.cycles / r.calls),
            r => {
                println!("bench_graft: graft {id}: test run {:?}", r.map_err(|r| (r.error, r.reason)));
                return None;
            }
        }
    }
    Some(v)
}

/// Calls per test run: fewer for the slow ones (each run stays under ~20 M ticks).
fn repeat_of(tech: Tech) -> u32 {
    match tech {
        Tech::Native | Tech::SignedRust | Tech::WasmAot => 20_000,
        Tech::Wasmi => 2_000,
        Tech::Upcall => 1_000,
        Tech::Ebpf | Tech::Script => 200,
    }
}

fn main() -> i32 {
    SMOKE.store(rt::args().split(' ').skip(1).any(|a| a == "smoke"), Ordering::Relaxed);
    let (blk, cache, files) = (rt::alloc_slot(), rt::alloc_slot(), rt::alloc_slot());
    if env::lookup("blk", blk).is_err() || env::lookup("cache", cache).is_err() || env::lookup("files", files).is_err()
    {
        println!("bench_graft: needs blk, cache and files");
        return 1;
    }
    let (state, input) = (hot_state(), candidates());
    let mut failed = false;
    for t in Tech::ALL.into_iter().filter(|t| t.is_file()) {
        let tech = t.name();
        for name in ["null", "hotlist"] {
            let path = format!("/grafts/evict_{tech}_{name}.graft");
            let Ok(file) = files_api::client::read_all(files, &path) else {
                println!("bench_graft: no {path}");
                failed = true;
                continue;
            };
            let mut loads = Vec::new();
            for _ in 0..samples() {
                let (r, t) = load_timed(cache, &file);
                match r {
                    Ok(i) => {
                        loads.push(t);
                        let _ = g::unload(cache, i);
                    }
                    Err(r) => {
                        println!("bench_graft: {path}: {:?} {}", r.error, r.reason);
                        failed = true;
                        break;
                    }
                }
            }
            if name == "hotlist" {
                report(&format!("graft_load_{tech}"), loads);
            }
            let Ok(id) = load_timed(cache, &file).0.map_err(|_| failed = true) else { continue };
            let _ = g::set_state(cache, id, 0, if name == "hotlist" { &state } else { &[] });
            match per_call(cache, id, &input, repeat_of(t)) {
                Some(v) => report(&format!("graft_evict_{tech}_{name}"), v),
                None => failed = true,
            }
            let _ = g::unload(cache, id);
        }
    }
    // The same hot list at mem0's reclaim point (this program's pages): candidates and
    // hot list are page addresses, none of the candidates hot.
    let mem0 = rt::alloc_slot();
    if env::lookup("mem0", mem0).is_ok() {
        for t in Tech::ALL.into_iter().filter(|t| t.is_file()) {
            let tech = t.name();
            let path = format!("/grafts/evict_{tech}_hotlist.graft");
            let Some(id) = files_api::client::read_all(files, &path).ok().and_then(|f| load_timed(mem0, &f).0.ok())
            else {
                println!("bench_graft: {path}: not loaded into mem0");
                failed = true;
                continue;
            };
            let _ = g::set_state(mem0, id, 0, &state);
            match per_call(mem0, id, &input, repeat_of(t)) {
                Some(v) => report(&format!("graft_reclaim_{tech}_hotlist"), v),
                None => failed = true,
            }
            let _ = g::unload(mem0, id);
        }
    } else {
        failed = true;
    }
    // The upcall: the same two grafts in a thread of this program.
    HOT.lock().copy_from_slice(&state);
    for (name, f) in [("null", serve_null as fn(u64)), ("hotlist", serve_hotlist as fn(u64))] {
        let Ok(t) = rt::thread::spawn(f, 0, rt::thread::my_priority()) else {
            failed = true;
            continue;
        };
        let t0 = sys::rdtsc();
        let Ok(id) = g::load_upcall(cache, name, graft::Point::Evict, t.slot) else {
            failed = true;
            continue;
        };
        if name == "hotlist" {
            report("graft_load_upcall", alloc::vec![sys::rdtsc() - t0]);
        }
        match per_call(cache, id, &input, repeat_of(Tech::Upcall)) {
            Some(v) => report(&format!("graft_evict_upcall_{name}"), v),
            None => failed = true,
        }
        let _ = g::unload(cache, id);
    }
    // The stream point: MD5 per KiB in every technology, run by blk.
    let kib: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    for tech in Tech::ALL {
        let repeat = match tech {
            Tech::Native | Tech::SignedRust | Tech::WasmAot | Tech::Upcall => 200,
            Tech::Wasmi | Tech::Ebpf => 20,
            Tech::Script => 2,
        };
        let Some(id) = load_in(blk, files, graft::Point::Stream, tech, "md5", serve_md5) else {
            failed = true;
            continue;
        };
        match per_call(blk, id, &kib, repeat) {
            Some(v) => report(&format!("graft_stream_{}_md5", tech.name()), v),
            None => failed = true,
        }
        let _ = g::unload(blk, id);
    }
    // The logical-disk point (Table 6): one block's lookup in each technology, run by blk
    // as its point calls it, on a map half full (512 logical blocks written over 1022
    // physical ones): a read of a mapped block, and a write (a free block found from
    // the log's head, the old one freed).
    let ld_input =
        |l: u64, write: bool| -> Vec<u8> { [l, 1022, write as u64].iter().flat_map(|w| w.to_le_bytes()).collect() };
    for tech in Tech::ALL {
        let repeat = match tech {
            Tech::Script => 20,
            _ => repeat_of(tech),
        };
        let Some(id) = load_in(blk, files, graft::Point::Ldisk, tech, "ldisk", serve_ldisk) else {
            failed = true;
            continue;
        };
        let filled = (0..graft_examples::LD_LOGICAL as u64)
            .all(|l| g::test_run(blk, id, &ld_input(l, true), 1).is_ok_and(|r| r.aborts == 0 && r.last < 1022));
        for (what, write) in [("read", false), ("write", true)] {
            match per_call(blk, id, &ld_input(77, write), repeat).filter(|_| filled) {
                Some(v) => report(&format!("graft_ldisk_{}_{what}", tech.name()), v),
                None => failed = true,
            }
        }
        let _ = g::unload(blk, id);
    }
    // The same blocks through blk: one direct block read and written on a plain segment
    // and on a logical disk (native graft: the rest is the point's own cost — the map
    // committed after each block written, and a flush between).
    let _ = baio::create(blk, "ldbench", 64, 0);
    let native_ld =
        files_api::client::read_all(files, "/grafts/ldisk_native_ldisk.graft").ok().and_then(|f| g::load(blk, &f).ok());
    if let (Ok(seg), Some(id)) = (baio::open(blk, "ldbench", 3, BUF), native_ld) {
        for (kind, ld) in [("plain", false), ("ldisk", true)] {
            if ld && seg.ldisk(id).is_err() {
                failed = true;
                continue;
            }
            for (what, op) in [("write", p::WRITE_OP), ("read", p::READ_OP)] {
                let mut v = Vec::new();
                for b in 0..16 {
                    let (t0, i0) = (sys::rdtsc(), sys::idle_tsc());
                    let r = seg.batch_ops(&[p::op(op, b, 1, 0, p::DATA)], p::WAIT_ALL);
                    let (t, i) = (sys::rdtsc() - t0, sys::idle_tsc() - i0);
                    if r.is_ok() && seg.status(0) == p::DONE {
                        v.push(t.saturating_sub(i));
                    }
                }
                failed |= v.len() < 16;
                report(&format!("graft_ldisk_io_{kind}_{what}"), v);
            }
        }
        let _ = seg.ldisk(0);
        let _ = seg.close();
        let _ = g::unload(blk, id);
    } else {
        failed = true;
    }
    // A miss: one block read buffered, not in the cache (each block once).
    let _ = baio::create(blk, "gbench", 256, 0);
    if let Ok(seg) = baio::open(blk, "gbench", 3, BUF) {
        // 1 MiB written, then read from the disk: 8 operations of 128 KiB at once.
        let ops: Vec<[u64; p::OP_WORDS]> =
            (0..8u64).map(|k| p::op(p::WRITE_OP, 32 * k, 32, k, p::DATA + k * 32 * 4096)).collect();
        let _ = seg.batch_ops(&ops, p::WAIT_ALL);
        let _ = seg.sync();
        let reads: Vec<[u64; p::OP_WORDS]> = ops.iter().map(|o| [p::READ_OP, o[1], o[2], o[3]]).collect();
        let (mut el, mut busy) = (Vec::new(), Vec::new());
        for _ in 0..samples() {
            let (t0, i0) = (sys::rdtsc(), sys::idle_tsc());
            let ok = seg.batch_ops(&reads, p::WAIT_ALL).is_ok() && (0..8).all(|k| seg.status(k) == p::DONE);
            let (t, i) = (sys::rdtsc() - t0, sys::idle_tsc() - i0);
            if ok {
                el.push(t);
                busy.push(t.saturating_sub(i));
            }
        }
        report("graft_disk_1m", el);
        report("graft_disk_1m_busy", busy);
        let mut v = Vec::new();
        for b in 0..32 {
            let (t0, i0) = (sys::rdtsc(), sys::idle_tsc());
            let r = seg.batch_ops(&[p::op(p::READ_OP | p::BUFFERED, b, 1, 0, p::DATA)], p::WAIT_ALL);
            let (t, i) = (sys::rdtsc() - t0, sys::idle_tsc() - i0);
            if r.is_ok() && seg.status(0) == p::DONE {
                v.push(t.saturating_sub(i));
            }
        }
        report("graft_evict_miss", v);
        let _ = seg.close();
    } else {
        failed = true;
    }
    println!("bench_graft: done");
    if failed {
        1
    } else {
        0
    }
}
