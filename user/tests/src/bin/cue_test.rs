//! Cue from a program's side: files sent by `net` to the host, where `cksum` (a
//! guestfwd rule: QEMU runs it for each connection to 10.0.2.102:9) answers with the
//! checksum of what arrived. Four transfers at once with four schedules, byte for
//! byte; a cancel; a peer that stops reading and closes (10.0.2.103:9 runs `head`);
//! a file removed under its transfer; the call misused as a hostile program would
//! (another program's transfers — `cue_peer`'s — and sockets, capabilities that are
//! not tickets, bad ranges, schedules and status words); `cue_peer` ending with a
//! transfer running; and afterwards no area of a transfer still mapped in `net`
//! (its kernel pages, from `ps`, back where they were).
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::Error;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use files_api::client as files;
use net_api::client::{cue_file, CueState, Net, Schedule};
use net_api::{self as np, ipv4};
use rt::ipc::Msg;
use rt::println;
use tests::{Checks, Cksum};

rt::entry!(main);

const SINK: u64 = ipv4(10, 0, 2, 102);
const CLOSER: u64 = ipv4(10, 0, 2, 103);

/// What the host's `cksum` says of a file the files server holds: (checksum, length).
fn expected(fs: u64, path: &str) -> (u32, u64) {
    let mut c = Cksum::new();
    c.update(&files::read_all(fs, path).unwrap_or_default());
    c.finish()
}

