//! Views and tickets under attack (the protection-holes and resources issues, "Cue
//! views and tickets"; scenario `views`). This program is principal 3; the others it
//! starts are this program with another argument:
//!
//! 1. Bytes past a view's limit: a view of our own segment readable for 100 bytes of
//!    32 blocks, read 400 times (direct and buffered) while we watch the read-only area:
//!    no byte past the 100th may ever be there, not even while a read is under way.
//! 2. Only the delegator revokes: `views_peer` (principal 4) holds a ticket of its own
//!    and sends REVOKE through its view with every id up to 400; our ticket's view (files
//!    delegated both) must live on. We revoke a view of our own segment ourselves.
//! 3. Reclaimed when the holder ends: `views_holder` (principal 3, like an ftpd) holds a
//!    ticket attached by itself, one `net` sends to the host slowly, and one unattached;
//!    it is killed mid-transfer, and what blk charges principal 3 (slots, areas, views)
//!    and files' tickets for principal 3 go back to what they were. Last, `net` itself
//!    is killed under one of our transfers: blk closes the view it held.
//! 4. Floods: `views_flood_files` (principal 4, a `files` capability only) takes 1,000
//!    tickets; `views_flood5` and `views_flood6` (principals 5 and 6, with `blk`) attach
//!    tickets and views of their own and delegate until blk refuses (each prints its
//!    figures: the scenario expects them). Meanwhile blk (never restarted), files and
//!    root serve us: we open segments and send a file by Cue, checked at the host.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use blk_api::client as seg;
use blk_api::{self as bp};
use files_api::client as files;
use net_api::client::{cue_file, Net, Schedule};
use net_api::{self as np, ipv4};
use rt::{env, println, sys};
use tests::{Checks, Cksum};

rt::entry!(main);

const SEG: &str = "views_seg";
/// The host's `cksum` (a guestfwd rule), and `head`, which stops reading.
const SINK: u64 = ipv4(10, 0, 2, 102);

/// What byte `k` of our segment holds (never 0: a zero seen is one blk wrote).
fn byte(k: u64) -> u8 {
    (k % 251) as u8 | 1
}

/// Any byte past `limit` of the first 32 blocks of the view's data, as the holder sees
/// them now (the block the limit falls in whole from the limit, then every 512th byte
/// of the blocks after it).
fn hidden_seen(v: &seg::View, limit: u64) -> bool {
    let first = limit / 8 * 8;
    let keep = limit - first;
    if v.word(bp::DATA + first) >> (8 * keep) != 0 {
        return true;
    }
    let block_end = limit.next_multiple_of(4096);
    if (first + 8..block_end).step_by(8).any(|o| v.word(bp::DATA + o) != 0) {
        return true;
    }
    (block_end / 4096..32u64).any(|b| (0..4096).step_by(512).any(|o| v.word(bp::DATA + b * 4096 + o) != 0))
}

/// Item 1: views readable for 100 bytes (the issue's) and for 31 blocks and 100 bytes
/// (the read of the visible blocks keeps the device busy meanwhile).
fn hidden_bytes(c: &mut Checks, blk: u64, s: &seg::Segment) {
    for limit in [100, 31 * 4096 + 100] {
        hidden_bytes_of(c, blk, s, limit);
    }
}

