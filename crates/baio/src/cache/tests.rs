//! The cache's host tests: lookups, fills and evictions against a model, the shared
//! tags, eviction grafts, policy swaps and the stream detector, the live-update
//! handover (and hostile states), growing and retiring slots, the sizer.

use super::handover::{HANDOVER_ENTRY, HANDOVER_HEAD};
use super::*;
use alloc::boxed::Box;
use swap::{Component, State};

/// A cache and its policy.
struct T {
    c: Cache,
    p: Box<dyn Policy>,
}

impl T {
    fn lru(n: u32) -> T {
        T { c: Cache::new(n), p: Box::new(Lru::default()) }
    }
    fn mru(n: u32) -> T {
        T { c: Cache::new(n), p: Box::new(Mru::default()) }
    }
    fn lookup(&mut self, b: u64) -> Lookup {
        self.c.lookup_for(b, 0, &mut NoGraft, &mut *self.p)
    }
    fn lookup_for(&mut self, b: u64, owner: u32, ch: &mut dyn Chooser) -> Lookup {
        self.c.lookup_for(b, owner, ch, &mut *self.p)
    }
    fn filled(&mut self, b: u64, ok: bool) -> bool {
        self.c.filled(b, ok, &mut *self.p)
    }
    fn invalidate(&mut self, b: u64, n: u64) {
        self.c.invalidate(b, n, &mut *self.p)
    }
    fn stats(&self) -> Stats {
        self.c.stats()
    }
    /// Swap the policy as the server does (state moved in `format`).
    fn swap_to(&mut self, mut next: Box<dyn Policy>, format: u32) {
        let st = self.p.export(format).unwrap();
        assert!(next.import(format, st));
        self.p = next;
    }
}

fn fill(c: &mut T, b: u64) -> u32 {
    match c.lookup(b) {
        Lookup::Fill(s) => {
            assert!(c.filled(b, true));
            s
        }
        other => panic!("block {b}: {other:?}"),
    }
}

#[test]
fn hit_after_fill_and_lru_eviction() {
    let mut c = T::lru(3);
    let s1 = fill(&mut c, 1);
    let s2 = fill(&mut c, 2);
    fill(&mut c, 3);
    assert_eq!(c.lookup(1), Lookup::Hit(s1)); // 1 is now most recent: 2 is the LRU
    assert_eq!(fill(&mut c, 4), s2, "the least recently used block's slot is reused");
    assert!(matches!(c.lookup(2), Lookup::Fill(_)), "2 was evicted");
    assert!(c.filled(2, true));
    let st = c.stats();
    assert_eq!((st.hits, st.misses, st.evictions, st.resident), (1, 5, 2, 3));
    assert_eq!(c.lookup(1), Lookup::Hit(s1), "1 (used recently) stayed; 3 went");
}

#[test]
fn filling_slots_are_never_evicted() {
    let mut c = T::lru(2);
    let a = match c.lookup(10) {
        Lookup::Fill(s) => s,
        o => panic!("{o:?}"),
    };
    assert_eq!(c.lookup(10), Lookup::Busy(a));
    let _b = match c.lookup(11) {
        Lookup::Fill(s) => s,
        o => panic!("{o:?}"),
    };
    assert_eq!(c.lookup(12), Lookup::Full, "both slots are being filled");
    assert!(c.filled(11, true));
    assert!(matches!(c.lookup(12), Lookup::Fill(_)), "the valid one is evicted, not the filling one");
    assert_eq!(c.lookup(10), Lookup::Busy(a));
}

