//! The BAIO device format's host tests: format, allocation, mount checks, fsck and repair,
//! crash consistency.

extern crate std;
use super::*;

fn dev(blocks: usize) -> MemDev {
    MemDev(vec![0u8; blocks * BLOCK])
}
#[test]
fn a_huge_block_count_is_refused_not_an_overflow() {
    let mut d = dev(64);
    Volume::format(&mut d).unwrap();
    for total in [u64::MAX, u64::MAX - 1, 1 << 63, 65] {
        let mut sb = [0u8; BLOCK];
        d.read(0, &mut sb).unwrap();
        sb[16..24].copy_from_slice(&total.to_le_bytes());
        let end = 16 + 8 * 11;
        let sum = checksum(&sb[..end]);
        sb[end..end + 8].copy_from_slice(&sum.to_le_bytes());
        let mut bad = MemDev(d.0.clone());
        bad.write(0, &sb).unwrap();
        assert!(matches!(Volume::mount(&mut bad), Err(Error::Corrupt(_))), "total {total}");
        assert!(!Volume::check(&mut bad).is_empty());
    }
    // The layout computation itself must not overflow either (no panic; None is
    // "no layout for that size").
    for total in [u64::MAX, u64::MAX - 1, 1 << 63] {
        let _ = Layout::for_blocks(total);
    }
}

#[test]
fn layout_fits_and_has_the_papers_inode_ratio() {
    for total in [8u64, 100, 4096, 16384, 262144, 1 << 22] {
        let l = Layout::for_blocks(total).unwrap();
        assert_eq!(l.data_start + l.data_blocks, total);
        assert_eq!(l.inode_count, (l.data_blocks / 1000).max(1));
        assert!(l.bitmap_blocks * BLOCK as u64 * 8 >= l.data_blocks);
        assert!(l.inode_blocks * INODES_PER_BLOCK >= l.inode_count);
    }
    assert!(Layout::for_blocks(7).is_none());
}

#[test]
fn format_create_remount() {
    let mut d = dev(16384);
    let mut v = Volume::format(&mut d).unwrap();
    let a = v.create("alpha", 7, READ | WRITE, READ, 1000, u64::MAX, 5).unwrap().clone();
    let b = v.create("beta", 8, READ | WRITE, 0, 3000, u64::MAX, 6).unwrap().clone();
    assert_eq!(b.start, a.start + a.length, "first fit from the hint: contiguous");
    assert_eq!(v.create("alpha", 7, 3, 0, 1, u64::MAX, 0).err(), Some(Error::NameTaken));
    assert_eq!(v.create("bad name", 7, 3, 0, 1, u64::MAX, 0).err(), Some(Error::BadName));
    assert_eq!(v.create("big", 7, 3, 0, 1 << 40, u64::MAX, 0).err(), Some(Error::NoSpace));
    assert_eq!(v.create("q", 7, 3, 0, 10, 1005, 0).err(), Some(Error::OverQuota));
    v.sync(&mut d).unwrap();
    let w = Volume::mount(&mut d).unwrap();
    assert_eq!(w.lookup("alpha"), Some(&a));
    assert_eq!(w.lookup("beta").unwrap().rights_for(8), READ | WRITE);
    assert_eq!(w.lookup("beta").unwrap().rights_for(9), 0);
    assert_eq!(w.usage(7), 1000);
    assert_eq!(w.list().count(), 2);
    assert!(Volume::check(&mut d).is_empty());
}

#[test]
fn the_written_mark_starts_at_zero_only_rises_and_is_kept() {
    let mut d = dev(8192);
    let mut v = Volume::format(&mut d).unwrap();
    assert_eq!(v.create("s", 1, 3, 0, 100, u64::MAX, 0).unwrap().written, 0, "a new segment reads as zeros");
    v.set_written("s", 40).unwrap();
    v.set_written("s", 10).unwrap();
    assert_eq!(v.lookup("s").unwrap().written, 40, "the mark never goes down");
    v.set_written("s", 1000).unwrap();
    assert_eq!(v.lookup("s").unwrap().written, 100, "nor past the segment");
    assert_eq!(v.set_written("nope", 1), Err(Error::NotFound));
    v.sync(&mut d).unwrap();
    assert_eq!(Volume::mount(&mut d).unwrap().lookup("s").unwrap().written, 100);
    // A segment made again where a deleted one was starts unwritten again.
    v.delete("s").unwrap();
    assert_eq!(v.create("t", 2, 3, 0, 100, u64::MAX, 0).unwrap().written, 0);
}

