//! Hits without a call (docs/storage.md, "Hits served by the block service"): what the
//! cache shares with its bound client, the block service, in its own frames, so that a
//! buffered read whose blocks are all cached costs the block service no call to the
//! cache (under TCG a call to another address space flushes the software TLB).
//!
//! - **Tags.** The first slots of each block of frames (`Layout::tag_slots`) are never
//!   handed out: they hold one word per slot of that block, its tag: the block it holds
//!   plus one while it is valid, 0 otherwise. Only the cache writes tags. The block service
//!   remembers where it last saw each block (its hints) and, before copying a hit out of
//!   slot `s`, checks that `s` lies below the limit and that `s`'s tag names the block.
//! - **The limit** (word 0 of the first block, a tag word no slot uses): slots handed out
//!   lie below it. The cache lowers it before it gives a block of frames back, and frees
//!   the frames only after the block service has next called it, so a slot the block
//!   service checked against the limit stays mapped until its copy is over.
//! - **The touch ring** (the first block's next slot): the runs of blocks the block
//!   service hit without a call, in order (`run_entry`). The cache applies them (recency, hit counts) before it
//!   serves any request, so evictions and `STATS` see every hit as they would had each
//!   been looked up. One producer (the block service), one consumer (the cache); when it
//!   is full the block service looks its blocks up by a call, which drains it.
//!
//! Why the check is enough: a slot's contents change only by the block service's own
//! fills and writes, and a valid block leaves a slot only while the block service is
//! inside a call to the cache (an eviction, an invalidation) or when a block of frames is
//! retired (the limit above). So a tag read as `block + 1` between two of its calls means
//! the slot holds that block until its next call.

use alloc::vec::Vec;

/// Bytes of a slot (a device block, a page).
pub const SLOT_BYTES: u64 = 4096;
/// Touches the ring holds.
pub const RING_ENTRIES: u64 = (SLOT_BYTES - RING_FIRST) / 8;
/// Where the ring's words lie in its page: the producer's count, the consumer's count,
/// the entries.
const RING_HEAD: u64 = 0;
const RING_TAIL: u64 = 8;
const RING_FIRST: u64 = 64;
/// Where the limit lies (from the frames' base).
pub const LIMIT_AT: u64 = 0;

/// Where tags, the limit and the ring lie in a cache of blocks of `block` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    block: u32,
}

impl Layout {
    /// Blocks of `block` slots: a power of two of at least 4 (two reserved slots in the
    /// first block leave it some) and at most `MAX_SLOTS`.
    pub fn new(block: u32) -> Option<Layout> {
        (block.is_power_of_two() && (4..=super::MAX_SLOTS).contains(&block)).then_some(Layout { block })
    }

    /// Slots of each block of frames.
    pub fn block(&self) -> u32 {
        self.block
    }

    /// The leading slots of each block that hold its slots' tags.
    pub fn tag_slots(&self) -> u32 {
        (self.block as u64 * 8).div_ceil(SLOT_BYTES) as u32
    }

    /// Whether slot `s` is never handed out (it holds tags, or it is the ring).
    pub fn reserved(&self, s: u32) -> bool {
        s % self.block < self.tag_slots() + (s < self.block) as u32
    }

    /// Slots of a cache of `blocks` blocks that may hold blocks.
    pub fn usable(&self, blocks: u32) -> u32 {
        blocks * (self.block - self.tag_slots()) - (blocks > 0) as u32
    }

    /// Where slot `s`'s tag lies, in bytes from the frames' base.
    pub fn tag_at(&self, s: u32) -> u64 {
        let (k, i) = ((s / self.block) as u64, (s % self.block) as u64);
        k * self.block as u64 * SLOT_BYTES + 8 * i
    }

    /// Where the touch ring's page lies, in bytes from the frames' base.
    pub fn ring_at(&self) -> u64 {
        self.tag_slots() as u64 * SLOT_BYTES
    }
}

/// A valid slot's tag.
pub fn tag(block: u64) -> u64 {
    block.wrapping_add(1)
}

/// Bits of a touch ring entry that hold the run's first block; its length is above them.
const RUN_FIRST_BITS: u32 = 56;

/// The ring's entry for a run of `n` (1..=255) blocks from `first` served without a call
/// (one entry per operation's run, so that the cache sees the runs it would have been
/// asked for: its stream detector counts runs), if it fits one.
pub fn run_entry(first: u64, n: u64) -> Option<u64> {
    (first < 1 << RUN_FIRST_BITS && (1..256).contains(&n)).then_some(first | n << RUN_FIRST_BITS)
}

