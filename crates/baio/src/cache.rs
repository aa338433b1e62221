//! The shared block cache's bookkeeping (the `cache` server is a thin loop around it):
//! which block is in which slot, which slots are being filled, and least-recently-used
//! eviction among the valid ones. A slot being filled is never evicted; a block
//! invalidated while it is being filled is dropped when the fill ends.
//!
//! Each block is kept for an owner (the principal whose segment it belongs to). When
//! the least recently used block's owner has an eviction graft (VINO's hot list), the
//! owner's `CANDIDATES` least recently used blocks go to it and it picks the victim
//! among them — only among its own blocks, so no graft changes what another principal
//! keeps. The candidates it passed over move to the most recently used end (it chose
//! to keep them), so the next eviction shows it others.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

const NIL: u32 = u32::MAX;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The block is in this slot.
    Hit(u32),
    /// The block was not here: this slot is now reserved for it; fill it, then `filled`.
    Fill(u32),
    /// Another fill of this block is under way in this slot.
    Busy(u32),
    /// Every slot is being filled: go around the cache.
    Full,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free,
    Filling { stale: bool },
    Valid,
}

#[derive(Clone, Copy)]
struct Slot {
    block: u64,
    owner: u32,
    state: State,
    prev: u32,
    next: u32,
}

/// Counters a cache keeps.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub resident: u64,
    /// Evictions an owner's graft chose (a victim other than the least recently used).
    pub grafted: u64,
}

/// Blocks of one owner handed to its eviction graft at most.
pub const CANDIDATES: usize = 8;
/// Slots looked at from the least recently used end to find them.
const WALK: usize = 64;

/// Who picks the victim when the least recently used block's owner wants to.
pub trait Chooser {
    /// Does `owner` pick its own victims (has it an eviction graft)?
    fn wants(&mut self, owner: u32) -> bool;
    /// The index of the victim among `blocks` (the owner's, least recently used
    /// first), or `None` for the least recently used one.
    fn choose(&mut self, owner: u32, blocks: &[u64]) -> Option<usize>;
}

/// Plain LRU: nobody picks.
pub struct Lru;

impl Chooser for Lru {
    fn wants(&mut self, _: u32) -> bool {
        false
    }
    fn choose(&mut self, _: u32, _: &[u64]) -> Option<usize> {
        None
    }
}

pub struct Cache {
    map: BTreeMap<u64, u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The LRU list of valid slots: `lru` is the least recently used, `mru` the most.
    lru: u32,
    mru: u32,
    stats: Stats,
}