/// A run with a block being filled in it stops there: nothing behind the busy block
/// is looked up (no slot handed out, none evicted for it), and the block behind it is
/// an ordinary miss when the run is asked for again.
#[test]
fn a_run_stops_at_a_busy_block() {
    let mut c = T::lru(8);
    let s11 = match c.lookup(11) {
        Lookup::Fill(s) => s,
        o => panic!("{o:?}"),
    };
    let mut out = [None; 3];
    c.c.lookup_run(10, 0, &mut NoGraft, &mut *c.p, &mut out);
    assert!(matches!(out[0], Some(Lookup::Fill(_))));
    assert_eq!((out[1], out[2]), (Some(Lookup::Busy(s11)), None));
    assert_eq!(c.stats().resident, 2, "no slot taken for block 12");
    assert!(c.filled(10, true) && c.filled(11, true));
    c.c.lookup_run(11, 0, &mut NoGraft, &mut *c.p, &mut out[..2]);
    assert_eq!(out[0], Some(Lookup::Hit(s11)));
    assert!(matches!(out[1], Some(Lookup::Fill(_))), "block 12: a miss like any other");
}

#[test]
fn failed_fill_and_invalidation() {
    let mut c = T::lru(4);
    assert!(matches!(c.lookup(5), Lookup::Fill(_)));
    assert!(c.filled(5, false));
    assert!(matches!(c.lookup(5), Lookup::Fill(_)), "a failed fill leaves nothing behind");
    c.invalidate(0, 10); // while filling: dropped at the end of the fill
    assert!(c.filled(5, true));
    assert!(matches!(c.lookup(5), Lookup::Fill(_)), "stale fill was dropped");
    assert!(c.filled(5, true));
    fill(&mut c, 6);
    c.invalidate(6, 1);
    assert!(matches!(c.lookup(6), Lookup::Fill(_)));
    assert!(matches!(c.lookup(5), Lookup::Hit(_)), "outside the range stays");
    assert!(!c.filled(99, true), "no fill of an unknown block");
}