fn hidden_bytes_of(c: &mut Checks, blk: u64, s: &seg::Segment, limit: u64) {
    let ticket = rt::alloc_slot();
    if !c.eq(
        s.delegate(baio::READ, &[(0, 32)], limit, ticket).map(|d| d.0),
        Ok(32),
        &format!("a view of 32 blocks readable for {limit} bytes"),
    ) {
        return;
    }
    let v = match seg::attach(blk, ticket, rt::layout::BENCH[1], 21, 0) {
        Ok(v) => v,
        Err(e) => {
            c.check(false, &format!("attach the view: {}", e.name()));
            return;
        }
    };
    let (mut seen, mut polls, mut bad) = (0u32, 0u64, 0u32);
    for i in 0..400u64 {
        let flags = if i % 2 == 1 { bp::BUFFERED } else { 0 };
        if v.batch_ops(&[bp::op(bp::READ_OP | flags, 0, 32, 0, bp::DATA)], 0).is_err() {
            bad += 1;
            continue;
        }
        let mut leaked = false;
        loop {
            let done = v.status(0) != 0;
            polls += 1;
            leaked |= hidden_seen(&v, limit);
            if done {
                break;
            }
        }
        seen += leaked as u32;
        if v.status(0) != bp::DONE || v.bytes(bp::DATA, limit).iter().enumerate().any(|(k, b)| *b != byte(k as u64)) {
            bad += 1;
        }
    }
    println!("views_test: 400 reads watched in {} looks", polls);
    c.eq(bad, 0, &format!("every read through the view is done and gives the view's {limit} bytes"));
    c.eq(
        seen,
        0,
        "no byte past the view's limit is ever visible in the holder's area, not even while the read is under way",
    );
    let _ = v.close();
    if limit > 4096 {
        return;
    }
    // Writing through a view must not reach past its limit either.
    let w = rt::alloc_slot();
    if s.delegate(baio::READ | baio::WRITE, &[(40, 2)], 4096 + 10, w).is_ok() {
        if let Ok(v) = seg::attach(blk, w, rt::layout::BENCH[1], 16, 0) {
            let r = v.batch_ops(&[bp::op(bp::WRITE_OP, 0, 2, 0, bp::DATA)], bp::WAIT_ALL);
            c.eq(
                (r, v.status(0)),
                (Ok(()), bp::FAILED | bp::E_RANGE),
                "a write through a view past its bytes is refused",
            );
            let _ = v.close();
        }
    }
}

/// Item 2, the other principal's side: REVOKE through our own view, and through a
/// segment of our own, with every id up to 400.
fn peer(blk: u64, fs: u64) -> i32 {
    let Ok((fh, _)) = files::open(fs, "/f2.bin", false) else { return 2 };
    let t = rt::alloc_slot();
    if files::ticket(fs, fh, t).is_err() {
        return 3;
    }
    let Ok(v) = seg::attach(blk, t, rt::layout::BENCH[2], 16, 0) else { return 4 };
    let through_view: Vec<Error> =
        (1..400u64).filter_map(|id| tests::raw_request(v.cap, bp::REVOKE, &[id], None).err()).collect();
    let _ = seg::delete(blk, "views_peer");
    let own = seg::create(blk, "views_peer", 4, 0).and_then(|_| seg::open(blk, "views_peer", 3, rt::layout::SCRATCH2));
    let through_own = own.as_ref().map_or(0, |s| (1..400u64).filter(|id| s.revoke(*id).is_ok()).count());
    println!(
        "views_peer: REVOKE through our view: {} of 399 refused with NoRights; through our own segment: {} revoked",
        through_view.iter().filter(|e| **e == Error::NoRights).count(),
        through_own
    );
    if let Ok(s) = own {
        let _ = s.close();
    }
    let _ = seg::delete(blk, "views_peer");
    0
}

/// Item 2.
fn revoke_others(c: &mut Checks, blk: u64, fs: u64, s: &seg::Segment) {
    let Ok((fh, _)) = files::open(fs, "/f1.bin", false) else {
        c.check(false, "open /f1.bin");
        return;
    };
    let t = rt::alloc_slot();
    c.check(files::ticket(fs, fh, t).is_ok(), "a ticket for /f1.bin");
    let v = match seg::attach(blk, t, rt::layout::BENCH[3], 16, 0) {
        Ok(v) => v,
        Err(e) => {
            c.check(false, &format!("attach our ticket: {}", e.name()));
            return;
        }
    };
    c.eq(
        tests::raw_request(v.cap, bp::REVOKE, &[1], None),
        Err(Error::NoRights),
        "REVOKE through a view: only the delegator revokes",
    );
    c.eq(
        tests::raw_request(v.cap, bp::DELEGATE, &[1, 1, 0, 0, 0, 1], None),
        Err(Error::BadState),
        "a view is not delegated further",
    );
    let h = rt::alloc_slot_pair();
    let id = env::spawn("views_peer", h);
    c.check(id.is_ok(), "start views_peer (principal 4, a ticket of its own)");
    c.check(tests::wait_until(6000, || sys::cap_info(h + 1).is_err()), "it ends");
    c.eq(sys::cap_info(v.cap).map(|_| ()), Ok(()), "our view is still open after its REVOKEs");
    let r = v.batch_ops(&[bp::op(bp::READ_OP, 0, 1, 0, bp::DATA)], bp::WAIT_ALL);
    c.eq((r, v.status(0)), (Ok(()), bp::DONE), "and reads through it still work");
    let _ = v.close();
    let _ = files::close(fs, fh);
    // The delegator does revoke: a view of our own segment, through the segment.
    let (a, b) = (rt::alloc_slot(), rt::alloc_slot());
    let (Ok((_, ida)), Ok(_)) = (s.delegate(baio::READ, &[(0, 1)], 0, a), s.delegate(baio::READ, &[(1, 1)], 0, b))
    else {
        c.check(false, "two views of our own segment");
        return;
    };
    c.eq(s.revoke(ida), Ok(()), "the delegator revokes a view through its segment");
    c.check(sys::cap_info(a).is_err() && sys::cap_info(b).is_ok(), "that view is gone, the other one is not");
    c.eq(tests::raw_request(b, bp::CLOSE, &[], None), Ok(()), "the holder closes its own");
}

