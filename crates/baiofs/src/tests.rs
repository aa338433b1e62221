use super::*;
use alloc::vec;
use baio::checksum;
use baio::crash::Recorder;
use baio::MemDev;

fn fresh(blocks: usize) -> Fs<MemDev> {
    Fs::format(MemDev(vec![0u8; blocks * BLOCK])).unwrap()
}

fn remount(fs: Fs<MemDev>) -> Fs<MemDev> {
    Fs::mount(fs.dev).unwrap()
}

#[test]
fn files_and_directories_survive_a_remount() {
    let mut fs = fresh(512);
    fs.create("/docs", Kind::Dir).unwrap();
    fs.create("/docs/a.txt", Kind::File).unwrap();
    let text: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(fs.write("/docs/a.txt", 0, &text), Ok(text.len()));
    fs.create("/b", Kind::File).unwrap();
    fs.write("/b", 5000, b"tail").unwrap();
    let mut fs = remount(fs);
    assert!(fs.check().is_empty());
    let mut buf = vec![0u8; 20_000];
    assert_eq!(fs.read("/docs/a.txt", 0, &mut buf), Ok(10_000));
    assert_eq!(&buf[..10_000], &text[..]);
    assert_eq!(
        fs.read("docs/a.txt", 9_990, &mut buf),
        Ok(10),
        "relative paths start at the root; reads stop at the end"
    );
    assert_eq!(fs.stat("/b"), Ok((Kind::File, 5004)));
    assert_eq!(fs.read("/b", 0, &mut buf[..5004]), Ok(5004));
    assert!(buf[..5000].iter().all(|b| *b == 0), "a hole reads as zeros");
    let names: Vec<String> = fs.list("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["docs", "b"]);
    assert_eq!(
        fs.list("/docs").unwrap()[0],
        Entry { name: "a.txt".into(), kind: Kind::File, size: 10_000, ino: fs.lookup("/docs/a.txt").unwrap() }
    );
}

#[test]
fn truncation_frees_the_blocks_past_the_size_and_zeros_the_tail() {
    let mut fs = fresh(512);
    fs.create("/t", Kind::File).unwrap();
    let free0 = fs.free_blocks();
    let text: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8 + 1).collect();
    fs.write("/t", 0, &text).unwrap();
    let ino = fs.lookup("/t").unwrap();
    assert_eq!(fs.free_blocks(), free0 - 5);
    fs.truncate_ino(ino, 5000).unwrap();
    assert_eq!(fs.stat("/t"), Ok((Kind::File, 5000)));
    assert_eq!(fs.free_blocks(), free0 - 2, "the blocks past the size are free");
    // Growing again: what was cut off reads as zeros, never as the old bytes.
    fs.write("/t", 9000, b"x").unwrap();
    let mut buf = vec![0u8; 9001];
    assert_eq!(fs.read("/t", 0, &mut buf), Ok(9001));
    assert_eq!(&buf[..5000], &text[..5000]);
    assert!(buf[5000..9000].iter().all(|&b| b == 0));
    fs.truncate_ino(ino, 12_000).unwrap();
    assert_eq!(fs.stat("/t"), Ok((Kind::File, 12_000)));
    fs.truncate_ino(ino, 0).unwrap();
    assert_eq!(fs.free_blocks(), free0);
    let mut fs = remount(fs);
    assert!(fs.check().is_empty());
    assert_eq!(fs.stat("/t"), Ok((Kind::File, 0)));
    let root = fs.lookup("/").unwrap();
    assert_eq!(fs.truncate_ino(root, 0), Err(Error::IsDir));
}

/// Blocks a file holds past its size (a growth whose data was written but whose size
/// never was: a failed write, a cut) never show their bytes: lengthening by `TRUNCATE`
/// and a write past the end over a gap read zeros there.
#[test]
fn bytes_held_past_the_size_never_show() {
    let mut fs = fresh(256);
    fs.create("/f", Kind::File).unwrap();
    let ino = fs.lookup("/f").unwrap();
    for lengthen in [true, false] {
        fs.write("/f", 0, &[0xab; 3 * BLOCK]).unwrap();
        // The size a failed write left: its blocks held, their bytes never exposed.
        fs.inodes[ino as usize].size = 100;
        fs.write_inode(ino).unwrap();
        let end = if lengthen {
            fs.truncate_ino(ino, 3 * BLOCK as u64).unwrap();
            3 * BLOCK
        } else {
            fs.write("/f", 2 * BLOCK as u64 + 5, b"x").unwrap();
            2 * BLOCK + 6
        };
        let mut b = vec![0u8; end];
        assert_eq!(fs.read("/f", 0, &mut b), Ok(end));
        assert!(b[..100].iter().all(|&x| x == 0xab));
        let shown = b[100..end - 1].iter().filter(|&&x| x != 0).count();
        assert_eq!(shown, 0, "lengthen {lengthen}: {shown} bytes past the old size show");
        fs.truncate_ino(ino, 0).unwrap();
    }
    assert!(remount(fs).check().is_empty());
}

#[test]
fn errors() {
    let mut fs = fresh(256);
    fs.create("/d", Kind::Dir).unwrap();
    fs.create("/d/f", Kind::File).unwrap();
    assert_eq!(fs.create("/d/f", Kind::File), Err(Error::Exists));
    assert_eq!(fs.create("/nope/f", Kind::File), Err(Error::NotFound));
    assert_eq!(fs.create("/d/f/g", Kind::File), Err(Error::NotDir));
    assert_eq!(fs.create("/..", Kind::File), Err(Error::BadName));
    assert_eq!(fs.create(&alloc::format!("/{}", "x".repeat(57)), Kind::File), Err(Error::BadName));
    assert_eq!(fs.remove("/d"), Err(Error::NotEmpty));
    assert_eq!(fs.read("/d", 0, &mut [0u8; 4]), Err(Error::IsDir));
    assert_eq!(fs.list("/d/f"), Err(Error::NotDir));
    assert_eq!(fs.remove("/"), Err(Error::BadName));
    let free = fs.free_blocks();
    assert_eq!(fs.write("/d/f", 0, &vec![1u8; 300 * BLOCK]), Err(Error::NoSpace));
    fs.remove("/d/f").unwrap();
    assert_eq!(fs.free_blocks(), free, "a failed write and a remove give every block back");
    fs.remove("/d").unwrap();
    assert!(fs.check().is_empty());
}

