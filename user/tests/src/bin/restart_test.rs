//! `restart_test KILLS`: the storage stack restarts under load. A killer
//! thread kills `blk` (half the time), `files` (a third) or `cache` (a sixth: blk then
//! ends too and is started again to attach to the new cache) KILLS times, at random
//! moments, each time once the last one was restarted by root. Meanwhile the main thread
//! writes blocks of a segment (direct and buffered, in turns) and files through
//! `files`, round after round; after each acknowledged write it notes what must be
//! there. A failed call means the server is gone: it finds the new one through root
//! (`Segment::reopen`, the files client's reconnecting calls), opens again and sends
//! the write again. The files server itself rides through `blk`'s restarts
//! (`SegDev`). At the end every acknowledged write must read back. A file write is
//! acknowledged by `CLOSE` answering `Ok` (the files contract: `WRITE`'s `Ok` alone
//! promises nothing across a restart of `files`).
//!
//! First, without the killer: a write `files` keeps back is lost when `files` is killed,
//! and the handle's next call says so (`Lost`), not a silent success.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client as baio;
use core::sync::atomic::{AtomicU64, Ordering};
use files_api::client as f;
use rt::{env, println, sys, thread};
use tests::Checks;

rt::entry!(main);

const AREA: u64 = rt::layout::SEGMENT_AREA;
const BLOCKS: u64 = 128;
const FILES: u64 = 8;

static KILLS_WANTED: AtomicU64 = AtomicU64::new(20);
static KILLS_DONE: AtomicU64 = AtomicU64::new(0);

fn pattern(what: u64, round: u64, k: usize) -> u8 {
    (what.wrapping_mul(31) ^ round.wrapping_mul(7) ^ (k as u64 % 251)) as u8
}

/// Kill `name` and wait until root has started it again: false if it did not come back.
fn kill_and_wait(name: &str) -> bool {
    let Some(id) = tests::id_of(name) else { return false };
    let _ = env::kill(id);
    for _ in 0..1000 {
        if tests::id_of(name).is_some_and(|n| n != id) {
            return true;
        }
        sys::sleep_us(10_000);
    }
    false
}

/// A write `files` kept back dies with it; the handle's next calls answer `Lost`.
fn lost_write_behind(c: &mut Checks, files: u64) {
    let data: Vec<u8> = (0..6000).map(|k| pattern(7, 7, k)).collect();
    let Ok((h, _)) = f::open(files, "/restart/kept", true) else {
        c.check(false, "open /restart/kept");
        return;
    };
    c.eq(f::write(files, h, 0, &data), Ok(6000), "a small write is taken (and kept back)");
    c.check(kill_and_wait("files"), "files killed and started again");
    c.eq(f::write(files, h, 6000, &data), Err(Error::Lost), "the handle's next write: Lost");
    c.eq(f::read(files, h, 0, 10).map(|d| d.len()), Err(Error::Lost), "a read on it: Lost");
    c.eq(f::close(files, h), Err(Error::Lost), "its close: Lost, not Ok");
    c.eq(f::stat(files, "/restart/kept").map(|s| s.1), Ok(0), "the kept-back bytes are not in the file");
    // The same write closed before the restart is there after it.
    let Ok((h, _)) = f::open(files, "/restart/kept", false) else {
        c.check(false, "open /restart/kept again");
        return;
    };
    c.eq(f::write(files, h, 0, &data), Ok(6000), "write again");
    c.eq(f::close(files, h), Ok(()), "closed: acknowledged");
    c.check(kill_and_wait("files"), "files killed and started again");
    c.check(
        f::read_all(files, "/restart/kept").is_ok_and(|d| d == data),
        "a write CLOSE acknowledged survives the restart",
    );
    let _ = f::remove(files, "/restart/kept");
}