#[test]
fn random_against_a_model() {
    // A model: a bounded LRU as a Vec (most recent last).
    let mut c = T::lru(8);
    let mut model: Vec<u64> = Vec::new();
    let mut x = 0x1234_5678u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x % 24;
        if x.is_multiple_of(17) {
            c.invalidate(b, 3);
            model.retain(|m| !(b..b + 3).contains(m));
            continue;
        }
        match c.lookup(b) {
            Lookup::Hit(_) => {
                let i = model.iter().position(|m| *m == b).expect("hit in the model");
                let m = model.remove(i);
                model.push(m);
            }
            Lookup::Fill(_) => {
                assert!(!model.contains(&b), "miss for a block the model has");
                if model.len() == 8 {
                    model.remove(0);
                }
                model.push(b);
                assert!(c.filled(b, true));
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(c.stats().resident, model.len() as u64);
    }
}

/// The shared tags (`tags`) mirror the cache exactly through every change, no
/// reserved slot is ever handed out, and a touch is a hit as a lookup's would be.
#[test]
fn shared_tags_follow_every_change() {
    let l = tags::Layout::new(16).unwrap();
    let mut c = Cache::with_layout(l);
    let mut p: Box<dyn Policy> = Box::new(Lru::default());
    // The tags as the block service would read them: every change applied in order.
    let mut mirror: BTreeMap<u32, u64> = BTreeMap::new();
    let mut model: Vec<u64> = Vec::new();
    let mut x = 0x9e37_79b9u64;
    let mut grown = 1;
    for round in 0..30_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x % 40;
        match x % 23 {
            0 => {
                c.invalidate(b, 2, &mut *p);
                model.retain(|m| !(b..b + 2).contains(m));
            }
            1 if grown < 4 => {
                assert!(c.grow(16));
                grown += 1;
            }
            2 if grown > 1 => {
                // Give the last block back (nothing is being filled here).
                grown -= 1;
                c.retire(grown * 16, &mut *p);
                assert!(c.shrink());
                model.retain(|m| c.map.contains_key(m));
            }
            3 if round % 97 == 0 => {
                c.clear(&mut *p);
                model.clear();
            }
            4..=6 => {
                // A hit served without a lookup, then touched.
                let hit = c.touch(b, &mut *p);
                assert_eq!(hit, model.contains(&b), "touch of {b}");
                if hit {
                    model.retain(|m| *m != b);
                    model.push(b);
                }
            }
            _ => match c.lookup_for(b, 0, &mut NoGraft, &mut *p) {
                Lookup::Hit(s) => {
                    assert!(!l.reserved(s));
                    assert_eq!(mirror.get(&s), Some(&tags::tag(b)), "a hit's tag names its block");
                    model.retain(|m| *m != b);
                    model.push(b);
                }
                Lookup::Fill(s) => {
                    assert!(!l.reserved(s), "slot {s} is reserved for tags or the ring");
                    assert!(!model.contains(&b));
                    let full = model.len() as u32 == l.usable(grown);
                    if full {
                        model.remove(0);
                    }
                    let ok = !x.is_multiple_of(5);
                    assert!(c.filled(b, ok, &mut *p));
                    if ok {
                        model.push(b);
                    }
                }
                o => panic!("{o:?}"),
            },
        }
        for (s, t) in c.take_tags() {
            assert!(!l.reserved(s));
            mirror.insert(s, t);
        }
        for s in c.take_cleared().into_iter().flatten() {
            mirror.insert(s, 0);
        }
        let live: BTreeMap<u32, u64> = c.all_tags().filter(|t| t.1 != 0).collect();
        let seen: BTreeMap<u32, u64> =
            mirror.iter().filter(|(s, t)| **t != 0 && **s < c.slots()).map(|(s, t)| (*s, *t)).collect();
        assert_eq!(live, seen, "round {round}: the tags differ from the cache");
        assert_eq!(c.stats().resident, model.len() as u64);
    }
    // Its state moves to a successor with the same layout, and is refused by one whose
    // reserved slots it would use.
    c.retire(16, &mut *p);
    assert!(c.shrink());
    let order = p.export(CANONICAL).unwrap();
    let bytes = c.encode(order.bytes().unwrap());
    let (d, _) = Cache::decode(&bytes, 16, Some(l)).expect("its own state");
    assert!(d.all_tags().eq(c.all_tags()));
    let plain = Cache::new(16);
    assert_eq!(Cache::decode(&plain.encode(&[]), 16, Some(l)).map(|_| ()), Ok(()));
    let mut q = T::lru(16);
    for k in 0..16 {
        assert!(matches!(q.lookup(k), Lookup::Fill(_)));
        q.filled(k, true);
    }
    let o = q.p.export(CANONICAL).unwrap();
    assert_eq!(
        Cache::decode(&q.c.encode(o.bytes().unwrap()), 16, Some(l)).err(),
        Some("a slot repeats or is out of the cache")
    );
}

/// Keeps the blocks it calls hot, for owner 7 only (a hot-list graft).
struct Hot(Vec<u64>, u32);

impl Chooser for Hot {
    fn wants(&mut self, owner: u32) -> bool {
        owner == 7
    }
    fn choose(&mut self, owner: u32, blocks: &[u64]) -> Option<usize> {
        assert_eq!(owner, 7, "a graft sees only its owner's blocks");
        self.1 += 1;
        blocks.iter().position(|b| !self.0.contains(b))
    }
}

fn fill_for(c: &mut T, b: u64, owner: u32, ch: &mut dyn Chooser) {
    match c.lookup_for(b, owner, ch) {
        Lookup::Fill(_) => assert!(c.filled(b, true)),
        Lookup::Hit(_) => {}
        o => panic!("block {b}: {o:?}"),
    }
}