#[test]
fn a_power_cut_during_a_written_mark_move_never_uncovers_old_bytes() {
    // An old segment full of 0xaa, deleted; a new one on the same blocks.
    let mut d = dev(4096);
    let mut v = Volume::format(&mut d).unwrap();
    let old = v.create("old", 1, 3, 0, 64, u64::MAX, 0).unwrap().start;
    for b in old..old + 64 {
        d.write(b, &[0xaa; BLOCK]).unwrap();
    }
    v.delete("old").unwrap();
    assert_eq!(v.create("new", 2, 3, 0, 64, u64::MAX, 0).unwrap().start, old);
    v.sync(&mut d).unwrap();
    // Two moves, on a disk that caches writes: every state a cut may leave.
    let mut r = crash::Recorder::new(d.0.clone());
    let mut w = Volume::mount(&mut r).unwrap();
    assert_eq!(w.extend_written(&mut r, "new", 10, 32).unwrap(), 32);
    r.ack();
    assert_eq!(w.extend_written(&mut r, "new", 40, 8).unwrap(), 40);
    r.ack();
    assert!(r.writes() > 40, "zeros, then the inode and the superblock");
    let mut states = 0;
    crash::crashes(&d.0, &r.events, 7, |mut c| {
        let m = Volume::mount(&mut c.dev).unwrap_or_else(|e| panic!("{c:?}: the device does not mount: {e:?}"));
        let seg = m.lookup("new").unwrap();
        let mut b = [0u8; BLOCK];
        for blk in seg.start..seg.start + seg.written {
            c.dev.read(blk, &mut b).unwrap();
            assert!(
                b.iter().all(|x| *x == 0),
                "{c:?}: block {blk} is under the mark {} but holds old bytes",
                seg.written
            );
        }
        assert_eq!(Volume::examine(&mut c.dev), Examination::default(), "{c:?}: after a mount");
        states += 1;
    });
    assert!(states > 100, "{states} states");
}

#[test]
fn delete_frees_and_the_hint_finds_the_hole() {
    let mut d = dev(8192);
    let mut v = Volume::format(&mut d).unwrap();
    let a = v.create("a", 1, 3, 0, 100, u64::MAX, 0).unwrap().start;
    v.create("b", 1, 3, 0, 100, u64::MAX, 0).unwrap();
    v.delete("a").unwrap();
    assert_eq!(v.delete("a").err(), Some(Error::NotFound));
    assert_eq!(v.create("c", 1, 3, 0, 50, u64::MAX, 0).unwrap().start, a, "the freed run is reused");
    let free = v.free_blocks();
    v.sync(&mut d).unwrap();
    let w = Volume::mount(&mut d).unwrap();
    assert_eq!(w.free_blocks(), free);
}

#[test]
fn fragmentation_needs_a_contiguous_run() {
    let mut d = dev(8192);
    let mut v = Volume::format(&mut d).unwrap();
    let n = v.layout.data_blocks;
    let third = n / 3;
    v.create("x", 1, 3, 0, third, u64::MAX, 0).unwrap();
    v.create("y", 1, 3, 0, third, u64::MAX, 0).unwrap();
    v.create("z", 1, 3, 0, n - 2 * third, u64::MAX, 0).unwrap();
    v.delete("x").unwrap();
    v.delete("z").unwrap();
    assert!(v.free_blocks() > third + 1);
    assert_eq!(
        v.create("w", 1, 3, 0, third + 1 + (n - 2 * third) / 2, u64::MAX, 0).err(),
        Some(Error::NoSpace),
        "free space is split in two runs"
    );
    assert!(v.create("v", 1, 3, 0, third, u64::MAX, 0).is_ok());
}