fn killer(seed: u64) {
    let mut r = tests::Rng::new(seed);
    let wanted = KILLS_WANTED.load(Ordering::SeqCst);
    for k in 0..wanted {
        sys::sleep_us(100_000 + r.below(400_000));
        let name = match r.below(6) {
            0 | 1 => "files",
            2 => "cache",
            _ => "blk",
        };
        // Root may be waiting out a back-off before it starts a server again (blk after
        // it ended by itself, the cache being gone): wait for it rather than skip a kill.
        let mut id = tests::id_of(name);
        for _ in 0..1000 {
            if id.is_some() {
                break;
            }
            sys::sleep_us(10_000);
            id = tests::id_of(name);
        }
        let Some(id) = id else { continue };
        let _ = env::kill(id);
        // Wait for root to start it again before the next kill.
        for _ in 0..1000 {
            if tests::id_of(name).is_some_and(|n| n != id) {
                break;
            }
            sys::sleep_us(10_000);
        }
        println!("restart_test: kill {} of {}: {} (was id {})", k + 1, wanted, name, id);
        KILLS_DONE.store(k + 1, Ordering::SeqCst);
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let kills: u64 = rt::args().split(' ').nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    KILLS_WANTED.store(kills, Ordering::SeqCst);
    let (blk, files) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find blk");
    c.eq(env::lookup("files", files), Ok(()), "find files");
    c.eq(baio::create(blk, "restart", BLOCKS, 0), Ok(()), "create a segment");
    let _ = f::mkdir(files, "/restart");
    let mut seg = match baio::open(blk, "restart", 3, AREA) {
        Ok(s) => s,
        Err(e) => {
            c.check(false, &format!("open the segment: {}", e.name()));
            return c.finish("restart_test");
        }
    };
    lost_write_behind(&mut c, files);
    c.check(thread::spawn(killer, sys::rdtsc(), thread::my_priority()).is_ok(), "start the killer thread");
    // What must be there: per block and per file, the round of its last acknowledged write.
    let mut blocks: Vec<Option<u64>> = alloc::vec![None; BLOCKS as usize];
    let mut files_w: Vec<Option<u64>> = alloc::vec![None; FILES as usize];
    let (mut retries, mut writes, mut round) = (0u64, 0u64, 0u64);
    while KILLS_DONE.load(Ordering::SeqCst) < kills && round < 10_000 {
        round += 1;
        for b in 0..BLOCKS {
            let kind = if (b + round) % 2 == 0 { p::WRITE_OP } else { p::WRITE_OP | p::BUFFERED };
            loop {
                for (k, x) in seg.data(0)[..4096].iter_mut().enumerate() {
                    *x = pattern(b, round, k);
                }
                let r = seg.batch_ops(&[p::op(kind, b, 1, 0, p::DATA)], p::WAIT_ALL);
                // The shared area is blk's memory: if blk died just after answering, it
                // has vanished and reads as fresh zeros (status 0): blk is gone.
                let r = match r {
                    Ok(()) if seg.status(0) == 0 => Err(Error::NoPartner),
                    r => r,
                };
                match r {
                    Ok(()) if seg.status(0) == p::DONE => break,
                    Ok(()) => {
                        c.check(
                            false,
                            &format!(
                                "block {b}: status {:#x}, completed {}, cap {}, retries {}",
                                seg.status(0),
                                seg.completed(),
                                seg.cap,
                                retries
                            ),
                        );
                        return c.finish("restart_test");
                    }
                    Err(e) if env::server_gone(e) => {
                        retries += 1;
                        if seg.reopen(blk).is_err() {
                            c.check(false, "blk came back within 10 s");
                            return c.finish("restart_test");
                        }
                    }
                    Err(e) => {
                        c.check(false, &format!("block {b}: {}", e.name()));
                        return c.finish("restart_test");
                    }
                }
            }
            blocks[b as usize] = Some(round);
            writes += 1;
            if b % 16 == 0 {
                let i = (b / 16 + round) % FILES;
                let path = format!("/restart/f{i}");
                let data: Vec<u8> = (0..6000).map(|k| pattern(1000 + i, round, k)).collect();
                let mut tries = 0;
                let done = loop {
                    // A handle of a files server that is gone is gone with it (`Lost`): open
                    // anew. The write counts once CLOSE answers Ok.
                    let r = f::open(files, &path, true).and_then(|(h, _)| {
                        let w = f::write(files, h, 0, &data);
                        let closed = f::close(files, h);
                        w.and_then(|n| closed.map(|_| n))
                    });
                    match r {
                        Ok(n) if n == data.len() as u64 => break true,
                        Ok(_) | Err(_) if tries < 1000 => {
                            tries += 1;
                            retries += 1;
                            sys::sleep_us(10_000);
                        }
                        _ => break false,
                    }
                };
                if !done {
                    c.check(false, &format!("write {path} (round {round})"));
                    return c.finish("restart_test");
                }
                files_w[i as usize] = Some(round);
            }
        }
    }
    println!(
        "restart_test: {} rounds, {} block writes acknowledged, {} retries after restarts",
        round, writes, retries
    );
    c.eq(KILLS_DONE.load(Ordering::SeqCst), kills, "every kill was followed by a restart");
    // Every acknowledged write is there: blocks direct and through the cache, files.
    let mut bad = 0;
    for b in 0..BLOCKS {
        let Some(rd) = blocks[b as usize] else { continue };
        for kind in [p::READ_OP, p::READ_OP | p::BUFFERED] {
            let ok = seg.batch_ops(&[p::op(kind, b, 1, 0, p::DATA)], p::WAIT_ALL).is_ok()
                && seg.status(0) == p::DONE
                && seg.data(0)[..4096].iter().enumerate().all(|(k, x)| *x == pattern(b, rd, k));
            if !ok {
                bad += 1;
            }
        }
    }
    c.eq(bad, 0, "every acknowledged block reads back, direct and buffered");
    let mut fbad = 0;
    for i in 0..FILES {
        let Some(rd) = files_w[i as usize] else { continue };
        let want: Vec<u8> = (0..6000).map(|k| pattern(1000 + i, rd, k)).collect();
        if !f::read_all(files, &format!("/restart/f{i}")).is_ok_and(|d| d == want) {
            fbad += 1;
        }
    }
    c.eq(fbad, 0, "every acknowledged file reads back");
    let _ = seg.close();
    c.eq(baio::delete(blk, "restart"), Ok(()), "delete the segment");
    c.eq(baio::mount(blk).map(|m| m.3), Ok(4096), "blk serves");
    c.finish("restart_test")
}
