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

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use swap::{Component, Formats, State};

pub mod tags;

/// No slot.
pub const NIL: u32 = u32::MAX;

swap::interface! {
    /// A replacement policy: it keeps the order in which valid slots are evicted.
    pub trait Policy via PolicyVia, methods PolicyMethod {
        /// Slot `s` was used (a hit, or its fill ended): it goes to the end a policy keeps.
        fn touched(&mut self, s: u32);
        /// Slot `s` left the cache (evicted or invalidated).
        fn removed(&mut self, s: u32);
        /// The first slot to evict (`NIL`: none is valid).
        fn first(&mut self) -> u32;
        /// The slot to evict after `s` (`NIL`: none).
        fn after(&mut self, s: u32) -> u32;
    }
}

/// The recency order of valid slots, least recently used first: a doubly linked list
/// over slot numbers. `Lru` evicts from its front, `Mru` from its back.
pub struct Recency {
    prev: Vec<u32>,
    next: Vec<u32>,
    lru: u32,
    mru: u32,
    len: usize,
}

/// State formats of the policies: bit 0, the canonical one every policy reads (valid
/// slots, least recently used first, u32 little-endian each); bit 1, the `Recency` list
/// itself, moved.
pub const CANONICAL: u32 = 0;
pub const RECENCY_MOVED: u32 = 1;
const FORMATS: Formats = 1 << CANONICAL | 1 << RECENCY_MOVED;
/// Slots a canonical state may name at most.
pub const MAX_SLOTS: u32 = 1 << 20;

impl Default for Recency {
    /// Empty (its ends `NIL`: a derived default would make slot 0 the whole list).
    fn default() -> Recency {
        Recency::new()
    }
}

impl Recency {
    pub fn new() -> Recency {
        Recency { prev: Vec::new(), next: Vec::new(), lru: NIL, mru: NIL, len: 0 }
    }

    fn linked(&self, s: u32) -> bool {
        (s as usize) < self.prev.len() && (self.prev[s as usize] != NIL || self.lru == s)
    }

    fn unlink(&mut self, s: u32) {
        if !self.linked(s) {
            return;
        }
        let (prev, next) = (self.prev[s as usize], self.next[s as usize]);
        if prev == NIL {
            self.lru = next
        } else {
            self.next[prev as usize] = next
        }
        if next == NIL {
            self.mru = prev
        } else {
            self.prev[next as usize] = prev
        }
        self.prev[s as usize] = NIL;
        self.next[s as usize] = NIL;
        self.len -= 1;
    }

    fn push_mru(&mut self, s: u32) {
        if s as usize >= self.prev.len() {
            self.prev.resize(s as usize + 1, NIL);
            self.next.resize(s as usize + 1, NIL);
        }
        self.prev[s as usize] = self.mru;
        self.next[s as usize] = NIL;
        if self.mru == NIL {
            self.lru = s
        } else {
            self.next[self.mru as usize] = s
        }
        self.mru = s;
        self.len += 1;
    }