#[test]
fn an_owners_graft_keeps_its_hot_blocks_and_only_its_own() {
    let mut c = T::lru(8);
    let mut hot = Hot(alloc::vec![100, 101], 0);
    // Owner 7's hot blocks come in first (the least recently used), then its
    // stream of others, interleaved with owner 3's stream.
    fill_for(&mut c, 100, 7, &mut hot);
    fill_for(&mut c, 101, 7, &mut hot);
    for k in 0..40 {
        fill_for(&mut c, 200 + k, 7, &mut hot);
        fill_for(&mut c, 900 + k, 3, &mut hot);
    }
    assert!(matches!(c.lookup_for(100, 7, &mut hot), Lookup::Hit(_)), "hot block 100 stayed");
    assert!(matches!(c.lookup_for(101, 7, &mut hot), Lookup::Hit(_)), "hot block 101 stayed");
    assert!(hot.1 > 0 && c.stats().grafted > 0);
    // Without the graft the same sequence evicts them.
    let mut c = T::lru(8);
    fill_for(&mut c, 100, 7, &mut NoGraft);
    fill_for(&mut c, 101, 7, &mut NoGraft);
    for k in 0..40 {
        fill_for(&mut c, 200 + k, 7, &mut NoGraft);
        fill_for(&mut c, 900 + k, 3, &mut NoGraft);
    }
    assert!(matches!(c.lookup(100), Lookup::Fill(_)), "plain LRU evicted it");
}

#[test]
fn a_chooser_never_evicts_another_owners_block_or_a_filling_one() {
    struct Liar;
    impl Chooser for Liar {
        fn wants(&mut self, _: u32) -> bool {
            true
        }
        fn choose(&mut self, _: u32, blocks: &[u64]) -> Option<usize> {
            Some(blocks.len() + 3)
        }
    }
    let mut c = T::lru(4);
    for b in 0..4 {
        fill_for(&mut c, b, b as u32 % 2, &mut Liar);
    }
    // An answer out of range falls back to the least recently used.
    fill_for(&mut c, 10, 0, &mut Liar);
    assert!(matches!(c.lookup(0), Lookup::Fill(_)), "block 0 (the LRU) went");
}

#[test]
fn mru_keeps_the_start_of_a_stream_larger_than_the_cache() {
    // Two passes over 12 blocks with 8 slots: LRU hits nothing; MRU keeps blocks
    // 0..=6 and 11 from the first pass.
    for (mut c, hits) in [(T::lru(8), 0), (T::mru(8), 8)] {
        for _ in 0..2 {
            for b in 0..12 {
                if let Lookup::Fill(_) = c.lookup(b) {
                    assert!(c.filled(b, true));
                }
            }
        }
        assert_eq!(c.stats().hits, hits);
    }
}

#[test]
fn swapping_the_policy_keeps_the_recency_order_in_both_formats() {
    for format in [CANONICAL, RECENCY_MOVED] {
        let mut c = T::lru(4);
        for b in 0..4 {
            fill(&mut c, b);
        }
        assert_eq!(c.lookup(0), Lookup::Hit(0), "slots are handed out from 0 up");
        // Order now, least recent first: 1 2 3 0.
        c.swap_to(Box::new(Mru::default()), format);
        fill(&mut c, 9); // MRU evicts 0, the most recently used
        assert!(matches!(c.lookup(0), Lookup::Fill(_)), "format {format}");
        assert!(c.filled(0, true));
        c.swap_to(Box::new(Lru::default()), format);
        fill(&mut c, 10); // LRU evicts 1 (order was 1 2 3 0)
        assert!(matches!(c.lookup(2), Lookup::Hit(_)), "format {format}");
        assert!(matches!(c.lookup(1), Lookup::Fill(_)), "format {format}");
    }
}

#[test]
fn a_canonical_state_that_repeats_or_overreaches_is_refused() {
    let mut p = Lru::default();
    let st = |v: &[u32]| State::Bytes(v.iter().flat_map(|s| s.to_le_bytes()).collect());
    assert!(!p.import(CANONICAL, st(&[1, 2, 1])), "a slot twice");
    assert!(!p.import(CANONICAL, st(&[MAX_SLOTS])), "a slot past the bound");
    assert!(!p.import(CANONICAL, State::Bytes(alloc::vec![1, 2, 3])), "a partial word");
    assert!(!p.import(RECENCY_MOVED, State::Bytes(alloc::vec![])), "bytes where an object was agreed");
    assert!(!p.import(7, st(&[])), "a format it does not know");
    assert!(p.import(CANONICAL, st(&[5, 1, 3])));
    assert_eq!(p.0.order(), alloc::vec![5, 1, 3]);
}

