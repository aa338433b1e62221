//! The shared block cache's bookkeeping (the `cache` server is a thin loop around it):
//! which block is in which slot, which slots are being filled, and eviction among the
//! valid ones in the order a replacement `Policy` keeps — least recently used first
//! (`Lru`) or most recently used first (`Mru`, for sequential streams larger than the
//! cache: the stream cycles through few slots instead of flushing everything). The
//! policy is a swappable component (`swap`, K42): the server swaps one for the other
//! while the cache runs, the recency order moving from one to the other. A slot being
//! filled is never evicted; a block invalidated while it is being filled is dropped
//! when the fill ends.
//!
//! Each block is kept for an owner (the principal whose segment it belongs to). When
//! the policy's first block's owner has an eviction graft (VINO's hot list), the
//! owner's first `CANDIDATES` blocks in the policy's order go to it and it picks the victim
//! among them — only among its own blocks, so no graft changes what another principal
//! keeps. The candidates it passed over move to the most recently used end (it chose
//! to keep them), so the next eviction shows it others.
//!
//! This file keeps the cache itself (slots, lookups, fills, eviction, growing and
//! retiring slots); the replacement policies are `policy`, the state handed to a
//! successor in a live update `handover`, how many frames the cache takes `sizer`,
//! the stream detector `sequential`, the `LOOKUPS` runs `runs`, the shared tags `tags`.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

mod handover;
mod policy;
pub mod runs;
mod sequential;
mod sizer;
pub mod tags;
#[cfg(test)]
mod tests;

pub use policy::{Lru, Mru, Policy, PolicyMethod, PolicyVia, Recency, CANONICAL, MAX_SLOTS, RECENCY_MOVED};
pub use sequential::{Sequential, TO_LRU, TO_MRU};
pub use sizer::{Memory, Resize, Sizer};

/// No slot.
pub const NIL: u32 = u32::MAX;

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
enum SlotState {
    Free,
    Filling { stale: bool },
    Valid,
}

#[derive(Clone, Copy)]
struct Slot {
    block: u64,
    owner: u32,
    state: SlotState,
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

/// Nobody picks: the policy's first slot goes.
pub struct NoGraft;

impl Chooser for NoGraft {
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
    /// Valid slots.
    valid: usize,
    stats: Stats,
    /// Slots at or past this one are being given back (`retire`): never handed out,
    /// dropped from the cache once no fill into them is under way (`shrink`).
    limit: u32,
    /// Where the shared tags lie (`tags`): slots reserved for them are never handed out.
    layout: Option<tags::Layout>,
    /// Tags changed since `take_tags` (slot, tag), in order, for the shared tags.
    changed: Vec<(u32, u64)>,
    /// Slots whose tags a `retire` cleared, as one range (`take_cleared`): a retire
    /// gives memory back, so it records no change per slot (which could need as much
    /// memory as the slots, when there is none to be had).
    cleared: Option<(u32, u32)>,
}

impl Cache {
    pub fn new(slots: u32) -> Cache {
        Cache {
            map: BTreeMap::new(),
            slots: (0..slots).map(|_| Slot { block: 0, owner: 0, state: SlotState::Free }).collect(),
            free: (0..slots).rev().collect(),
            valid: 0,
            stats: Stats::default(),
            limit: slots,
            layout: None,
            changed: Vec::new(),
            cleared: None,
        }
    }

    /// A cache of one block of frames that shares its tags (`tags`): the slots that hold
    /// them, and the ring, are never handed out; `take_tags` gives every change of a tag.
    pub fn with_layout(l: tags::Layout) -> Cache {
        let mut c = Cache::new(l.block());
        c.layout = Some(l);
        c.free.retain(|&s| !l.reserved(s));
        c
    }

    pub fn layout(&self) -> Option<tags::Layout> {
        self.layout
    }

    /// Every tag changed since the last call (slot, its tag: `tags::tag(block)` or 0), in
    /// the order they changed; none without a layout.
    pub fn take_tags(&mut self) -> Vec<(u32, u64)> {
        core::mem::take(&mut self.changed)
    }

    /// The slots whose tags are 0 since the last call (`retire`), as a range; to be
    /// written after `take_tags`' changes.
    pub fn take_cleared(&mut self) -> Option<core::ops::Range<u32>> {
        self.cleared.take().map(|(a, b)| a..b)
    }

