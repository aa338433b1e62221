//! An interest set and a ready list, in epoll's shape, for `net`'s readiness wait
//! (`net_api::WATCH`, `WAIT_READY`; docs/network.md, "Waiting").
//!
//! A client says once what it waits for on each of its sockets (`watch`: add, change,
//! remove), not on every wait. Whatever may change a socket's readiness — a frame for
//! it, a request on it, a timer — `mark`s it: it joins the ready list (once, however
//! often it is marked). A wait (`collect`) looks only at the marked entries, asks the
//! caller which of the watched events hold now, and gives those; its cost is the number
//! marked since the last wait, not the number watched.
//!
//! Level-triggered: an entry given by a wait stays on the list, and the next wait looks
//! at it again (it is given again while its events hold: a reader that left bytes
//! unread is told again); one whose events no longer hold leaves the list until it is
//! marked again. A new or changed entry is marked at once, so its state now is seen.
//!
//! Bounded: at most `max` entries (`Full` past it; changing or removing one is always
//! possible), and the list never holds more than one place per entry plus a bounded
//! slack of places left by removed entries (`compact`).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::{BTreeMap, VecDeque};

/// `watch` past `max` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

#[derive(Debug, Clone, Copy)]
struct Entry {
    events: u64,
    token: u64,
    /// On the ready list (at most one live place there).
    queued: bool,
}

/// The interest set of one client and its ready list, keyed by `K` (net: a socket's
/// or a transfer's handle).
#[derive(Debug)]
pub struct Set<K> {
    table: BTreeMap<K, Entry>,
    list: VecDeque<K>,
    max: usize,
}

impl<K: Ord + Copy> Set<K> {
    /// An empty set that holds at most `max` entries.
    pub const fn new(max: usize) -> Self {
        Set { table: BTreeMap::new(), list: VecDeque::new(), max }
    }

    /// Entries watched.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The most entries it holds.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Watch `events` of `key`, given back with `token` when ready; `events` 0 removes
    /// it. A new or changed entry is marked (its state now is looked at by the next
    /// wait). `Full`: a new entry past `max`.
    pub fn watch(&mut self, key: K, events: u64, token: u64) -> Result<(), Full> {
        if events == 0 {
            self.remove(&key);
            return Ok(());
        }
        match self.table.get_mut(&key) {
            Some(e) => {
                e.events = events;
                e.token = token;
            }
            None => {
                if self.table.len() >= self.max {
                    return Err(Full);
                }
                self.table.insert(key, Entry { events, token, queued: false });
            }
        }
        self.mark(&key);
        Ok(())
    }

    /// Stop watching `key`; whether it was watched. (Its place on the list, if any, is
    /// skipped by the next wait.)
    pub fn remove(&mut self, key: &K) -> bool {
        let was = self.table.remove(key).is_some();
        self.compact();
        was
    }

    /// What `key` is watched for and its token.
    pub fn get(&self, key: &K) -> Option<(u64, u64)> {
        self.table.get(key).map(|e| (e.events, e.token))
    }

    /// Something touched `key`: if it is watched, the next wait looks at it. O(log n).
    pub fn mark(&mut self, key: &K) {
        if let Some(e) = self.table.get_mut(key) {
            if !e.queued {
                e.queued = true;
                self.list.push_back(*key);
                self.compact();
            }
        }
    }

    /// Mark every entry (a sweep for what no frame or request announces: net does it
    /// once a second, not per event).
    pub fn mark_all(&mut self) {
        for (k, e) in self.table.iter_mut() {
            if !e.queued {
                e.queued = true;
                self.list.push_back(*k);
            }
        }
    }

    /// Is any entry marked (a wait would look at something)?
    pub fn pending(&self) -> bool {
        !self.list.is_empty()
    }

    /// Look at each marked entry once, in the order marked: `ready(key, events)` says
    /// which of its watched events hold now (0: none; None: the key is gone, and its
    /// entry with it). At most `max` ready ones are given to `out(token, events)` and
    /// stay on the list (level-triggered); the others leave it. How many were given.
    pub fn collect(
        &mut self,
        max: usize,
        mut ready: impl FnMut(K, u64) -> Option<u64>,
        mut out: impl FnMut(u64, u64),
    ) -> usize {
        let mut given = 0;
        let mut again = alloc::vec::Vec::new();
        let n = self.list.len();
        for _ in 0..n {
            if given >= max {
                break;
            }
            let Some(k) = self.list.pop_front() else { break };
            let Some(e) = self.table.get_mut(&k) else { continue };
            if !e.queued {
                // A place left by an entry removed and watched again since.
                continue;
            }
            // Off the list while looked at: another place of the same key is skipped.
            e.queued = false;
            let (events, token) = (e.events, e.token);
            match ready(k, events) {
                None => {
                    self.table.remove(&k);
                }
                Some(r) if r & events != 0 => {
                    out(token, r & events);
                    given += 1;
                    again.push(k);
                }
                Some(_) => {}
            }
        }
        for k in again {
            if let Some(e) = self.table.get_mut(&k) {
                e.queued = true;
                self.list.push_back(k);
            }
        }
        given
    }

