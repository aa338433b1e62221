//! Grafts at the cache's eviction point (VINO §3.1): a hot-list graft in
//! every technology keeps this program's hot blocks in the shared cache while a stream
//! of its other blocks goes through, where plain LRU evicts them; hostile grafts are
//! refused at load (with the reason) or aborted call by call and unloaded after three
//! failures, and the cache keeps serving the right bytes throughout.
//!
//! Why one file of about 900 lines: it is one QEMU test program of many cases, a
//! function each, sharing one setup (its segment, the cache's and blk's capabilities,
//! the hot set); a case is read on its own.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client::{self as baio, Segment};
use core::sync::atomic::{AtomicU64, Ordering};
use graft::format::Tech;
use graft_api as g;
use rt::{env, ipc, println};
use tests::blocks::io;
use tests::Checks;

rt::entry!(main);

const BUF: u64 = rt::layout::SEGMENT_AREA;
const SEG: &str = "gt";
const BLOCKS: u64 = 2048;
/// Hot blocks (of the segment): read first, so LRU would evict them first.
const HOT: u64 = 4;
/// Then this many other blocks stream through: more than the cache's 1024 slots.
const STREAM: (u64, u64) = (64, 1280);

fn cache_hits(cache: u64) -> u64 {
    cache_word(cache, 2)
}

/// The cache's `STATS` reply word `k` (2: hits …).
fn cache_word(cache: u64, k: usize) -> u64 {
    cache_api::client::stats(cache).map_or(0, |s| s[k - 2])
}

/// Read the hot blocks, stream the others, and count how many hot ones are still
/// cached (hits when they are read again). Every read is checked.
fn hot_kept(seg: &Segment, cache: u64, c: &mut Checks, what: &str) -> u64 {
    let rd = p::READ_OP | p::BUFFERED;
    c.check(io(seg, rd, 0, HOT, true), &format!("{what}: the hot blocks read right"));
    c.check(io(seg, rd, STREAM.0, STREAM.1, true), &format!("{what}: the stream reads right"));
    let h0 = cache_hits(cache);
    c.check(io(seg, rd, 0, HOT, true), &format!("{what}: the hot blocks read right again"));
    cache_hits(cache) - h0
}

fn hot_list(start: u64) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&HOT.to_le_bytes());
    for b in 0..HOT {
        s.extend_from_slice(&(start + b).to_le_bytes());
    }
    s
}

/// The upcall graft's hot list, in this program (VINO: the user-level server's memory).
static HOT_LIST: [AtomicU64; 1 + HOT as usize] = [const { AtomicU64::new(0) }; 1 + HOT as usize];

