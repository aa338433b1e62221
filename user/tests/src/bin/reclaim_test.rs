//! The memory servers' graft point (VINO's prioritization): this program runs
//! past a resident limit, so mem0 takes its clean pages back as it faults in new ones —
//! the oldest, or the one its eviction graft chooses. A read-only table of 192 pages:
//! four hot pages are read, then the other pages stream through; without a graft
//! (oldest first) the hot pages are taken back, with the hot-list graft in every
//! technology they stay; every byte reads right throughout (a page taken back is
//! filled again from the image), and hostile grafts change nothing but themselves.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use graft::format::Tech;
use graft_api as g;
use mem_api::client as mem;
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

const PAGES: usize = 192;
const HOT: usize = 4;
/// Pages past what the program holds at its start: its resident limit in every round.
const ROOM: u64 = 32;

/// The table this program reads: clean pages mem0 may take back.
static TABLE: tests::CleanPages<PAGES> = tests::CleanPages::new();

fn read(p: usize) -> bool {
    TABLE.read(p)
}

fn addr(p: usize) -> u64 {
    TABLE.addr(p)
}

/// One round under resident limit `limit`: the hot pages, then the rest streaming
/// through. How many hot pages are still resident after, and whether every page read
/// right.
fn round(srv: u64, limit: u64) -> (usize, bool) {
    let _ = mem::usage(srv, limit);
    let mut right = (0..HOT).all(read);
    for p in 2 * HOT..PAGES {
        right &= read(p);
    }
    let hot = (0..HOT).filter(|p| mem::resident(srv, addr(*p)).unwrap_or(false)).count();
    right &= (0..PAGES).all(read);
    (hot, right)
}

fn hot_list() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&(HOT as u64).to_le_bytes());
    for p in 0..HOT {
        s.extend_from_slice(&addr(p).to_le_bytes());
    }
    s
}

/// The upcall hot list (this program's state).
fn serve_hotlist(_: u64) {
    graft_api::upcall::serve(|_, input| {
        let mut st = hot_list();
        st.resize(graft_examples::HOT_STATE, 0);
        graft_examples::hotlist(input, &mut st)
    })
}

