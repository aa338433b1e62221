//! Priority run queues: 256 priorities, FIFO (round-robin) within a priority,
//! a bitmap to find the highest non-empty priority, and that priority kept at hand
//! (the IPC fastpath asks for it on every call; it changes only when a queue fills or
//! the highest one empties).

use crate::idlist::{Links, List};

pub const PRIORITIES: usize = 256;

pub struct RunQueue<const N: usize> {
    links: Links<N>,
    queues: [List; PRIORITIES],
    prio_of: [u8; N],
    bitmap: [u64; PRIORITIES / 64],
    /// The highest non-empty priority, -1 when every queue is empty.
    top: i16,
}

const _: () = assert!(PRIORITIES == 256, "highest() tests four bitmap words");

impl<const N: usize> RunQueue<N> {
    pub const fn new() -> Self {
        RunQueue {
            links: Links::new(),
            queues: [List::new(); PRIORITIES],
            prio_of: [0; N],
            bitmap: [0; PRIORITIES / 64],
            top: -1,
        }
    }

    pub fn contains(&self, id: u32) -> bool {
        self.links.is_linked(id)
    }

    /// Put `id` at the back of its priority's queue. No effect if already queued.
    pub fn enqueue(&mut self, id: u32, prio: u8) {
        if (id as usize) >= N || self.links.is_linked(id) {
            return;
        }
        self.prio_of[id as usize] = prio;
        self.links.push_back(&mut self.queues[prio as usize], id);
        self.bitmap[prio as usize / 64] |= 1 << (prio % 64);
        if prio as i16 > self.top {
            self.top = prio as i16;
        }
    }

    /// Remove `id` wherever it is queued. No effect if not queued.
    pub fn remove(&mut self, id: u32) {
        if !self.links.is_linked(id) {
            return;
        }
        let p = self.prio_of[id as usize] as usize;
        self.links.remove(&mut self.queues[p], id);
        if self.queues[p].is_empty() {
            self.bitmap[p / 64] &= !(1 << (p % 64));
            if p as i16 == self.top {
                self.top = self.scan();
            }
        }
    }

    /// Highest priority with a queued thread.
    #[inline]
    pub fn highest(&self) -> Option<u8> {
        (self.top >= 0).then_some(self.top as u8)
    }

    /// Some thread more important than `prio` is ready (one compare).
    #[inline(always)]
    pub fn any_above(&self, prio: u8) -> bool {
        self.top > prio as i16
    }

    /// The highest non-empty priority from the bitmap (-1: none): the four words tested
    /// from the top.
    fn scan(&self) -> i16 {
        let b = &self.bitmap;
        let (w, bits) = if b[3] != 0 {
            (3, b[3])
        } else if b[2] != 0 {
            (2, b[2])
        } else if b[1] != 0 {
            (1, b[1])
        } else if b[0] != 0 {
            (0, b[0])
        } else {
            return -1;
        };
        (w * 64 + 63 - bits.leading_zeros() as usize) as i16
    }

    /// Remove and return the front thread of the highest priority.
    pub fn pop_highest(&mut self) -> Option<u32> {
        let p = self.highest()?;
        let id = self.queues[p as usize].front()?;
        self.remove(id);
        Some(id)
    }
}

impl<const N: usize> Default for RunQueue<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_first_then_fifo() {
        let mut rq = RunQueue::<16>::new();
        rq.enqueue(1, 10);
        rq.enqueue(2, 200);
        rq.enqueue(3, 10);
        rq.enqueue(4, 200);
        rq.enqueue(4, 200); // duplicate ignored
        assert_eq!(rq.highest(), Some(200));
        assert_eq!(rq.pop_highest(), Some(2));
        assert_eq!(rq.pop_highest(), Some(4));
        assert_eq!(rq.pop_highest(), Some(1));
        rq.enqueue(1, 10); // round robin: back of the queue
        assert_eq!(rq.pop_highest(), Some(3));
        assert_eq!(rq.pop_highest(), Some(1));
        assert_eq!(rq.pop_highest(), None);
    }

    #[test]
    fn remove_clears_bitmap() {
        let mut rq = RunQueue::<16>::new();
        rq.enqueue(5, 255);
        rq.enqueue(6, 0);
        rq.remove(5);
        assert_eq!(rq.highest(), Some(0));
        rq.remove(6);
        assert_eq!(rq.highest(), None);
        rq.remove(6);
        assert!(!rq.contains(6));
    }

    /// The kept highest priority against a plain model under random operations.
    #[test]
    fn highest_matches_model() {
        let mut rq = RunQueue::<64>::new();
        let mut model: [Option<u8>; 64] = [None; 64];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let id = (seed % 64) as u32;
            // Few distinct priorities, often the same, so queues empty and refill.
            let prio = [0u8, 1, 63, 64, 65, 127, 128, 200, 255][(seed >> 8) as usize % 9];
            match (seed >> 16) % 3 {
                0 | 1 if model[id as usize].is_none() => {
                    rq.enqueue(id, prio);
                    model[id as usize] = Some(prio);
                }
                _ => {
                    rq.remove(id);
                    model[id as usize] = None;
                }
            }
            let want = model.iter().flatten().copied().max();
            assert_eq!(rq.highest(), want);
            for p in [0u8, 64, 127, 254] {
                assert_eq!(rq.any_above(p), want.is_some_and(|h| h > p));
            }
        }
    }
}