#[test]
fn a_stream_is_seen_and_its_end_too() {
    let mut q = Sequential::default();
    let mut changes = Vec::new();
    // Random runs: no stream.
    let mut x = 99u64;
    for _ in 0..100 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        if let Some(v) = q.run(x >> 40, 8) {
            changes.push(v);
        }
    }
    assert!(changes.is_empty());
    // Two interleaved streams of 8-block runs: a stream.
    for k in 0..40 {
        for base in [1000u64, 50_000] {
            if let Some(v) = q.run(base + 8 * k, 8) {
                changes.push(v);
            }
        }
    }
    assert_eq!(changes, [true]);
    for _ in 0..40 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        if let Some(v) = q.run(x >> 40, 1) {
            changes.push(v);
        }
    }
    assert_eq!(changes, [true, false], "random again: back");
}

/// K42 Fig. 7's workload on the host (`bench_k42` runs it through the cache server):
/// swapping on the stream detector's verdict misses less than either fixed policy.
#[test]
fn adaptive_swapping_beats_both_fixed_policies_on_streams_and_hot_sets() {
    fn run(mode: usize) -> u64 {
        let mut c = T::lru(1024);
        let mut seq = Sequential::default();
        let mut imp = 0;
        let mut read = |c: &mut T, first: u64, n: u64, imp: &mut usize| {
            if let Some(stream) = seq.run(first, n) {
                let want = stream as usize;
                if mode == 2 && want != *imp {
                    let next: Box<dyn Policy> =
                        if want == 1 { Box::new(Mru::default()) } else { Box::new(Lru::default()) };
                    c.swap_to(next, RECENCY_MOVED);
                    *imp = want;
                }
            }
            for b in first..first + n {
                if let Lookup::Fill(_) = c.lookup(b) {
                    assert!(c.filled(b, true));
                }
            }
        };
        for b in (896..2000).rev() {
            read(&mut c, b, 1, &mut imp);
        }
        if mode == 1 {
            c.swap_to(Box::new(Mru::default()), RECENCY_MOVED);
        }
        let m0 = c.stats().misses;
        let mut x = 12345u64;
        for round in 0..4 {
            for b in (2000..4000).step_by(8) {
                read(&mut c, b, 8, &mut imp);
            }
            let h = [0, 512][round % 2];
            for _ in 0..768 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                read(&mut c, h + (x >> 33) % 384, 1, &mut imp);
            }
        }
        c.stats().misses - m0
    }
    let (lru, mru, auto) = (run(0), run(1), run(2));
    assert!(auto < lru && auto < mru, "misses: lru {lru}, mru {mru}, auto {auto}");
}

/// A cache handed over (a live update of the cache server) behaves as the old one:
/// the same hits, the same victims, fills under way still end.
#[test]
fn handover_round_trip() {
    let mut a = T::lru(8);
    for b in 0..6 {
        fill(&mut a, b);
    }
    assert_eq!(a.lookup(1), Lookup::Hit(a.c.map[&1]));
    let filling = match a.lookup(20) {
        Lookup::Fill(s) => s,
        o => panic!("{o:?}"),
    };
    assert!(matches!(a.lookup(21), Lookup::Fill(_)));
    a.invalidate(21, 1);
    let order = a.p.export(CANONICAL).unwrap();
    let bytes = a.c.encode(order.bytes().unwrap());
    let (c, order) = Cache::decode(&bytes, 8, None).expect("its own state");
    let mut b = T { c, p: Box::new(Lru::default()) };
    assert!(b.p.import(CANONICAL, State::Bytes(order)));
    assert_eq!(b.stats(), a.stats());
    assert_eq!(b.lookup(20), Lookup::Busy(filling), "the fill under way is still under way");
    assert!(b.filled(20, true) && a.filled(20, true));
    assert!(b.filled(21, true) && a.filled(21, true), "the invalidated fill ends (dropped)");
    for blk in [30, 1, 31, 32, 2, 33] {
        let la = a.lookup(blk);
        assert_eq!(b.lookup(blk), la, "block {blk}");
        if let Lookup::Fill(_) = la {
            assert!(a.filled(blk, true) && b.filled(blk, true));
        }
    }
    assert_eq!(b.stats(), a.stats());
}

