//! Doubly-linked lists of small integer ids with the links kept outside the
//! elements (one `Links` table serves every list an id can be on, one at a time).
//! Used for run queues and IPC send queues: O(1) insert and remove, no allocation.

pub const NIL: u32 = u32::MAX;

/// Head of one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    pub const fn new() -> List {
        List { head: NIL, tail: NIL, len: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn front(&self) -> Option<u32> {
        if self.head == NIL {
            None
        } else {
            Some(self.head)
        }
    }
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

/// Link storage for ids `0..N`. An id is on at most one list of this table.
pub struct Links<const N: usize> {
    next: [u32; N],
    prev: [u32; N],
    linked: [bool; N],
}

impl<const N: usize> Links<N> {
    pub const fn new() -> Self {
        Links { next: [NIL; N], prev: [NIL; N], linked: [false; N] }
    }

    pub fn is_linked(&self, id: u32) -> bool {
        (id as usize) < N && self.linked[id as usize]
    }

    /// Append `id`. Returns false (and does nothing) if `id` is out of range or already linked.
    pub fn push_back(&mut self, list: &mut List, id: u32) -> bool {
        let i = id as usize;
        if i >= N || self.linked[i] {
            return false;
        }
        self.linked[i] = true;
        self.next[i] = NIL;
        self.prev[i] = list.tail;
        if list.tail == NIL {
            list.head = id;
        } else {
            self.next[list.tail as usize] = id;
        }
        list.tail = id;
        list.len += 1;
        true
    }

    /// Unlink `id` from `list`. The caller guarantees that `id` is on `list` if it is
    /// linked at all; an unlinked id is ignored.
    pub fn remove(&mut self, list: &mut List, id: u32) -> bool {
        let i = id as usize;
        if i >= N || !self.linked[i] {
            return false;
        }
        let (p, n) = (self.prev[i], self.next[i]);
        if p == NIL {
            list.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            list.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.linked[i] = false;
        self.next[i] = NIL;
        self.prev[i] = NIL;
        list.len -= 1;
        true
    }

    pub fn pop_front(&mut self, list: &mut List) -> Option<u32> {
        let id = list.front()?;
        self.remove(list, id);
        Some(id)
    }

    pub fn next_of(&self, id: u32) -> Option<u32> {
        let n = *self.next.get(id as usize)?;
        if n == NIL {
            None
        } else {
            Some(n)
        }
    }

    /// Ids of `list` from front to back.
    pub fn iter<'a>(&'a self, list: &List) -> impl Iterator<Item = u32> + 'a {
        let mut cur = list.head;
        core::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let id = cur;
            cur = self.next[id as usize];
            Some(id)
        })
    }
}

impl<const N: usize> Default for Links<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::vec::Vec;

    #[test]
    fn push_pop_order() {
        let mut l = Links::<8>::new();
        let mut a = List::new();
        assert!(l.push_back(&mut a, 3));
        assert!(l.push_back(&mut a, 1));
        assert!(!l.push_back(&mut a, 1), "double insert refused");
        assert!(!l.push_back(&mut a, 8), "out of range refused");
        assert_eq!(l.iter(&a).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(l.pop_front(&mut a), Some(3));
        assert_eq!(l.pop_front(&mut a), Some(1));
        assert_eq!(l.pop_front(&mut a), None);
        assert!(a.is_empty());
    }

    #[test]
    fn random_against_model() {
        // Several lists over one link table, checked against VecDeques.
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        const N: usize = 32;
        let mut links = Links::<N>::new();
        let mut lists = [List::new(); 4];
        let mut model: [VecDeque<u32>; 4] = Default::default();
        let mut home = [usize::MAX; N];
        for _ in 0..20_000 {
            let id = (rnd() % N as u64) as u32;
            let which = (rnd() % 4) as usize;
            match rnd() % 3 {
                0 => {
                    let ok = links.push_back(&mut lists[which], id);
                    assert_eq!(ok, home[id as usize] == usize::MAX);
                    if ok {
                        model[which].push_back(id);
                        home[id as usize] = which;
                    }
                }
                1 => {
                    let h = home[id as usize];
                    if h != usize::MAX {
                        assert!(links.remove(&mut lists[h], id));
                        model[h].retain(|x| *x != id);
                        home[id as usize] = usize::MAX;
                    }
                }
                _ => {
                    let got = links.pop_front(&mut lists[which]);
                    assert_eq!(got, model[which].pop_front());
                    if let Some(g) = got {
                        home[g as usize] = usize::MAX;
                    }
                }
            }
            for w in 0..4 {
                assert_eq!(links.iter(&lists[w]).collect::<Vec<_>>(), model[w].iter().copied().collect::<Vec<_>>());
                assert_eq!(lists[w].len(), model[w].len());
            }
        }
    }
}
