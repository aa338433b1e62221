//! Indexed min-heap of (deadline, id) for timeouts. Each id is in the heap at most
//! once, so its size is bounded by the number of threads whatever users do, and an
//! id's deadline can be removed in O(log n) when its IPC completes early.

const NIL: u32 = u32::MAX;

pub struct TimerHeap<const N: usize> {
    heap: [u32; N],
    key: [u64; N],
    pos: [u32; N],
    len: usize,
}

impl<const N: usize> TimerHeap<N> {
    pub const fn new() -> Self {
        TimerHeap { heap: [0; N], key: [0; N], pos: [NIL; N], len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < N && self.pos[id as usize] != NIL
    }

    /// Set (or move) the deadline of `id`.
    pub fn insert(&mut self, id: u32, deadline: u64) {
        let i = id as usize;
        if i >= N {
            return;
        }
        if self.pos[i] != NIL {
            self.remove(id);
        }
        let at = self.len;
        self.len += 1;
        self.heap[at] = id;
        self.key[i] = deadline;
        self.pos[i] = at as u32;
        self.sift_up(at);
    }

    /// Take `id`'s timer away (nothing if it has none: the common case, inline).
    #[inline]
    pub fn remove(&mut self, id: u32) {
        let i = id as usize;
        if i >= N || self.pos[i] == NIL {
            return;
        }
        self.remove_present(i);
    }

    fn remove_present(&mut self, i: usize) {
        let at = self.pos[i] as usize;
        self.pos[i] = NIL;
        self.len -= 1;
        if at != self.len {
            let moved = self.heap[self.len];
            self.heap[at] = moved;
            self.pos[moved as usize] = at as u32;
            self.sift_down(at);
            self.sift_up(self.pos[moved as usize] as usize);
        }
    }

    pub fn peek(&self) -> Option<(u32, u64)> {
        if self.len == 0 {
            None
        } else {
            let id = self.heap[0];
            Some((id, self.key[id as usize]))
        }
    }

    /// Remove and return the earliest entry if its deadline is `<= now`.
    pub fn pop_expired(&mut self, now: u64) -> Option<u32> {
        let (id, d) = self.peek()?;
        if d <= now {
            self.remove(id);
            Some(id)
        } else {
            None
        }
    }

    fn k(&self, at: usize) -> u64 {
        self.key[self.heap[at] as usize]
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a] as usize] = a as u32;
        self.pos[self.heap[b] as usize] = b as u32;
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.k(parent) <= self.k(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut m = at;
            if l < self.len && self.k(l) < self.k(m) {
                m = l;
            }
            if r < self.len && self.k(r) < self.k(m) {
                m = r;
            }
            if m == at {
                break;
            }
            self.swap(m, at);
            at = m;
        }
    }
}

impl<const N: usize> Default for TimerHeap<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn random_against_model() {
        let mut seed = 42u64;
        let mut rnd = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 33
        };
        let mut h = TimerHeap::<64>::new();
        let mut model: BTreeMap<u32, u64> = BTreeMap::new();
        for step in 0..50_000u64 {
            let id = (rnd() % 64) as u32;
            match rnd() % 4 {
                0 | 1 => {
                    let d = rnd() % 1000;
                    h.insert(id, d);
                    model.insert(id, d);
                }
                2 => {
                    h.remove(id);
                    model.remove(&id);
                }
                _ => {
                    let now = step % 1000;
                    let got = h.pop_expired(now);
                    let min = model.iter().map(|(i, d)| (*d, *i)).min();
                    match got {
                        Some(g) => {
                            let (d, _) = min.unwrap();
                            assert!(d <= now);
                            assert_eq!(model[&g], d, "popped an earliest deadline");
                            model.remove(&g);
                        }
                        None => assert!(min.is_none_or(|(d, _)| d > now)),
                    }
                }
            }
            assert_eq!(h.len(), model.len());
            for (i, _) in model.iter() {
                assert!(h.contains(*i));
            }
        }
    }
}