    /// Slots least recently used first.
    pub fn order(&self) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.len);
        let mut s = self.lru;
        while s != NIL {
            v.push(s);
            s = self.next[s as usize];
        }
        v
    }

    fn export(&mut self, format: u32) -> Option<State> {
        match format {
            CANONICAL => Some(State::Bytes(self.order().iter().flat_map(|s| s.to_le_bytes()).collect())),
            RECENCY_MOVED => Some(State::Object(Box::new(core::mem::take(self)))),
            _ => None,
        }
    }

    /// Take a state; a canonical one must name distinct slots below `MAX_SLOTS`.
    fn import(&mut self, format: u32, state: State) -> bool {
        match format {
            CANONICAL => {
                let Some(b) = state.bytes() else { return false };
                if b.len() % 4 != 0 {
                    return false;
                }
                let mut r = Recency::new();
                for w in b.chunks_exact(4) {
                    let s = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    if s >= MAX_SLOTS || r.linked(s) {
                        return false;
                    }
                    r.push_mru(s);
                }
                *self = r;
                true
            }
            RECENCY_MOVED => match state.object::<Recency>() {
                Some(r) => {
                    *self = *r;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }
}

/// Least recently used first.
#[derive(Default)]
pub struct Lru(pub Recency);

/// Most recently used first.
#[derive(Default)]
pub struct Mru(pub Recency);

macro_rules! recency_policy {
    ($t:ident, $first:ident, $after:ident) => {
        impl Component for $t {
            fn formats(&self) -> Formats {
                FORMATS
            }
            fn export(&mut self, format: u32) -> Option<State> {
                self.0.export(format)
            }
            fn import(&mut self, format: u32, state: State) -> bool {
                self.0.import(format, state)
            }
        }

        impl Policy for $t {
            #[inline]
            fn touched(&mut self, s: u32) {
                self.0.unlink(s);
                self.0.push_mru(s);
            }
            #[inline]
            fn removed(&mut self, s: u32) {
                self.0.unlink(s);
            }
            #[inline]
            fn first(&mut self) -> u32 {
                self.0.$first
            }
            #[inline]
            fn after(&mut self, s: u32) -> u32 {
                self.0.$after.get(s as usize).copied().unwrap_or(NIL)
            }
        }
    };
}
recency_policy!(Lru, lru, next);
recency_policy!(Mru, mru, prev);

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
    /// False, and nothing added, while slots are being given back or past `MAX_SLOTS`.
    pub fn grow(&mut self, n: u32) -> bool {
        let old = self.slots();
        if self.limit != old || old.checked_add(n).is_none_or(|t| t > MAX_SLOTS) {
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
        for s in to..self.limit {
            match self.slots[s as usize].state {
                SlotState::Valid => {
                    policy.removed(s);
                    self.valid -= 1;
                    self.tag_changed(s, 0);
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

/// What the cache server hands its successor in a live update, format 0:
/// magic, the number of slots, of entries and of slots in the recency order, four
/// counters (hits, misses, evictions, grafted), then per slot in use (slot, block, owner,
/// state: 1 being filled, 2 being filled but invalidated, 3 valid) and the policy's
/// canonical state (the valid slots, least recently used first), little-endian. It comes
/// from another program: `decode` checks every count, bound and repetition.
const HANDOVER_MAGIC: &[u8; 8] = b"SCCACHE0";
const HANDOVER_HEAD: usize = 8 + 12 + 32;
const HANDOVER_ENTRY: usize = 17;

impl Cache {
    /// The cache's state with the policy's canonical state `order` (`CANONICAL`).
    pub fn encode(&self, order: &[u8]) -> Vec<u8> {
        let used: Vec<(usize, &Slot)> =
            self.slots.iter().enumerate().filter(|(_, s)| s.state != SlotState::Free).collect();
        let mut v = Vec::with_capacity(HANDOVER_HEAD + HANDOVER_ENTRY * used.len() + order.len());
        v.extend_from_slice(HANDOVER_MAGIC);
        for w in [self.slots(), used.len() as u32, (order.len() / 4) as u32] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        for w in [self.stats.hits, self.stats.misses, self.stats.evictions, self.stats.grafted] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        for (k, s) in used {
            v.extend_from_slice(&(k as u32).to_le_bytes());
            v.extend_from_slice(&s.block.to_le_bytes());
            v.extend_from_slice(&s.owner.to_le_bytes());
            v.push(match s.state {
                SlotState::Filling { stale: false } => 1,
                SlotState::Filling { stale: true } => 2,
                _ => 3,
            });
        }
        v.extend_from_slice(order);
        v
    }

    /// A cache of `slots` slots from `b`, and the policy's canonical state (exactly the
    /// valid slots, each once), or why the state is refused.
    /// With `layout`, the cache shares its tags so laid out (`with_layout`): a state that
    /// puts a block in a reserved slot is refused.
    pub fn decode(b: &[u8], slots: u32, layout: Option<tags::Layout>) -> Result<(Cache, Vec<u8>), &'static str> {
        let word = |at: usize, n: usize| -> u64 {
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&b[at..at + n]);
            u64::from_le_bytes(w)
        };
        if b.len() < HANDOVER_HEAD || &b[..8] != HANDOVER_MAGIC {
            return Err("not a cache state");
        }
        let (n, used, ordered) = (word(8, 4), word(12, 4) as usize, word(16, 4) as usize);
        if n != slots as u64 {
            return Err("the state is of a cache of another size");
        }
        if used > slots as usize || ordered > used || b.len() != HANDOVER_HEAD + HANDOVER_ENTRY * used + 4 * ordered {
            return Err("the state's counts do not fit");
        }
        if layout.is_some_and(|l| l.block() != slots) {
            return Err("the state is of a cache of another size");
        }
        let mut c = Cache::new(slots);
        c.layout = layout;
        c.stats =
            Stats { hits: word(20, 8), misses: word(28, 8), evictions: word(36, 8), resident: 0, grafted: word(44, 8) };
        for k in 0..used {
            let at = HANDOVER_HEAD + HANDOVER_ENTRY * k;
            let (s, block, owner) = (word(at, 4) as usize, word(at + 4, 8), word(at + 12, 4) as u32);
            let state = match b[at + 16] {
                1 => SlotState::Filling { stale: false },
                2 => SlotState::Filling { stale: true },
                3 => SlotState::Valid,
                _ => return Err("a slot's state is unknown"),
            };
            if s >= slots as usize || c.slots[s].state != SlotState::Free || c.is_reserved(s as u32) {
                return Err("a slot repeats or is out of the cache");
            }
            if c.map.insert(block, s as u32).is_some() {
                return Err("a block is in two slots");
            }
            c.slots[s] = Slot { block, owner, state };
            c.valid += (state == SlotState::Valid) as usize;
        }
        let order = b[HANDOVER_HEAD + HANDOVER_ENTRY * used..].to_vec();
        let mut seen = alloc::vec![false; slots as usize];
        for w in order.chunks_exact(4) {
            let s = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize;
            if s >= slots as usize || c.slots[s].state != SlotState::Valid || core::mem::replace(&mut seen[s], true) {
                return Err("the recency order is not the valid slots, each once");
            }
        }
        if ordered != c.valid {
            return Err("the recency order is not the valid slots, each once");
        }
        c.free =
            (0..slots).rev().filter(|&s| c.slots[s as usize].state == SlotState::Free && !c.is_reserved(s)).collect();
        Ok((c, order))
    }
}

/// What sigma0 says of its frames (`sigma0_api::STATS`), for `Sizer`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Free frames.
    pub free: u64,
    /// All frames.
    pub total: u64,
    /// Frames sigma0 keeps for page faults (it refuses requests that would take them).
    pub keep: u64,
    /// Frames sigma0 has refused so far (a counter: memory servers asked and got none).
    pub refused: u64,
}

/// What the cache should do with its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    Stay,
    /// Take one more block of frames.
    Grow,
    /// Give back this many of its grown blocks (never the first).
    Shrink(u64),
}

/// When the cache grows into free memory and when it gives it back.
/// It grows by a block of frames when it had to evict since it last looked (the working
/// set does not fit) and sigma0 would still have its reserve and a margin (an eighth of
/// the frames, at least two blocks) free after it; it gives blocks back when sigma0
/// refused someone since it last looked (a memory server that needed frames: enough
/// blocks that sigma0 has what was refused and the margin again), or when free memory
/// fell below the reserve and half the margin (before anyone is refused). The first
/// block is never given back. Whether the cache's own and the block service's kernel
/// quota can map another block is the server's question (`room`).
#[derive(Debug, Clone)]
pub struct Sizer {
    /// Pages per block.
    pub block: u64,
    /// Blocks at most (the first included).
    pub max_blocks: u64,
    refused: Option<u64>,
    evictions: u64,
}

impl Sizer {
    pub fn new(block: u64, max_blocks: u64) -> Sizer {
        Sizer { block: block.max(1), max_blocks: max_blocks.max(1), refused: None, evictions: 0 }
    }

    /// Free frames the cache leaves to everyone else beyond sigma0's reserve.
    pub fn margin(&self, total: u64) -> u64 {
        (total / 8).max(2 * self.block)
    }

    /// Decide with sigma0's figures `m`, the cache's `blocks` (the first included) and
    /// its eviction counter.
    pub fn decide(&mut self, m: Memory, blocks: u64, evictions: u64) -> Resize {
        let refused = m.refused.saturating_sub(self.refused.unwrap_or(m.refused));
        self.refused = Some(m.refused);
        let evicted = evictions > self.evictions;
        self.evictions = evictions;
        let grown = blocks.saturating_sub(1);
        let margin = self.margin(m.total);
        let want = m.keep.saturating_add(margin);
        if grown > 0 && (refused > 0 || m.free < m.keep.saturating_add(margin / 2)) {
            let short = want.saturating_add(refused).saturating_sub(m.free);
            return Resize::Shrink(short.div_ceil(self.block).clamp(1, grown));
        }
        if refused == 0 && evicted && blocks < self.max_blocks && m.free >= want.saturating_add(self.block) {
            return Resize::Grow;
        }
        Resize::Stay
    }
}

/// Watches the runs of blocks the cache is asked for (each `LOOKUP`) for a sequential
/// stream (K42 Fig. 7's trigger): a run is sequential when it starts where one of the
/// last `STREAMS` runs ended (so interleaved streams count too). Of the last 32 runs,
/// `TO_MRU` sequential ones say "a stream": evict most recently used first; `TO_LRU` or
/// fewer say "no stream".
#[derive(Default)]
pub struct Sequential {
    ends: [u64; STREAMS],
    next: usize,
    /// The last 32 runs, one bit each (1 = sequential), the newest in bit 0.
    window: u32,
    seen: u32,
    pub stream: bool,
}

const STREAMS: usize = 4;
pub const TO_MRU: u32 = 28;
pub const TO_LRU: u32 = 16;

impl Sequential {
    /// A run of blocks `first..first + n` looked up; `Some(stream)` when the verdict
    /// changes.
    pub fn run(&mut self, first: u64, n: u64) -> Option<bool> {
        let seq = self.ends.contains(&first) && first != 0;
        self.ends[self.next] = first.saturating_add(n);
        self.next = (self.next + 1) % STREAMS;
        self.window = self.window << 1 | seq as u32;
        self.seen = (self.seen + 1).min(32);
        let ones = self.window.count_ones();
        let flip = self.seen == 32 && if self.stream { ones <= TO_LRU } else { ones >= TO_MRU };
        flip.then(|| {
            self.stream = !self.stream;
            self.stream
        })
    }
}

/// The runs of blocks one `LOOKUPS` call asks the cache about (`cache_api`): each
/// `first | n << RUN_SHIFT`.
pub mod runs {
    /// The most blocks one `LOOKUP` run may have.
    pub const MAX_LOOKUP: u64 = 8;
    /// Where a run's length sits in its word (the first block below it).
    pub const RUN_SHIFT: u32 = 56;
    /// The most blocks one `LOOKUPS` may ask about: with the principal, the count and
    /// the last word, its answer fits in one message (64 words).
    pub const MAX_RUN_BLOCKS: u64 = 56;

    /// A run's word.
    pub fn run_word(first: u64, n: u64) -> u64 {
        first | n << RUN_SHIFT
    }

    /// A run's first block and length.
    pub fn run_of(w: u64) -> (u64, u64) {
        (w & ((1 << RUN_SHIFT) - 1), w >> RUN_SHIFT)
    }

    /// Whether `runs` is a `LOOKUPS` request's list: at least one run, each of 1 to
    /// `MAX_LOOKUP` blocks that end by block 2^`RUN_SHIFT`, `MAX_RUN_BLOCKS` in all.
    pub fn runs_fit(runs: &[u64]) -> bool {
        let mut total = 0u64;
        !runs.is_empty()
            && runs.iter().all(|&w| {
                let (first, n) = run_of(w);
                total += n;
                (1..=MAX_LOOKUP).contains(&n) && first + n <= 1 << RUN_SHIFT
            })
            && total <= MAX_RUN_BLOCKS
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn runs_are_checked() {
            assert_eq!(run_of(run_word(12345, 8)), (12345, 8));
            assert!(runs_fit(&[run_word(0, 1), run_word(100, 8)]));
            assert!(!runs_fit(&[]), "no run");
            assert!(!runs_fit(&[run_word(5, 0)]), "an empty run");
            assert!(!runs_fit(&[run_word(5, 9)]), "past MAX_LOOKUP");
            assert!(!runs_fit(&[u64::MAX]), "a length of 255");
            assert!(!runs_fit(&[run_word((1 << RUN_SHIFT) - 2, 4)]), "past the last block");
            assert!(runs_fit(&[run_word((1 << RUN_SHIFT) - 4, 4)]));
            assert!(runs_fit(&[run_word(0, 8); 7]), "56 blocks");
            assert!(
                !runs_fit(&[
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 8),
                    run_word(0, 1)
                ]),
                "57 blocks"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