impl Cache {
    pub fn new(slots: u32) -> Cache {
        Cache {
            map: BTreeMap::new(),
            slots: (0..slots).map(|_| Slot { block: 0, owner: 0, state: State::Free, prev: NIL, next: NIL }).collect(),
            free: (0..slots).rev().collect(),
            lru: NIL,
            mru: NIL,
            stats: Stats::default(),
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn stats(&self) -> Stats {
        Stats { resident: self.map.len() as u64, ..self.stats }
    }

    fn unlink(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev == NIL { self.lru = next } else { self.slots[prev as usize].next = next }
        if next == NIL { self.mru = prev } else { self.slots[next as usize].prev = prev }
        self.slots[s as usize].prev = NIL;
        self.slots[s as usize].next = NIL;
    }

    fn push_mru(&mut self, s: u32) {
        self.slots[s as usize].prev = self.mru;
        self.slots[s as usize].next = NIL;
        if self.mru == NIL { self.lru = s } else { self.slots[self.mru as usize].next = s }
        self.mru = s;
    }

    fn release(&mut self, s: u32) {
        let b = self.slots[s as usize].block;
        self.map.remove(&b);
        self.slots[s as usize].state = State::Free;
        self.free.push(s);
    }

    /// `lookup_for` with owner 0 and plain LRU.
    pub fn lookup(&mut self, block: u64) -> Lookup {
        self.lookup_for(block, 0, &mut Lru)
    }

    /// The slot to evict: the least recently used, or the one its owner's graft picks.
    fn victim(&mut self, chooser: &mut dyn Chooser) -> u32 {
        let first = self.lru;
        let owner = self.slots[first as usize].owner;
        if !chooser.wants(owner) {
            return first;
        }
        let (mut c, mut blocks) = ([NIL; CANDIDATES], [0u64; CANDIDATES]);
        let (mut n, mut s, mut walked) = (0, first, 0);
        while s != NIL && n < CANDIDATES && walked < WALK {
            let sl = self.slots[s as usize];
            if sl.owner == owner {
                c[n] = s;
                blocks[n] = sl.block;
                n += 1;
            }
            s = sl.next;
            walked += 1;
        }
        if n < 2 {
            return first;
        }
        match chooser.choose(owner, &blocks[..n]) {
            Some(k) if k > 0 && k < n => {
                for &kept in &c[..k] {
                    self.unlink(kept);
                    self.push_mru(kept);
                }
                self.stats.grafted += 1;
                c[k]
            }
            _ => first,
        }
    }

    /// Look `block` up for `owner`; when a slot must be freed, `chooser` may pick it.
    pub fn lookup_for(&mut self, block: u64, owner: u32, chooser: &mut dyn Chooser) -> Lookup {
        if let Some(&s) = self.map.get(&block) {
            return match self.slots[s as usize].state {
                State::Valid => {
                    self.stats.hits += 1;
                    self.unlink(s);
                    self.push_mru(s);
                    Lookup::Hit(s)
                }
                _ => Lookup::Busy(s),
            };
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None if self.lru != NIL => {
                let v = self.victim(chooser);
                self.unlink(v);
                self.release(v);
                self.stats.evictions += 1;
                self.free.pop().unwrap()
            }
            None => return Lookup::Full,
        };
        self.stats.misses += 1;
        self.slots[s as usize].block = block;
        self.slots[s as usize].owner = owner;
        self.slots[s as usize].state = State::Filling { stale: false };
        self.map.insert(block, s);
        Lookup::Fill(s)
    }

    /// The fill of `block` ended (`ok`: the slot holds it now). False if no fill of it
    /// was under way.
    pub fn filled(&mut self, block: u64, ok: bool) -> bool {
        let Some(&s) = self.map.get(&block) else { return false };
        let State::Filling { stale } = self.slots[s as usize].state else { return false };
        if ok && !stale {
            self.slots[s as usize].state = State::Valid;
            self.push_mru(s);
        } else {
            self.release(s);
        }
        true
    }

    /// Forget blocks `first..first + n` (they were written without the cache).
    pub fn invalidate(&mut self, first: u64, n: u64) {
        let hit: Vec<(u64, u32)> = self.map.range(first..first.saturating_add(n)).map(|(b, s)| (*b, *s)).collect();
        for (_, s) in hit {
            match self.slots[s as usize].state {
                State::Valid => {
                    self.unlink(s);
                    self.release(s);
                }
                State::Filling { .. } => self.slots[s as usize].state = State::Filling { stale: true },
                State::Free => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(c: &mut Cache, b: u64) -> u32 {
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
        let mut c = Cache::new(3);
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
        let mut c = Cache::new(2);
        let a = match c.lookup(10) { Lookup::Fill(s) => s, o => panic!("{o:?}") };
        assert_eq!(c.lookup(10), Lookup::Busy(a));
        let _b = match c.lookup(11) { Lookup::Fill(s) => s, o => panic!("{o:?}") };
        assert_eq!(c.lookup(12), Lookup::Full, "both slots are being filled");
        assert!(c.filled(11, true));
        assert!(matches!(c.lookup(12), Lookup::Fill(_)), "the valid one is evicted, not the filling one");
        assert_eq!(c.lookup(10), Lookup::Busy(a));
    }

    #[test]
    fn failed_fill_and_invalidation() {
        let mut c = Cache::new(4);
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
        let mut c = Cache::new(8);
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

    fn fill_for(c: &mut Cache, b: u64, owner: u32, ch: &mut dyn Chooser) {
        match c.lookup_for(b, owner, ch) {
            Lookup::Fill(_) => assert!(c.filled(b, true)),
            Lookup::Hit(_) => {}
            o => panic!("block {b}: {o:?}"),
        }
    }

    #[test]
    fn an_owners_graft_keeps_its_hot_blocks_and_only_its_own() {
        let mut c = Cache::new(8);
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
        let mut c = Cache::new(8);
        fill_for(&mut c, 100, 7, &mut Lru);
        fill_for(&mut c, 101, 7, &mut Lru);
        for k in 0..40 {
            fill_for(&mut c, 200 + k, 7, &mut Lru);
            fill_for(&mut c, 900 + k, 3, &mut Lru);
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
        let mut c = Cache::new(4);
        for b in 0..4 {
            fill_for(&mut c, b, b as u32 % 2, &mut Liar);
        }
        // An answer out of range falls back to the least recently used.
        fill_for(&mut c, 10, 0, &mut Liar);
        assert!(matches!(c.lookup(0), Lookup::Fill(_)), "block 0 (the LRU) went");
    }
}