/// The hot-list graft as a user-level server: the same code as the native one.
fn upcall_hotlist(_p: graft::Point, input: &[u8]) -> u64 {
    let mut st = [0u8; graft_examples::HOT_STATE];
    for (k, w) in HOT_LIST.iter().enumerate() {
        st[8 * k..8 * k + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    graft_examples::hotlist(input, &mut st)
}

fn liar(_p: graft::Point, input: &[u8]) -> u64 {
    (input.len() / 8 + 1) as u64
}

/// Hostile upcall servers: one that answers a victim that is not a candidate, one that
/// takes the call and never answers (and `serve_garbled`).
fn serve_liar(_: u64) {
    graft_api::upcall::serve(liar)
}

fn serve_hotlist(_: u64) {
    graft_api::upcall::serve(upcall_hotlist)
}

fn serve_mute(_: u64) {
    let mut m = ipc::Msg::empty();
    loop {
        let _ = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
        rt::sys::sleep_us(10_000_000);
    }
}

/// A hostile upcall server that answers every call with a message of another shape: a
/// label other than the answer's and two words, the first 0 (so an answer taken from
/// the second word, as the upcall's did before its one-register call, would be a good victim).
fn serve_garbled(_: u64) {
    let mut buf = [0u8; 1024];
    let _ = ipc::recv_regs_string(&mut buf);
    loop {
        let _ = ipc::reply_regs_wait_string(abi::ipc::Tag::new(5, 2).0, 0, &mut buf);
    }
}

/// The upcall MD5 and logical-disk grafts' states, in this program.
static UP_MD5: rt::sync::Lock<[u8; graft_examples::MD5_STATE]> = rt::sync::Lock::new([0; graft_examples::MD5_STATE]);
static UP_LDISK: rt::sync::Lock<[u8; graft_examples::LD_STATE]> = rt::sync::Lock::new([0; graft_examples::LD_STATE]);

fn serve_md5(_: u64) {
    graft_api::upcall::serve(|_, input| graft_examples::md5(input, &mut *UP_MD5.lock()))
}

fn serve_ldisk(_: u64) {
    graft_api::upcall::serve(|_, input| graft_examples::ldisk(input, &mut *UP_LDISK.lock()))
}

/// The upcall technology: the graft's code in a thread of this program, one IPC per call.
fn upcalls(c: &mut Checks, seg: &Segment, cache: u64, start: u64) {
    HOT_LIST[0].store(HOT, Ordering::Relaxed);
    for b in 0..HOT {
        HOT_LIST[1 + b as usize].store(start + b, Ordering::Relaxed);
    }
    let prio = rt::thread::my_priority();
    let r = tests::load_graft(
        cache,
        &graft::GraftFile {
            point: graft::Point::Evict,
            tech: graft::Tech::Upcall,
            state_len: 0,
            name: "u",
            code: b"u",
            sig: &[],
        }
        .to_bytes(),
    );
    c.check(
        r.is_err_and(|r| r.reason.contains("capability")),
        "an upcall graft without its thread's capability is refused",
    );
    let Ok(t) = rt::thread::spawn(serve_hotlist, 0, prio) else {
        c.check(false, "start the upcall server thread");
        return;
    };
    let id = g::load_upcall(cache, "hotlist", graft::Point::Evict, t.slot);
    c.check(id.is_ok(), "upcall: load the hot-list graft (a capability to this program's thread)");
    let id = id.unwrap_or(0);
    let k = hot_kept(seg, cache, c, "upcall");
    c.eq(k, HOT, "upcall: the user-level graft kept all the hot blocks");
    let st = g::stats(cache, id);
    c.check(
        st.as_ref().is_ok_and(|s| s.calls > 0 && s.aborts == 0),
        &format!("upcall: called, never aborted ({st:?})"),
    );
    c.check(g::unload(cache, id).is_ok(), "upcall: unload it");
    for (name, f) in [
        ("upcall liar", serve_liar as fn(u64)),
        ("upcall mute", serve_mute as fn(u64)),
        ("upcall garbled", serve_garbled as fn(u64)),
    ] {
        let Ok(t) = rt::thread::spawn(f, 0, prio) else { continue };
        let Ok(id) = g::load_upcall(cache, name.trim_start_matches("upcall "), graft::Point::Evict, t.slot) else {
            c.check(false, &format!("{name}: load"));
            continue;
        };
        let reaped = cache_word(cache, 9);
        c.check(
            io(seg, p::READ_OP | p::BUFFERED, STREAM.0, STREAM.1, true),
            &format!("{name}: the cache serves the right bytes under it"),
        );
        c.eq(
            g::stats(cache, id).map_err(|r| r.error).err(),
            Some(Error::NotFound),
            &format!("{name}: unloaded after failing"),
        );
        c.eq(cache_word(cache, 9), reaped + 1, &format!("{name}: counted as unloaded for failing"));
    }
}

/// The stream point in blk (VINO §3.2): reads flagged `STREAM` go through the reader's
/// MD5 graft; the digest it leaves must be the one this program computes over the
/// same bytes.
fn streams(c: &mut Checks, seg: &Segment, blk: u64, files: u64) {
    let stream_read = |first: u64, n: u64| -> (bool, u64) {
        let r = seg.batch_ops(&[p::op(p::READ_OP | p::STREAM, first, n, 0, p::DATA)], p::WAIT_ALL);
        (r.is_ok(), seg.status(0))
    };
    let (ok, st) = stream_read(0, 4);
    c.check(
        ok && st == p::DONE | p::STREAM_ABORTED,
        &format!("a stream read with no graft completes, marked STREAM_ABORTED ({st:#x})"),
    );
    let r = seg.batch_ops(&[p::op(p::WRITE_OP | p::STREAM, 0, 1, 0, p::DATA)], p::WAIT_ALL);
    c.check(r.is_ok() && seg.status(0) == p::FAILED | p::E_BAD, "a write cannot be a stream");
    for tech in Tech::ALL.into_iter().filter(|t| t.is_file()).map(Tech::name) {
        let Ok(file) = files_api::client::read_all(files, &format!("/grafts/stream_{tech}_md5.graft")) else {
            c.check(false, &format!("/grafts/stream_{tech}_md5.graft is in the files filesystem"));
            continue;
        };
        let id = match tests::load_graft(blk, &file) {
            Ok(id) => id,
            Err(r) => {
                c.check(false, &format!("{tech}: load MD5 into blk: {:?} {}", r.error, r.reason));
                continue;
            }
        };
        let mut want = [0u8; graft_examples::MD5_STATE];
        let mut all_done = true;
        for (first, n) in [(0u64, 32u64), (32, 32), (64, 8)] {
            let (ok, st) = stream_read(first, n);
            all_done &= ok && st == p::DONE;
            for piece in seg.bytes(p::DATA, n * 4096).chunks(1024) {
                graft_examples::md5(piece, &mut want);
            }
        }
        graft_examples::md5(&[], &mut want);
        let st = g::stats(blk, id).map_err(|r| r.error);
        c.check(all_done, &format!("{tech}: 72 blocks read through the MD5 graft ({st:?})"));
        let end = g::test_run(blk, id, &[], 1);
        c.check(end.as_ref().is_ok_and(|r| r.last == 0 && r.aborts == 0), &format!("{tech}: end the stream ({end:?})"));
        let got = g::read_state(blk, id, 0, 16).map(|w| [w[0], w[1]]);
        let want = [
            u64::from_le_bytes(want[..8].try_into().unwrap_or_default()),
            u64::from_le_bytes(want[8..16].try_into().unwrap_or_default()),
        ];
        c.eq(got.map_err(|r| r.error), Ok(want), &format!("{tech}: the graft's digest is the MD5 of the bytes read"));
        c.check(
            g::read_state(blk, id, 200_000, 64).is_ok_and(|w| w == [0; 8]),
            &format!("{tech}: a READ far past the state answers nothing, and blk lives on"),
        );
        c.check(g::unload(blk, id).is_ok(), &format!("{tech}: unload it"));
    }
    // By upcall: the same MD5 in a thread of this program, its digest kept here.
    match rt::thread::spawn(serve_md5, 0, rt::thread::my_priority())
        .map_err(|_| ())
        .and_then(|t| g::load_upcall(blk, "md5", graft::Point::Stream, t.slot).map_err(|_| ()))
    {
        Ok(id) => {
            let mut want = [0u8; graft_examples::MD5_STATE];
            let mut all_done = true;
            for (first, n) in [(0u64, 32u64), (32, 8)] {
                let (ok, st) = stream_read(first, n);
                all_done &= ok && st == p::DONE;
                for piece in seg.bytes(p::DATA, n * 4096).chunks(1024) {
                    graft_examples::md5(piece, &mut want);
                }
            }
            graft_examples::md5(&[], &mut want);
            let end = g::test_run(blk, id, &[], 1);
            c.check(all_done && end.is_ok(), "upcall: 40 blocks read through the MD5 graft in this program");
            c.check(*UP_MD5.lock() == want, "upcall: its digest (kept in this program) is the MD5 of the bytes read");
            let _ = g::unload(blk, id);
        }
        Err(()) => {
            c.check(false, "upcall: load MD5 into blk");
        }
    }
    // Hostile grafts at the stream point (the evict ones, their header's point made
    // `stream`: the engines do not care which point calls them; a signed one would no
    // longer be).
    for name in ["wasmi_spin", "wasmi_oob", "ebpf_liar", "rhai_spin", "rhai_hog"] {
        let Ok(mut file) = files_api::client::read_all(files, &format!("/grafts/evict_{name}.graft")) else {
            c.check(false, &format!("/grafts/evict_{name}.graft is in the files filesystem"));
            continue;
        };
        file[8] = graft::Point::Stream as u8;
        let Ok(id) = tests::load_graft(blk, &file) else {
            c.check(false, &format!("stream {name}: load"));
            continue;
        };
        let _ = g::set_budget(blk, id, 200_000);
        let runs: Vec<(bool, u64)> = (0..3).map(|_| stream_read(0, 8)).collect();
        c.check(
            runs.iter().all(|(ok, st)| *ok && *st == p::DONE | p::STREAM_ABORTED),
            &format!("stream {name}: each read completes, marked STREAM_ABORTED ({runs:?})"),
        );
        c.check(io(seg, p::READ_OP, 0, 8, true), &format!("stream {name}: the bytes read are right"));
        c.eq(
            g::stats(blk, id).map_err(|r| r.error).err(),
            Some(Error::NotFound),
            &format!("stream {name}: unloaded after three aborted calls"),
        );
    }
}

/// Blocks of each logical-disk segment: 62 the graft maps onto, the map's 2.
const LD_LEN: u64 = 64;

/// Write logical blocks `first .. first + n` of `seg` as write `v`: the status word.
fn ld_write(seg: &Segment, first: u64, n: u64, v: u64) -> u64 {
    for k in 0..n {
        seg.bytes(p::DATA + k * 4096, 4096).copy_from_slice(&tests::ldisk_block(first + k, v));
    }
    match seg.batch_ops(&[p::op(p::WRITE_OP, first, n, 0, p::DATA)], p::WAIT_ALL) {
        Ok(_) => seg.status(0),
        Err(_) => p::FAILED,
    }
}

/// Read blocks `first .. first + n` of `seg`: the status word, and the bytes.
fn ld_read(seg: &Segment, first: u64, n: u64) -> (u64, Vec<u8>) {
    match seg.batch_ops(&[p::op(p::READ_OP, first, n, 0, p::DATA)], p::WAIT_ALL) {
        Ok(_) => (seg.status(0), seg.bytes(p::DATA, n * 4096).to_vec()),
        Err(_) => (p::FAILED, Vec::new()),
    }
}

/// The writes every technology's logical disk gets: (first, blocks, version).
const LD_WRITES: [(u64, u64, u64); 6] = [(0, 8, 1), (3, 2, 2), (40, 4, 3), (7, 1, 4), (0, 32, 5), (50, 12, 6)];

/// What the logical disk should hold after `LD_WRITES`: the version of each block.
fn ld_expected() -> [u64; 62] {
    let mut v = [0u64; 62];
    for (first, n, ver) in LD_WRITES {
        for l in first..first + n {
            v[l as usize] = ver;
        }
    }
    v
}

/// A graft file made here: point `ldisk`, rhai.
fn rhai_ldisk(name: &str, code: &str) -> Vec<u8> {
    graft::format::GraftFile {
        point: graft::Point::Ldisk,
        tech: graft::format::Tech::Script,
        state_len: 8,
        name,
        code: code.as_bytes(),
        sig: &[],
    }
    .to_bytes()
}

/// The logical-disk point (VINO §3.3) in blk: a segment made a logical disk by its
/// owner's graft in every technology holds what was written where the graft put it,
/// and every technology lays it out — blocks and map — as the native graft does;
/// hostile grafts fail the operations they touch (`E_GRAFT`), never another segment.
fn ldisks(c: &mut Checks, blk: u64, files: u64) {
    let want = ld_expected();
    let mut layouts: Vec<(&str, u64)> = Vec::new();
    for (k, tech) in Tech::ALL.into_iter().filter(|t| t.is_file()).map(Tech::name).enumerate() {
        let name = format!("ld_{tech}");
        c.eq(baio::create(blk, &name, LD_LEN, 0), Ok(()), &format!("{tech}: create a segment of 64 blocks"));
        let Ok(seg) = baio::open(blk, &name, 3, BUF + (k as u64 + 1) * p::AREA_BYTES) else {
            c.check(false, &format!("{tech}: open it"));
            continue;
        };
        let Ok(file) = files_api::client::read_all(files, &format!("/grafts/ldisk_{tech}_ldisk.graft")) else {
            c.check(false, &format!("/grafts/ldisk_{tech}_ldisk.graft is in the files filesystem"));
            continue;
        };
        let Ok(id) = tests::load_graft(blk, &file) else {
            c.check(false, &format!("{tech}: load the logical-disk graft into blk"));
            continue;
        };
        c.eq(seg.ldisk(id), Ok(LD_LEN - p::MAP_BLOCKS), &format!("{tech}: the segment is a logical disk of 62 blocks"));
        let statuses: Vec<u64> = LD_WRITES.iter().map(|&(f, n, v)| ld_write(&seg, f, n, v)).collect();
        c.check(
            statuses.iter().all(|s| *s == p::DONE),
            &format!("{tech}: six writes through the graft ({statuses:x?})"),
        );
        let (s1, a) = ld_read(&seg, 0, 31);
        let (s2, b) = ld_read(&seg, 31, 31);
        let good = (0..62u64).all(|l| {
            let got = if l < 31 { &a[l as usize * 4096..][..4096] } else { &b[(l - 31) as usize * 4096..][..4096] };
            if want[l as usize] == 0 {
                got.iter().all(|x| *x == 0)
            } else {
                *got == tests::ldisk_block(l, want[l as usize])[..]
            }
        });
        c.check(
            s1 == p::DONE && s2 == p::DONE && good,
            &format!("{tech}: every logical block reads back its last write (zeros if never written)"),
        );
        let st = g::stats(blk, id);
        c.check(
            st.as_ref().is_ok_and(|s| s.calls >= 62 + 59 && s.aborts == 0),
            &format!("{tech}: a graft call per block, none aborted ({st:?})"),
        );
        c.check(seg.ldisk(0).is_ok(), &format!("{tech}: detach the graft"));
        let (s, raw) = ld_read(&seg, 0, 32);
        let (s2, raw2) = ld_read(&seg, 32, 32);
        c.check(s == p::DONE && s2 == p::DONE, &format!("{tech}: read the segment as it lies"));
        c.check(
            raw[3 * 4096..4 * 4096] == tests::ldisk_block(3, 1)[..],
            &format!("{tech}: block 3's first version is still where it was written (the log moved the block)"),
        );
        let mut all = raw;
        all.extend_from_slice(&raw2);
        layouts.push((tech, baio_fnv(&all)));
        let _ = g::unload(blk, id);
        let _ = seg.close();
        let _ = baio::delete(blk, &name);
    }
    let native = layouts.first().map(|l| l.1);
    for (tech, sum) in &layouts[1.min(layouts.len())..] {
        c.eq(Some(*sum), native, &format!("{tech}: the segment's blocks and map are native's, byte for byte"));
    }

    // By upcall: the map lives in this program (blk keeps no state of it on the disk).
    let up = rt::thread::spawn(serve_ldisk, 0, rt::thread::my_priority())
        .map_err(|_| ())
        .and_then(|t| g::load_upcall(blk, "ldisk", graft::Point::Ldisk, t.slot).map_err(|_| ()));
    let made = baio::create(blk, "ld_upcall", LD_LEN, 0).is_ok();
    match (up, baio::open(blk, "ld_upcall", 3, BUF + p::AREA_BYTES)) {
        (Ok(id), Ok(seg)) if made => {
            c.eq(
                seg.ldisk(id),
                Ok(LD_LEN - p::MAP_BLOCKS),
                "upcall: the segment is a logical disk through a thread of this program",
            );
            let statuses: Vec<u64> = LD_WRITES.iter().map(|&(f, n, v)| ld_write(&seg, f, n, v)).collect();
            let (s1, a) = ld_read(&seg, 0, 31);
            let (s2, b) = ld_read(&seg, 31, 31);
            let good = (0..62u64).all(|l| {
                let got = if l < 31 { &a[l as usize * 4096..][..4096] } else { &b[(l - 31) as usize * 4096..][..4096] };
                if want[l as usize] == 0 {
                    got.iter().all(|x| *x == 0)
                } else {
                    *got == tests::ldisk_block(l, want[l as usize])[..]
                }
            });
            c.check(
                statuses.iter().all(|s| *s == p::DONE) && s1 == p::DONE && s2 == p::DONE && good,
                "upcall: every logical block reads back its last write",
            );
            let mut native = alloc::vec![0u8; graft_examples::LD_STATE];
            for &(f, n, _) in LD_WRITES.iter() {
                for l in f..f + n {
                    let mut i = [0u8; 24];
                    i[..8].copy_from_slice(&l.to_le_bytes());
                    i[8..16].copy_from_slice(&(LD_LEN - p::MAP_BLOCKS).to_le_bytes());
                    i[16] = 1;
                    graft_examples::ldisk(&i, &mut native);
                }
            }
            c.check(
                UP_LDISK.lock()[..] == native[..],
                "upcall: its map is the one the native graft makes from the same writes",
            );
            let _ = g::unload(blk, id);
            let _ = seg.close();
        }
        _ => {
            c.check(false, "upcall: a logical disk by upcall");
        }
    }
    let _ = baio::delete(blk, "ld_upcall");

    // Hostile grafts, on a segment of their own beside one with the native graft.
    let (Ok(()), Ok(())) = (baio::create(blk, "ld_mine", LD_LEN, 0), baio::create(blk, "ld_bad", LD_LEN, 0)) else {
        c.check(false, "create two more segments");
        return;
    };
    let (Ok(mine), Ok(bad)) =
        (baio::open(blk, "ld_mine", 3, BUF + p::AREA_BYTES), baio::open(blk, "ld_bad", 3, BUF + 2 * p::AREA_BYTES))
    else {
        c.check(false, "open them");
        return;
    };
    let Ok(native) = files_api::client::read_all(files, "/grafts/ldisk_native_ldisk.graft")
        .map_err(|_| ())
        .and_then(|f| tests::load_graft(blk, &f).map_err(|_| ()))
    else {
        c.check(false, "load the native logical disk");
        return;
    };
    c.check(
        mine.ldisk(native).is_ok() && ld_write(&mine, 0, 4, 9) == p::DONE,
        "a logical disk with the native graft, written",
    );
    c.eq(bad.ldisk(native).err(), Some(Error::SlotInUse), "one graft maps one segment");
    // Another principal's segment (files', principal 1, readable by others): not ours to
    // lay out, whatever graft we hold.
    match baio::open(blk, "files", 1, BUF + 3 * p::AREA_BYTES) {
        Ok(theirs) => {
            c.eq(theirs.ldisk(native).err(), Some(Error::NoRights), "only a segment's owner makes it a logical disk");
            let _ = theirs.close();
        }
        Err(e) => {
            c.check(false, &format!("open files' segment to read: {e:?}"));
        }
    }
    c.eq(bad.ldisk(native + 500).err(), Some(Error::NotFound), "a graft that does not exist is refused");
    let outside = tests::load_graft(blk, &rhai_ldisk("outside", "fn graft(input) { 1 << 40 }"));
    c.eq(
        outside.as_ref().ok().map(|id| bad.ldisk(*id)),
        Some(Err(Error::InvalidArg)),
        "a graft that answers a block outside the segment is refused at attach",
    );
    if let Ok(id) = outside {
        let _ = g::unload(blk, id);
    }
    // Right for reads (never written), outside the segment for writes.
    let liar = tests::load_graft(blk, &rhai_ldisk("liar", "fn graft(input) { let b = input.parse_le_int(8, 8); if input.parse_le_int(16, 8) != 0 { b + 3 } else { b } }"));
    let attached = liar.as_ref().ok().map(|id| bad.ldisk(*id));
    c.eq(attached, Some(Ok(LD_LEN - p::MAP_BLOCKS)), "a graft that lies only on writes attaches");
    let writes: Vec<u64> = (0..3).map(|_| ld_write(&bad, 0, 2, 1)).collect();
    c.check(
        writes.iter().all(|s| *s == p::FAILED | p::E_GRAFT),
        &format!("each write it answers outside the segment fails E_GRAFT ({writes:x?})"),
    );
    c.check(
        liar.is_ok_and(|id| g::stats(blk, id).map_err(|r| r.error).err() == Some(Error::NotFound)),
        "and it is unloaded after three",
    );
    c.eq(ld_read(&bad, 0, 1).0, p::FAILED | p::E_GRAFT, "its segment fails every operation while its graft is gone");
    let spin = files_api::client::read_all(files, "/grafts/evict_rhai_spin.graft").ok().map(|mut f| {
        f[8] = graft::Point::Ldisk as u8;
        f
    });
    if let Some(Ok(id)) = spin.map(|f| tests::load_graft(blk, &f)) {
        let _ = g::set_budget(blk, id, 200_000);
        // The probe read at attach already runs out of budget.
        c.eq(
            bad.ldisk(id).err(),
            Some(Error::InvalidArg),
            "a graft that loops forever is stopped by its budget and refused",
        );
        let _ = g::unload(blk, id);
    } else {
        c.check(false, "load a looping graft at ldisk");
    }
    let (s, b) = ld_read(&mine, 0, 4);
    c.check(
        s == p::DONE && (0..4).all(|l| b[l as usize * 4096..][..4096] == tests::ldisk_block(l, 9)[..]),
        "the native logical disk beside them reads right throughout",
    );
    c.check(
        bad.ldisk(0).is_ok() && ld_read(&bad, 0, 1).0 == p::DONE,
        "detached, the hostile graft's segment works again",
    );
    let _ = g::unload(blk, native);
    c.eq(
        ld_read(&mine, 0, 1).0,
        p::FAILED | p::E_GRAFT,
        "a logical disk whose graft was unloaded fails until one is attached",
    );
    if let Ok(id) = files_api::client::read_all(files, "/grafts/ldisk_wasmi_ldisk.graft")
        .map_err(|_| ())
        .and_then(|f| tests::load_graft(blk, &f).map_err(|_| ()))
    {
        let (attached, (s, b)) = (mine.ldisk(id), ld_read(&mine, 0, 4));
        c.check(
            attached.is_ok()
                && s == p::DONE
                && (0..4).all(|l| b[l as usize * 4096..][..4096] == tests::ldisk_block(l, 9)[..]),
            "another technology's graft attached takes the map from the disk: the blocks are there",
        );
        let _ = g::unload(blk, id);
    }
    let _ = mine.close();
    let _ = bad.close();
    let _ = baio::delete(blk, "ld_mine");
    let _ = baio::delete(blk, "ld_bad");
}

/// The graft runs `TEST_RUN` asks for, from a second thread of this program.
static RUNS: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

fn test_runs(id: u64) {
    let cache = RUNS[2].load(Ordering::Relaxed);
    let input: Vec<u8> = [3u64, 4, 5, 6, 7, 8, 9, 10].iter().flat_map(|b| b.to_le_bytes()).collect();
    for _ in 0..8 {
        match g::test_run(cache, id as u32, &input, g::MAX_REPEAT as u32) {
            Ok(r) => {
                RUNS[0].fetch_max(r.calls, Ordering::Relaxed);
                RUNS[1].fetch_max(r.cycles, Ordering::Relaxed);
            }
            Err(_) => RUNS[0].store(u64::MAX, Ordering::Relaxed),
        }
    }
    RUNS[2].store(0, Ordering::Release);
    rt::sys::thread_exit()
}

/// A request's graft work is bounded: a client asking for 100,000 runs of a graft
/// gets as many as fit in the cache's turn (`TURN_MS`), and the cache serves the
/// other reads meanwhile, right.
fn bounded_requests(c: &mut Checks, seg: &Segment, cache: u64, files: u64) {
    // (wasmi's: 100,000 of its calls take far longer than a turn; the compiled ones'
    // may not.)
    let Ok(id) = files_api::client::read_all(files, "/grafts/evict_wasmi_hotlist.graft")
        .map_err(|_| ())
        .and_then(|f| tests::load_graft(cache, &f).map_err(|_| ()))
    else {
        c.check(false, "load the wasmi hot list for the TEST_RUNs");
        return;
    };
    RUNS[2].store(cache, Ordering::Release);
    if rt::thread::spawn(test_runs, id as u64, rt::thread::my_priority()).is_err() {
        c.check(false, "start the thread that asks for the runs");
        return;
    }
    let mut reads = 0;
    let mut right = true;
    while RUNS[2].load(Ordering::Acquire) != 0 {
        right &= io(seg, p::READ_OP | p::BUFFERED, STREAM.0 + reads % 64, 1, true);
        reads += 1;
    }
    let (calls, cycles) = (RUNS[0].load(Ordering::Relaxed), RUNS[1].load(Ordering::Relaxed));
    let turn = graft::table::TURN_MS * rt::sys::kernel_info().tsc_per_ms;
    println!(
        "graft_test: TEST_RUN of 100,000: at most {calls} calls, {cycles} ticks (a turn: {turn}); {reads} reads beside"
    );
    c.check(
        calls > 0 && calls < g::MAX_REPEAT,
        &format!("a TEST_RUN of 100,000 calls stops after the cache's turn ({calls} calls)"),
    );
    // Wall time, which counts the cache's thread being preempted by the other programs
    // (this one's reads among them): bounded, not exactly a turn.
    c.check(
        cycles < 20 * turn,
        &format!("it ends within a second, not the minutes 100,000 calls take ({cycles} ticks, a turn {turn})"),
    );
    c.check(right && reads > 0, &format!("the cache serves other reads meanwhile, right ({reads})"));
    let _ = g::unload(cache, id);
}

/// FNV-1a of `b` (`baio::checksum`'s).
fn baio_fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100_0000_01b3))
}

