//! BAIO through the block service, as principal 1: create, open, batches of mixed
//! direct and buffered operations completing into status words, rights, ranges,
//! list, stat, sync, close, delete. `seg_peer` (principal 2) checks protection.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use blk_api as p;
use blk_api::client::{self as baio, Segment, SLOT_BYTES};
use rt::{env, ipc, sys};
use tests::{raw_request, Checks};

rt::entry!(main);

const BUF: u64 = rt::layout::SEGMENT_AREA;

fn fill(seg: &Segment, slot: u64, seed: u8) {
    for (k, b) in seg.data(slot).iter_mut().enumerate() {
        *b = seed.wrapping_add((k / 7) as u8);
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    let mounted = baio::mount(blk);
    c.check(
        mounted.is_ok_and(|(blocks, free, _, bs)| blocks == 16384 && free > 0 && free < blocks && bs == 4096),
        "baio_mount: the device's blocks, free blocks and block size",
    );
    c.eq(baio::create(blk, "mine", 64, 0), Ok(()), "create a private segment of 64 blocks");
    c.eq(baio::create(blk, "shared", 16, baio_read()), Ok(()), "create one others may read");
    c.eq(baio::create(blk, "mine", 8, 0), Err(Error::Exists), "a name is taken once");
    c.eq(baio::create(blk, "no/slash", 8, 0), Err(Error::InvalidArg), "a bad name");
    c.eq(baio::create(blk, "huge", 1 << 30, 0), Err(Error::NoSpace), "more than the disk has");
    c.eq(baio::stat(blk, "mine").map(|s| (s.0, s.2)), Ok((64, 3)), "stat: length and owner rights");

    let seg = baio::open(blk, "mine", 3, BUF);
    c.check(seg.is_ok(), "open it read-write: a capability and a shared buffer");
    let Ok(seg) = seg else { return c.finish("seg_test") };
    c.eq(seg.blocks, 64, "of 64 blocks");
    // A batch of writes, direct and buffered, then reads of both kinds.
    fill(&seg, 0, 1);
    fill(&seg, 1, 2);
    c.eq(
        seg.batch(&[(p::WRITE_OP, 0, 4), (p::WRITE_OP | p::BUFFERED, 4, 4)]),
        Ok(()),
        "a batch of two writes returns at once",
    );
    let s = (seg.wait(0), seg.wait(1));
    c.eq(s, (p::DONE, p::DONE), "both complete into their status words");
    for i in 2..8 {
        seg.data(i).fill(0);
    }
    c.eq(
        seg.batch(&[
            (p::READ_OP, 0, 4),
            (p::READ_OP | p::BUFFERED, 4, 4),
            (p::READ_OP | p::BUFFERED, 0, 4),
            (p::READ_OP, 4, 4),
            (p::READ_OP, 62, 4),
            (p::WRITE_OP, 2, 0),
            (9, 0, 1),
        ]),
        Ok(()),
        "a batch of mixed operations",
    );
    let st: alloc::vec::Vec<u64> = (0..7).map(|i| seg.wait(i)).collect();
    c.eq(&st[..4], &[p::DONE; 4][..], "reads done");
    c.eq(st[4], p::FAILED | p::E_RANGE, "a read past the segment's end fails with out-of-range");
    c.eq(st[5], p::FAILED | p::E_BAD, "zero blocks is malformed");
    c.eq(st[6], p::FAILED | p::E_BAD, "an unknown operation is malformed");
    let expect = |seed: u8| (0..SLOT_BYTES as usize).map(move |k| seed.wrapping_add((k / 7) as u8));
    c.check(seg.data(0).iter().copied().eq(expect(1)), "direct read returns what was written");
    c.check(seg.data(1).iter().copied().eq(expect(2)), "buffered read returns what was written");
    c.check(
        seg.data(2).iter().copied().eq(expect(1)) && seg.data(3).iter().copied().eq(expect(2)),
        "buffered and direct reads agree",
    );
    // Many outstanding requests: eight direct writes in descending block order (more than
    // the device queue holds at once), then eight reads; each checks its own data.
    for i in 0..8u64 {
        fill(&seg, i, 100 + i as u8);
    }
    let writes: alloc::vec::Vec<(u64, u64, u64)> = (0..8u64).map(|i| (p::WRITE_OP, 56 - 4 * i, 4)).collect();
    c.eq(seg.batch(&writes), Ok(()), "eight writes in one batch");
    c.check((0..8).all(|i| seg.wait(i) == p::DONE), "all eight complete");
    for i in 0..8 {
        seg.data(i).fill(0);
    }
    let reads: alloc::vec::Vec<(u64, u64, u64)> = (0..8u64).map(|i| (p::READ_OP, 56 - 4 * i, 4)).collect();
    c.eq(seg.batch(&reads), Ok(()), "eight reads in one batch");
    c.check((0..8).all(|i| seg.wait(i) == p::DONE), "all eight complete");
    c.check(
        (0..8u64).all(|i| seg.data(i).iter().copied().eq(expect(100 + i as u8))),
        "each read returns its own write",
    );
    c.eq(seg.sync(), Ok(()), "sync: on the disk");
    c.eq(baio::delete(blk, "mine"), Err(Error::BadState), "an open segment cannot be deleted");
    let cap = seg.cap;
    c.eq(seg.close(), Ok(()), "close");
    let mut m = rt::ipc::Msg::new(p::SYNC, &[]);
    c.eq(ipc::call(cap, &mut m, ipc::FOREVER), Err(Error::InvalidCap), "the capability died with the close");

    // Read-only capability.
    let ro = baio::open(blk, "mine", 1, BUF).unwrap();
    c.eq(ro.batch(&[(p::WRITE_OP, 0, 1)]), Ok(()), "a write through a read-only capability is accepted");
    c.eq(ro.wait(0), p::FAILED | p::E_RIGHTS, "and fails: no right");
    let _ = ro.close();
    c.check(
        baio::list(blk).is_ok_and(|l| l.contains("mine 64 1") && l.contains("shared 16 1")),
        "list shows our segments",
    );

    ring(&mut c, blk);

    // The peer (principal 2) opens "shared" and ends without closing it, then makes
    // "peer-done". Root tells the service, which closes the handle: "shared" can go.
    let seen = tests::wait_until(1000, || baio::stat(blk, "peer-done").is_ok());
    c.check(seen, "the peer ran");
    let mut r = Err(Error::BadState);
    for _ in 0..500 {
        r = baio::delete(blk, "shared");
        if r != Err(Error::BadState) {
            break;
        }
        sys::sleep_us(10_000);
    }
    c.eq(r, Ok(()), "a segment its dead opener left open was closed for it (root said GONE)");
    c.finish("seg_test")
}

/// The submission ring, sleeping waits and hostile control words.
fn ring(c: &mut Checks, blk: u64) {
    const N: u64 = 40;
    c.eq(baio::create(blk, "ring", N, 0), Ok(()), "create a segment for the ring");
    let Ok(seg) = baio::open(blk, "ring", 3, BUF) else {
        c.check(false, "open it");
        return;
    };
    let block = |i: u64| p::DATA + i * 4096;
    for i in 0..N {
        seg.bytes(block(i), 4096).fill(0xa0 ^ i as u8);
    }
    // Forty direct writes in descending block order behind one doorbell.
    let writes: alloc::vec::Vec<_> = (0..N).map(|i| p::op(p::WRITE_OP, N - 1 - i, 1, i, block(i))).collect();
    c.eq(seg.submit(&writes, 0), Ok(()), "forty writes through the ring: one doorbell");
    c.check((0..N).all(|i| seg.wait(i) == p::DONE), "all complete (waiting asleep in the service)");
    c.eq(seg.wait_count(0), Ok(N), "the completion counter says forty");
    // Read them back, buffered then buffered again (from the cache), with WAIT_ALL.
    for pass in 0..2 {
        for i in 0..N {
            seg.bytes(block(64 + i), 4096).fill(0);
        }
        let reads: alloc::vec::Vec<_> =
            (0..N).map(|i| p::op(p::READ_OP | p::BUFFERED, N - 1 - i, 1, 100 + i, block(64 + i))).collect();
        c.eq(
            seg.submit(&reads, p::WAIT_ALL),
            Ok(()),
            if pass == 0 { "forty buffered reads, WAIT_ALL" } else { "again, from the cache" },
        );
        c.check((0..N).all(|i| seg.status(100 + i) == p::DONE), "all done when the doorbell returns");
        c.check(
            (0..N).all(|i| seg.bytes(block(64 + i), 4096).iter().all(|b| *b == 0xa0 ^ i as u8)),
            "every block has its data",
        );
    }
    // A direct write behind the cache, then a buffered read: the cache must not answer
    // with the old block.
    seg.bytes(block(0), 4096).fill(0x5e);
    c.eq(
        seg.batch_ops(&[p::op(p::WRITE_OP, 3, 1, 0, block(0))], p::WAIT_ALL),
        Ok(()),
        "a direct write of a cached block",
    );
    c.eq(
        seg.batch_ops(&[p::op(p::READ_OP | p::BUFFERED, 3, 1, 1, block(1))], p::WAIT_ALL),
        Ok(()),
        "a buffered read of it",
    );
    c.check(seg.bytes(block(1), 4096).iter().all(|b| *b == 0x5e), "sees the direct write (the cache was invalidated)");
    // Overlapping buffered reads of blocks not in the cache, in one batch: the first
    // read's fill of block 11 is still under way when the second looks up 10..=12, so
    // the cache answers fill 10, busy 11, fill 12. The fills after the busy block must
    // not be dropped (their slots would stay filling, and every later look-up of block
    // 12 would say busy: the service asked again for ever).
    for (i, b) in (10..13u64).enumerate() {
        seg.bytes(block(90 + i as u64), 4096).fill(0x30 + b as u8);
    }
    c.eq(
        seg.batch_ops(&[p::op(p::WRITE_OP, 10, 3, 0, block(90))], p::WAIT_ALL),
        Ok(()),
        "direct writes of blocks 10..=12 (out of the cache)",
    );
    seg.bytes(block(80), 4 * 4096).fill(0);
    let overlapping =
        [p::op(p::READ_OP | p::BUFFERED, 11, 1, 0, block(80)), p::op(p::READ_OP | p::BUFFERED, 10, 3, 1, block(81))];
    c.eq(
        seg.batch_ops(&overlapping, p::WAIT_ALL),
        Ok(()),
        "a buffered read of block 11, then of 10..=12, in one batch",
    );
    c.eq((seg.status(0), seg.status(1)), (p::DONE, p::DONE), "both done");
    let has = |at: u64, b: u64| seg.bytes(block(at), 4096).iter().all(|x| *x == 0x30 + b as u8);
    c.check(has(80, 11) && has(81, 10) && has(82, 11) && has(83, 12), "each with its blocks' data");
    c.eq(seg.batch_ops(&[p::op(p::READ_OP | p::BUFFERED, 12, 1, 2, block(84))], p::WAIT_ALL), Ok(()), "block 12 again");
    c.check(seg.status(2) == p::DONE && has(84, 12), "from the cache");
    // Hostile operations and control words.
    let bad = [
        p::op(p::READ_OP, 0, 1, 0, 100),
        p::op(p::READ_OP, 0, 1, 1, p::AREA_BYTES - 4096 + 4096),
        p::op(p::READ_OP, 0, 1, 2, 0),
        p::op(p::READ_OP, 0, 64, 3, block(0)),
    ];
    c.eq(seg.batch_ops(&bad, p::WAIT_ALL), Ok(()), "a batch of malformed operations is taken");
    c.check(
        (0..4).all(|i| seg.status(i) == p::FAILED | p::E_BAD),
        "each fails as malformed: unaligned, past the area, over the control page, too long",
    );
    c.eq(
        seg.batch_ops(&[p::op(p::READ_OP, 0, 1, p::STATUS_WORDS, block(0))], 0),
        Err(Error::InvalidArg),
        "a status word past the page: the batch is refused",
    );
    let head = seg.shared().read(p::SQ_HEAD);
    c.eq(
        seg.submit(&[p::op(p::READ_OP, 0, 1, 0, block(0)), p::op(p::READ_OP, 0, 1, p::STATUS_WORDS, block(0))], 0),
        Err(Error::InvalidArg),
        "through the ring too",
    );
    c.eq(seg.shared().read(p::SQ_HEAD), head, "and the refused doorbell took none of the entries");
    c.eq(seg.submit(&[p::op(p::READ_OP, 0, 1, 5, block(0))], p::WAIT_ALL), Ok(()), "the ring goes on after it");
    c.eq(seg.status(5), p::DONE, "with the next entries alone");
    // Lying in our own control page harms only us.
    seg.shared().write(p::SQ_TAIL, 1 << 40);
    c.eq(
        raw_request(seg.cap, p::SUBMIT, &[0], None),
        Err(Error::InvalidArg),
        "a ring tail that runs past the ring is refused",
    );
    // Messages no client stub sends.
    let op = p::op(p::READ_OP, 0, 1, 0, block(0));
    c.eq(
        raw_request(seg.cap, p::BATCH, &[0, 3, op[0], op[1], op[2], op[3]], None),
        Err(Error::Malformed),
        "BATCH of 3 with the words of 1: Malformed",
    );
    c.eq(
        raw_request(seg.cap, 0xee, &[], None),
        Err(Error::Unsupported),
        "an unknown label through a segment: Unsupported",
    );
    c.eq(raw_request(blk, 0xee, &[], None), Err(Error::Unsupported), "an unknown label to the service: Unsupported");
    c.eq(
        raw_request(seg.cap, p::CREATE, &[1, 0], Some(b"x")),
        Err(Error::Unsupported),
        "a service request through a segment capability",
    );
    c.eq(
        raw_request(blk, p::WAIT, &[1], None),
        Err(Error::InvalidCap),
        "a segment request without a segment capability",
    );
    c.eq(
        raw_request(blk, p::OPEN, &[0x101], Some(b"ring")),
        Err(Error::NoRights),
        "rights beyond READ|WRITE are refused, not truncated",
    );
    let _ = seg.close();
    c.eq(baio::delete(blk, "ring"), Ok(()), "delete the ring segment");
}

fn baio_read() -> u8 {
    1
}