/// What blk charges our principal and files' tickets for it: (slots, areas, views,
/// tickets).
fn charged(blk: u64, fs: u64) -> (u64, u64, u64, u64) {
    let u = seg::usage(blk).unwrap_or([u64::MAX; 5]);
    let t = files::tickets(fs).map_or(u64::MAX, |t| t[1]);
    (u[0], u[2], u[4], t)
}

/// Item 3, the holder's side (principal 3, like ftpd): three tickets — one attached
/// here, one sent by net to the host slowly, one kept — then wait to be killed.
fn holder(blk: u64, fs: u64) -> i32 {
    let ns = rt::alloc_slot();
    if env::lookup("net", ns).is_err() {
        return 2;
    }
    let Ok(net) = Net::attach(ns) else { return 3 };
    tests::wait_until(3000, || net.info().is_ok_and(|i| i.how != 2));
    let Ok((fh, _)) = files::open(fs, "/1m.bin", false) else { return 4 };
    let (t1, t2) = (rt::alloc_slot(), rt::alloc_slot());
    let mine = files::ticket(fs, fh, t1).and_then(|_| seg::attach(blk, t1, rt::layout::BENCH[1], 16, 0));
    let kept = files::ticket(fs, fh, t2);
    let sent = net
        .connect(SINK, 9, 20_000_000)
        .and_then(|h| cue_file(&net, fs, fh, h, Schedule { k: 1, t_ms: 50 }, np::CUE_SHUTDOWN, np::NO_STATUS));
    println!(
        "views_holder: attached {:?}, kept {:?}, sending {:?}",
        mine.as_ref().map(|v| v.blocks),
        kept,
        sent.map(|s| s.1)
    );
    loop {
        sys::sleep_us(1_000_000);
    }
}

/// Item 3.
fn holder_killed(c: &mut Checks, blk: u64, fs: u64) {
    let before = charged(blk, fs);
    let h = rt::alloc_slot_pair();
    let Ok(id) = env::spawn("views_holder", h) else {
        c.check(false, "start views_holder");
        return;
    };
    // Three tickets (and two of them attached: ours here, net's) on principal 3.
    let up = tests::wait_until(3000, || {
        let now = charged(blk, fs);
        now.3 == before.3 + 3 && now.1 == before.1 + 2
    });
    let during = charged(blk, fs);
    c.check(
        up,
        &format!(
            "views_holder holds three tickets, two attached, charged to principal 3: {:?} from {:?}",
            during, before
        ),
    );
    c.check(during.0 >= before.0 + 5, &format!("their slots at blk are principal 3's: {} from {}", during.0, before.0));
    c.eq(env::kill(id), Ok(()), "kill it mid-transfer");
    let back = tests::wait_until(3000, || charged(blk, fs) == before);
    c.check(
        back,
        &format!(
            "its views, areas and slots at blk and its tickets at files are reclaimed: {:?}, were {:?}",
            charged(blk, fs),
            before
        ),
    );
}