fn main() -> i32 {
    let mut c = Checks::new();
    let (blk, cache, files) = (rt::alloc_slot(), rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(env::lookup("cache", cache), Ok(()), "find the cache");
    c.eq(env::lookup("files", files), Ok(()), "find the files server");
    c.eq(baio::create(blk, SEG, BLOCKS, 0), Ok(()), "create a segment of 2048 blocks");
    let Ok(seg) = baio::open(blk, SEG, 3, BUF) else {
        c.check(false, "open it");
        return c.finish("graft_test");
    };
    c.check(io(&seg, p::WRITE_OP, 0, BLOCKS, false) && seg.sync().is_ok(), "write every block's number into it");
    let start = baio::first_block(blk, SEG).unwrap_or(0);
    c.check(start > 0, "its first block on the device");

    let k = hot_kept(&seg, cache, &mut c, "LRU");
    c.eq(k, 0, "without a graft, LRU evicts the hot blocks");

    for tech in Tech::ALL.into_iter().filter(|t| t.is_file()).map(Tech::name) {
        let path = format!("/grafts/evict_{tech}_hotlist.graft");
        let file = files_api::client::read_all(files, &path);
        if !c.check(file.is_ok(), &format!("{path} is in the files filesystem")) {
            continue;
        }
        let id = tests::load_graft(cache, &file.unwrap_or_default());
        if !c.check(id.is_ok(), &format!("{tech}: load the hot-list graft into the cache")) {
            println!("    {:?}", id.err());
            continue;
        }
        let id = id.unwrap_or(0);
        c.check(g::set_state(cache, id, 0, &hot_list(start)).is_ok(), &format!("{tech}: give it the hot list"));
        let grafted0 = cache_word(cache, 7);
        let k = hot_kept(&seg, cache, &mut c, tech);
        c.eq(k, HOT, &format!("{tech}: the graft kept all the hot blocks"));
        let st = g::stats(cache, id);
        c.check(
            st.as_ref().is_ok_and(|s| s.calls > 0 && s.aborts == 0),
            &format!("{tech}: it was called and never aborted ({st:?})"),
        );
        c.check(cache_word(cache, 7) > grafted0, &format!("{tech}: the cache counts victims the graft chose"));
        c.check(
            g::list(cache).is_ok_and(|t| t.contains("evict") && t.contains(tech)),
            &format!("{tech}: LIST shows it"),
        );
        c.check(g::unload(cache, id).is_ok(), &format!("{tech}: unload it"));
        c.eq(
            g::stats(cache, id).map_err(|r| r.error).err(),
            Some(Error::NotFound),
            &format!("{tech}: gone after the unload"),
        );
    }

    // Hot-swap (K42): one graft id, its hot list set once, swapped through every
    // technology while the cache calls it; each keeps the hot blocks with the state it
    // was handed.
    let file = |tech: &str, g: &str| {
        files_api::client::read_all(files, &format!("/grafts/evict_{tech}_{g}.graft")).unwrap_or_default()
    };
    match tests::load_graft(cache, &file("wasmi", "hotlist")) {
        Ok(id) => {
            c.check(g::set_state(cache, id, 0, &hot_list(start)).is_ok(), "swap: give the graft its hot list once");
            for tech in ["native", "signed", "wasmaot", "ebpf", "rhai", "wasmi"] {
                c.check(
                    tests::replace_graft(cache, id, &file(tech, "hotlist")).is_ok(),
                    &format!("swap: the graft hot-swapped to {tech}"),
                );
                let k = hot_kept(&seg, cache, &mut c, tech);
                c.eq(k, HOT, &format!("swap: {tech} keeps the hot blocks with the state it was handed"));
            }
            let st = g::stats(cache, id);
            c.check(st.is_ok(), "swap: the same id all along");
            let r = tests::replace_graft(cache, id, &file("native", "null"));
            c.check(
                r.as_ref().err().is_some_and(|r| r.reason.contains("state")),
                &format!("swap: a graft whose state is laid out otherwise is refused ({r:?})"),
            );
            let k = hot_kept(&seg, cache, &mut c, "after a refused swap");
            c.eq(k, HOT, "swap: the old graft stays");
            let _ = g::unload(cache, id);
        }
        Err(r) => {
            c.check(false, &format!("swap: load the wasmi hot list ({r:?})"));
        }
    }

    upcalls(&mut c, &seg, cache, start);
    streams(&mut c, &seg, blk, files);
    ldisks(&mut c, blk, files);

    // A second graft at the same point for the same principal waits for the first.
    if let Ok(file) = files_api::client::read_all(files, "/grafts/evict_native_null.graft") {
        let a = tests::load_graft(cache, &file);
        c.eq(
            tests::load_graft(cache, &file).map_err(|r| r.error).err(),
            Some(Error::Exists),
            "one graft per point and principal",
        );
        if let Ok(a) = a {
            let _ = g::unload(cache, a);
        }
    }

    // Files that are not grafts, or that name what this cache does not run.
    let refused = |bytes: &[u8]| tests::load_graft(cache, bytes).err().map(|r| (r.error, r.reason));
    let r = refused(b"not a graft at all");
    c.check(
        r.as_ref().is_some_and(|(e, why)| *e == Error::Malformed && why.contains("header")),
        &format!("a short file is refused with its reason ({r:?})"),
    );
    let mut bad = alloc::vec![0u8; 80];
    bad[..8].copy_from_slice(b"SCGRAFT0");
    let r = refused(&bad);
    c.check(
        r.as_ref().is_some_and(|(e, why)| *e == Error::Malformed && why.contains("magic")),
        &format!("a bad magic is refused ({r:?})"),
    );
    let aot = graft::GraftFile {
        point: graft::Point::Evict,
        tech: graft::Tech::WasmAot,
        state_len: 0,
        name: "x",
        code: b"x",
        sig: &[],
    }
    .to_bytes();
    let r = refused(&aot);
    c.check(
        r.as_ref().is_some_and(|(e, why)| *e == Error::InvalidArg && why.contains("signature")),
        &format!(
            "compiled WebAssembly the build did not sign is refused: the runtime would trust its machine code ({r:?})"
        ),
    );
    let up = graft::GraftFile {
        point: graft::Point::Evict,
        tech: graft::Tech::Upcall,
        state_len: 0,
        name: "x",
        code: b"x",
        sig: &[],
    }
    .to_bytes();
    c.check(refused(&up).is_some(), "an upcall graft without its thread is refused");
    // Signed grafts: any byte of header or code changed, or signed with another key.
    match files_api::client::read_all(files, "/grafts/evict_signed_hotlist.graft") {
        Ok(file) => {
            let code_byte = file.len() - 64 - 10;
            for (at, what) in [
                (code_byte, "a byte of its code"),
                (24, "its name"),
                (12, "its state's size"),
                (file.len() - 1, "its signature"),
            ] {
                let mut b = file.clone();
                b[at] ^= 1;
                let r = refused(&b);
                c.check(
                    r.as_ref().is_some_and(|(e, why)| *e == Error::InvalidArg && why.contains("signature")),
                    &format!("a signed graft with {what} changed is refused ({r:?})"),
                );
            }
            let f = graft::GraftFile::parse(&file).ok();
            let unsigned = f.map(|f| graft::GraftFile { sig: &[], ..f }.to_bytes()).unwrap_or_default();
            c.check(
                refused(&unsigned).is_some_and(|(_, why)| why.contains("signature")),
                "a signed graft without its signature is refused",
            );
        }
        Err(_) => {
            c.check(false, "/grafts/evict_signed_hotlist.graft is in the files filesystem");
        }
    }
    let ldisk = graft::GraftFile {
        point: graft::Point::Ldisk,
        tech: graft::Tech::Script,
        state_len: 0,
        name: "x",
        code: b"fn graft(i) { 0 }",
        sig: &[],
    }
    .to_bytes();
    c.check(
        refused(&ldisk).is_some_and(|(_, why)| why.contains("no such graft point")),
        "a point the cache does not host",
    );
    ipc::set_send_string(b"x");
    let mut m = ipc::Msg::new(g::PUT, &[1 << 40]).with_string();
    let _ = ipc::call(cache, &mut m, ipc::FOREVER);
    c.check(m.word(1) != 0, "a piece far past any file's end is refused");

    // An honest counted loop of 330,000 rounds (a million instructions for the verifier
    // to follow, Linux's bound): loaded — verified a slice a request (`MORE`) — and run.
    let code = tests::bpf_counted_loop(330_000);
    let counted = graft::GraftFile {
        point: graft::Point::Evict,
        tech: graft::Tech::Ebpf,
        state_len: 0,
        name: "counted",
        code: &code,
        sig: &[],
    }
    .to_bytes();
    match tests::load_graft(cache, &counted) {
        Ok(id) => {
            let input: Vec<u8> = (1u64..=8).flat_map(|b| b.to_le_bytes()).collect();
            c.eq(
                g::test_run(cache, id, &input, 1).map(|r| (r.calls, r.last)).map_err(|r| r.error),
                Ok((1, 0)),
                "a counted loop of 330,000 rounds is loaded and runs",
            );
            let _ = g::unload(cache, id);
        }
        Err(r) => {
            c.check(false, &format!("a counted loop of 330,000 rounds is loaded: {}", r.reason));
        }
    }

    // Hostile grafts: refused at load, or aborted and unloaded after three failures.
    let hostile: [(&str, Option<&str>); 23] = [
        ("wasmaot_spin", None),
        ("wasmaot_oob", None),
        ("wasmaot_hog", None),
        ("wasmaot_liar", None),
        ("wasmaot_trap", None),
        ("wasmi_spin", None),
        ("wasmi_oob", None),
        ("wasmi_hog", None),
        ("wasmi_liar", None),
        ("wasmi_trap", None),
        ("ebpf_spin", Some("loop")),
        ("ebpf_helper", Some("helper")),
        ("ebpf_oob", Some("unbounded")),
        ("ebpf_negx", Some("does not implement")),
        ("ebpf_leak", Some("only in the stack")),
        ("ebpf_liar", None),
        ("rhai_spin", None),
        ("rhai_hog", None),
        ("rhai_liar", None),
        ("rhai_shrink", None),
        ("rhai_keys", None),
        ("rhai_curry", None),
        ("signed_spin", None),
    ];
    for (name, refusal) in hostile {
        let Ok(file) = files_api::client::read_all(files, &format!("/grafts/evict_{name}.graft")) else {
            c.check(false, &format!("{name} is in the files filesystem"));
            continue;
        };
        match (tests::load_graft(cache, &file), refusal) {
            (Err(r), Some(why)) => {
                c.check(r.reason.contains(why), &format!("{name}: refused at load: {}", r.reason));
            }
            (Ok(id), None) => {
                let _ = g::set_state(cache, id, 0, &hot_list(start));
                // wasmi's spin at the largest budget its owner may set: the interpreter's
                // native stack must stay flat however long it runs (with wasmi's
                // tail-call dispatch on the servers' soft-float target it grew by a frame
                // per instruction that changed its integer register, ~30 MB here, and the
                // cache died of the fault).
                let _ = g::set_budget(cache, id, if name == "wasmi_spin" { graft::table::MAX_BUDGET } else { 200_000 });
                let reaped = cache_word(cache, 9);
                let rd = p::READ_OP | p::BUFFERED;
                c.check(
                    io(&seg, rd, STREAM.0, STREAM.1, true),
                    &format!("{name}: the cache serves the right bytes under it"),
                );
                c.eq(
                    g::stats(cache, id).map_err(|r| r.error).err(),
                    Some(Error::NotFound),
                    &format!("{name}: unloaded after failing"),
                );
                c.eq(cache_word(cache, 9), reaped + 1, &format!("{name}: the cache counts it as unloaded for failing"));
            }
            (r, _) => {
                c.check(false, &format!("{name}: {:?}", r.map_err(|r| (r.error, r.reason))));
            }
        }
    }
    let k = hot_kept(&seg, cache, &mut c, "after the hostile ones");
    c.eq(k, 0, "no graft is left: LRU again");
    bounded_requests(&mut c, &seg, cache, files);
    let _ = seg.close();
    // Reconfiguring the cache is for the system's principals: this program (principal 3)
    // may list the components but not swap or interpose.
    let mut why = [0u8; 64];
    c.eq(
        swap_api::client::swap(cache, 0, 1, &mut why).map_err(|e| e.0).err(),
        Some(Error::NoRights),
        "principal 3 may not swap the cache's policy",
    );
    c.eq(swap_api::client::interpose(cache, 0, swap_api::TRACE), Err(Error::NoRights), "nor interpose on it");
    c.check(swap_api::client::list(cache, &mut [0u8; 512]).is_ok(), "but may list it");
    c.finish("graft_test")
}
