//! The shared block cache's bookkeeping (the `cache` server is a thin loop around it):
//! which block is in which slot, which slots are being filled, and least-recently-used
//! eviction among the valid ones. A slot being filled is never evicted; a block
//! invalidated while it is being filled is dropped when the fill ends.

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
            slots: (0..slots).map(|_| Slot { block: 0, state: State::Free, prev: NIL, next: NIL }).collect(),
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

    pub fn lookup(&mut self, block: u64) -> Lookup {
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
                let v = self.lru;
                self.unlink(v);
                self.release(v);
                self.stats.evictions += 1;
                self.free.pop().unwrap()
            }
            None => return Lookup::Full,
        };
        self.stats.misses += 1;
        self.slots[s as usize].block = block;
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
}