/// Everything the host sends back on `h` until it closes, as text.
fn reply(net: &Net, h: u64) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n) = net.recv(h, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `cksum`'s line, parsed.
fn parse_cksum(s: &str) -> Option<(u32, u64)> {
    let mut w = s.split_whitespace();
    Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
}

fn connect(c: &mut Checks, net: &Net, ip: u64) -> Option<u64> {
    match net.connect(ip, 9, 20_000_000) {
        Ok(h) => Some(h),
        Err(e) => {
            c.check(false, &format!("connect to the host at {}: {}", np::Ip(ip), e.name()));
            None
        }
    }
}

/// A CUE as a hostile program sends it: `cap` mapped (not granted), any words.
fn cue_raw(net: &Net, cap: Option<u64>, words: &[u64]) -> Result<u64, Error> {
    let mut m = Msg::new(np::CUE, words);
    if let Some(cap) = cap {
        m.push_item(Fpage::caps(cap, 0, abi::rights::SEND), 0);
    }
    rt::server::request(net.srv, &mut m)?;
    Ok(m.word(2))
}

/// Open `path` and start sending it on `h` with `sched` (FIN at the end).
fn start(net: &Net, fs: u64, path: &str, h: u64, sched: Schedule, status_off: u64) -> Result<u64, Error> {
    let (fh, _) = files::open(fs, path, false)?;
    let r = cue_file(net, fs, fh, h, sched, np::CUE_SHUTDOWN, status_off).map(|(t, _)| t);
    let _ = files::close(fs, fh);
    r
}

fn net_kpages() -> u64 {
    tests::ps_column("net", 6).unwrap_or(0)
}

/// Four transfers at once, each with its own schedule, checked by the host's cksum.
fn parallel(c: &mut Checks, net: &Net, fs: u64) {
    let scheds = [Schedule::FAST, Schedule { k: 1, t_ms: 0 }, Schedule { k: 4, t_ms: 4 }, Schedule { k: 16, t_ms: 16 }];
    let mut running = Vec::new();
    for (i, s) in scheds.iter().enumerate() {
        let path = format!("/f{}.bin", i);
        let Some(h) = connect(c, net, SINK) else { return };
        // The first keeps its status words in the shared area.
        let off = if i == 0 { 4096 } else { np::NO_STATUS };
        match start(net, fs, &path, h, *s, off) {
            Ok(t) => running.push((path, h, t, *s)),
            Err(e) => {
                c.check(false, &format!("cue {} with k={} t={}: {}", path, s.k, s.t_ms, e.name()));
            }
        }
    }
    c.eq(running.len(), 4, "four transfers started at once");
    let list = net.cue_list().unwrap_or_default();
    let listed = |t: u64| list.lines().any(|l| l.split_whitespace().next() == Some(&format!("{}", t)));
    c.check(
        running.iter().all(|(_, _, t, _)| listed(*t) || net.wait(&[(*t, np::ENDED)], 0) == Ok(1)),
        "CUE_LIST shows every one of them not yet ended",
    );
    c.eq(
        running.iter().map(|(_, h, _, _)| net.send_area(*h, 0, 1)).collect::<Vec<_>>(),
        alloc::vec![Err(Error::BadState); 4],
        "SEND on a socket a transfer runs on is refused",
    );
    for (path, h, t, s) in running {
        let st = net.cue_wait(t, 120_000_000);
        let want = expected(fs, &path);
        c.eq(
            st.map(|s| (s.status, s.sent)),
            Ok((np::CUE_DONE, want.1)),
            &format!("{} with k={} t={} ends done, every byte sent", path, s.k, s.t_ms),
        );
        c.eq(parse_cksum(&reply(net, h)), Some(want), &format!("{} reached the host byte for byte (cksum)", path));
        let _ = net.close(h);
    }
    c.eq(
        (net.area.read(4096), net.area.read(4104)),
        (np::CUE_DONE, expected(fs, "/f0.bin").1),
        "the status words in the shared area say done and every byte",
    );
}

fn cancel(c: &mut Checks, net: &Net, fs: u64) {
    let Some(h) = connect(c, net, SINK) else { return };
    let t = match start(net, fs, "/1m.bin", h, Schedule { k: 1, t_ms: 20 }, np::NO_STATUS) {
        Ok(t) => t,
        Err(e) => {
            c.check(false, &format!("a slow transfer: {}", e.name()));
            return;
        }
    };
    rt::sys::sleep_us(200_000);
    let st = net.cue_state(t);
    c.check(
        st.is_ok_and(|s| s.status == np::CUE_RUNNING && s.sent > 0 && s.sent < s.total),
        &format!("the slow transfer is under way: {:?}", st),
    );
    c.eq(net.cue_set(t, Schedule { k: 2, t_ms: 30 }), Ok(()), "its schedule changes while it runs");
    c.eq(net.cue_state(t).map(|s| s.schedule), Ok(Schedule { k: 2, t_ms: 30 }), "and CUE_STATE reports the new one");
    c.eq(net.cue_cancel(t), Ok(()), "cancel");
    c.eq(net.cue_state(t).map(|s| s.status), Err(Error::InvalidCap), "a cancelled transfer is forgotten");
    c.check(net.send_area(h, 0, 1).is_ok(), "the socket is the program's again");
    let _ = net.close(h);
}

/// One program may run `MAX_TRANSFERS_PER_CLIENT` at once, so that it cannot take all
/// of net's; closing the sockets cancels them.
fn per_client_limit(c: &mut Checks, net: &Net, fs: u64) {
    let slow = Schedule { k: 1, t_ms: 50 };
    let mut socks = Vec::new();
    for _ in 0..np::MAX_TRANSFERS_PER_CLIENT {
        let Some(h) = connect(c, net, SINK) else { return };
        c.check(start(net, fs, "/1m.bin", h, slow, np::NO_STATUS).is_ok(), "a slow transfer within the limit");
        socks.push(h);
    }
    if let Some(h) = connect(c, net, SINK) {
        c.eq(start(net, fs, "/1m.bin", h, slow, np::NO_STATUS), Err(Error::NoSpace), "one more than a program may run");
        socks.push(h);
    }
    for h in socks {
        let _ = net.close(h);
    }
    let me = format!("{}", tests::id_of("cue_test").unwrap_or(0));
    c.eq(
        net.cue_list().map(|l| l.lines().filter(|l| l.split_whitespace().nth(1) == Some(&me)).count()),
        Ok(0),
        "closing the sockets cancelled them",
    );
}

fn peer_closes(c: &mut Checks, net: &Net, fs: u64) {
    let Some(h) = connect(c, net, CLOSER) else { return };
    match start(net, fs, "/16m.bin", h, Schedule::FAST, np::NO_STATUS) {
        Ok(t) => {
            let st = net.cue_wait(t, 120_000_000);
            c.check(
                st.is_ok_and(|s| s.result() == Err(Error::Reset) && s.sent < s.total),
                &format!("a peer that closes mid-transfer ends it with Reset: {:?}", st),
            );
        }
        Err(e) => {
            c.check(false, &format!("cue to the closing peer: {}", e.name()));
        }
    }
    let _ = net.close(h);
}

/// An ended transfer stays until its client asks about it, however many others end
/// first: 66 transfers, one after another on sockets of their own, none asked about
/// until all have ended; then every one is known and done. (net once kept 64 a client
/// and forgot the oldest: httpd, going through a hundred connections before it asked,
/// had its WAIT_MANY answered InvalidCap.)
fn ended_kept(c: &mut Checks, net: &Net, fs: u64) {
    const N: usize = 66;
    let mut ended = Vec::new();
    for i in 0..N {
        let Some(h) = connect(c, net, CLOSER) else { return };
        match start(net, fs, "/small.txt", h, Schedule::FAST, np::NO_STATUS) {
            Ok(t) => {
                if net.wait(&[(t, np::ENDED)], 30_000_000) != Ok(1) {
                    c.check(false, &format!("transfer {i} ends within 30 s"));
                    return;
                }
                ended.push((h, t));
            }
            Err(e) => {
                c.check(false, &format!("transfer {i}: {}", e.name()));
                return;
            }
        }
    }
    let done = ended.iter().filter(|(_, t)| net.cue_state(*t).is_ok_and(|s| s.status == np::CUE_DONE)).count();
    c.eq(done, N, &format!("all {N} ended transfers known and done when asked after the last"));
    c.eq(net.cue_state(ended[0].1).map(|s| s.status), Err(Error::InvalidCap), "one asked about is forgotten");
    for (h, _) in ended {
        let _ = net.close(h);
    }
}

fn removed(c: &mut Checks, net: &Net, fs: u64) {
    let path = "/cue_removed.bin";
    let Ok((fh, _)) = files::open(fs, path, true) else {
        c.check(false, "create a file to remove");
        return;
    };
    let block: Vec<u8> = (0..files_api::MAX_IO).map(|i| (i % 253) as u8).collect();
    for k in 0..(3 << 20) / files_api::MAX_IO {
        let _ = files::write(fs, fh, k * files_api::MAX_IO, &block);
    }
    let _ = files::close(fs, fh);
    let Some(h) = connect(c, net, SINK) else { return };
    let t = match start(net, fs, path, h, Schedule { k: 8, t_ms: 10 }, np::NO_STATUS) {
        Ok(t) => t,
        Err(e) => {
            c.check(false, &format!("cue the file to remove: {}", e.name()));
            return;
        }
    };
    rt::sys::sleep_us(100_000);
    c.eq(files::remove(fs, path), Ok(()), "the file is removed while net sends it");
    let st = net.cue_wait(t, 120_000_000);
    c.check(
        st.is_ok_and(|s: CueState| s.result() == Err(Error::InvalidCap) && s.sent < s.total),
        &format!("the transfer ends: its blocks were taken back ({:?})", st),
    );
    let _ = net.close(h);
}

fn hostile(c: &mut Checks, net: &Net, fs: u64, blk: u64) {
    let Some(h) = connect(c, net, SINK) else { return };
    let (fh, size) = files::open(fs, "/1m.bin", false).unwrap_or((0, 0));
    let ticket = rt::alloc_slot();
    c.eq(files::ticket(fs, fh, ticket).map(|t| t.0), Ok(size), "a ticket for an open file");
    c.eq(
        files::ticket(fs, fh + 1000, rt::alloc_slot()).map(|t| t.0),
        Err(Error::InvalidCap),
        "no ticket for a handle that is not ours",
    );
    let words = |sock: u64, first: u64, len: u64, k: u64, t: u64, size: u64, off: u64| {
        [sock, first, len, k, t, np::CUE_SHUTDOWN, size, off]
    };
    let good = words(h, 0, 0, np::MAX_K, 0, size, np::NO_STATUS);
    c.eq(cue_raw(net, None, &good), Err(Error::Malformed), "CUE without a capability");
    c.eq(
        cue_raw(net, Some(fs), &good),
        Err(Error::InvalidCap),
        "CUE with a capability to the files server, not a ticket",
    );
    c.eq(cue_raw(net, Some(net.srv), &good), Err(Error::InvalidCap), "CUE with a capability to net itself");
    c.eq(cue_raw(net, Some(blk), &good), Err(Error::InvalidCap), "CUE with the block service's own capability");
    c.eq(
        cue_raw(net, Some(ticket), &words(9999, 0, 0, np::MAX_K, 0, size, np::NO_STATUS)),
        Err(Error::InvalidCap),
        "CUE on a socket that is not ours",
    );
    c.eq(cue_raw(net, Some(ticket), &words(h, 0, 0, 0, 0, size, np::NO_STATUS)), Err(Error::InvalidArg), "k = 0");
    c.eq(
        cue_raw(net, Some(ticket), &words(h, 0, 0, 1, np::MAX_T_MS + 1, size, np::NO_STATUS)),
        Err(Error::InvalidArg),
        "t past the limit",
    );
    c.eq(
        cue_raw(net, Some(ticket), &words(h, size, 0, 1, 0, size, np::NO_STATUS)),
        Err(Error::InvalidArg),
        "a first byte past the end",
    );
    c.eq(
        cue_raw(net, Some(ticket), &words(h, 0, size + 1, 1, 0, size, np::NO_STATUS)),
        Err(Error::InvalidArg),
        "a range past the size",
    );
    c.eq(
        cue_raw(net, Some(ticket), &words(h, 0, 0, 1, 0, size, 3)),
        Err(Error::InvalidArg),
        "a status word not aligned",
    );
    c.eq(
        cue_raw(net, Some(ticket), &words(h, 0, 0, 1, 0, size, np::AREA_BYTES - 8)),
        Err(Error::InvalidArg),
        "status words past the shared area",
    );
    let mut m = Msg::new(np::CUE, &[h, 0, 0, 1, 0, 8 | np::CUE_SHUTDOWN, size, np::NO_STATUS]);
    m.push_item(Fpage::caps(ticket, 0, abi::rights::SEND), 0);
    c.eq(rt::server::request(net.srv, &mut m), Err(Error::InvalidArg), "unknown flags");
    // A ticket its holder has attached itself is refused: net's view would share it.
    let own = blk_api::client::attach(blk, ticket, rt::layout::SCRATCH, 21, 0);
    c.check(own.as_ref().is_ok_and(|v| v.cap != ticket), "ATTACH hands the holder a capability of its own");
    c.check(own.is_ok(), &format!("a program may attach its ticket itself: {:?}", own.as_ref().map(|v| v.blocks)));
    c.eq(cue_raw(net, Some(ticket), &good), Err(Error::BadState), "CUE with a ticket attached already");
    c.eq(
        tests::raw_request(ticket, blk_api::CLOSE, &[], None),
        Err(Error::BadState),
        "once attached, the ticket cannot close the view: only its holder can",
    );
    if let Ok(v) = &own {
        c.eq(rt::sys::cap_info(v.cap).map(|_| ()), Ok(()), "and the holder's view is still open");
    }
    // net attaches a ticket before it can check the size against its blocks: this one
    // is used up (net gives it back).
    let fresh = rt::alloc_slot();
    let _ = files::ticket(fs, fh, fresh);
    c.eq(
        cue_raw(net, Some(fresh), &words(h, 0, 0, 1, 0, size + 1, np::NO_STATUS)),
        Err(Error::InvalidArg),
        "a size past the file's (the ticket says how many bytes it holds)",
    );
    c.eq(cue_raw(net, Some(fresh), &good), Err(Error::InvalidCap), "a ticket net gave back after a refusal is dead");
    // A file that ends inside a block: its slack is not the program's to send.
    if let Ok((f1, s1)) = files::open(fs, "/f1.bin", false) {
        let t1 = rt::alloc_slot();
        let _ = files::ticket(fs, f1, t1);
        c.eq(
            cue_raw(net, Some(t1), &words(h, 0, 0, 1, 0, s1.div_ceil(4096) * 4096, np::NO_STATUS)),
            Err(Error::InvalidArg),
            "a size up to the end of the file's last block, past the file",
        );
        let _ = files::close(fs, f1);
    }
    // Nothing net refused stays running.
    c.eq(
        net.cue_list().map(|l| {
            l.lines()
                .filter(|l| l.split_whitespace().nth(1) == Some(&format!("{}", tests::id_of("cue_test").unwrap_or(0))))
                .count()
        }),
        Ok(0),
        "no refused CUE left a transfer",
    );
    let _ = files::close(fs, fh);
    let _ = net.close(h);
    let _ = rt::sys::cap_delete(ticket);
}

/// A range of a BAIO segment of our own, delegated out of order (blocks 40..48, then
/// 8..24), sent from byte 100 on: what reaches the host is exactly those bytes.
fn segment_range(c: &mut Checks, net: &Net, blk: u64) {
    use blk_api::client as seg;
    let byte = |o: u64| (o * 31 + o / 4096) as u8;
    let _ = seg::delete(blk, "cue_seg");
    let s = match seg::create(blk, "cue_seg", 64, 0).and_then(|_| seg::open(blk, "cue_seg", 3, rt::layout::SCRATCH2)) {
        Ok(s) => s,
        Err(e) => {
            c.check(false, &format!("a segment of our own: {}", e.name()));
            return;
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
            ops.push((blk_api::WRITE_OP, first, per));
        }
        written &= s.batch(&ops).is_ok() && (0..8).all(|i| s.wait(i) == blk_api::DONE);
    }
    c.check(written, "64 blocks written to the segment");
    let ticket = rt::alloc_slot();
    let runs = [(40u64, 8u64), (8, 16)];
    c.eq(s.delegate(baio::READ, &runs, 0, ticket).map(|d| d.0), Ok(24), "a view of two runs of it, out of order");
    match seg::open(blk, "cue_seg", baio::READ, rt::layout::BENCH[0]) {
        Ok(ro) => {
            c.eq(
                ro.delegate(baio::READ | baio::WRITE, &[(0, 64)], 0, rt::alloc_slot()),
                Err(Error::NoRights),
                "a view has no more rights than its parent",
            );
            let _ = ro.close();
        }
        Err(e) => {
            c.check(false, &format!("open the segment read-only: {}", e.name()));
        }
    }
    c.eq(
        s.delegate(baio::READ, &[(60, 8)], 0, rt::alloc_slot()),
        Err(Error::InvalidArg),
        "a view past the segment's end",
    );
    c.eq(
        s.delegate(baio::READ, &[(0, 2)], 3 * 4096, rt::alloc_slot()),
        Err(Error::InvalidArg),
        "a view of more bytes than its blocks",
    );
    // A view of 16 blocks readable for 8 blocks and 100 bytes: the rest reads as zeros
    // (a file's slack in its last block is never seen through a ticket).
    let short = rt::alloc_slot();
    let limit = 8 * 4096 + 100;
    let _ = s.delegate(baio::READ, &[(40, 16)], limit, short);
    for bad in [11u64, 22] {
        c.eq(
            seg::attach(blk, short, rt::layout::BENCH[1], bad, 0).map(|_| ()),
            Err(Error::InvalidArg),
            &format!("ATTACH of 2^{bad} bytes"),
        );
    }
    c.eq(
        tests::raw_request(short, blk_api::ATTACH, &[17, 0], None),
        Err(Error::BadState),
        "ATTACH through the ticket itself (it goes to the service)",
    );
    // The control page and 16 blocks: 128 KiB of the area mapped, no more.
    let mine = seg::attach(blk, short, rt::layout::BENCH[1], 17, 0);
    match mine {
        Ok(v) => {
            c.eq(v.bytes, limit, "ATTACH says how many bytes the view holds");
            let read = v.batch_ops(&[blk_api::op(blk_api::READ_OP, 0, 16, 0, blk_api::DATA)], blk_api::WAIT_ALL);
            let got = v.bytes(blk_api::DATA, 16 * 4096);
            let want = |k: u64| if k < limit { byte(40 * 4096 + k) } else { 0 };
            c.check(
                read.is_ok()
                    && v.status(0) == blk_api::DONE
                    && got.iter().enumerate().all(|(k, b)| *b == want(k as u64)),
                "reads through it give its bytes, then zeros",
            );
            let past =
                v.batch_ops(&[blk_api::op(blk_api::READ_OP, 0, 16, 1, blk_api::DATA + 64 * 1024)], blk_api::WAIT_ALL);
            c.eq(
                (past, v.status(1)),
                (Ok(()), blk_api::FAILED | blk_api::E_BAD),
                "a read into the area past what the holder mapped",
            );
            let _ = v.close();
        }
        Err(e) => {
            c.check(false, &format!("a view with a byte limit: {}", e.name()));
        }
    }
    let mut want = Cksum::new();
    let mut all = Vec::new();
    for (f, n) in runs {
        all.extend((f * 4096..(f + n) * 4096).map(byte));
    }
    want.update(&all[100..]);
    let want = want.finish();
    let Some(h) = connect(c, net, SINK) else { return };
    match net.cue(ticket, h, 100, 0, 24 * 4096, Schedule::FAST, np::CUE_SHUTDOWN, np::NO_STATUS) {
        Ok(t) => {
            let st = net.cue_wait(t, 120_000_000);
            c.eq(st.map(|s| (s.status, s.sent)), Ok((np::CUE_DONE, want.1)), "the segment range is sent");
            c.eq(parse_cksum(&reply(net, h)), Some(want), "and reached the host byte for byte");
        }
        Err(e) => {
            c.check(false, &format!("cue of a segment range: {}", e.name()));
        }
    }
    let _ = net.close(h);
    let _ = s.close();
    let _ = seg::delete(blk, "cue_seg");
}

/// `cue_peer`'s transfer: ours to name by its id, not to see, change or stop.
fn others(c: &mut Checks, net: &Net) {
    let me = tests::id_of("cue_test").unwrap_or(0);
    let mut theirs = None;
    tests::wait_until(3000, || {
        theirs = net.cue_list().ok().and_then(|l| {
            l.lines().find_map(|l| {
                let w: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                (w.len() >= 3 && w[1] != me).then(|| (w[0], w[2]))
            })
        });
        theirs.is_some()
    });
    let Some((t, sock)) = theirs else {
        c.check(false, "cue_peer's transfer shows in CUE_LIST");
        return;
    };
    c.eq(net.cue_state(t).map(|s| s.status), Err(Error::InvalidCap), "CUE_STATE of another program's transfer");
    c.eq(net.cue_set(t, Schedule::FAST), Err(Error::InvalidCap), "CUE_SET of another program's transfer");
    c.eq(net.cue_cancel(t), Err(Error::InvalidCap), "CUE_CANCEL of another program's transfer");
    c.eq(net.wait(&[(t, np::ENDED)], 0), Err(Error::InvalidCap), "WAIT for another program's transfer");
    c.check(net.state(sock).is_err() || sock > 1000, "its socket handle means nothing in our table");
}

/// MD5 of `data` as the stream point hands it to a graft: whole blocks in pieces of
/// at most 1 KiB, then the tail, which ends the stream.
fn md5_of(data: &[u8]) -> [u64; 2] {
    let mut st = [0u8; graft_examples::MD5_STATE];
    let whole = data.len() / 64 * 64;
    for piece in data[..whole].chunks(1024) {
        graft_examples::md5(piece, &mut st);
    }
    graft_examples::md5(&data[whole..], &mut st);
    [
        u64::from_le_bytes(st[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(st[8..16].try_into().unwrap_or_default()),
    ]
}

/// Cue's stream point (VINO §3.2): with `CUE_STREAM` the bytes net sends also go
/// through this program's stream graft in net; its MD5 must be the file's, in every
/// technology, while the host still gets every byte.
fn streams(c: &mut Checks, net: &Net, fs: u64) {
    let send = |c: &mut Checks, path: &str| -> Option<CueState> {
        let h = connect(c, net, SINK)?;
        let (fh, _) = files::open(fs, path, false).ok()?;
        let r = cue_file(net, fs, fh, h, Schedule::FAST, np::CUE_SHUTDOWN | np::CUE_STREAM, np::NO_STATUS);
        let _ = files::close(fs, fh);
        let st = r.ok().and_then(|(t, _)| net.cue_wait(t, 120_000_000).ok());
        c.eq(
            parse_cksum(&reply(net, h)),
            Some(expected(fs, path)),
            &format!("{path} reached the host byte for byte (cksum)"),
        );
        let _ = net.close(h);
        st
    };
    let st = send(c, "/small.txt");
    c.eq(
        st.map(|s| s.status),
        Some(np::CUE_DONE | np::CUE_STREAM_ABORTED),
        "a stream transfer with no graft ends done, marked CUE_STREAM_ABORTED",
    );
    // rhai hashes about a thousand times slower than native: a short file for it.
    for (tech, path) in [("native", "/f1.bin"), ("wasmi", "/f1.bin"), ("ebpf", "/f1.bin"), ("rhai", "/small.txt")] {
        let Ok(file) = files::read_all(fs, &format!("/grafts/stream_{tech}_md5.graft")) else {
            c.check(false, &format!("/grafts/stream_{tech}_md5.graft is in the files filesystem"));
            continue;
        };
        let id = match tests::load_graft(net.srv, &file) {
            Ok(id) => id,
            Err(r) => {
                c.check(false, &format!("{tech}: load MD5 into net: {:?} {}", r.error, r.reason));
                continue;
            }
        };
        let st = send(c, path);
        let len = files::read_all(fs, path).map(|d| d.len() as u64).unwrap_or(0);
        c.eq(
            st.map(|s| (s.status, s.sent)),
            Some((np::CUE_DONE, len)),
            &format!("{tech}: {path} sent through the MD5 graft, done"),
        );
        let want = md5_of(&files::read_all(fs, path).unwrap_or_default());
        let got = graft_api::read_state(net.srv, id, 0, 16).map(|w| [w[0], w[1]]);
        c.eq(got.map_err(|r| r.error), Ok(want), &format!("{tech}: the graft's digest is the MD5 of {path}"));
        c.check(graft_api::unload(net.srv, id).is_ok(), &format!("{tech}: unload it"));
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let (ns, fs, blk) = (rt::alloc_slot(), rt::alloc_slot(), rt::alloc_slot());
    if rt::env::lookup("net", ns).is_err()
        || rt::env::lookup("files", fs).is_err()
        || rt::env::lookup("blk", blk).is_err()
    {
        println!("cue_test: the manifest must grant net, files and blk");
        return 1;
    }
    let net = match Net::attach(ns) {
        Ok(n) => n,
        Err(e) => {
            println!("cue_test: cannot attach to net: {}", e.name());
            return 1;
        }
    };
    // DHCP first (the host is reached through the gateway).
    tests::wait_until(3000, || net.info().is_ok_and(|i| i.how != 2));
    others(&mut c, &net);
    hostile(&mut c, &net, fs, blk);
    parallel(&mut c, &net, fs);
    segment_range(&mut c, &net, blk);
    // (Before the kernel pages are counted: the most areas net maps at once is here,
    // and the kernel keeps the page tables and node pages it grew to.)
    per_client_limit(&mut c, &net, fs);
    // cue_peer ends with a transfer running: net cancels it.
    let all_gone =
        tests::wait_until(6000, || net.cue_list().is_ok_and(|l| l.is_empty()) && tests::id_of("cue_peer").is_none());
    c.check(all_gone, "the transfer of cue_peer, which ended under it, is cancelled");
    // Areas of ended transfers go from net once blk's PARK_US has passed.
    rt::sys::sleep_us(1_500_000);
    let quiet = net_kpages();
    cancel(&mut c, &net, fs);
    peer_closes(&mut c, &net, fs);
    removed(&mut c, &net, fs);
    c.eq(net.cue_list().map(|l| l.lines().count()), Ok(0), "no transfer is left");
    rt::sys::sleep_us(1_500_000);
    c.eq(net_kpages(), quiet, "no area of a transfer stays mapped in net (its kernel pages, from ps, as before)");
    // (After the count: grafts grow net's heap, and with it its page tables.)
    streams(&mut c, &net, fs);
    ended_kept(&mut c, &net, fs);
    c.finish("cue_test")
}