/// A state from another program: cut, flipped or made inconsistent, it is refused
/// with a reason, never a panic.
#[test]
fn handover_refuses_hostile_states() {
    let mut a = T::lru(4);
    for b in 0..3 {
        fill(&mut a, b);
    }
    let order = a.p.export(CANONICAL).unwrap();
    let good = a.c.encode(order.bytes().unwrap());
    assert!(Cache::decode(&good, 4, None).is_ok());
    assert_eq!(Cache::decode(&good, 8, None).err(), Some("the state is of a cache of another size"));
    for n in 0..good.len() {
        assert!(Cache::decode(&good[..n], 4, None).is_err(), "cut at {n}");
    }
    let mut x = 7u64;
    for _ in 0..2000 {
        let mut b = good.clone();
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        let at = (x >> 33) as usize % b.len();
        b[at] ^= 1 << ((x >> 20) % 8);
        if let Ok((c, order)) = Cache::decode(&b, 4, None) {
            // Whatever passed is consistent: the policy takes the order, lookups work.
            let mut t = T { c, p: Box::new(Lru::default()) };
            assert!(t.p.import(CANONICAL, State::Bytes(order)));
            for blk in 0..10 {
                if let Lookup::Fill(_) = t.lookup(blk) {
                    t.filled(blk, true);
                }
            }
        }
    }
    let entry = |k: usize| HANDOVER_HEAD + HANDOVER_ENTRY * k;
    let mut b = good.clone();
    b.copy_within(entry(0)..entry(0) + 4, entry(1));
    assert_eq!(Cache::decode(&b, 4, None).err(), Some("a slot repeats or is out of the cache"));
    let mut b = good.clone();
    b.copy_within(entry(0) + 4..entry(0) + 12, entry(1) + 4);
    assert_eq!(Cache::decode(&b, 4, None).err(), Some("a block is in two slots"));
    let mut b = good.clone();
    b[entry(2) + 16] = 9;
    assert_eq!(Cache::decode(&b, 4, None).err(), Some("a slot's state is unknown"));
    let mut b = good.clone();
    let n = b.len();
    b.copy_within(n - 8..n - 4, n - 4);
    assert_eq!(Cache::decode(&b, 4, None).err(), Some("the recency order is not the valid slots, each once"));
    let mut b = good.clone();
    b[entry(2) + 16] = 1;
    assert_eq!(
        Cache::decode(&b, 4, None).err(),
        Some("the recency order is not the valid slots, each once"),
        "an ordered slot that is not valid"
    );
}

#[test]
fn grow_adds_free_slots_and_retire_gives_them_back() {
    let mut t = T::lru(2);
    assert!(matches!(t.lookup(10), Lookup::Fill(_)));
    assert!(t.filled(10, true));
    assert!(matches!(t.lookup(11), Lookup::Fill(_)));
    assert!(t.filled(11, true));
    assert!(t.c.grow(2));
    assert_eq!(t.c.slots(), 4);
    // Two more blocks fit without an eviction.
    for b in [12, 13] {
        let Lookup::Fill(s) = t.lookup(b) else { panic!("a free slot") };
        assert!(s >= 2, "a new slot");
        assert!(t.filled(b, true));
    }
    assert_eq!(t.stats().evictions, 0);
    // Retire the second pair while block 14 is being filled into one of them.
    assert!(matches!(t.lookup(10), Lookup::Hit(_)));
    let Lookup::Fill(s14) = t.lookup(14) else { panic!() };
    t.c.retire(2, &mut *t.p);
    assert_eq!(t.c.limit(), 2);
    assert_eq!(t.c.retiring_busy(), if s14 >= 2 { 1 } else { 0 });
    assert!(!t.c.grow(2), "no growth while giving back");
    // Nothing retired is found again, nor handed out.
    for b in 10..=13 {
        if let Lookup::Hit(s) | Lookup::Fill(s) = t.lookup(b) {
            assert!(s < 2, "block {} in retired slot {}", b, s);
        }
    }
    assert!(t.c.shrink() || t.c.retiring_busy() > 0);
    t.filled(14, true);
    assert!(t.c.shrink());
    assert_eq!(t.c.slots(), 2);
    assert!(t.stats().resident <= 2);
    assert!(t.c.grow(1));
    assert_eq!(t.c.slots(), 3);
}