/// Item 3, the holder is `net`: killed under one of our transfers, blk closes the view
/// it held (its area and slots back to principal 3).
fn net_killed(c: &mut Checks, blk: u64, fs: u64, net: &Net) {
    let before = charged(blk, fs);
    let Ok(h) = net.connect(SINK, 9, 20_000_000) else {
        c.check(false, "connect to the host");
        return;
    };
    let Ok((fh, _)) = files::open(fs, "/1m.bin", false) else { return };
    let t = cue_file(net, fs, fh, h, Schedule { k: 1, t_ms: 50 }, np::CUE_SHUTDOWN, np::NO_STATUS);
    c.check(t.is_ok(), "a slow transfer of ours");
    c.check(tests::wait_until(1000, || charged(blk, fs).1 == before.1 + 1), "its view is attached for principal 3");
    let id = tests::id_of("net");
    c.check(id.is_some_and(|id| env::kill(id).is_ok()), "kill net under it");
    let back = tests::wait_until(3000, || {
        let now = charged(blk, fs);
        now.0 == before.0 && now.1 == before.1 && now.2 == before.2
    });
    c.check(
        back,
        &format!(
            "blk closed the view net held: its area and slots are principal 3's again ({:?}, were {:?})",
            charged(blk, fs),
            before
        ),
    );
    c.check(tests::wait_until(3000, || charged(blk, fs).3 == before.3), "and files no longer counts its ticket");
    let _ = files::close(fs, fh);
}

/// A file marks a flooder done (files serves everyone).
fn mark(fs: u64, who: &str) {
    let _ = files::open(fs, &format!("/flood_{who}.done"), true).map(|(h, _)| files::close(fs, h));
}

/// Item 4, `views_flood_files`: only a `files` capability. 1,000 tickets; through a
/// ticket nothing but CLOSE works (ATTACH goes to blk, which this program cannot call).
fn flood_files(fs: u64) -> i32 {
    let Ok((fh, _)) = files::open(fs, "/f3.bin", false) else { return 2 };
    let mut taken = 0;
    let mut last = Err(Error::NoSpace);
    let mut held = alloc::collections::VecDeque::new();
    for _ in 0..1000 {
        let t = rt::alloc_slot();
        last = files::ticket(fs, fh, t).map(|_| t);
        if last.is_ok() {
            taken += 1;
            held.push_back(t);
            // Files revoked our oldest past our share: its slot is empty now.
            if held.len() > files_api::MAX_TICKETS {
                held.pop_front().into_iter().for_each(rt::free_slot);
            }
        } else {
            rt::free_slot(t);
        }
    }
    let held = files::tickets(fs).map(|t| t[0]).unwrap_or(u64::MAX);
    let (a, d) = match last {
        Ok(t) => (
            tests::raw_request(t, bp::ATTACH, &[16, 0], None),
            tests::raw_request(t, bp::DELEGATE, &[1, 1, 0, 0, 0, 1], None),
        ),
        Err(e) => (Err(e), Err(e)),
    };
    println!(
        "views_flood_files: {} of 1000 tickets, {} held; through a ticket: ATTACH {:?}, DELEGATE {:?}",
        taken, held, a, d
    );
    mark(fs, "files");
    loop {
        sys::sleep_us(1_000_000);
    }
}

/// Item 4, `views_flood5`/`6`: segments of our own opened four times, tickets from files
/// attached, views of our segment delegated and attached until blk refuses: areas stop at
/// the principal's limit (NoMemory), capability slots at its share (NoSpace).
fn flood_blk(blk: u64, fs: u64, who: &str) -> i32 {
    let name = format!("views_flood{who}");
    let _ = seg::delete(blk, &name);
    let _ = seg::create(blk, &name, 8, 0);
    let mut segs = Vec::new();
    for k in 0..4u64 {
        if let Ok(s) = seg::open(blk, &name, 1, rt::layout::BENCH[0] + k * bp::AREA_BYTES) {
            segs.push(s);
        }
    }
    // Views are mapped at 2 MiB apart from SCRATCH.
    let mut va = rt::layout::SCRATCH;
    let mut attach = |t: u64| {
        let r = seg::attach(blk, t, va, 12, 0);
        va += bp::AREA_BYTES;
        r
    };
    let mut views = Vec::new();
    let mut area_end = Ok(());
    if let Ok((fh, _)) = files::open(fs, "/f4.bin", false) {
        for _ in 0..files_api::MAX_TICKETS {
            let t = rt::alloc_slot();
            match files::ticket(fs, fh, t).and_then(|_| attach(t)) {
                Ok(v) => views.push(v),
                Err(e) => area_end = Err(e),
            }
        }
    }
    let mut n = 0usize;
    while area_end.is_ok() && n < 64 {
        let t = rt::alloc_slot();
        match segs[n % segs.len()].delegate(baio::READ, &[(0, 1)], 0, t).and_then(|_| attach(t)) {
            Ok(v) => views.push(v),
            Err(e) => area_end = Err(e),
        }
        n += 1;
    }
    let mut slot_end = Ok(());
    let mut k = 0usize;
    while slot_end.is_ok() && k < 1200 {
        slot_end = segs[k % segs.len()].delegate(baio::READ, &[(0, 1)], 0, rt::alloc_slot()).map(|_| ());
        k += 1;
    }
    let u = seg::usage(blk).unwrap_or([0; 5]);
    println!(
        "views_flood{}: areas {} of {}, then {:?}; slots {} of {}, then {:?}",
        who, u[2], u[3], area_end, u[0], u[1], slot_end
    );
    mark(fs, who);
    loop {
        sys::sleep_us(1_000_000);
    }
}