    /// Drop the places of removed entries once they are as many as the live ones (and
    /// a few): the list stays within twice the set.
    fn compact(&mut self) {
        if self.list.len() <= 2 * self.table.len() + 16 {
            return;
        }
        let table = &mut self.table;
        let old = core::mem::take(&mut self.list);
        for k in old {
            if let Some(e) = table.get_mut(&k) {
                if e.queued {
                    // Kept once: its other places are dropped.
                    e.queued = false;
                    self.list.push_back(k);
                }
            }
        }
        for k in &self.list {
            if let Some(e) = table.get_mut(k) {
                e.queued = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    const R: u64 = 1;
    const W: u64 = 2;

    fn take(s: &mut Set<u64>, max: usize, holds: impl Fn(u64) -> u64) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        s.collect(max, |k, _| Some(holds(k)), |t, e| v.push((t, e)));
        v
    }

    #[test]
    fn a_new_entry_is_looked_at_once_then_only_when_marked() {
        let mut s = Set::new(8);
        s.watch(1, R, 100).unwrap();
        s.watch(2, R, 200).unwrap();
        assert_eq!(take(&mut s, 8, |_| 0), Vec::new());
        assert!(!s.pending());
        // Nothing marked: nothing looked at, whatever holds.
        let mut looked = 0;
        s.collect(
            8,
            |_, _| {
                looked += 1;
                Some(R)
            },
            |_, _| {},
        );
        assert_eq!(looked, 0);
        s.mark(&2);
        assert_eq!(take(&mut s, 8, |_| R), [(200, R)]);
    }

    #[test]
    fn level_triggered_an_entry_given_is_looked_at_again() {
        let mut s = Set::new(8);
        s.watch(1, R, 7).unwrap();
        assert_eq!(take(&mut s, 8, |_| R), [(7, R)]);
        assert_eq!(take(&mut s, 8, |_| R), [(7, R)], "still readable: given again");
        assert_eq!(take(&mut s, 8, |_| 0), []);
        assert_eq!(take(&mut s, 8, |_| R), [], "left the list once it held no more");
    }

    #[test]
    fn only_the_watched_events_are_given() {
        let mut s = Set::new(8);
        s.watch(1, R, 1).unwrap();
        assert_eq!(take(&mut s, 8, |_| W), []);
        s.watch(1, R | W, 1).unwrap();
        assert_eq!(take(&mut s, 8, |_| W), [(1, W)], "a change is looked at at once");
    }

    #[test]
    fn the_cost_of_a_wait_is_the_marked_not_the_watched() {
        let mut s = Set::new(100_000);
        for k in 0..10_000 {
            s.watch(k, R, k).unwrap();
        }
        assert_eq!(take(&mut s, usize::MAX, |_| 0).len(), 0);
        s.mark(&4242);
        s.mark(&4242);
        s.mark(&17);
        let mut looked = Vec::new();
        let n = s.collect(
            usize::MAX,
            |k, _| {
                looked.push(k);
                Some(R)
            },
            |_, _| {},
        );
        assert_eq!((n, looked), (2, alloc::vec![4242, 17]));
    }

    #[test]
    fn at_most_max_are_given_and_the_rest_wait_their_turn() {
        let mut s = Set::new(8);
        for k in 0..5 {
            s.watch(k, R, k).unwrap();
        }
        assert_eq!(take(&mut s, 2, |_| R), [(0, R), (1, R)]);
        assert_eq!(take(&mut s, 3, |_| R), [(2, R), (3, R), (4, R)]);
        assert_eq!(take(&mut s, 2, |_| R), [(0, R), (1, R)], "the given ones come after");
    }

    #[test]
    fn bounded_with_a_clear_error_and_changes_still_allowed() {
        let mut s = Set::new(2);
        s.watch(1, R, 1).unwrap();
        s.watch(2, R, 2).unwrap();
        assert_eq!(s.watch(3, R, 3), Err(Full));
        assert_eq!(s.watch(2, W, 22), Ok(()));
        assert_eq!(s.get(&2), Some((W, 22)));
        s.watch(1, 0, 0).unwrap();
        assert_eq!(s.watch(3, R, 3), Ok(()));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn removed_entries_are_not_given_and_their_places_stay_bounded() {
        let mut s = Set::new(4);
        for round in 0..10_000u64 {
            s.watch(1, R, round).unwrap();
            assert!(s.remove(&1));
            assert!(s.list.len() <= 2 * s.len() + 17, "round {round}: {}", s.list.len());
        }
        assert_eq!(take(&mut s, 8, |_| R), []);
        s.watch(1, R, 5).unwrap();
        s.remove(&1);
        s.watch(1, R, 6).unwrap();
        assert_eq!(take(&mut s, 8, |_| R), [(6, R)], "given once, with its new token");
    }

    #[test]
    fn a_gone_key_leaves_the_set() {
        let mut s = Set::new(4);
        s.watch(1, R, 1).unwrap();
        s.watch(2, R, 2).unwrap();
        let mut v = Vec::new();
        s.collect(8, |k, _| if k == 1 { None } else { Some(R) }, |t, e| v.push((t, e)));
        assert_eq!(v, [(2, R)]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(&1), None);
    }

    #[test]
    fn mark_all_looks_at_everything_once() {
        let mut s = Set::new(8);
        for k in 0..4 {
            s.watch(k, R, k).unwrap();
        }
        assert_eq!(take(&mut s, 8, |_| 0), []);
        s.mark_all();
        s.mark_all();
        assert_eq!(take(&mut s, 8, |k| if k == 3 { R } else { 0 }), [(3, R)]);
    }

    #[test]
    fn marking_an_unwatched_key_does_nothing() {
        let mut s: Set<u64> = Set::new(8);
        s.mark(&9);
        assert!(!s.pending());
    }
}