#[track_caller]
fn damaged(f: impl FnOnce(&mut MemDev, &Layout)) -> MemDev {
    let mut d = dev(8192);
    let mut v = Volume::format(&mut d).unwrap();
    v.create("one", 1, 3, 0, 100, u64::MAX, 0).unwrap();
    v.create("two", 1, 3, 0, 100, u64::MAX, 0).unwrap();
    v.sync(&mut d).unwrap();
    let l = v.layout;
    f(&mut d, &l);
    d
}

/// Damage a device: the mount must refuse it; returns what check names.
#[track_caller]
fn corrupt(f: impl FnOnce(&mut MemDev, &Layout)) -> Vec<String> {
    let mut d = damaged(f);
    let m = Volume::mount(&mut d);
    assert!(m.is_err(), "mount refuses a corrupt device: {:?}", Volume::check(&mut d));
    Volume::check(&mut d)
}

/// Leave derived metadata stale: the mount must finish the update (and say so)
/// and leave a clean device; returns what it said.
#[track_caller]
fn interrupted(f: impl FnOnce(&mut MemDev, &Layout)) -> Vec<String> {
    let mut d = damaged(f);
    let e = Volume::examine(&mut d);
    assert!(e.problems.is_empty() && !e.unfinished.is_empty(), "{e:?}");
    let v = Volume::mount(&mut d).unwrap();
    assert_eq!(v.finished, e.unfinished);
    assert_eq!(Volume::examine(&mut d), Examination::default(), "the mount wrote the rebuilt metadata");
    assert_eq!(v.list().count(), 2);
    v.finished
}

fn patch_super(d: &mut MemDev, field: usize, value: u64) {
    let mut b = [0u8; BLOCK];
    d.read(0, &mut b).unwrap();
    b[16 + 8 * field..24 + 8 * field].copy_from_slice(&value.to_le_bytes());
    let end = 16 + 8 * 11;
    let c = checksum(&b[..end]);
    b[end..end + 8].copy_from_slice(&c.to_le_bytes());
    d.write(0, &b).unwrap();
}

/// Change bytes of inode `idx`; `sum`: and make its checksum agree (a forged
/// inode rather than a damaged one).
fn patch_inode_as(d: &mut MemDev, l: &Layout, idx: usize, off: usize, bytes: &[u8], sum: bool) {
    let mut b = [0u8; BLOCK];
    d.read(l.inode_start, &mut b).unwrap();
    let i = &mut b[idx * INODE_SIZE..(idx + 1) * INODE_SIZE];
    i[off..off + bytes.len()].copy_from_slice(bytes);
    if sum {
        let c = checksum(&i[..INODE_SUM]);
        i[INODE_SUM..].copy_from_slice(&c.to_le_bytes());
    }
    d.write(l.inode_start, &b).unwrap();
}

fn patch_inode(d: &mut MemDev, l: &Layout, idx: usize, off: usize, bytes: &[u8]) {
    patch_inode_as(d, l, idx, off, bytes, true)
}