#[test]
fn a_retired_fill_is_dropped_when_it_ends() {
    let mut t = T::lru(1);
    assert!(t.c.grow(1));
    let Lookup::Fill(a) = t.lookup(1) else { panic!() };
    let Lookup::Fill(b) = t.lookup(2) else { panic!() };
    assert_eq!((a, b), (1, 0), "the new slot first");
    t.c.retire(1, &mut *t.p);
    assert!(!t.c.shrink(), "a fill into a retired slot is under way");
    assert!(t.filled(1, true));
    assert!(t.filled(2, true));
    assert!(matches!(t.lookup(1), Lookup::Fill(0)), "block 1 is not served from the retired slot");
    assert!(t.c.shrink());
    assert_eq!(t.c.slots(), 1);
}

fn mem(free: u64, refused: u64) -> Memory {
    Memory { free, total: 131072, keep: 2048, refused }
}

#[test]
fn the_sizer_grows_while_memory_is_free_and_the_cache_evicts() {
    let mut z = Sizer::new(1024, 8);
    let margin = z.margin(131072);
    assert_eq!(margin, 16384);
    assert_eq!(z.decide(mem(100_000, 0), 1, 0), Resize::Stay, "no evictions: the working set fits");
    assert_eq!(z.decide(mem(100_000, 0), 1, 5), Resize::Grow);
    assert_eq!(z.decide(mem(100_000, 0), 2, 5), Resize::Stay, "no eviction since");
    assert_eq!(z.decide(mem(2048 + margin + 1023, 0), 2, 9), Resize::Stay, "the block would eat into the margin");
    assert_eq!(z.decide(mem(2048 + margin + 1024, 0), 2, 12), Resize::Grow);
    assert_eq!(z.decide(mem(100_000, 0), 8, 20), Resize::Stay, "at its most");
}

#[test]
fn the_sizer_gives_back_when_someone_is_refused() {
    let mut z = Sizer::new(1024, 64);
    assert_eq!(z.decide(mem(50_000, 7), 10, 0), Resize::Stay, "the first look sets the counter");
    // 256 frames refused with 2,100 free: enough blocks for the reserve, the margin
    // and what was refused.
    let want: u64 = 2048 + 16384 + 256 - 2100;
    assert_eq!(z.decide(mem(2100, 7 + 256), 10, 0), Resize::Shrink(want.div_ceil(1024).min(9)));
    assert_eq!(z.decide(mem(2100, 7 + 512), 3, 0), Resize::Shrink(2), "never the first block");
    assert_eq!(z.decide(mem(2100, 7 + 768), 1, 0), Resize::Stay, "nothing grown to give");
    // Low memory with nobody refused yet: give back ahead, one block at least.
    assert_eq!(z.decide(mem(2048 + 8191, 7 + 768), 4, 0), Resize::Shrink(3));
    assert_eq!(z.decide(mem(2048 + 16384 - 10, 7 + 768), 4, 100), Resize::Stay, "between the marks: neither");
    // No growth in the decision that saw a refusal, whatever the evictions.
    assert!(matches!(z.decide(mem(100_000, 7 + 1000), 4, 200), Resize::Shrink(_)));
}