    /// Every usable slot's tag now (to write them all: a new server's first).
    pub fn all_tags(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(k, _)| !self.is_reserved(*k as u32))
            .map(|(k, sl)| (k as u32, if sl.state == SlotState::Valid { tags::tag(sl.block) } else { 0 }))
    }

    fn is_reserved(&self, s: u32) -> bool {
        self.layout.is_some_and(|l| l.reserved(s))
    }

    fn tag_changed(&mut self, s: u32, t: u64) {
        if self.layout.is_some() {
            self.changed.push((s, t));
        }
    }

    /// Block `block` was hit without a lookup (the touch ring): if it is still valid, it
    /// counts as a hit and is used now, as a lookup's hit would be. False if it is not.
    pub fn touch(&mut self, block: u64, policy: &mut dyn Policy) -> bool {
        match self.map.get(&block) {
            Some(&s) if self.slots[s as usize].state == SlotState::Valid => {
                self.stats.hits += 1;
                policy.touched(s);
                true
            }
            _ => false,
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn stats(&self) -> Stats {
        Stats { resident: self.map.len() as u64, ..self.stats }
    }

    fn release(&mut self, s: u32) {
        if self.slots[s as usize].state == SlotState::Valid {
            self.valid -= 1;
            self.tag_changed(s, 0);
        }
        let b = self.slots[s as usize].block;
        self.map.remove(&b);
        self.slots[s as usize].state = SlotState::Free;
        if s < self.limit {
            self.free.push(s);
        }
    }

    /// `n` more slots, free, after the last (the cache grew by a block of frames).
    /// False, and nothing added, while slots are being given back, past `MAX_SLOTS`, or
    /// when the memory for their bookkeeping cannot be had (the block goes back then).
    pub fn grow(&mut self, n: u32) -> bool {
        let old = self.slots();
        if self.limit != old || old.checked_add(n).is_none_or(|t| t > MAX_SLOTS) {
            return false;
        }
        if self.slots.try_reserve(n as usize).is_err() || self.free.try_reserve(n as usize).is_err() {
            return false;
        }
        self.slots.extend((0..n).map(|_| Slot { block: 0, owner: 0, state: SlotState::Free }));
        let l = self.layout;
        self.free.extend((old..old + n).rev().filter(|&s| !l.is_some_and(|l| l.reserved(s))));
        self.limit = old + n;
        true
    }

    /// Start giving back the slots from `to` on (the last block of frames): their
    /// blocks leave the cache now (nothing in it is dirty: writes go to the device as
    /// they go into it) and they are never handed out again; a fill under way into one
    /// is dropped when it ends. `shrink` ends it. Bounded by the slots given back.
    pub fn retire(&mut self, to: u32, policy: &mut dyn Policy) {
        let to = to.min(self.limit);
        if self.layout.is_some() && to < self.limit {
            let (a, b) = self.cleared.map_or((to, self.limit), |(a, b)| (a.min(to), b.max(self.limit)));
            self.cleared = Some((a, b));
        }
        for s in to..self.limit {
            match self.slots[s as usize].state {
                SlotState::Valid => {
                    policy.removed(s);
                    self.valid -= 1;
                    let b = self.slots[s as usize].block;
                    self.map.remove(&b);
                    self.slots[s as usize].state = SlotState::Free;
                }
                SlotState::Filling { .. } => self.slots[s as usize].state = SlotState::Filling { stale: true },
                SlotState::Free => {}
            }
        }
        self.limit = to;
        self.free.retain(|&s| s < to);
    }

    /// Slots being given back (`retire`) whose fills are still under way.
    pub fn retiring_busy(&self) -> usize {
        self.slots[self.limit as usize..].iter().filter(|s| s.state != SlotState::Free).count()
    }

    /// End a `retire`: the slots past the limit are gone. False (nothing changes) while
    /// a fill into one is under way.
    pub fn shrink(&mut self) -> bool {
        if self.retiring_busy() > 0 {
            return false;
        }
        self.slots.truncate(self.limit as usize);
        true
    }

    /// Slots handed out from now on lie below this (`slots()` while none is retiring).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The slot to evict: the policy's first, or the one its owner's graft picks among
    /// the owner's first candidates in the policy's order.
    fn victim(&mut self, chooser: &mut dyn Chooser, policy: &mut dyn Policy) -> u32 {
        let first = policy.first();
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
            s = policy.after(s);
            walked += 1;
        }
        if n < 2 {
            return first;
        }
        match chooser.choose(owner, &blocks[..n]) {
            Some(k) if k > 0 && k < n => {
                for &kept in &c[..k] {
                    policy.touched(kept);
                }
                self.stats.grafted += 1;
                c[k]
            }
            _ => first,
        }
    }

    /// Look up the run of `out.len()` blocks from `first` for `owner`, up to the first
    /// busy one: the blocks after it are not looked up (`None`). Its caller waits for the
    /// fill under way and asks again from the busy block, so a slot handed out behind it
    /// now would be filled by nobody — and found busy by every later look-up.
    pub fn lookup_run(
        &mut self,
        first: u64,
        owner: u32,
        chooser: &mut dyn Chooser,
        policy: &mut dyn Policy,
        out: &mut [Option<Lookup>],
    ) {
        let mut busy = false;
        for (k, o) in out.iter_mut().enumerate() {
            *o = if busy { None } else { Some(self.lookup_for(first.wrapping_add(k as u64), owner, chooser, policy)) };
            busy |= matches!(o, Some(Lookup::Busy(_)));
        }
    }

    /// Look `block` up for `owner`; when a slot must be freed, `chooser` may pick it.
    pub fn lookup_for(&mut self, block: u64, owner: u32, chooser: &mut dyn Chooser, policy: &mut dyn Policy) -> Lookup {
        if let Some(&s) = self.map.get(&block) {
            return match self.slots[s as usize].state {
                SlotState::Valid => {
                    self.stats.hits += 1;
                    policy.touched(s);
                    Lookup::Hit(s)
                }
                _ => Lookup::Busy(s),
            };
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None if self.valid > 0 => {
                let v = self.victim(chooser, policy);
                policy.removed(v);
                self.release(v);
                self.stats.evictions += 1;
                self.free.pop().unwrap()
            }
            None => return Lookup::Full,
        };
        self.stats.misses += 1;
        self.slots[s as usize].block = block;
        self.slots[s as usize].owner = owner;
        self.slots[s as usize].state = SlotState::Filling { stale: false };
        self.map.insert(block, s);
        Lookup::Fill(s)
    }

    /// The fill of `block` ended (`ok`: the slot holds it now). False if no fill of it
    /// was under way.
    pub fn filled(&mut self, block: u64, ok: bool, policy: &mut dyn Policy) -> bool {
        let Some(&s) = self.map.get(&block) else { return false };
        let SlotState::Filling { stale } = self.slots[s as usize].state else { return false };
        if ok && !stale {
            self.slots[s as usize].state = SlotState::Valid;
            self.valid += 1;
            self.tag_changed(s, tags::tag(block));
            policy.touched(s);
        } else {
            self.release(s);
        }
        true
    }

    /// Start empty (the client that filled the slots is gone); the policy forgets them.
    pub fn clear(&mut self, policy: &mut dyn Policy) {
        for k in 0..self.slots.len() {
            if self.slots[k].state == SlotState::Valid {
                policy.removed(k as u32);
                self.tag_changed(k as u32, 0);
            }
        }
        let changed = core::mem::take(&mut self.changed);
        let layout = self.layout;
        *self = Cache::new(self.limit);
        self.layout = layout;
        if let Some(l) = layout {
            self.free.retain(|&s| !l.reserved(s));
        }
        self.changed = changed;
    }

    /// Forget blocks `first..first + n` (they were written without the cache).
    pub fn invalidate(&mut self, first: u64, n: u64, policy: &mut dyn Policy) {
        let hit: Vec<(u64, u32)> = self.map.range(first..first.saturating_add(n)).map(|(b, s)| (*b, *s)).collect();
        for (_, s) in hit {
            match self.slots[s as usize].state {
                SlotState::Valid => {
                    policy.removed(s);
                    self.release(s);
                }
                SlotState::Filling { .. } => self.slots[s as usize].state = SlotState::Filling { stale: true },
                SlotState::Free => {}
            }
        }
    }
}