#[test]
fn every_kind_of_corruption_is_named() {
    let p = corrupt(|d, _| d.0[0] = b'X');
    assert!(p[0].contains("magic"));
    let p = corrupt(|d, _| d.0[20] ^= 1);
    assert!(p[0].contains("checksum"));
    let p = corrupt(|d, l| patch_super(d, 6, l.data_start + 1));
    assert!(p[0].contains("layout"));
    let p = corrupt(|d, _| patch_super(d, 10, u64::MAX));
    assert!(p[0].contains("next generation"), "{p:?}");
    // Overlapping segments: make "two" start where "one" starts.
    let p = corrupt(|d, l| {
        let start = l.data_start.to_le_bytes();
        patch_inode(d, l, 1, 80, &start);
    });
    assert!(p.iter().any(|x| x.contains("another segment")), "{p:?}");
    // A written mark past the segment's end.
    let p = corrupt(|d, l| patch_inode(d, l, 0, 112, &101u64.to_le_bytes()));
    assert!(p.iter().any(|x| x.contains("written mark")), "{p:?}");
    // A version 2 device (no inode checksums) is refused.
    let p = corrupt(|d, _| {
        let mut b = [0u8; BLOCK];
        d.read(0, &mut b).unwrap();
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        d.write(0, &b).unwrap();
    });
    assert!(p[0].contains("version"), "{p:?}");
    // Length past the end of the device.
    // A free count no device of this size can have (2^64 - 1 was once let through).
    for free in [u64::MAX, 8192] {
        let p = corrupt(|d, _| patch_super(d, 9, free));
        assert!(p[0].contains("more than its"), "{free}: {p:?}");
    }
    // A free inode slot (flags 0) with one byte that is not zero.
    for off in [4, 64, 127] {
        let p = corrupt(|d, l| patch_inode_as(d, l, 5, off, &[1], false));
        assert!(p.iter().any(|x| x.contains("inode 5: a free inode that is not all zeros")), "byte {off}: {p:?}");
    }
    let p = corrupt(|d, l| patch_inode(d, l, 0, 88, &(1u64 << 40).to_le_bytes()));
    assert!(p.iter().any(|x| x.contains("outside the data area")), "{p:?}");
    // One flipped byte of an owner, of rights, of a name: the inode's checksum.
    for off in [4, 9, 20] {
        let p = corrupt(|d, l| patch_inode_as(d, l, 0, off, &[0x42], false));
        assert!(p.iter().any(|x| x.contains("inode 0: checksum")), "byte {off}: {p:?}");
    }
    let p = corrupt(|d, l| patch_inode(d, l, 0, 104, &GENERATION_LIMIT.to_le_bytes()));
    assert!(p.iter().any(|x| x.contains("out of range")), "{p:?}");
    // The largest generation there is, with a checksum that holds: named, no overflow.
    let p = corrupt(|d, l| patch_inode(d, l, 0, 104, &u64::MAX.to_le_bytes()));
    assert!(p.iter().any(|x| x.contains("out of range")), "{p:?}");
    // Same name twice, bad names.
    let p = corrupt(|d, l| patch_inode(d, l, 1, 10, &[3, 0, 0, 0, 0, 0, b'o', b'n', b'e']));
    assert!(!p.is_empty());
    let p = corrupt(|d, l| patch_inode(d, l, 0, 16, &[0xff]));
    assert!(p.iter().any(|x| x.contains("UTF-8")), "{p:?}");
}

#[test]
fn stale_derived_metadata_is_an_interrupted_update_the_mount_finishes() {
    let p = interrupted(|d, _| patch_super(d, 9, 1234));
    assert!(p.iter().any(|x| x.contains("free blocks")), "{p:?}");
    let p = interrupted(|d, _| patch_super(d, 10, 1));
    assert!(p.iter().any(|x| x.contains("generation")), "{p:?}");
    let p = interrupted(|d, l| {
        let mut b = [0u8; BLOCK];
        d.read(l.bitmap_start, &mut b).unwrap();
        b[0] = 0;
        d.write(l.bitmap_start, &b).unwrap();
    });
    assert!(p.iter().any(|x| x.contains("free in the bitmap")), "{p:?}");
}

/// Blocks used in the bitmap that no segment holds: no interrupted update leaves
/// them (a delete frees its blocks in the bitmap before the inode goes), so they are
/// damage — a zeroed inode-table block looks just like that — and the mount refuses
/// rather than free the segments it cannot see. Repair frees them, saying so.
#[test]
fn blocks_no_segment_holds_are_damage_not_an_interrupted_update() {
    let zero_inodes = |d: &mut MemDev, l: &Layout| d.write(l.inode_start, &[0u8; BLOCK]).unwrap();
    let p = corrupt(zero_inodes);
    assert!(p.iter().any(|x| x.contains("belong to no segment")), "{p:?}");
    let c = repaired(zero_inodes, &[]);
    assert!(c.iter().any(|x| x.contains("belong to no segment") && x.contains("freed")), "{c:?}");
    let p = corrupt(|d, l| {
        let mut b = [0u8; BLOCK];
        d.read(l.bitmap_start, &mut b).unwrap();
        b[200] = 0xff;
        d.write(l.bitmap_start, &b).unwrap();
    });
    assert!(p.iter().any(|x| x.contains("belong to no segment")), "{p:?}");
}