fn main() -> i32 {
    let mut c = Checks::new();
    let (srv, files) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("mem0", srv), Ok(()), "find my memory server");
    c.eq(env::lookup("files", files), Ok(()), "find the files server");
    let u = mem::usage(srv, u64::MAX);
    c.check(
        u.is_ok_and(|u| u.resident_limit == 8000 && u.pages > 0),
        &format!("the manifest's resident limit is mine ({u:?})"),
    );
    c.eq(
        mem::usage(srv, u64::MAX - 1).err(),
        Some(abi::Error::InvalidArg),
        "a resident limit past my limit is refused",
    );
    c.eq(mem::usage(srv, mem_api::MIN_RESIDENT - 1).err(), Some(abi::Error::InvalidArg), "and one below the lowest");
    // Only root sends a program's image (a program from the files filesystem): a client
    // that could would have its own code paged into another program.
    let me = tests::id_of("reclaim_test").unwrap_or(0);
    c.eq(
        tests::raw_request(srv, mem_api::IMAGE, &[me, 0, 4], Some(b"\x7fELF")),
        Err(abi::Error::NoRights),
        "a program may not send an image",
    );
    c.eq(
        tests::raw_request(srv, mem_api::REGISTER, &[me, 64, 0, 0], Some(b"/evil")),
        Err(abi::Error::NoRights),
        "nor register one",
    );

    let limit = u.map_or(0, |u| u.pages) + ROOM;
    let (hot, right) = round(srv, limit);
    let u = mem::usage(srv, u64::MAX).unwrap_or_default();
    c.check(right, "oldest first: every page reads right, taken back or not");
    c.eq(hot, 0, "oldest first: the hot pages were taken back");
    c.check(
        u.taken_back > 0 && u.refaults > 0 && u.grafted == 0,
        &format!("pages were taken back and faulted in again ({u:?})"),
    );

    for tech in Tech::ALL.into_iter().filter(|t| t.is_file()).map(Tech::name) {
        let path = format!("/grafts/evict_{tech}_hotlist.graft");
        let Ok(file) = files_api::client::read_all(files, &path) else {
            c.check(false, &format!("{path} is in the files filesystem"));
            continue;
        };
        let Ok(id) = tests::load_graft(srv, &file) else {
            c.check(false, &format!("{tech}: load the hot-list graft into mem0"));
            continue;
        };
        c.check(g::set_state(srv, id, 0, &hot_list()).is_ok(), &format!("{tech}: give it the hot pages"));
        let before = mem::usage(srv, u64::MAX).unwrap_or_default();
        let (hot, right) = round(srv, limit);
        let after = mem::usage(srv, u64::MAX).unwrap_or_default();
        c.check(right, &format!("{tech}: every page reads right"));
        c.eq(hot, HOT, &format!("{tech}: the graft kept the hot pages resident"));
        c.check(
            after.grafted > before.grafted && after.taken_back > before.taken_back,
            &format!("{tech}: it chose the victims ({after:?})"),
        );
        let st = g::stats(srv, id);
        c.check(st.as_ref().is_ok_and(|s| s.aborts == 0), &format!("{tech}: never aborted ({st:?})"));
        c.check(g::unload(srv, id).is_ok(), &format!("{tech}: unload it"));
    }

    // Not by upcall: the graft's thread would fault into mem0 while mem0 waits for it.
    if let Ok(t) = rt::thread::spawn(serve_hotlist, 0, rt::thread::my_priority()) {
        let r = g::load_upcall(srv, "hotlist", graft::Point::Evict, t.slot);
        c.check(
            r.as_ref().is_err_and(|r| r.reason.contains("page faults")),
            &format!("an upcall graft is refused with the reason ({:?})", r.map_err(|r| r.reason)),
        );
    }

    // Hostile grafts: each call aborted (the oldest page goes instead), unloaded after
    // three; the pages still read right.
    // Refused at load, and mem0 (which pages this program and others) lives on: an
    // opcode the eBPF engine lacks used to pass and panic mem0 at the first call.
    for (name, why) in
        [("ebpf_negx", "does not implement"), ("ebpf_leak", "only in the stack"), ("ebpf_oob", "unbounded")]
    {
        let r = files_api::client::read_all(files, &format!("/grafts/evict_{name}.graft"))
            .map_err(|e| alloc::format!("{e:?}"))
            .and_then(|f| tests::load_graft(srv, &f).map(|_| alloc::string::String::new()).map_err(|r| r.reason));
        c.check(r.as_ref().is_err_and(|w| w.contains(why)), &format!("{name}: refused by mem0 ({r:?})"));
    }
    // A signed graft that never returns is stopped by mem0's watchdog, and one that
    // holds gigabytes by its heap.
    for name in ["wasmi_liar", "rhai_spin", "ebpf_liar", "rhai_keys", "signed_spin"] {
        let Ok(file) = files_api::client::read_all(files, &format!("/grafts/evict_{name}.graft")) else {
            c.check(false, &format!("/grafts/evict_{name}.graft is in the files filesystem"));
            continue;
        };
        let Ok(id) = tests::load_graft(srv, &file) else {
            c.check(false, &format!("{name}: load it"));
            continue;
        };
        let _ = g::set_budget(srv, id, 200_000);
        let (hot, right) = round(srv, limit);
        c.check(right, &format!("{name}: every page reads right"));
        c.eq(hot, 0, &format!("{name}: the oldest went instead"));
        // A graft whose aborted calls spent this principal's share of mem0's time is
        // not called until the share comes back (`graft::share`; the oldest goes
        // meanwhile): more rounds, a little apart, make its three failures.
        let mut right = true;
        for _ in 0..20 {
            if g::stats(srv, id).is_err() {
                break;
            }
            rt::sys::sleep_us(200_000);
            right &= round(srv, limit).1;
        }
        c.check(right, &format!("{name}: every page reads right in the rounds after"));
        c.eq(
            g::stats(srv, id).map_err(|r| r.error).err(),
            Some(abi::Error::NotFound),
            &format!("{name}: unloaded after three aborted calls"),
        );
    }
    // Written pages past the resident limit leave few clean ones: reading the table (its
    // code and the table are both clean) must still go on. (With one clean page left,
    // the instruction's page and the table's took each other back for ever.)
    let mut dirty = alloc::vec![0u8; 48 * 4096];
    for (k, b) in dirty.iter_mut().enumerate().step_by(4096) {
        *b = k as u8 | 1;
    }
    let floor = mem::usage(srv, mem_api::MIN_RESIDENT).is_ok();
    let right = (0..PAGES).all(read) && (0..PAGES).rev().all(read);
    c.check(
        floor && right && dirty.iter().step_by(4096).all(|b| *b & 1 == 1),
        "past the limit in written pages, the clean ones still read right",
    );
    let u = mem::usage(srv, 0);
    println!("reclaim_test: {:?}", u);
    c.finish("reclaim_test")
}
