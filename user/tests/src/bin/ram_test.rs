//! All of the RAM is usable (memory at the machine's scale). `ram_test MiB` (the
//! machine's `-m`, from the scenario) spawns children that map and touch 75% of it:
//!
//! 1. one program (`ram_all`) touches 75% of the RAM, checks every page, reports;
//! 2. four (`ram_part`, two paged by mem0 and two by mem1) touch a quarter of that
//!    each, all holding their memory at once;
//! 3. three of those again, and then `ram_over` asks for more than its page limit:
//!    its memory server refuses (`NoMemory`: a reservation past its limit, and a heap
//!    that cannot grow past it), the program sees the refusal and ends by itself,
//!    while the other three check all of their pages again.
//!
//! A child that is killed (by an unhandled fault) instead of reporting fails the
//! phase; at the end both memory servers still serve (`meminfo` lists them).
//!
//! 4. `ram_most`, whose limit is all of the RAM, sets pages aside 16 MiB at a time until
//!    refused (then 1 MiB, then 64 KiB), touches them all and reports: the largest
//!    allocation one program gets.
//!
//! `ram_test child PAGES`: reserve PAGES pages at its memory server (`mem_api::RESERVE`,
//! through `abi::cap::PAGER`, which every program paged by one has), touch them, check
//! them, report to the spawner (PEER) and wait: "exit" or "check again". `ram_test
//! over`: ask for more than the limit, report what it heard, touch 16 pages it may have.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use rt::ipc::{self, Msg};
use rt::{env, println, sys};
use tests::Checks;

rt::entry!(main);

/// Where a child's pages go (a range no other region of `rt::layout` uses).
const AT: u64 = 0x0000_0800_0000_0000;
const PAGE: u64 = 4096;
/// Pages a child's manifest entry allows beyond what it touches (its image, stacks,
/// heap): the scenario's `pages` are the touched pages plus this.
pub const SLACK: u64 = 512;
/// Its memory server (every program paged by one has it).
const PAGER: u64 = abi::cap::PAGER;

/// Report labels (child → spawner).
const REPORT: u64 = 1;
/// Answers (spawner → child) in MR1.
const EXIT: u64 = 0;
const AGAIN: u64 = 1;

fn value(i: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ 0x5a5a
}

/// Touch `pages` pages at AT, a word in each.
fn touch(pages: u64) {
    for i in 0..pages {
        // SAFETY: AT.. is this program's own range, used for nothing else; the pages
        // come from its memory server (reserved first) when first written.
        unsafe { core::ptr::write_volatile((AT + i * PAGE) as *mut u64, value(i)) };
    }
}

/// How many of the `pages` pages at AT hold what `touch` wrote.
fn verify(pages: u64) -> u64 {
    // SAFETY: as in `touch`: pages of our own, mapped by now.
    (0..pages).filter(|&i| unsafe { core::ptr::read_volatile((AT + i * PAGE) as *const u64) } == value(i)).count()
        as u64
}

fn report(words: &[u64]) -> u64 {
    let mut m = Msg::new(REPORT, words);
    match ipc::call(abi::cap::PEER, &mut m, ipc::FOREVER) {
        Ok(()) => m.word(1),
        Err(_) => EXIT,
    }
}

fn child(pages: u64) -> i32 {
    let t = sys::now_us();
    let reserved = mem_api::client::reserve(PAGER, pages, AT);
    let reserve_ms = (sys::now_us() - t) / 1000;
    if let Err(e) = reserved {
        report(&[0, 0, e as u64]);
        return 1;
    }
    let t0 = sys::now_us();
    touch(pages);
    let t1 = sys::now_us();
    let mut ok = verify(pages);
    println!(
        "ram_test child: {} pages ({} MiB) set aside in {} ms, touched in {} ms, {} checked in {} ms",
        pages,
        pages >> 8,
        reserve_ms,
        (t1 - t0) / 1000,
        ok,
        (sys::now_us() - t1) / 1000
    );
    while report(&[1, ok, 0]) == AGAIN {
        ok = verify(pages);
    }
    0
}