#[test]
fn files_are_contiguous_until_they_cannot_be() {
    let mut fs = fresh(1024);
    fs.create("/a", Kind::File).unwrap();
    fs.create("/b", Kind::File).unwrap();
    fs.write("/a", 0, &vec![1u8; 8 * BLOCK]).unwrap();
    fs.write("/b", 0, &vec![2u8; 8 * BLOCK]).unwrap();
    // Growing /a cannot extend in place (b follows): a second extent.
    fs.write("/a", 8 * BLOCK as u64, &vec![3u8; 8 * BLOCK]).unwrap();
    let a = fs.lookup("/a").unwrap();
    assert_eq!(fs.inodes[a as usize].ext.iter().filter(|e| e.1 > 0).count(), 2);
    assert_eq!(fs.inodes[a as usize].ext[0].1, 8);
    // A file of many small appends separated by others runs out of extents: it moves
    // to one run, whole, and its old blocks are free again.
    fs.create("/c", Kind::File).unwrap();
    for i in 0..10u64 {
        let name = alloc::format!("/sep{i}");
        fs.create(&name, Kind::File).unwrap();
        fs.write("/c", i * BLOCK as u64, &[i as u8 + 1; BLOCK]).unwrap();
        fs.write(&name, 0, &[0u8; BLOCK]).unwrap();
    }
    let c = fs.lookup("/c").unwrap();
    assert!(fs.inodes[c as usize].ext.iter().filter(|e| e.1 > 0).count() <= EXTENTS);
    let mut fs = remount(fs);
    assert!(fs.check().is_empty());
    let mut buf = vec![0u8; 10 * BLOCK];
    assert_eq!(fs.read("/c", 0, &mut buf), Ok(10 * BLOCK));
    for i in 0..10 {
        assert!(buf[i * BLOCK..(i + 1) * BLOCK].iter().all(|&b| b == i as u8 + 1), "block {i}");
    }
    // With no free run long enough to move to, the growth is refused.
    let free = fs.free_blocks();
    fs.create("/big", Kind::File).unwrap();
    let _ = fs.write("/big", 0, &vec![7u8; (free as usize - 4) * BLOCK]);
    let mut r = Ok(0);
    for i in 10..40u64 {
        let name = alloc::format!("/late{i}");
        if fs.create(&name, Kind::File).is_err() || fs.write(&name, 0, &[0u8; BLOCK]).is_err() {
            break;
        }
        r = fs.write("/c", i * BLOCK as u64, &[1u8; BLOCK]);
        if r.is_err() {
            break;
        }
    }
    assert!(matches!(r, Err(Error::TooFragmented | Error::NoSpace)), "{r:?}");
    assert!(remount(fs).check().is_empty());
}

#[test]
fn extents_name_exactly_the_blocks_that_hold_a_file() {
    let mut fs = fresh(1024);
    fs.create("/a", Kind::File).unwrap();
    fs.create("/b", Kind::File).unwrap();
    fs.write("/a", 0, &vec![1u8; 3 * BLOCK]).unwrap();
    fs.write("/b", 0, &vec![2u8; BLOCK]).unwrap();
    fs.write("/a", 3 * BLOCK as u64, &vec![3u8; BLOCK + 10]).unwrap();
    let a = fs.lookup("/a").unwrap();
    let (size, runs) = fs.extents_of(a).unwrap();
    assert_eq!(size, 4 * BLOCK as u64 + 10);
    assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 5, "only the blocks the size covers");
    assert_eq!(runs.len(), 2, "b sits between a's two runs");
    // Reading the runs straight from the device gives the file's bytes.
    let mut got = Vec::new();
    for (first, n) in &runs {
        for b in *first..first + n {
            got.extend_from_slice(&fs.dev.0[b as usize * BLOCK..(b as usize + 1) * BLOCK]);
        }
    }
    let mut want = vec![0u8; size as usize];
    fs.read("/a", 0, &mut want).unwrap();
    assert_eq!(&got[..size as usize], &want[..]);
    fs.create("/empty", Kind::File).unwrap();
    let e = fs.lookup("/empty").unwrap();
    assert_eq!(fs.extents_of(e), Ok((0, vec![])));
    assert_eq!(fs.extents_of(ROOT), Err(Error::IsDir));
    assert_eq!(fs.extents_of(999), Err(Error::NotFound));
}

/// A device that counts what reaches it and records prefetch hints.
struct Counting {
    inner: MemDev,
    reads: u64,
    direct: u64,
    hints: Vec<(u64, u64)>,
}

impl BlockDev for Counting {
    fn blocks(&self) -> u64 {
        self.inner.blocks()
    }
    fn read(&mut self, b: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        self.reads += 1;
        self.inner.read(b, buf)
    }
    fn write(&mut self, b: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        self.inner.write(b, buf)
    }
}

impl Dev for Counting {
    fn prefetch(&mut self, first: u64, n: u64) {
        self.hints.push((first, n));
    }
    fn read_direct(&mut self, b: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        self.direct += 1;
        self.inner.read(b, buf)
    }
}