/// `views_cueflood_a`/`_b` (both principal 7): Cue transfers of a file to the host's
/// sink, one block a second (they run for a minute), started until net refuses. Each
/// program may run `MAX_TRANSFERS_PER_CLIENT`, but the two together only their
/// principal's `MAX_TRANSFERS_PER_PRINCIPAL`: before that share, two programs of one
/// principal took all eight of net's transfers and another principal got `NoSpace`.
fn flood_cue(fs: u64, who: &str) -> i32 {
    let ns = rt::alloc_slot();
    let Ok(net) = env::lookup("net", ns).and_then(|_| Net::attach(ns)) else { return 2 };
    tests::wait_until(3000, || net.info().is_ok_and(|i| i.how != 2));
    // The second program begins once the first has taken all it could.
    if who == "b" {
        tests::wait_until(30_000, || files::stat(fs, "/flood_cue_a.done").is_ok());
    }
    let mut started = 0;
    let mut last = Ok(0);
    for _ in 0..2 * np::MAX_TRANSFERS_PER_CLIENT {
        last = net.connect(SINK, 9, 20_000_000).and_then(|h| {
            files::open(fs, "/f5.bin", false).and_then(|(fh, _)| {
                cue_file(&net, fs, fh, h, Schedule { k: 1, t_ms: 1000 }, np::CUE_SHUTDOWN, np::NO_STATUS)
                    .map(|(t, _)| t)
            })
        });
        if last.is_err() {
            break;
        }
        started += 1;
    }
    println!("views_cueflood: a program of principal 7 started {} Cue transfers, then {:?}", started, last.map(|_| ()));
    mark(fs, &format!("cue_{who}"));
    loop {
        sys::sleep_us(1_000_000);
    }
}