/// Ask for more than the limit: a reservation, then the heap. Reports (reservation
/// refused with NoMemory, heap growth refused, a reservation within the limit works).
fn over() -> i32 {
    let u = mem_api::client::usage(PAGER, u64::MAX).unwrap_or_default();
    let past = mem_api::client::reserve(PAGER, u.limit + 1, AT);
    let mut v: Vec<u8> = Vec::new();
    let heap = v.try_reserve(((u.limit + 1) * PAGE) as usize);
    let within = mem_api::client::reserve(PAGER, 16, AT);
    touch(16);
    let touched = verify(16);
    println!(
        "ram_test over: limit {} pages; reserve {} → {:?}; heap of {} MiB → {}; reserve 16 → {:?}",
        u.limit,
        u.limit + 1,
        past,
        ((u.limit + 1) * PAGE) >> 20,
        if heap.is_ok() { "granted" } else { "refused" },
        within
    );
    let ok = past == Err(Error::NoMemory) && heap.is_err() && within.is_ok() && touched == 16;
    report(&[ok as u64, 0, past.err().map_or(0, |e| e as u64)]);
    0
}

/// Set pages aside 16 MiB at a time until refused, then 1 MiB, then 64 KiB; touch and
/// check them all: report the pages.
fn most() -> i32 {
    let t = sys::now_us();
    let mut got = 0;
    let mut why = Error::NoMemory;
    for step in [4096, 256, 16] {
        why = loop {
            match mem_api::client::reserve(PAGER, step, AT + got * PAGE) {
                Ok(()) => got += step,
                Err(e) => break e,
            }
        };
    }
    touch(got);
    let ok = verify(got);
    println!(
        "ram_test most: {} pages ({} MiB) set aside, touched and checked in {} ms; then {:?}",
        got,
        got >> 8,
        (sys::now_us() - t) / 1000,
        why
    );
    // The figure the baio suite reports (`system/bench/memory.toml`).
    println!("BENCH largest_alloc_mib median={} unit=MiB", got >> 8);
    report(&[(ok == got && why == Error::NoMemory) as u64, got, why as u64]);
    (ok != got) as i32
}

struct Kid {
    id: u64,
    task: u64,
    /// Its saved reply, once it reported.
    reply: Option<u64>,
    words: [u64; 3],
}

/// Spawn `cmd`; None (and a failed check) if root refuses.
fn spawn(c: &mut Checks, cmd: &str) -> Option<Kid> {
    let pair = rt::alloc_slot_pair();
    match env::spawn(cmd, pair) {
        Ok(id) => Some(Kid { id, task: pair + 1, reply: None, words: [0; 3] }),
        Err(e) => {
            c.check(false, &alloc::format!("spawn `{}`: {:?}", cmd, e));
            None
        }
    }
}

/// Wait until every kid reported (its reply saved) or ended without: whether all did.
fn gather(kids: &mut [Kid]) -> bool {
    loop {
        if kids.iter().all(|k| k.reply.is_some()) {
            return true;
        }
        if let Some(k) = kids.iter().find(|k| k.reply.is_none() && sys::cap_info(k.task).is_err()) {
            println!("ram_test: program {} ended without reporting", k.id);
            return false;
        }
        let mut m = Msg::empty();
        let Ok(badge) = ipc::recv(ipc::RECV_ANY, &mut m, ipc::timeouts(ipc::POLL, 200_000)) else { continue };
        let Some(k) = kids.iter_mut().find(|k| k.id == badge && k.reply.is_none()) else { continue };
        let slot = rt::alloc_slot();
        if m.label() == REPORT && ipc::save_reply(slot).is_ok() {
            k.reply = Some(slot);
            k.words = [m.word(1), m.word(2), m.word(3)];
        }
    }
}

/// Answer every kid that reported; with EXIT, wait for them to end.
fn answer(kids: &mut [Kid], what: u64) {
    let t = sys::now_us();
    for k in kids.iter_mut() {
        if let Some(slot) = k.reply.take() {
            let _ = ipc::send(slot, &Msg::new(0, &[what]), ipc::timeouts(ipc::POLL, ipc::POLL));
            rt::free_slot(slot);
        }
    }
    if what == EXIT {
        for k in kids.iter() {
            if !tests::wait_until(1000, || sys::cap_info(k.task).is_err()) {
                let _ = env::kill(k.id);
            }
        }
        println!("ram_test: {} programs ended in {} ms", kids.len(), (sys::now_us() - t) / 1000);
    }
}