#[test]
fn the_application_controls_caching_and_prefetching() {
    let mut fs = fresh(1024);
    for f in ["/hot", "/stream", "/cold"] {
        fs.create(f, Kind::File).unwrap();
        fs.write(f, 0, &vec![7u8; 16 * BLOCK]).unwrap();
    }
    let mut fs = Fs::mount(Counting { inner: fs.dev, reads: 0, direct: 0, hints: Vec::new() }).unwrap();
    fs.set_cache_blocks(24);
    fs.set_policy("/hot", Policy::Keep).unwrap();
    fs.set_policy("/stream", Policy::NoCache).unwrap();
    let mut buf = vec![0u8; 16 * BLOCK];
    fs.read("/hot", 0, &mut buf).unwrap();
    let base = fs.dev.reads;
    // Reading the other files twice must not push /hot out.
    for _ in 0..2 {
        fs.read("/cold", 0, &mut buf).unwrap();
        fs.read("/stream", 0, &mut buf).unwrap();
    }
    assert_eq!(fs.dev.direct, 32, "NoCache reads go around the cache, every time");
    let before = fs.dev.reads;
    fs.read("/hot", 0, &mut buf).unwrap();
    assert_eq!(fs.dev.reads, before, "kept blocks stay cached");
    assert!(fs.dev.reads > base, "cold blocks came from the device");
    assert!(fs.cache_stats().resident <= 24 + 1, "the cache holds what the application allowed");
    // Prefetch hints name the file's runs that are not cached.
    fs.prefetch("/cold", 0, 16 * BLOCK as u64).unwrap();
    fs.prefetch("/hot", 0, 16 * BLOCK as u64).unwrap();
    let cold = fs.lookup("/cold").unwrap();
    let first = fs.inodes[cold as usize].ext[0].0 as u64;
    assert!(!fs.dev.hints.is_empty() && fs.dev.hints.iter().all(|(f, n)| *f >= first && f + n <= first + 16));
}

#[test]
fn corrupt_images_are_refused_with_a_reason() {
    let mut fs = fresh(256);
    fs.create("/f", Kind::File).unwrap();
    fs.write("/f", 0, &[1u8; 3 * BLOCK]).unwrap();
    let good = fs.dev.0.clone();
    let geo = fs.geo;
    let ino = fs.lookup("/f").unwrap() as usize;
    let inode_at = (geo.itable_start as usize) * BLOCK + ino * INODE_SIZE;
    type Corrupt = alloc::boxed::Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Corrupt)> = vec![
        ("magic", alloc::boxed::Box::new(|d: &mut Vec<u8>| d[0] ^= 1)),
        ("checksum", alloc::boxed::Box::new(|d: &mut Vec<u8>| d[20] ^= 1)),
        (
            "outside",
            alloc::boxed::Box::new(move |d: &mut Vec<u8>| {
                d[inode_at + 16..inode_at + 20].copy_from_slice(&1000u32.to_le_bytes())
            }),
        ),
        (
            "size",
            alloc::boxed::Box::new(move |d: &mut Vec<u8>| {
                d[inode_at + 8..inode_at + 16].copy_from_slice(&(1u64 << 40).to_le_bytes())
            }),
        ),
        ("named", alloc::boxed::Box::new(move |d: &mut Vec<u8>| d[inode_at + 64] = 1)),
    ];
    for (what, f) in cases {
        let mut d = good.clone();
        f(&mut d);
        match Fs::mount(MemDev(d)) {
            Err(Error::Corrupt(why)) => assert!(!why.is_empty(), "{what}"),
            Err(e) => panic!("{what}: {e:?}"),
            Ok(_) => panic!("{what}: mounted a corrupt image"),
        }
    }
    assert!(Fs::mount(MemDev(good)).is_ok());
}

#[test]
fn fuzzed_images_never_panic() {
    let mut fs = fresh(128);
    fs.create("/d", Kind::Dir).unwrap();
    fs.create("/d/f", Kind::File).unwrap();
    fs.write("/d/f", 0, &[5u8; 2 * BLOCK]).unwrap();
    let good = fs.dev.0.clone();
    let meta = (fs.geo.data_start as usize + 4) * BLOCK;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..2000 {
        let mut d = good.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % meta;
            d[at] = (x >> 40) as u8;
        }
        if let Ok(mut fs) = Fs::mount(MemDev(d)) {
            // Whatever mounted must be usable without panics.
            let _ = fs.list("/d");
            let mut b = [0u8; 64];
            let _ = fs.read("/d/f", 0, &mut b);
            let _ = fs.create("/d/g", Kind::File).and_then(|_| fs.write("/d/g", 0, b"x"));
        }
    }
}

#[test]
fn no_data_blocks_is_no_space_not_a_panic() {
    // A hand-made image whose metadata fills the segment: mount accepts it (it is
    // consistent), and the first allocation must say NoSpace, not divide by zero.
    let blocks = (1..64).find(|b| Geometry::new(*b).data_start == *b).expect("a size with no data blocks");
    let geo = Geometry::new(blocks);
    let mut fs = Fs::new(MemDev(vec![0u8; blocks as usize * BLOCK]), geo);
    for b in 0..blocks {
        fs.set_bit(b, true);
    }
    fs.inodes[ROOT as usize].kind = Kind::Dir as u16;
    fs.write_super().unwrap();
    fs.write_bitmap_all().unwrap();
    fs.write_inode(ROOT).unwrap();
    let mut fs = Fs::mount(fs.dev).expect("consistent, so it mounts");
    assert_eq!(fs.find_run(1), None);
    assert_eq!(fs.create("/x", Kind::File).map(|_| ()), Err(Error::NoSpace));
    assert_eq!(fs.create("/d", Kind::Dir).map(|_| ()), Err(Error::NoSpace));
    assert!(fs.list("/").unwrap().is_empty());
}