/// Item 4: while the flooders hold all they could take, blk, files and root serve us.
fn floods(c: &mut Checks, blk: u64, fs: u64, net: &Net) {
    let blk_id = tests::id_of("blk");
    let mut ids = Vec::new();
    for name in ["views_flood_files", "views_flood5", "views_flood6", "views_cueflood_a", "views_cueflood_b"] {
        let h = rt::alloc_slot_pair();
        match env::spawn(name, h) {
            Ok(id) => ids.push(id),
            Err(e) => {
                c.check(false, &format!("start {name}: {}", e.name()));
            }
        }
    }
    let done = tests::wait_until(30_000, || {
        ["files", "5", "6", "cue_a", "cue_b"].iter().all(|w| files::stat(fs, &format!("/flood_{w}.done")).is_ok())
    });
    c.check(done, "the five flooders took all they could");
    c.eq(tests::id_of("blk"), blk_id, "blk never ended (no panic, no restart)");
    // A normal client of another principal: segments open, a file goes out by Cue.
    let s = seg::open(blk, SEG, 1, rt::layout::BENCH[3]);
    c.check(s.is_ok(), "we still open segments");
    if let Ok(s) = s {
        let r = s.batch(&[(bp::READ_OP, 0, 1)]);
        c.check(r.is_ok() && s.wait(0) == bp::DONE && s.data(0)[0] == byte(0), "and read them");
        let _ = s.close();
    }
    c.check(files::read_all(fs, "/small.txt").is_ok(), "files serves us");
    c.check(env::ps().is_ok(), "root serves us");
    match net.connect(SINK, 9, 20_000_000) {
        Ok(h) => {
            let path = "/f0.bin";
            let want = {
                let mut k = Cksum::new();
                k.update(&files::read_all(fs, path).unwrap_or_default());
                k.finish()
            };
            let r = files::open(fs, path, false)
                .and_then(|(fh, _)| cue_file(net, fs, fh, h, Schedule::FAST, np::CUE_SHUTDOWN, np::NO_STATUS));
            let st = r.and_then(|(t, _)| net.cue_wait(t, 120_000_000));
            c.eq(st.map(|s| (s.status, s.sent)), Ok((np::CUE_DONE, want.1)), "a Cue transfer of ours runs to its end");
            let mut got = Vec::new();
            let mut buf = [0u8; 128];
            while let Ok(n) = net.recv(h, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let text = String::from_utf8_lossy(&got).into_owned();
            c.eq(text.trim(), format!("{} {}", want.0, want.1).as_str(), "and reached the host byte for byte (cksum)");
            let _ = net.close(h);
        }
        Err(e) => {
            c.check(false, &format!("connect to the host: {}", e.name()));
        }
    }
    for id in ids {
        c.eq(env::kill(id), Ok(()), "kill a flooder");
    }
    for w in ["files", "5", "6", "cue_a", "cue_b"] {
        let _ = files::remove(fs, &format!("/flood_{w}.done"));
    }
}

fn main() -> i32 {
    let (blk, fs) = (rt::alloc_slot(), rt::alloc_slot());
    if env::lookup("files", fs).is_err() {
        println!("views_test: the manifest must grant files");
        return 1;
    }
    let arg = rt::args().split(' ').nth(1);
    if arg == Some("flood_files") {
        return flood_files(fs);
    }
    if let Some(who) = arg.and_then(|a| a.strip_prefix("cueflood_")) {
        return flood_cue(fs, who);
    }
    if env::lookup("blk", blk).is_err() {
        println!("views_test: the manifest must grant blk");
        return 1;
    }
    match arg {
        Some("peer") => return peer(blk, fs),
        Some("holder") => return holder(blk, fs),
        Some(who) if who.starts_with("flood") => return flood_blk(blk, fs, &who[5..]),
        _ => {}
    }
    let mut c = Checks::new();
    let ns = rt::alloc_slot();
    let net = match env::lookup("net", ns).and_then(|_| Net::attach(ns)) {
        Ok(n) => n,
        Err(e) => {
            println!("views_test: cannot attach to net: {}", e.name());
            return 1;
        }
    };
    tests::wait_until(3000, || net.info().is_ok_and(|i| i.how != 2));
    let _ = seg::delete(blk, SEG);
    let s = match seg::create(blk, SEG, 64, 1).and_then(|_| seg::open(blk, SEG, 3, rt::layout::SCRATCH2)) {
        Ok(s) => s,
        Err(e) => {
            c.check(false, &format!("a segment of our own: {}", e.name()));
            return c.finish("views_test");
        }
    };
    let per = seg::SLOT_BYTES / 4096;
    let mut written = true;
    for round in 0..2u64 {
        let mut ops = Vec::new();
        for i in 0..8u64 {
            let first = (round * 8 + i) * per;
            for (k, b) in s.data(i).iter_mut().enumerate() {
                *b = byte(first * 4096 + k as u64);
            }
            ops.push((bp::WRITE_OP, first, per));
        }
        written &= s.batch(&ops).is_ok() && (0..8).all(|i| s.wait(i) == bp::DONE);
    }
    c.check(written, "64 blocks written, no zero byte among them");
    let u = seg::usage(blk);
    c.eq(
        u.map(|u| (u[0], u[1], u[2], u[3])),
        Ok((1, bp::PRINCIPAL_SLOTS, 1, bp::MAX_OPEN_PER_PRINCIPAL)),
        "USAGE: our open segment is a slot and an area of our share",
    );
    hidden_bytes(&mut c, blk, &s);
    revoke_others(&mut c, blk, fs, &s);
    floods(&mut c, blk, fs, &net);
    holder_killed(&mut c, blk, fs);
    net_killed(&mut c, blk, fs, &net);
    let _ = s.close();
    let _ = seg::delete(blk, SEG);
    c.finish("views_test")
}