fn main() -> i32 {
    let mut args = rt::args().split(' ').skip(1);
    let first = args.next().unwrap_or("");
    let num = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    match first {
        "child" => return child(num(args.next())),
        "over" => return over(),
        "most" => return most(),
        _ => {}
    }
    let mib: u64 = first.parse().unwrap_or(0);
    let start = sys::now_us();
    let mut c = Checks::new();
    if !c.check(mib > 0, "the machine's RAM in MiB is given") {
        return c.finish("ram_test");
    }
    let all = mib * 256 * 3 / 4;
    let part = all / 4;
    println!(
        "ram_test: {} MiB of RAM: one program touches {} pages ({} MiB), then four {} pages each",
        mib,
        all,
        all >> 8,
        part
    );
    println!("{}", env::meminfo().unwrap_or_default());

    // 1. One program, 75% of the RAM.
    let t0 = sys::now_us();
    let mut one: Vec<Kid> = spawn(&mut c, &alloc::format!("ram_all child {}", all)).into_iter().collect();
    let reported = gather(&mut one);
    c.check(
        reported && one[0].words == [1, all, 0],
        &alloc::format!("one program touched and checked {} pages (75% of {} MiB)", all, mib),
    );
    println!("ram_test: one program: {:?} after {} ms", one.first().map(|k| k.words), (sys::now_us() - t0) / 1000);
    answer(&mut one, EXIT);

    // 2. Four at once, a quarter each, two on each memory server.
    let t0 = sys::now_us();
    let mut four: Vec<Kid> = (0..4)
        .filter_map(|i| {
            spawn(&mut c, &alloc::format!("{}ram_part child {}", if i % 2 == 1 { "pager=mem1 " } else { "" }, part))
        })
        .collect();
    let reported = gather(&mut four);
    c.check(
        reported && four.len() == 4 && four.iter().all(|k| k.words == [1, part, 0]),
        &alloc::format!("four programs hold {} pages each at once", part),
    );
    println!(
        "ram_test: four programs: {:?} after {} ms",
        four.iter().map(|k| k.words).collect::<Vec<_>>(),
        (sys::now_us() - t0) / 1000
    );
    answer(&mut four, EXIT);

    // 3. Three again; a fourth goes past its limit and is refused; the three carry on.
    let mut three: Vec<Kid> = (0..3)
        .filter_map(|i| {
            spawn(&mut c, &alloc::format!("{}ram_part child {}", if i % 2 == 1 { "pager=mem1 " } else { "" }, part))
        })
        .collect();
    let reported = gather(&mut three);
    c.check(
        reported && three.len() == 3 && three.iter().all(|k| k.words == [1, part, 0]),
        "three programs hold their pages",
    );
    let mut o: Vec<Kid> = spawn(&mut c, "ram_over").into_iter().collect();
    let reported = gather(&mut o);
    c.check(reported && o[0].words[0] == 1, "a program past its limit is refused (NoMemory) and carries on");
    answer(&mut o, EXIT);
    answer(&mut three, AGAIN);
    let reported = gather(&mut three);
    c.check(reported && three.iter().all(|k| k.words == [1, part, 0]), "the other three still hold every page");
    answer(&mut three, EXIT);

    // 4. The largest allocation.
    let mut m: Vec<Kid> = spawn(&mut c, "ram_most").into_iter().collect();
    let reported = gather(&mut m);
    let most = m.first().map_or(0, |k| k.words[1]);
    println!(
        "ram_test: the largest allocation: {} pages, {} MiB of {} MiB ({}%)",
        most,
        most >> 8,
        mib,
        most * 100 / (mib * 256).max(1)
    );
    c.check(reported && m[0].words[0] == 1 && most >= all, "one program gets at least 75% of the RAM, then NoMemory");
    answer(&mut m, EXIT);

    // The memory servers served all of it and still do.
    let info = env::meminfo().unwrap_or_default();
    println!("{}", info);
    c.check(info.contains("mem0: pool") && info.contains("mem1: pool"), "both memory servers still serve");
    println!("ram_test: all of it in {} ms", (sys::now_us() - start) / 1000);
    c.finish("ram_test")
}