#[test]
fn a_generation_of_u64_max_is_refused_by_fsck_and_repair_without_a_panic() {
    let forged = |d: &mut MemDev, l: &Layout| patch_inode(d, l, 1, 104, &u64::MAX.to_le_bytes());
    let e = Volume::examine(&mut damaged(forged));
    assert!(e.problems.iter().any(|x| x.contains("inode 1: generation") && x.contains("out of range")), "{e:?}");
    let c = repaired(forged, &["one"]);
    assert!(c.iter().any(|x| x.contains("out of range") && x.contains("removed")), "{c:?}");
}

/// Repair: the damage goes, the rest stays, and the device then mounts clean.
#[track_caller]
fn repaired(f: impl FnOnce(&mut MemDev, &Layout), left: &[&str]) -> Vec<String> {
    let mut d = damaged(f);
    let (_, changes) = Volume::repair(&mut d).unwrap();
    assert!(!changes.is_empty());
    assert_eq!(Volume::examine(&mut d), Examination::default(), "after {changes:?}");
    let v = Volume::mount(&mut d).unwrap();
    let mut names: Vec<&str> = v.list().map(|i| i.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, left, "after {changes:?}");
    changes
}

#[test]
fn repair_removes_what_cannot_be_trusted_and_keeps_the_rest() {
    let c = repaired(|d, l| patch_inode_as(d, l, 0, 4, &[0x42], false), &["two"]);
    assert!(c.iter().any(|x| x.contains("checksum") && x.contains("removed")), "{c:?}");
    let c = repaired(|d, l| patch_inode(d, l, 1, 80, &l.data_start.to_le_bytes()), &["one"]);
    assert!(c.iter().any(|x| x.contains("another segment") && x.contains("removed")), "{c:?}");
    let c = repaired(|d, l| patch_inode(d, l, 0, 112, &101u64.to_le_bytes()), &["one", "two"]);
    assert!(c.iter().any(|x| x.contains("cut")), "{c:?}");
    let c = repaired(|d, _| d.0[20] ^= 1, &["one", "two"]);
    assert!(c.iter().any(|x| x.contains("superblock") && x.contains("rewritten")), "{c:?}");
    let c = repaired(|d, _| patch_super(d, 9, 7), &["one", "two"]);
    assert!(c.iter().any(|x| x.contains("free blocks")), "{c:?}");
    let c = repaired(|d, _| patch_super(d, 9, u64::MAX), &["one", "two"]);
    assert!(c.iter().any(|x| x.contains("more than its") && x.contains("rewritten")), "{c:?}");
    let c = repaired(|d, l| patch_inode_as(d, l, 5, 64, &[1], false), &["one", "two"]);
    assert!(c.iter().any(|x| x.contains("not all zeros") && x.contains("removed")), "{c:?}");
    // Not a BAIO device: nothing to repair, nothing written.
    let mut d = damaged(|d, _| d.0[0] = b'X');
    let before = d.0.clone();
    assert!(Volume::repair(&mut d).is_err());
    assert!(d.0 == before);
    // A sound device: no change, no write.
    let mut d = damaged(|_, _| {});
    let before = d.0.clone();
    assert_eq!(Volume::repair(&mut d).unwrap().1, Vec::<String>::new());
    assert!(d.0 == before);
}

/// The segment table as (name, owner, start, length, written), sorted.
fn table(v: &Volume) -> Vec<(String, u32, u64, u64, u64)> {
    let mut t: Vec<_> = v.list().map(|i| (i.name.clone(), i.owner, i.start, i.length, i.written)).collect();
    t.sort();
    t
}

