//! Live update of a whole server: `files` is replaced by a new program while
//! a thread here and another program (`update_peer`) keep writing and reading their
//! files through it. Updates whose new program crashes at start, exits without taking
//! the state, or refuses it (it reads only a format the old server does not write) fail
//! with the reason and leave the old server serving; two real updates succeed, the
//! clients' handles and capabilities keep working across them (the second new program
//! comes from the files filesystem, `/files`). Then the shared block
//! cache under them is updated too (its index, order and frames move to the new
//! program; blk's capability and mapping keep working). At the end every byte either
//! program wrote is read back and checked.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use baio::BLOCK;
use blk_api as p;
use blk_api::client::{self as blkc, SLOT_BYTES};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use files_api::client as f;
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

static STOP: AtomicBool = AtomicBool::new(false);
static OPS: AtomicU64 = AtomicU64::new(0);
static BAD: AtomicU64 = AtomicU64::new(0);
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// The writer: chunk k of `/u_a` holds `tests::update_chunk(b'a', k)`, read back at once.
fn writer(_: u64) {
    let srv = rt::alloc_slot();
    let _ = env::lookup("files", srv);
    let (r, n) = tests::update_writer(
        srv,
        "/u_a",
        b'a',
        || STOP.load(Ordering::Relaxed),
        |ok| {
            OPS.fetch_add(1, Ordering::Relaxed);
            if !ok {
                BAD.fetch_add(1, Ordering::Relaxed);
            }
        },
    );
    if r.is_err() {
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    WRITTEN.store(n + 1, Ordering::Relaxed);
}

/// The files server's program id (from `ps`).
fn files_id() -> Option<u64> {
    tests::id_of("files")
}

fn ops_advance(c: &mut Checks, what: &str) {
    let o = OPS.load(Ordering::Relaxed);
    c.check(tests::wait_until(3000, || OPS.load(Ordering::Relaxed) >= o + 5), &format!("the clients go on {what}"));
}

fn main() -> i32 {
    let mut c = Checks::new();
    c.check(rt::thread::spawn(writer, 0, rt::thread::my_priority()).is_ok(), "start the writing thread");
    c.check(tests::wait_until(3000, || OPS.load(Ordering::Relaxed) >= 10), "it writes and reads through files");
    let first = files_id();
    c.check(first.is_some(), "files runs");

    let fails = [
        ("files fault_crasher", "the new program ended before it took the state", "whose new program crashes at start"),
        (
            "files hello",
            "the new program ended before it took the state",
            "whose new program exits without taking the state",
        ),
        (
            "files files formats=2",
            "the new program refused the state",
            "whose new program reads only a format the old one does not write",
        ),
    ];
    for (cmd, why, what) in fails {
        let r = env::update(cmd);
        c.check(
            matches!(&r, Err((Error::BadState, w)) if w == why),
            &format!("an update {what} fails with the reason ({r:?})"),
        );
        c.eq(files_id(), first, &format!("after an update {what}, the old server serves"));
        ops_advance(&mut c, &format!("after an update {what}"));
    }
    // A server that does not take part is asked before anything starts: no second
    // instance of it (here a second driver of the disk) ever runs.
    let (blk, programs) = (tests::id_of("blk"), env::root_slots().map(|r| r.2));
    c.eq(env::update("blk blk").map_err(|e| e.0), Err(Error::Unsupported), "blk does not take part in live updates");
    c.eq(
        (tests::id_of("blk"), env::root_slots().map(|r| r.2)),
        (blk, programs),
        "and no new blk was started (root started no program)",
    );
    ops_advance(&mut c, "after an update blk refused");
    // Only root starts an update, and only the program root named takes the state.
    let fsrv = rt::alloc_slot();
    let _ = env::lookup("files", fsrv);
    c.eq(
        tests::raw_request(fsrv, swap_api::UPDATE_BEGIN, &[tests::id_of("update_test").unwrap_or(0)], None),
        Err(Error::NoRights),
        "a client cannot name a successor",
    );
    c.eq(
        tests::raw_request(fsrv, swap_api::UPDATE_STATE, &[u64::MAX], None),
        Err(Error::NoRights),
        "nor take the state",
    );
    c.eq(tests::raw_request(fsrv, swap_api::UPDATE_COMMIT, &[], None), Err(Error::NoRights), "nor its capabilities");
    c.eq(tests::raw_request(fsrv, swap_api::UPDATE_ABORT, &[], None), Err(Error::NoRights), "nor abort an update");
    c.eq(
        tests::raw_request(fsrv, swap_api::UPDATE_BEGIN, &[], None),
        Err(Error::Malformed),
        "a BEGIN without its word",
    );
    ops_advance(&mut c, "after the hostile requests");
    c.eq(env::update("files nothing").map_err(|e| e.0), Err(Error::InvalidArg), "a program not in the boot image");
    c.eq(env::update("nosuch files").map_err(|e| e.0), Err(Error::NotFound), "a server that is not running");
    c.eq(env::update("files").map_err(|e| e.0), Err(Error::InvalidArg), "no program named");

    // A ticket (Cue) for an open file: the new server must know it to take it back.
    let srv = rt::alloc_slot();
    let _ = env::lookup("files", srv);
    let _ = f::remove(srv, "/u_t");
    let t = f::open(srv, "/u_t", true).and_then(|(h, _)| f::write(srv, h, 0, b"a ticket's file").map(|_| h));
    let ticket = rt::alloc_slot();
    c.check(t.is_ok_and(|h| f::ticket(srv, h, ticket).is_ok()), "a ticket for an open file");

    c.eq(env::update("files files"), Ok(()), "update files to a new instance of files");
    let second = files_id();
    c.check(second.is_some() && second != first, &format!("a new program serves ({first:?} → {second:?})"));
    ops_advance(&mut c, "after the update, through the handles they had");
    if let Ok(h) = t {
        c.eq(f::remove(srv, "/u_t"), Err(Error::BadState), "the new server knows the file is open");
        c.check(rt::sys::cap_info(ticket).is_ok(), "the ticket still works");
        c.eq(f::close(srv, h), Ok(()), "close it through the handle the old server gave");
        c.eq(f::remove(srv, "/u_t"), Ok(()), "remove it");
        c.check(rt::sys::cap_info(ticket).is_err(), "the new server took the ticket back with the file");
    }
    // A program from the files filesystem (root reads it through files itself).
    let r = env::update("files /disk/hello.txt");
    c.check(matches!(&r, Err((Error::InvalidArg, _))), &format!("a file that is not a program is refused ({r:?})"));
    c.eq(env::update("files /nothing").map_err(|e| e.0), Err(Error::NotFound), "a path that is not there");
    c.eq(files_id(), second, "the server serves on");
    c.eq(
        env::update("files /files"),
        Ok(()),
        "and once more, with the program in the files filesystem (the endpoint moves again)",
    );
    let third = files_id();
    c.check(third.is_some() && third != second, &format!("another new program serves ({second:?} → {third:?})"));
    ops_advance(&mut c, "after the second update");

    // The shared block cache under it all (blk asks it about every buffered block the
    // files server reads or writes): updated while both programs go on.
    let cache = rt::alloc_slot();
    c.eq(env::lookup("cache", cache), Ok(()), "find the cache");
    let cid = tests::id_of("cache");
    let lookups = |s: [u64; 13]| s[0] + s[1];
    c.eq(
        tests::raw_request(cache, swap_api::UPDATE_STATE, &[1], None),
        Err(Error::NoRights),
        "a client cannot take the cache's state",
    );
    let r = env::update("cache hello");
    c.check(
        matches!(&r, Err((Error::BadState, w)) if w == "the new program ended before it took the state"),
        &format!("an update of the cache whose new program exits fails ({r:?})"),
    );
    c.eq(tests::id_of("cache"), cid, "and the old cache serves on");
    ops_advance(&mut c, "after the cache's failed update");
    // A block of a segment of this program's, written and read through the cache (so
    // the cache holds it), to be read from the cache's frames again after the update.
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    let _ = blkc::delete(blk, "u_cache");
    c.eq(blkc::create(blk, "u_cache", 4, 0), Ok(()), "a segment of this program's");
    let seg = blkc::open(blk, "u_cache", 3, rt::layout::SEGMENT_AREA);
    let pattern = |seed: u8| (0..SLOT_BYTES as usize).map(move |k| seed ^ (k as u8).wrapping_mul(13) ^ (k >> 8) as u8);
    let buffered = |seg: &blkc::Segment, kind: u64, slot: u64| {
        seg.batch_ops(&[p::op(kind, 0, 1, slot, p::DATA + slot * SLOT_BYTES)], p::WAIT_ALL).map(|_| seg.status(slot))
    };
    if let Ok(seg) = &seg {
        for (d, x) in seg.data(0).iter_mut().zip(pattern(0x5a)) {
            *d = x;
        }
        c.eq(buffered(seg, p::WRITE_OP | p::BUFFERED, 0), Ok(p::DONE), "write its block through the cache");
        c.eq(buffered(seg, p::READ_OP | p::BUFFERED, 1), Ok(p::DONE), "and read it back through the cache");
        c.check(seg.data(1)[..BLOCK].iter().copied().eq(pattern(0x5a).take(BLOCK)), "the same bytes");
    }
    let before = cache_api::client::stats(cache);
    c.check(before.is_ok_and(|s| s[2] > 0), &format!("the cache holds blocks ({before:?})"));
    c.eq(env::update("cache cache"), Ok(()), "update the cache to a new instance of cache");
    let cid2 = tests::id_of("cache");
    c.check(cid2.is_some() && cid2 != cid, &format!("a new cache serves ({cid:?} → {cid2:?})"));
    let after = cache_api::client::stats(cache);
    c.check(
        matches!((before, after), (Ok(b), Ok(a)) if lookups(a) >= lookups(b) && a[2] > 0 && a[3] == b[3]),
        &format!("its index and counters came with it, through the old capability ({before:?} → {after:?})"),
    );
    ops_advance(&mut c, "after the cache's update");
    let later = cache_api::client::stats(cache);
    c.check(
        matches!((after, later), (Ok(a), Ok(l)) if lookups(l) > lookups(a)),
        &format!("blk's lookups reach the new cache ({later:?})"),
    );
    // The frames moved with their contents, and blk still reaches them: the block read
    // through the cache is the one written before the update (sigma0 made the frames the
    // new program's; taken back with the old one, blk's mapping of them would be gone).
    if let Ok(seg) = &seg {
        seg.data(1).fill(0);
        c.eq(buffered(seg, p::READ_OP | p::BUFFERED, 1), Ok(p::DONE), "read the block through the new cache");
        c.check(
            seg.data(1)[..BLOCK].iter().copied().eq(pattern(0x5a).take(BLOCK)),
            "its bytes came from the cache's frames as written before the update",
        );
        for (d, x) in seg.data(0).iter_mut().zip(pattern(0xa5)) {
            *d = x;
        }
        c.eq(buffered(seg, p::WRITE_OP | p::BUFFERED, 0), Ok(p::DONE), "write it again through the new cache");
        seg.data(1).fill(0);
        c.eq(buffered(seg, p::READ_OP | p::BUFFERED, 1), Ok(p::DONE), "read it through the cache");
        let cached = seg.data(1)[..BLOCK].iter().copied().eq(pattern(0xa5).take(BLOCK));
        seg.data(1).fill(0);
        c.eq(buffered(seg, p::READ_OP, 1), Ok(p::DONE), "and from the disk");
        c.check(
            cached && seg.data(1)[..BLOCK].iter().copied().eq(pattern(0xa5).take(BLOCK)),
            "both hold the new bytes",
        );
    }

    // Sessions: exclusive while one client has a file open, shared with two.
    let sessions = || {
        let mut buf = [0u8; 512];
        let n = swap_api::client::list(srv, &mut buf).unwrap_or(0);
        // (Component 0's line; `fcm`'s follows it.)
        let text = alloc::string::String::from_utf8_lossy(&buf[..n]).into_owned();
        alloc::string::String::from(text.lines().find(|l| l.starts_with("sessions ")).unwrap_or(""))
    };
    let count =
        |l: &str, key: &str| l.split(key).nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse::<u64>().ok());
    let l = sessions();
    c.check(
        l.starts_with("sessions auto auto,shared") && count(&l, "shared=") == Some(0),
        &format!("files lists its sessions, none shared ({l})"),
    );
    // One interposer on every session, those open now and those opened later.
    c.eq(swap_api::client::interpose(srv, 0, swap_api::COUNTER), Ok(()), "interpose a counter on files' sessions");
    let _ = f::remove(srv, "/u_x");
    if let Ok((h, _)) = f::open(srv, "/u_x", true) {
        for k in 0..3u8 {
            let _ = f::write(srv, h, 100 * k as u64, &[k; 100]);
        }
        let l = sessions();
        c.check(
            l.contains("counter: read=") && count(&l, "write=").is_some_and(|n| n >= 3),
            &format!("it counted the writes of a file opened after it was attached ({l})"),
        );
        c.eq(swap_api::client::interpose(srv, 0, swap_api::NONE), Ok(()), "detach it");
        c.check(sessions().trim_end().ends_with(" -"), "detached from every session");
        c.eq(
            f::stat(srv, "/u_x").map(|s| s.1),
            Ok(300),
            "an exclusive session's appends are there when the file is looked at",
        );
        let swaps = count(&sessions(), "swaps=").unwrap_or(0);
        let mut why = [0u8; 64];
        c.check(swap_api::client::swap(srv, 0, 1, &mut why).is_ok(), "fix every session shared");
        let l = sessions();
        c.check(
            count(&l, "shared=") == count(&l, "open=") && count(&l, "swaps=") > Some(swaps),
            &format!("all open files' sessions swapped to shared ({l})"),
        );
        c.check(f::read(srv, h, 0, 300).is_ok_and(|d| d.len() == 300 && d[250] == 2), "the bytes are all there");
        c.check(swap_api::client::swap(srv, 0, 0, &mut why).is_ok(), "let them adapt again");
        c.eq(count(&sessions(), "shared="), Some(0), "one client each: exclusive again");
        let _ = f::close(srv, h);
        let _ = f::remove(srv, "/u_x");
    }
    c.check(tests::wait_until(3000, || f::stat(srv, "/u_s").is_ok()), "update_peer made /u_s");
    match f::open(srv, "/u_s", false) {
        Ok((h, _)) => {
            let l = sessions();
            c.eq(count(&l, "shared="), Some(1), &format!("a second client opened /u_s: its session is shared ({l})"));
            c.eq(f::write(srv, h, 0, b"written by update_test"), Ok(22), "write into the shared file");
            let _ = f::close(srv, h);
            c.eq(count(&sessions(), "shared="), Some(0), "closed: one client left, exclusive again");
        }
        Err(e) => {
            c.check(false, &format!("open /u_s: {e:?}"));
        }
    }

    STOP.store(true, Ordering::Relaxed);
    c.check(tests::wait_until(3000, || WRITTEN.load(Ordering::Relaxed) != 0), "the writing thread ends");
    c.eq(BAD.load(Ordering::Relaxed), 0, "every write and read through the updates succeeded and read back right");
    let n = WRITTEN.load(Ordering::Relaxed) - 1;
    let srv = rt::alloc_slot();
    let _ = env::lookup("files", srv);
    c.check(
        n >= 20 && tests::update_check(srv, "/u_a", b'a', n),
        &format!("all {n} chunks read back byte for byte from the new server"),
    );
    // Tell the peer to finish.
    c.check(f::open(srv, "/u_done", true).is_ok(), "tell update_peer to check its file");
    println!("update_test: {} operations", OPS.load(Ordering::Relaxed));

    // A restart after a live update starts a fresh instance of the program that serves
    // now: killed after an update from the boot image (whose entry carried `update`, so
    // each new instance asked a dead server for its state and exited, thousands of
    // times) and after one from /files (which root read through files: gone then).
    c.check(tests::wait_until(3000, || tests::id_of("update_peer").is_none()), "update_peer has ended");
    c.eq(env::update("files files"), Ok(()), "update files from the boot image once more");
    kill_and_serve(&mut c, "after the update from the boot image");
    c.eq(env::update("files /files"), Ok(()), "update files from /files once more");
    kill_and_serve(&mut c, "after the update from /files");
    c.finish("update_test")
}

/// Kill `files`: root must start it again once, and it must serve (a client's call
/// succeeds) within 10 s and go on serving as the same instance.
fn kill_and_serve(c: &mut Checks, what: &str) {
    let restarts = || tests::ps_column("files", 7);
    let (id, before) = (files_id(), restarts());
    c.check(id.is_some_and(|i| env::kill(i).is_ok()), &format!("kill files {what}"));
    let t0 = rt::sys::now_us();
    let srv = rt::alloc_slot();
    let served = tests::wait_until(1000, || {
        let _ = rt::sys::cap_delete(srv);
        env::lookup("files", srv).is_ok() && f::stat(srv, "/u_a").is_ok()
    });
    let took = (rt::sys::now_us() - t0) / 1000;
    c.check(served, &format!("files serves again {what} ({took} ms)"));
    let new = files_id();
    rt::sys::sleep_us(2_000_000);
    c.eq(restarts(), before.map(|b| b + 1), &format!("restarted once {what}"));
    c.check(
        new.is_some() && new != id && files_id() == new,
        &format!("a new instance serves on ({id:?} → {new:?} → {:?})", files_id()),
    );
    c.check(f::stat(srv, "/u_a").is_ok(), "and answers");
}