/// The run (first block, blocks) of a ring entry (from another program: `n` may be 0).
pub fn entry_run(e: u64) -> (u64, u64) {
    (e & ((1 << RUN_FIRST_BITS) - 1), e >> RUN_FIRST_BITS)
}

/// Words of the cache's frames, by byte offset from their base (8-byte aligned, within
/// a block of frames mapped here): read and written volatile, the other program's side
/// changing them.
pub trait Words {
    fn read(&self, at: u64) -> u64;
    fn write(&self, at: u64, v: u64);
}

/// The producer's half (the block service): append `blocks` to the ring, all of them or
/// none (false: no room for them all).
pub fn push(w: &impl Words, l: &Layout, blocks: &[u64]) -> bool {
    let r = l.ring_at();
    let (head, tail) = (w.read(r + RING_HEAD), w.read(r + RING_TAIL));
    let used = head.wrapping_sub(tail);
    if used > RING_ENTRIES || RING_ENTRIES - used < blocks.len() as u64 {
        return false;
    }
    for (k, &b) in blocks.iter().enumerate() {
        w.write(r + RING_FIRST + 8 * (head.wrapping_add(k as u64) % RING_ENTRIES), b);
    }
    // The entries before the count that publishes them.
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    w.write(r + RING_HEAD, head.wrapping_add(blocks.len() as u64));
    true
}

/// The consumer's half (the cache): each block appended since the last drain, in order,
/// to `f`; how many. The producer is another program: a count that runs further ahead
/// than the ring holds loses what the ring held (touches steer recency only).
pub fn drain(w: &impl Words, l: &Layout, mut f: impl FnMut(u64)) -> u64 {
    let r = l.ring_at();
    let (head, tail) = (w.read(r + RING_HEAD), w.read(r + RING_TAIL));
    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
    let n = head.wrapping_sub(tail);
    if n == 0 {
        return 0;
    }
    if n > RING_ENTRIES {
        w.write(r + RING_TAIL, head);
        return 0;
    }
    for k in 0..n {
        f(w.read(r + RING_FIRST + 8 * (tail.wrapping_add(k) % RING_ENTRIES)));
    }
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    w.write(r + RING_TAIL, head);
    n
}

/// Start the ring empty (the consumer, before a new producer attaches).
pub fn reset(w: &impl Words, l: &Layout) {
    let r = l.ring_at();
    w.write(r + RING_TAIL, 0);
    w.write(r + RING_HEAD, 0);
}

/// The block service's memory of where it last saw each block in the cache, exactly (no two blocks crowd each other
/// out): for each slot the block it was last seen holding, and an open-addressed table
/// (linear probing, at most half full) from block to slot. 16 bytes per 4 KiB slot. A
/// hint is only a guess: `direct` checks it against the cache's tag before it trusts it.
#[derive(Default)]
pub struct Hints {
    /// Per slot: `tag(block)` of the block last seen in it, 0 for none.
    by_slot: Vec<u64>,
    /// Slot + 1 (0: empty), at the place its block hashes to or after.
    table: Vec<u32>,
    /// 64 − log2 of the table's length (the hash's top bits index it).
    shift: u32,
}