/// The tree's metadata: (path, kind, size), sorted.
fn tree<D: Dev>(fs: &mut Fs<D>) -> Vec<(String, Kind, u64)> {
    let mut out = Vec::new();
    let mut dirs = vec![String::new()];
    while let Some(d) = dirs.pop() {
        for e in fs.list(if d.is_empty() { "/" } else { &d }).unwrap() {
            let p = alloc::format!("{d}/{}", e.name);
            if e.kind == Kind::Dir {
                dirs.push(p.clone());
            }
            out.push((p, e.kind, e.size));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A history of updates on a disk that caches writes, each acknowledged when it
/// returns. Every state a power cut may leave (any subset of the writes since the last
/// flush, `baio::crash`) must mount and check clean once mounted, and hold every update
/// acknowledged before the last completed flush, and any subset of the later ones that
/// had begun, each whole or not at all (updates between two flushes may reach the disk
/// in any order). A file no update since the last flush touched holds exactly its
/// bytes; one such an update wrote has a size it had meanwhile and holds only its own
/// bytes or zeros (a write not yet flushed may be there in part, but never another
/// file's old bytes).
#[test]
fn a_power_cut_at_any_moment_of_any_update_leaves_a_tree_with_every_durable_update() {
    type Step = alloc::boxed::Box<dyn Fn(&mut Fs<Recorder>) -> Result<(), Error>>;
    let mut steps: Vec<(String, Step)> = vec![
        ("mkdir /d".into(), alloc::boxed::Box::new(|fs| fs.create("/d", Kind::Dir).map(|_| ()))),
        ("create /d/f".into(), alloc::boxed::Box::new(|fs| fs.create("/d/f", Kind::File).map(|_| ()))),
        (
            "write 5 blocks to /d/f".into(),
            alloc::boxed::Box::new(|fs| fs.write("/d/f", 0, &[7u8; 5 * BLOCK]).map(|_| ())),
        ),
        ("create /g".into(), alloc::boxed::Box::new(|fs| fs.create("/g", Kind::File).map(|_| ()))),
        ("write a block to /g".into(), alloc::boxed::Box::new(|fs| fs.write("/g", 0, &[1u8; BLOCK]).map(|_| ()))),
        (
            "grow /d/f past /g (a second extent)".into(),
            alloc::boxed::Box::new(|fs| fs.write("/d/f", 5 * BLOCK as u64, &[8u8; 3 * BLOCK]).map(|_| ())),
        ),
        ("sync".into(), alloc::boxed::Box::new(|fs| fs.sync())),
    ];
    // Enough entries in /d that the directory grows a second block.
    for i in 0..66 {
        steps.push((
            alloc::format!("create /d/e{i}"),
            alloc::boxed::Box::new(move |fs| fs.create(&alloc::format!("/d/e{i}"), Kind::File).map(|_| ())),
        ));
    }
    steps.push(("create /big".into(), alloc::boxed::Box::new(|fs| fs.create("/big", Kind::File).map(|_| ()))));
    steps.push((
        "fill the disk but 2 blocks".into(),
        alloc::boxed::Box::new(|fs| {
            let n = fs.free_blocks() as usize - 2;
            fs.write("/big", 0, &vec![5u8; n * BLOCK]).map(|_| ())
        }),
    ));
    steps.push(("remove /d/f".into(), alloc::boxed::Box::new(|fs| fs.remove("/d/f"))));
    steps.push(("remove /d/e3".into(), alloc::boxed::Box::new(|fs| fs.remove("/d/e3"))));
    steps.push((
        "create /d/e3 again (a reused entry)".into(),
        alloc::boxed::Box::new(|fs| fs.create("/d/e3", Kind::Dir).map(|_| ())),
    ));
    steps.push(("create /h".into(), alloc::boxed::Box::new(|fs| fs.create("/h", Kind::File).map(|_| ()))));
    steps.push((
        "write 4 blocks to /h, over /d/f's old blocks".into(),
        alloc::boxed::Box::new(|fs| fs.write("/h", 0, &[9u8; 4 * BLOCK]).map(|_| ())),
    ));
    steps.push((
        "append to /h".into(),
        alloc::boxed::Box::new(|fs| fs.write("/h", 4 * BLOCK as u64 + 100, &[10u8; 300]).map(|_| ())),
    ));
    steps.push(("remove /g".into(), alloc::boxed::Box::new(|fs| fs.remove("/g"))));
    steps.push(("mkdir /g".into(), alloc::boxed::Box::new(|fs| fs.create("/g", Kind::Dir).map(|_| ()))));
    let base = fresh(512).dev.0;
    let mut fs = Fs::mount(Recorder::new(base.clone())).unwrap();
    let mut trees = vec![contents(&mut fs)];
    let mut f_blocks = Vec::new();
    for (what, step) in &steps {
        if what.starts_with("remove /d/f") {
            let ino = fs.lookup("/d/f").unwrap();
            f_blocks = fs.extents_of(ino).unwrap().1;
        }
        step(&mut fs).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        fs.dev.ack();
        trees.push(contents(&mut fs));
    }
    let hi = fs.lookup("/h").unwrap();
    let h = fs.extents_of(hi).unwrap().1;
    assert!(
        h.iter().any(|(s, n)| f_blocks.iter().any(|(t, m)| s < &(t + m) && t < &(s + n))),
        "/h {h:?} reuses blocks of /d/f {f_blocks:?}"
    );
    let names = |t: &Contents| t.keys().cloned().collect::<alloc::collections::BTreeSet<_>>();
    let mut cuts = 0;
    baio::crash::crashes(&base, &fs.dev.events, 3, |c| {
        let what = alloc::format!("{c:?}");
        let (durable, acked) = (c.durable, c.acked);
        let mut m = Fs::mount(c.dev).unwrap_or_else(|e| panic!("{what}: no mount: {e:?}"));
        let t = contents(&mut m);
        let last = (acked + 1).min(steps.len());
        let window = &trees[durable..=last];
        // The names after the durable updates and some of the later ones, each whole.
        let later = last - durable;
        assert!(later <= 12, "{what}: {later} updates since the last flush");
        let fits = (0u32..1 << later).any(|mask| {
            let mut n = names(&trees[durable]);
            for j in (0..later).filter(|j| mask & (1 << j) != 0) {
                let (before, after) = (names(&trees[durable + j]), names(&trees[durable + j + 1]));
                n.retain(|x| after.contains(x) || !before.contains(x));
                n.extend(after.difference(&before).cloned());
            }
            n == names(&t)
        });
        assert!(fits, "{what}: the names are not those after the {durable} durable updates and some of the next up to {last}; against the last, missing {:?}, more {:?}", names(&trees[last]).difference(&names(&t)).collect::<Vec<_>>(), names(&t).difference(&names(&trees[last])).collect::<Vec<_>>());
        for (p, (size, sum, bytes)) in &t {
            let had: Vec<_> = window.iter().filter_map(|w| w.get(p)).collect();
            if had.len() == window.len() && had.iter().all(|h| h == &had[0]) {
                assert_eq!(
                    (size, sum),
                    (&had[0].0, &had[0].1),
                    "{what}: {p:?}, untouched since the last flush, changed"
                );
            } else {
                assert!(had.iter().any(|h| h.0 == *size), "{what}: {p:?} has size {size}, none it had");
                let own: Vec<u8> = had.iter().flat_map(|h| h.2.iter().copied()).collect();
                assert!(
                    bytes.iter().all(|b| *b == 0 || own.contains(b)),
                    "{what}: {p:?} holds bytes {bytes:?}, not its own {own:?}"
                );
            }
        }
        assert_eq!(m.check(), Vec::<String>::new(), "{what}: after a mount");
        cuts += 1;
    });
    assert!(cuts > steps.len() * 4, "{cuts} cuts");
}

/// Ordered data: a file that grows by appends — within its last block, across blocks, by
/// new extents — on a disk that caches writes and tears a block's write at 512 bytes.
/// After a cut anywhere the file is exactly one of its versions (every append
/// acknowledged before the last flush, and maybe the ones after), never a later size
/// over zeros nor a torn mix.
#[test]
fn a_power_cut_leaves_a_growing_file_as_one_of_its_versions() {
    let mut fs = fresh(128);
    fs.create("/f", Kind::File).unwrap();
    fs.create("/g", Kind::File).unwrap();
    fs.write("/g", 0, &[9u8; 2 * BLOCK]).unwrap();
    let base = fs.dev.0.clone();
    let mut fs = Fs::mount(Recorder::new(base.clone())).unwrap();
    let appends: [(u8, usize); 6] = [(1, 100), (2, 3000), (3, 2 * BLOCK + 10), (4, 50), (5, BLOCK), (6, BLOCK - 1100)];
    let mut versions = vec![Vec::new()];
    for (i, (v, n)) in appends.iter().enumerate() {
        let at = versions[i].len() as u64;
        fs.write("/f", at, &vec![*v; *n]).unwrap();
        if i == 2 {
            // /g grows past /f's blocks, so /f's next growth takes a new extent.
            fs.write("/g", 2 * BLOCK as u64, &[9u8; BLOCK]).unwrap();
        }
        fs.dev.ack();
        let mut next = versions[i].clone();
        next.extend(vec![*v; *n]);
        versions.push(next);
    }
    let ino = fs.lookup("/f").unwrap();
    assert!(fs.extents_of(ino).unwrap().1.len() > 1, "/f took a second extent");
    let mut cuts = 0;
    baio::crash::torn_crashes(&base, &fs.dev.events, 11, |c| {
        let what = alloc::format!("{c:?}");
        let (durable, acked) = (c.durable, c.acked);
        let mut m = Fs::mount(c.dev).unwrap_or_else(|e| panic!("{what}: no mount: {e:?}"));
        let f = m.lookup("/f").unwrap();
        let size = m.size_of(f).unwrap() as usize;
        let mut b = vec![0u8; size];
        assert_eq!(m.read("/f", 0, &mut b), Ok(size));
        let k = (durable..=(acked + 1).min(appends.len())).find(|k| versions[*k] == b);
        assert!(k.is_some(), "{what}: /f ({size} bytes) is none of versions {durable}..={}", acked + 1);
        assert_eq!(m.check(), Vec::<String>::new(), "{what}: after a mount");
        cuts += 1;
    });
    assert!(cuts > 100, "{cuts} cuts");
}

/// Ordered truncation and relocation: a file cut short mid-block, grown past a gap,
/// cut again, lengthened with zeros, then grown by single blocks between other files'
/// until its extents run out and it moves whole to one run — on a disk that caches
/// writes and tears a block's write at 512 bytes. After a cut anywhere the file is
/// exactly one of its versions (never an old size over a zeroed tail, never the bytes
/// of a cut-off tail back after a growth) and the filesystem checks clean.
#[test]
fn a_power_cut_during_a_truncate_or_a_move_leaves_the_file_one_of_its_versions() {
    let mut fs = fresh(256);
    fs.create("/f", Kind::File).unwrap();
    let first: Vec<u8> = (0..3 * BLOCK + 500).map(|i| (i % 251) as u8 + 1).collect();
    fs.write("/f", 0, &first).unwrap();
    let base = fs.dev.0.clone();
    let mut fs = Fs::mount(Recorder::new(base.clone())).unwrap();
    let ino = fs.lookup("/f").unwrap();
    let mut v = first[..2 * BLOCK + 100].to_vec();
    let mut versions = vec![first];
    let mut push = |fs: &mut Fs<Recorder>, v: Vec<u8>| {
        fs.dev.ack();
        versions.push(v);
    };
    // Cut short mid-block, then grown past a gap: the cut-off tail reads as zeros.
    fs.truncate_ino(ino, 2 * BLOCK as u64 + 100).unwrap();
    push(&mut fs, v.clone());
    fs.write("/f", 3 * BLOCK as u64 + 7, &[0xee; 20]).unwrap();
    v.resize(3 * BLOCK + 7, 0);
    v.extend([0xee; 20]);
    push(&mut fs, v.clone());
    fs.truncate_ino(ino, 5000).unwrap();
    v.truncate(5000);
    push(&mut fs, v.clone());
    fs.truncate_ino(ino, 3 * BLOCK as u64).unwrap();
    v.resize(3 * BLOCK, 0);
    push(&mut fs, v.clone());
    // A block at a time between other files' until it moves.
    let mut moved = false;
    for i in 0..8u8 {
        let sep = alloc::format!("/sep{i}");
        fs.create(&sep, Kind::File).unwrap();
        fs.write(&sep, 0, &[0x50 + i; BLOCK]).unwrap();
        let before = fs.extents_of(ino).unwrap().1;
        let at = v.len() as u64;
        fs.write("/f", at, &[0xa0 + i; BLOCK]).unwrap();
        v.extend([0xa0 + i; BLOCK]);
        let after = fs.extents_of(ino).unwrap().1;
        moved |= after.len() == 1 && before.len() > 1;
        push(&mut fs, v.clone());
    }
    assert!(moved, "/f moved to one run");
    let n = versions.len();
    let mut cuts = 0;
    baio::crash::torn_crashes(&base, &fs.dev.events, 13, |c| {
        let what = alloc::format!("{c:?}");
        let (durable, acked) = (c.durable, c.acked);
        let mut m = Fs::mount(c.dev).unwrap_or_else(|e| panic!("{what}: no mount: {e:?}"));
        let f = m.lookup("/f").unwrap();
        let size = m.size_of(f).unwrap() as usize;
        let mut b = vec![0u8; size];
        assert_eq!(m.read("/f", 0, &mut b), Ok(size));
        // A version from the last durable one to the one under way; the bytes
        // a later growth would expose (the last block's tail) are zeros.
        let k = (durable..=(acked + 1).min(n - 1)).find(|k| versions[*k] == b);
        assert!(k.is_some(), "{what}: /f ({size} bytes) is none of versions {durable}..={}", acked + 1);
        let grown = size.div_ceil(BLOCK) * BLOCK;
        let mut tail = vec![0u8; grown - size];
        if !tail.is_empty() {
            m.write("/f", grown as u64, &[1]).unwrap();
            assert_eq!(m.read("/f", size as u64, &mut tail), Ok(tail.len()));
            assert!(tail.iter().all(|&x| x == 0), "{what}: the tail past {size} came back: {tail:?}");
        }
        assert_eq!(m.check(), Vec::<String>::new(), "{what}: after a mount");
        cuts += 1;
    });
    assert!(cuts > 100, "{cuts} cuts");
}

/// Path, and whether a directory → (size, checksum of the bytes, the byte values found).
type Contents = alloc::collections::BTreeMap<(String, bool), (u64, u64, Vec<u8>)>;

/// The tree with each file's size and bytes. A directory's size is left out: an
/// appended entry's block may reach the disk without the entry (a free entry at the
/// end is no entry).
fn contents<D: Dev>(fs: &mut Fs<D>) -> Contents {
    tree(fs)
        .into_iter()
        .map(|(p, k, size)| {
            if k == Kind::Dir {
                return ((p, true), (0, 0, Vec::new()));
            }
            let mut b = vec![0u8; size as usize];
            let n = fs.read(&p, 0, &mut b).unwrap_or(0);
            let mut values: Vec<u8> = b[..n].to_vec();
            values.sort_unstable();
            values.dedup();
            ((p, false), (size, baio::checksum(&b[..n]), values))
        })
        .collect()
}

#[test]
fn damage_is_named_and_repair_keeps_what_can_be_trusted() {
    let mut fs = fresh(256);
    fs.create("/d", Kind::Dir).unwrap();
    fs.create("/d/keep", Kind::File).unwrap();
    fs.write("/d/keep", 0, b"kept").unwrap();
    fs.create("/lost", Kind::File).unwrap();
    fs.write("/lost", 0, &[3u8; 2 * BLOCK]).unwrap();
    let geo = fs.geo;
    let lost = fs.lookup("/lost").unwrap() as usize;
    let good = fs.dev.0.clone();
    let inode_at = |i: usize| geo.itable_start as usize * BLOCK + i * INODE_SIZE;
    // One flipped byte of /lost's inode (its size): named, refused, then freed by repair.
    let mut d = good.clone();
    d[inode_at(lost) + 9] ^= 1;
    let e = Fs::examine(MemDev(d.clone())).unwrap();
    assert!(e.problems.iter().any(|p| p.contains(&alloc::format!("inode {lost}: checksum"))), "{e:?}");
    assert!(matches!(Fs::mount(MemDev(d.clone())), Err(Error::Corrupt(_))));
    let (fs2, changes) = Fs::repair(MemDev(d)).unwrap();
    assert!(
        changes.iter().any(|c| c.contains("freed")) && changes.iter().any(|c| c.contains("entry cleared")),
        "{changes:?}"
    );
    let mut fs2 = Fs::mount(fs2.dev).unwrap();
    assert_eq!(fs2.check(), Vec::<String>::new());
    assert_eq!(fs2.lookup("/lost"), Err(Error::NotFound));
    let mut b = [0u8; 4];
    assert_eq!(fs2.read("/d/keep", 0, &mut b), Ok(4));
    assert_eq!(&b, b"kept");
    // A flipped byte of an entry's name: its checksum.
    let root_block = fs2.inodes[ROOT as usize].ext[0].0 as usize;
    let mut d = good.clone();
    d[root_block * BLOCK + 9] ^= 1;
    let e = Fs::examine(MemDev(d.clone())).unwrap();
    assert!(e.problems.iter().any(|p| p.contains("entry 0: checksum")), "{e:?}");
    let (fs3, changes) = Fs::repair(MemDev(d)).unwrap();
    assert!(changes.iter().any(|c| c.contains("entry cleared")), "{changes:?}");
    assert!(changes.iter().any(|c| c.contains("no directory names it")), "the unnamed inodes go: {changes:?}");
    assert_eq!(Fs::examine(fs3.dev).unwrap(), Examination::default());
    // A superblock zeroed, or with a damaged magic, or of another version: repair (asked
    // of a device meant to hold a filesystem) rewrites it, and the files are there.
    for damage in [(|b: &mut [u8]| b[..BLOCK].fill(0)) as fn(&mut [u8]), |b| b[3] ^= 0x20, |b| b[8] = 9] {
        let mut d = good.clone();
        damage(&mut d);
        assert!(matches!(Fs::mount(MemDev(d.clone())), Err(Error::Corrupt(_))));
        let (fs5, changes) = Fs::repair(MemDev(d)).unwrap();
        assert!(
            changes.iter().any(|c| (c.contains("magic") || c.contains("version")) && c.contains("rewritten")),
            "{changes:?}"
        );
        let mut fs5 = Fs::mount(fs5.dev).unwrap();
        assert_eq!(fs5.check(), Vec::<String>::new());
        assert_eq!(fs5.read("/d/keep", 0, &mut b), Ok(4));
    }
    // A sound filesystem: repair changes nothing and writes nothing.
    let (fs4, changes) = Fs::repair(MemDev(good.clone())).unwrap();
    assert_eq!(changes, Vec::<String>::new());
    assert!(fs4.dev.0 == good);
}

#[test]
fn fuzzed_images_repair_to_sound_ones() {
    let mut fs = fresh(128);
    fs.create("/d", Kind::Dir).unwrap();
    fs.create("/d/f", Kind::File).unwrap();
    fs.write("/d/f", 0, &[5u8; 2 * BLOCK]).unwrap();
    fs.create("/e", Kind::File).unwrap();
    let good = fs.dev.0.clone();
    let meta = (fs.geo.data_start as usize + 4) * BLOCK;
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut repaired = 0;
    for _ in 0..1000 {
        let mut d = good.clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d[(x as usize) % meta] = (x >> 40) as u8;
        }
        if let Ok((fs, _)) = Fs::repair(MemDev(d)) {
            assert_eq!(Fs::examine(fs.dev).unwrap(), Examination::default(), "a repaired filesystem is sound");
            repaired += 1;
        }
    }
    assert!(repaired > 500, "{repaired} of 1000 repaired");
}

/// A disk that dies: once `dead`, every read, write and flush fails.
struct Dying {
    dev: MemDev,
    dead: bool,
}

impl BlockDev for Dying {
    fn blocks(&self) -> u64 {
        self.dev.blocks()
    }
    fn read(&mut self, b: u64, buf: &mut [u8; BLOCK]) -> Result<(), baio::Error> {
        if self.dead {
            return Err(baio::Error::Io);
        }
        self.dev.read(b, buf)
    }
    fn write(&mut self, b: u64, buf: &[u8; BLOCK]) -> Result<(), baio::Error> {
        if self.dead {
            return Err(baio::Error::Io);
        }
        self.dev.write(b, buf)
    }
    fn flush(&mut self) -> Result<(), baio::Error> {
        if self.dead {
            return Err(baio::Error::Io);
        }
        Ok(())
    }
}

impl Dev for Dying {}

#[test]
fn a_failing_disk_is_an_io_error_not_a_usage_error() {
    let mut fs = Fs::format(Dying { dev: MemDev(vec![0u8; 256 * BLOCK]), dead: false }).unwrap();
    fs.create("/d", Kind::Dir).unwrap();
    fs.create("/d/f", Kind::File).unwrap();
    let ino = fs.lookup("/d/f").unwrap();
    // Usage errors keep their codes.
    assert_eq!(fs.remove("/d").unwrap_err().code(), abi::Error::BadState, "a directory not empty");
    assert_eq!(fs.create("/d/f", Kind::File).unwrap_err().code(), abi::Error::Exists);
    fs.dev.dead = true;
    // (The library caches metadata: a lookup may still answer; what reaches the disk fails.)
    for (what, r) in [
        ("create", fs.create("/g", Kind::File).map(|_| ())),
        ("write", fs.write_ino(ino, 0, &[1u8; 3 * BLOCK]).map(|_| ())),
        ("sync", fs.sync()),
        ("fsync", fs.sync_ino(ino)),
        ("rename", fs.rename("/d/f", "/h")),
        ("remove", fs.remove("/d/f")),
    ] {
        let e = r.expect_err(what);
        assert_eq!(e.code(), abi::Error::Io, "{what}: {e:?}");
    }
    assert_eq!(Error::Corrupt("x".into()).code(), abi::Error::Io, "damage found after the mount is the disk's");
    assert!(Fs::mount(fs.dev).is_err_and(|e| e.code() == abi::Error::Io), "a mount of a dead disk: Io");
}

#[test]
fn rename_moves_and_replaces_as_posix_does() {
    let mut fs = fresh(512);
    fs.create("/a", Kind::Dir).unwrap();
    fs.create("/b", Kind::Dir).unwrap();
    fs.create("/a/x", Kind::File).unwrap();
    fs.write("/a/x", 0, b"new bytes").unwrap();
    fs.create("/b/y", Kind::File).unwrap();
    fs.write("/b/y", 0, &[3u8; 5 * BLOCK]).unwrap();
    let (x, free) = (fs.lookup("/a/x").unwrap(), fs.free_blocks());
    // Within a directory.
    fs.rename("/a/x", "/a/z").unwrap();
    assert_eq!(fs.lookup("/a/x"), Err(Error::NotFound));
    assert_eq!(fs.lookup("/a/z"), Ok(x), "the same file under its new name");
    // Across directories, replacing a file: its blocks become free.
    fs.rename("/a/z", "/b/y").unwrap();
    assert_eq!(fs.lookup("/b/y"), Ok(x));
    assert!(fs.list("/a").unwrap().is_empty());
    assert_eq!(fs.free_blocks(), free + 5, "the replaced file's blocks are free");
    let mut b = [0u8; 9];
    assert_eq!(fs.read("/b/y", 0, &mut b), Ok(9));
    assert_eq!(&b, b"new bytes");
    // A name to itself: nothing changes.
    fs.rename("/b/y", "b/y").unwrap();
    assert_eq!(fs.lookup("/b/y"), Ok(x));
    // Directories: moved whole, never into themselves.
    fs.create("/a/sub", Kind::Dir).unwrap();
    assert_eq!(fs.rename("/a", "/a/sub/a"), Err(Error::BadName), "into itself");
    assert_eq!(fs.rename("/a", "/a/a"), Err(Error::BadName), "into itself, one down");
    assert_eq!(fs.rename("/a", "/b/y"), Err(Error::NotDir), "a directory over a file");
    assert_eq!(fs.rename("/b/y", "/a"), Err(Error::IsDir), "a file over a directory");
    assert_eq!(fs.rename("/b", "/a"), Err(Error::NotEmpty), "over a directory not empty");
    fs.create("/e", Kind::Dir).unwrap();
    fs.rename("/b", "/e").unwrap();
    assert_eq!(fs.lookup("/e/y"), Ok(x), "a directory over an empty one, with what it holds");
    fs.rename("/e", "/a/sub/e").unwrap();
    assert_eq!(fs.lookup("/a/sub/e/y"), Ok(x));
    assert_eq!(fs.rename("/", "/q"), Err(Error::BadName));
    assert_eq!(fs.rename("/a", "/"), Err(Error::BadName));
    assert_eq!(fs.rename("/nope", "/q"), Err(Error::NotFound));
    assert_eq!(fs.rename("/a", "/nope/q"), Err(Error::NotFound));
    assert_eq!(fs.rename("/a", "/.."), Err(Error::BadName));
    let mut fs = remount(fs);
    assert!(fs.check().is_empty(), "{:?}", fs.check());
    assert_eq!(fs.lookup("/a/sub/e/y"), Ok(x));
}

#[test]
fn fsync_flushes_the_disk_for_one_file() {
    let mut fs = Fs::mount(Recorder::new(fresh(64).dev.0)).unwrap();
    fs.create("/f", Kind::File).unwrap();
    let ino = fs.lookup("/f").unwrap();
    fs.write_ino(ino, 0, b"durable").unwrap();
    let n = fs.dev.flushes();
    fs.sync_ino(ino).unwrap();
    assert_eq!(fs.dev.flushes(), n + 1);
    assert!(matches!(fs.dev.events.last(), Some(baio::crash::Event::Flush)), "the flush comes after every write");
    assert_eq!(fs.sync_ino(ino + 1), Err(Error::NotFound));
    assert_eq!(fs.sync_ino(u32::MAX), Err(Error::NotFound));
}

/// Renames on a disk that caches writes: after a cut at any write, each rename is
/// either undone or done — `from` and `to` as before (both bytes where they were) or
/// as after — never both names for one file nor neither; the tree checks clean.
#[test]
fn a_power_cut_during_a_rename_leaves_the_old_or_the_new_names() {
    let mut fs = fresh(256);
    fs.create("/a", Kind::Dir).unwrap();
    fs.create("/b", Kind::Dir).unwrap();
    for (p, v) in [("/a/x", 1u8), ("/a/old", 2), ("/b/y", 3), ("/b/t", 4)] {
        fs.create(p, Kind::File).unwrap();
        fs.write(p, 0, &vec![v; 2 * BLOCK + 100]).unwrap();
    }
    fs.create("/a/d", Kind::Dir).unwrap();
    fs.create("/a/d/in", Kind::File).unwrap();
    fs.write("/a/d/in", 0, &[5u8; 300]).unwrap();
    fs.create("/b/empty", Kind::Dir).unwrap();
    let base = fs.dev.0.clone();
    let renames: [(&str, &str); 5] = [
        ("/a/x", "/a/x2"),    // within a directory
        ("/a/x2", "/b/x3"),   // across
        ("/b/x3", "/a/old"),  // across, replacing a file
        ("/b/y", "/b/t"),     // within, replacing a file
        ("/a/d", "/b/empty"), // a directory over an empty one
    ];
    let mut fs = Fs::mount(Recorder::new(base.clone())).unwrap();
    let mut trees = vec![contents(&mut fs)];
    for (f, t) in renames {
        fs.rename(f, t).unwrap_or_else(|e| panic!("{f} -> {t}: {e:?}"));
        fs.dev.ack();
        trees.push(contents(&mut fs));
    }
    let mut cuts = 0;
    baio::crash::crashes(&base, &fs.dev.events, 5, |c| {
        let what = alloc::format!("{c:?}");
        let (durable, acked) = (c.durable, c.acked);
        let mut m = Fs::mount(c.dev).unwrap_or_else(|e| panic!("{what}: no mount: {e:?}"));
        assert_eq!(m.check(), Vec::<String>::new(), "{what}: after a mount");
        let t = contents(&mut m);
        // A rename is durable when it returns: the tree is the one after the last
        // acknowledged rename, or the next one's (a cut inside it).
        let k = (durable..=(acked + 1).min(renames.len())).find(|k| trees[*k] == t);
        assert!(k.is_some(), "{what}: {t:?} is no tree between rename {durable} and {}", acked + 1);
        cuts += 1;
    });
    assert!(cuts > 20, "{cuts} cuts");
}

#[test]
fn a_version_2_filesystem_mounts_and_becomes_version_3_and_odd_entry_flags_are_refused() {
    let mut fs = fresh(128);
    fs.create("/f", Kind::File).unwrap();
    let mut img = fs.dev.0.clone();
    img[8..12].copy_from_slice(&2u32.to_le_bytes());
    let c = checksum(&img[..64]);
    img[64..72].copy_from_slice(&c.to_le_bytes());
    let mut m = Fs::mount(MemDev(img)).unwrap();
    assert_eq!(m.lookup("/f").map(|_| ()), Ok(()));
    assert_eq!(u32::from_le_bytes(m.dev.0[8..12].try_into().unwrap()), VERSION, "the mount wrote version 3");
    assert!(m.check().is_empty());
    // An entry with flags no version writes.
    let root = fs.inodes[ROOT as usize].ext[0].0 as usize;
    let mut img = fs.dev.0.clone();
    let e = &mut img[root * BLOCK..root * BLOCK + DIRENT];
    e[7] = 1;
    let c = checksum(&e[..SUM]);
    e[SUM..].copy_from_slice(&c.to_le_bytes());
    assert!(matches!(Fs::mount(MemDev(img)), Err(Error::Corrupt(w)) if w.contains("unknown entry flags")));
    img = fs.dev.0.clone();
    img[8..12].copy_from_slice(&4u32.to_le_bytes());
    let c = checksum(&img[..64]);
    img[64..72].copy_from_slice(&c.to_le_bytes());
    assert!(matches!(Fs::mount(MemDev(img)), Err(Error::Corrupt(w)) if w.contains("unknown version 4")));
}