#[test]
fn a_power_cut_at_any_write_of_any_update_leaves_the_old_or_the_new_table() {
    // A history of updates, each acknowledged when it returns, on a disk that
    // caches writes: creates, deletes, a create in a freed hole, written-mark moves.
    // Every state a cut may leave (any subset of the writes since the last flush)
    // must mount (finishing what the cut interrupted), hold the table of every
    // update acknowledged by then (the block service answers only after `sync`) and
    // of none not yet begun, and then check clean.
    type Step = alloc::boxed::Box<dyn Fn(&mut Volume, &mut crash::Recorder) -> Result<(), Error>>;
    let steps: Vec<(&str, Step)> = vec![
        (
            "create a",
            alloc::boxed::Box::new(|v, d| v.create("a", 1, 3, 1, 300, u64::MAX, 1).map(|_| ()).and_then(|_| v.sync(d))),
        ),
        (
            "create b",
            alloc::boxed::Box::new(|v, d| {
                v.create("b", 2, 3, 0, 5000, u64::MAX, 2).map(|_| ()).and_then(|_| v.sync(d))
            }),
        ),
        ("mark a", alloc::boxed::Box::new(|v, d| v.extend_written(d, "a", 3, 16).map(|_| ()))),
        ("delete a", alloc::boxed::Box::new(|v, d| v.delete("a").map(|_| ()).and_then(|_| v.sync(d)))),
        (
            "create c in a's hole",
            alloc::boxed::Box::new(|v, d| v.create("c", 3, 3, 0, 200, u64::MAX, 3).map(|_| ()).and_then(|_| v.sync(d))),
        ),
        ("delete b", alloc::boxed::Box::new(|v, d| v.delete("b").map(|_| ()).and_then(|_| v.sync(d)))),
        (
            "create d over b's blocks and more",
            alloc::boxed::Box::new(|v, d| {
                v.create("d", 4, 3, 0, 6000, u64::MAX, 4).map(|_| ()).and_then(|_| v.sync(d))
            }),
        ),
        (
            "delete c and d at once",
            alloc::boxed::Box::new(|v, d| {
                v.delete("c").and_then(|_| v.delete("d")).map(|_| ()).and_then(|_| v.sync(d))
            }),
        ),
    ];
    let mut base = dev(40000);
    Volume::format(&mut base).unwrap();
    let mut r = crash::Recorder::new(base.0.clone());
    let mut v = Volume::mount(&mut r).unwrap();
    let mut tables = vec![table(&v)];
    for (what, step) in &steps {
        step(&mut v, &mut r).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        r.ack();
        tables.push(table(&v));
        assert_ne!(tables[tables.len() - 2], tables[tables.len() - 1], "{what} changes the table");
    }
    let mut cuts = 0;
    crash::crashes(&base.0, &r.events, 11, |mut c| {
        let m = Volume::mount(&mut c.dev).unwrap_or_else(|e| panic!("{c:?}: no mount: {e:?}"));
        let t = table(&m);
        let last = (c.acked + 1).min(steps.len());
        let k = (c.acked..=last).find(|k| tables[*k] == t).unwrap_or_else(|| {
            panic!("{c:?}: the table {t:?} is none of the states after {} to {last} updates", c.acked)
        });
        assert_eq!(Volume::examine(&mut c.dev), Examination::default(), "{c:?}: {k} updates, then a mount");
        cuts += 1;
    });
    assert!(cuts >= steps.len() * 3, "{cuts} cuts");
}