impl Hints {
    fn home(&self, block: u64) -> usize {
        (block.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Hints for slots up to `slots` (the cache grew): both tables grow with them, if
    /// memory for them can be had (false: hints stay for the slots there were).
    pub fn grow_to(&mut self, slots: u64) -> bool {
        if slots <= self.by_slot.len() as u64 {
            return true;
        }
        if slots > super::MAX_SLOTS as u64 {
            return false;
        }
        let want = (2 * slots).next_power_of_two() as usize;
        let (mut by_slot, mut table): (Vec<u64>, Vec<u32>) = (Vec::new(), Vec::new());
        if by_slot.try_reserve_exact(slots as usize).is_err() || table.try_reserve_exact(want).is_err() {
            return false;
        }
        by_slot.extend_from_slice(&self.by_slot);
        by_slot.resize(slots as usize, 0);
        table.resize(want, 0);
        self.by_slot = by_slot;
        self.table = table;
        self.shift = 64 - want.trailing_zeros();
        for s in 0..self.by_slot.len() {
            if self.by_slot[s] != 0 {
                let mut i = self.home(self.by_slot[s] - 1);
                while self.table[i] != 0 {
                    i = (i + 1) & (self.table.len() - 1);
                }
                self.table[i] = s as u32 + 1;
            }
        }
        true
    }

    /// Where `block`'s entry lies in the table.
    fn find(&self, block: u64) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = self.home(block);
        loop {
            let e = self.table[i];
            if e == 0 {
                return None;
            }
            if self.by_slot[e as usize - 1] == tag(block) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Empty place `i`, moving back the entries after it that would be lost behind the gap.
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.table.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let e = self.table[j];
            if e == 0 {
                break;
            }
            let k = self.home(self.by_slot[e as usize - 1] - 1);
            // The entry at j may fill the gap at i if its home is not within (i, j].
            let stays = if i <= j { i < k && k <= j } else { i < k || k <= j };
            if !stays {
                self.table[i] = e;
                i = j;
            }
        }
        self.table[i] = 0;
    }

    /// The cache put `block` in `slot` (a hit or a fill it answered): what the slot held
    /// before, and where the block was before, are forgotten. A slot past the hints' is not
    /// remembered.
    pub fn saw(&mut self, block: u64, slot: u64) {
        let Ok(slot) = usize::try_from(slot) else { return };
        if slot >= self.by_slot.len() {
            return;
        }
        let t = tag(block);
        if t == 0 || self.by_slot[slot] == t {
            return;
        }
        // The block the slot held before, and the slot the block was in before, go.
        if self.by_slot[slot] != 0 {
            if let Some(i) = self.find(self.by_slot[slot] - 1) {
                self.remove_at(i);
            }
            self.by_slot[slot] = 0;
        }
        if let Some(i) = self.find(block) {
            let old = self.table[i] as usize - 1;
            self.by_slot[old] = 0;
            self.table[i] = slot as u32 + 1;
        } else {
            let mask = self.table.len() - 1;
            let mut i = self.home(block);
            while self.table[i] != 0 {
                i = (i + 1) & mask;
            }
            self.table[i] = slot as u32 + 1;
        }
        self.by_slot[slot] = t;
    }

    /// The slot `block` was last seen in, if it is remembered.
    pub fn slot(&self, block: u64) -> Option<u32> {
        self.find(block).map(|i| self.table[i] - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::RefCell;

    /// Frames of `blocks` blocks, as words.
    struct Mem(RefCell<alloc::vec::Vec<u64>>);

    impl Mem {
        fn new(l: &Layout, blocks: u32) -> Mem {
            Mem(RefCell::new(alloc::vec![0; (blocks as u64 * l.block() as u64 * SLOT_BYTES / 8) as usize]))
        }
    }

    impl Words for Mem {
        fn read(&self, at: u64) -> u64 {
            assert!(at.is_multiple_of(8));
            self.0.borrow()[(at / 8) as usize]
        }
        fn write(&self, at: u64, v: u64) {
            assert!(at.is_multiple_of(8));
            self.0.borrow_mut()[(at / 8) as usize] = v;
        }
    }

    /// Hints are exact against a model through many changes and a growth: every block
    /// is found where it was last seen, and nowhere once its slot held another.
    #[test]
    fn hints_remember_exactly_where_each_block_was_last_seen() {
        use alloc::collections::BTreeMap;
        let mut h = Hints::default();
        assert_eq!(h.slot(3), None);
        h.saw(3, 0);
        assert_eq!(h.slot(3), None, "no slots yet: nothing remembered");
        assert!(h.grow_to(64));
        let (mut by_slot, mut by_block): (BTreeMap<u64, u64>, BTreeMap<u64, u64>) = Default::default();
        let mut slots = 64u64;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for round in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if round == 100_000 {
                assert!(h.grow_to(1000));
                slots = 1000;
            }
            // Blocks far apart and close together (many collide in the table's home).
            let b = if x.is_multiple_of(3) { (x >> 8) % 4000 } else { ((x >> 8) % 200) << 40 };
            let s = (x >> 32) % (slots + 8);
            h.saw(b, s);
            if s < slots {
                if let Some(old) = by_slot.insert(s, b) {
                    by_block.remove(&old);
                }
                if let Some(was) = by_block.insert(b, s) {
                    if was != s {
                        by_slot.remove(&was);
                    }
                }
            }
            if round % 997 == 0 || round > 199_000 {
                for (&b, &s) in &by_block {
                    assert_eq!(h.slot(b), Some(s as u32), "round {round}: block {b}");
                }
                assert_eq!(h.table.iter().filter(|&&e| e != 0).count(), by_block.len());
            }
            let probe = (x >> 16) % 4000;
            assert_eq!(h.slot(probe), by_block.get(&probe).map(|&s| s as u32), "round {round}: block {probe}");
        }
        // The last block has no tag: never remembered.
        h.saw(u64::MAX, 1);
        assert_eq!(h.slot(u64::MAX), None);
        assert!(!h.grow_to(super::super::MAX_SLOTS as u64 + 1));
    }

    #[test]
    fn run_entries_round_trip_and_refuse_what_does_not_fit() {
        for (f, n) in [(0, 1), (5, 8), ((1 << 56) - 1, 255)] {
            assert_eq!(entry_run(run_entry(f, n).unwrap()), (f, n));
        }
        assert_eq!(run_entry(1 << 56, 1), None);
        assert_eq!(run_entry(3, 0), None);
        assert_eq!(run_entry(3, 256), None);
    }

    #[test]
    fn layouts_refuse_odd_blocks() {
        for b in [0, 1, 2, 3, 6, 1000, super::super::MAX_SLOTS * 2] {
            assert_eq!(Layout::new(b), None, "{b}");
        }
        assert!(Layout::new(4).is_some() && Layout::new(1024).is_some());
    }

    #[test]
    fn tags_lie_in_reserved_slots_of_their_own_block() {
        for block in [4u32, 64, 512, 1024, 4096] {
            let l = Layout::new(block).unwrap();
            let blocks = 3;
            let mut usable = 0;
            for s in 0..blocks * block {
                let at = l.tag_at(s);
                // The tag lies in its own block's leading (reserved) slots.
                let (page, k) = (at / SLOT_BYTES, (s / block) as u64);
                assert_eq!(page / block as u64, k, "slot {s} of blocks of {block}");
                assert!(l.reserved(page as u32), "slot {s}'s tag lies in a slot handed out");
                if !l.reserved(s) {
                    usable += 1;
                    // No usable slot's tag is the limit's word or in the ring's page.
                    assert_ne!(at, LIMIT_AT);
                    assert_ne!(at / SLOT_BYTES, l.ring_at() / SLOT_BYTES);
                }
            }
            assert_eq!(usable, l.usable(blocks));
            // The ring's page is reserved, in the first block, and holds no tag.
            assert!(l.reserved((l.ring_at() / SLOT_BYTES) as u32));
            assert!(l.ring_at() >= block as u64 * 8);
            assert!(l.usable(1) > 0);
        }
    }

    #[test]
    fn the_ring_keeps_order_and_refuses_past_its_room() {
        let l = Layout::new(64).unwrap();
        let m = Mem::new(&l, 1);
        let mut got = alloc::vec::Vec::new();
        let mut next = 0u64;
        // Many rounds, so the counts wrap the ring many times.
        for round in 0..50 {
            let n = (round * 37) % 200 + 1;
            let mut pushed = alloc::vec::Vec::new();
            loop {
                let batch: alloc::vec::Vec<u64> = (next..next + 7).collect();
                if !push(&m, &l, &batch) {
                    break;
                }
                pushed.extend_from_slice(&batch);
                next += 7;
                if pushed.len() >= n {
                    break;
                }
            }
            assert!(pushed.len() as u64 <= RING_ENTRIES);
            got.clear();
            assert_eq!(drain(&m, &l, |b| got.push(b)), pushed.len() as u64);
            assert_eq!(got, pushed);
        }
        // Full: all or none.
        let big: alloc::vec::Vec<u64> = (0..RING_ENTRIES).collect();
        assert!(push(&m, &l, &big));
        assert!(!push(&m, &l, &[1]));
        assert_eq!(drain(&m, &l, |_| {}), RING_ENTRIES);
        assert!(push(&m, &l, &[1]));
    }

    #[test]
    fn a_hostile_head_loses_touches_not_the_cache() {
        let l = Layout::new(64).unwrap();
        let m = Mem::new(&l, 1);
        for head in [RING_ENTRIES + 1, u64::MAX, 1 << 40] {
            m.write(l.ring_at() + RING_HEAD, head);
            let mut n = 0;
            assert_eq!(drain(&m, &l, |_| n += 1), 0);
            assert_eq!(n, 0);
            // The ring starts again from where the producer is.
            assert!(push(&m, &l, &[5, 6]));
            let mut got = alloc::vec::Vec::new();
            assert_eq!(drain(&m, &l, |b| got.push(b)), 2);
            assert_eq!(got, [5, 6]);
        }
        reset(&m, &l);
        assert_eq!(drain(&m, &l, |_| {}), 0);
    }
}