#[test]
fn the_allocator_against_a_model() {
    // Random creates and deletes; the model is a map of used blocks. A create must
    // take free blocks only, and may say NoSpace only when no run of that length
    // is free; free counts agree; a remount sees the same table.
    // 200,000 blocks (200 inodes); only the metadata is stored.
    let total = 200_000;
    let meta = Layout::for_blocks(total).unwrap().data_start as usize * BLOCK;
    let mut d = MetaDev { meta: vec![0u8; meta], blocks: total };
    let mut v = Volume::format(&mut d).unwrap();
    let n = v.layout.data_blocks as usize;
    let mut used = vec![false; n];
    let mut live: Vec<(String, u64, u64)> = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..3000 {
        if live.len() >= v.layout.inode_count as usize || (!live.is_empty() && next() % 3 == 0) {
            let (name, start, len) = live.swap_remove((next() % live.len() as u64) as usize);
            v.delete(&name).unwrap();
            for b in start..start + len {
                used[(b - v.layout.data_start) as usize] = false;
            }
            continue;
        }
        let len = 1 + next() % 4000;
        let name = format!("s{i}");
        match v.create(&name, 1, 3, 0, len, u64::MAX, 0) {
            Ok(ino) => {
                let (start, l) = (ino.start, ino.length);
                assert_eq!(l, len);
                for b in start..start + len {
                    let k = (b - v.layout.data_start) as usize;
                    assert!(!used[k], "create {i}: block {b} was in use");
                    used[k] = true;
                }
                live.push((name, start, len));
            }
            Err(Error::NoSpace) => {
                let fits = used.windows(len as usize).any(|w| w.iter().all(|u| !u));
                assert!(!fits, "create {i}: NoSpace, but {len} free blocks in a row exist");
            }
            Err(e) => panic!("create {i}: {e:?}"),
        }
        assert_eq!(v.free_blocks(), used.iter().filter(|u| !**u).count() as u64);
    }
    v.sync(&mut d).unwrap();
    let w = Volume::mount(&mut d).unwrap();
    assert_eq!(table(&w), table(&v));
    assert_eq!(w.free_blocks(), v.free_blocks());
}

#[test]
fn every_single_byte_change_of_an_inode_is_caught() {
    let mut d = dev(4096);
    let mut v = Volume::format(&mut d).unwrap();
    v.create("victim", 7, READ | WRITE, READ, 100, u64::MAX, 42).unwrap();
    v.sync(&mut d).unwrap();
    let l = v.layout;
    let mut b = [0u8; BLOCK];
    d.read(l.inode_start, &mut b).unwrap();
    for off in 0..INODE_SIZE {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut c = b;
            c[off] ^= flip;
            let r = decode_inode(&c[..INODE_SIZE]);
            assert!(r.is_err() || (off < 4 && r == Ok(None)), "byte {off} ^ {flip:#x} went unseen: {r:?}");
        }
    }
}

/// A device that stores only its metadata blocks (data blocks read as zeros).
struct MetaDev {
    meta: Vec<u8>,
    blocks: u64,
}

impl BlockDev for MetaDev {
    fn blocks(&self) -> u64 {
        self.blocks
    }
    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK]) -> Result<(), Error> {
        let at = block as usize * BLOCK;
        match self.meta.get(at..at + BLOCK) {
            Some(b) => buf.copy_from_slice(b),
            None if block < self.blocks => buf.fill(0),
            None => return Err(Error::Io),
        }
        Ok(())
    }
    fn write(&mut self, block: u64, buf: &[u8; BLOCK]) -> Result<(), Error> {
        let at = block as usize * BLOCK;
        if let Some(b) = self.meta.get_mut(at..at + BLOCK) {
            b.copy_from_slice(buf);
        }
        Ok(())
    }
}

#[test]
fn fuzzed_images_never_panic() {
    let mut d = dev(8192);
    let mut v = Volume::format(&mut d).unwrap();
    for k in 0..5 {
        v.create(&format!("seg{k}"), k, 3, 1, 50 + k as u64 * 10, u64::MAX, 0).unwrap();
    }
    v.sync(&mut d).unwrap();
    let l = v.layout;
    let meta_end = l.data_start as usize * BLOCK;
    let meta = d.0[..meta_end].to_vec();
    let mut s = 0x5eed_u64;
    let mut repaired = 0;
    for _ in 0..3000 {
        let mut m = MetaDev { meta: meta.clone(), blocks: l.total_blocks };
        for _ in 0..4 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let at = (s % meta_end as u64) as usize;
            m.meta[at] = (s >> 40) as u8;
        }
        let _ = Volume::check(&mut m);
        let _ = Volume::mount(&mut m);
        // Whatever repair keeps must then be a sound device.
        if Volume::repair(&mut m).is_ok() {
            let e = Volume::examine(&mut m);
            assert_eq!(e, Examination::default(), "a repaired device is clean");
            repaired += 1;
        }
    }
    assert!(repaired > 1000, "{repaired} of 3000 damaged images repaired");
}
