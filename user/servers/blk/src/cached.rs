//! The cache client: blk's calls to the shared `cache` server (`LOOKUP`, the batch's
//! `LOOKUPS` prefetch and its `looked` queue, `FILLED`, `INVALIDATE`, `SYNC`, `MAP`),
//! the cache's frames mapped here, and what blk does when the cache is gone: it serves
//! on, around the cache, and attaches to the new one when root has started it.
//!
//! When blk calls the cache matters: the answers the cache gave are good only until
//! blk's next call to it (a `HIT` slot may be handed out again after it), so every call
//! first drops what `prefetch` looked up and was not taken (`drop_looked`).
//!
//! A buffered read whose blocks are all cached is served without a call when it can be
//! (`direct`; `baio::cache::tags`, docs/storage.md "Hits without a call"): blk remembers
//! where it saw each block (`Hints`), checks the slot against the limit and its tag in
//! the cache's frames, appends the blocks to the touch ring and copies them.

use crate::Blk;
use abi::cap;
use abi::Error;
use alloc::vec::Vec;
use baio::cache::tags::{self, Layout, Words};
use baio::BLOCK;
use blk_api as p;
use cache_api as pc;
use rt::{env, println};
use virtio_hal as virtio;

/// The cache server's frames, mapped here (its first block, then the blocks it takes as
/// it grows, each at its first slot's place: `CACHE_VA` + slot × `BLOCK` is the slot).
pub(crate) const CACHE_VA: u64 = rt::layout::CACHE_IN_BLK;

/// The room for them (1 TiB: up to the next area of the layout).
const CACHE_SPAN: u64 = 1 << 40;

/// Kernel-quota pages kept beyond what mapping another of the cache's blocks costs.
const CACHE_KQUOTA_SLACK: u64 = 64;

/// How often this service says `SYNC` while the cache holds grown blocks.
pub(crate) const CACHE_SYNC_US: u64 = 5_000;

/// How often blk asks root for a new cache while it serves without one (µs).
pub(crate) const CACHE_RETRY_US: u64 = 50_000;

/// Map the cache server's frames here for DMA: (capability slot, pages of its first
/// block), or why not.
pub(crate) fn attach_cache() -> Result<(u64, u64), &'static str> {
    let slot = rt::alloc_slot();
    attach_cache_at(slot).inspect_err(|_| rt::free_slot(slot)).map(|slots| (slot, slots))
}

/// `attach_cache` into capability slot `slot` (empty): the pages of the first block.
fn attach_cache_at(slot: u64) -> Result<u64, &'static str> {
    env::lookup("cache", slot).map_err(|_| "the manifest must grant the cache server")?;
    let attached = pc::client::attach(slot, CACHE_VA, 12 + 16);
    let (phys, slots) = attached.map_err(|_| {
        let _ = rt::sys::cap_delete(slot);
        "the cache server refused to attach"
    })?;
    virtio::register_dma(CACHE_VA, phys, slots);
    Ok(slots)
}

/// The cache's frames as mapped here, as words (`tags::Words`): the limit and the touch
/// ring in its first block, the tags in each block.
struct Frames;

impl Words for Frames {
    fn read(&self, at: u64) -> u64 {
        // SAFETY: `at` is the limit's word or a ring word (in the cache's first block,
        // mapped here from `ATTACH` on), or the tag of a slot below the slots mapped here
        // (`Hints::mapped`), all 8-byte aligned (`tags::Layout`). If the cache dies, its
        // frames vanish and read as zeros: no tag then names a block.
        unsafe { core::ptr::read_volatile((CACHE_VA + at) as *const u64) }
    }
    fn write(&self, at: u64, v: u64) {
        // SAFETY: only ring words are written (`tags::push`), in the first block, mapped
        // here read-write; nothing Rust-owned lives in the cache's frames.
        unsafe { core::ptr::write_volatile((CACHE_VA + at) as *mut u64, v) }
    }
}

/// What blk needs for hits without a call: where it last saw each block
/// (`tags::Hints`), where the tags lie, and how many slots are mapped here.
pub(crate) struct Hints {
    map: tags::Hints,
    /// Where the tags lie (None: blocks of an odd size, no hits without a call).
    layout: Option<Layout>,
    /// Slots in the blocks of frames mapped here.
    mapped: u64,
}

impl Hints {
    /// For the cache's first block, of `block` slots.
    pub(crate) fn new(block: u64) -> Hints {
        let mut h = Hints { map: tags::Hints::default(), layout: None, mapped: 0 };
        if let Some(l) = u32::try_from(block).ok().and_then(Layout::new) {
            h.layout = Some(l);
            h.mapped_to(block);
        }
        h
    }

    /// No cache attached: no hits without a call.
    fn none() -> Hints {
        Hints { map: tags::Hints::default(), layout: None, mapped: 0 }
    }

    /// Slots up to `slots` are mapped here now (hints for them if memory can be had).
    fn mapped_to(&mut self, slots: u64) {
        self.mapped = self.mapped.max(slots);
        self.map.grow_to(slots);
    }

    /// The cache answered `word` (`slot | state << 32`) for `block`.
    fn saw(&mut self, block: u64, word: u64) {
        if word != u64::MAX && (word >> 32 == pc::HIT || word >> 32 == pc::FILL) {
            self.map.saw(block, word & 0xffff_ffff);
        }
    }

    fn slot(&self, block: u64) -> Option<u32> {
        self.map.slot(block)
    }
}

impl Blk {
    /// A call to the cache came to this: its answer, None when it refused (a request it
    /// does not take now) or is gone (then blk serves on without it: `lose_cache`).
    fn cached<T>(&mut self, r: Result<T, Error>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) if env::server_gone(e) => {
                self.lose_cache();
                None
            }
            Err(_) => None,
        }
    }

    /// The cache server died: its frames (mapped here) are gone with what blk knew of
    /// them. blk serves on around the cache (buffered operations go to the device as
    /// direct ones do) and attaches to the new cache once root has started it
    /// (`cache_retry`). An operation that copied out of the old frames, or whose fill
    /// was under way into them, fails (`cache_alive`): they may have vanished before the
    /// copy. Its clients keep their handles, areas and grafts. (Before, blk ended here,
    /// fail-stop, and every principal's grafts in it went with it.)
    pub(crate) fn lose_cache(&mut self) {
        if self.cache_lost {
            return;
        }
        println!("blk: the cache server is gone: serving around it until a new one attaches");
        self.cache_lost = true;
        self.cache_retry_at = 0;
        self.looked.clear();
        self.hints = Hints::none();
        self.cache_grown = false;
        let _ = rt::sys::cap_delete(self.cache);
        virtio::forget_dma(CACHE_VA, CACHE_VA + CACHE_SPAN);
    }

    /// Without a cache: attach to the new one if root has started it (at most every
    /// `CACHE_RETRY_US`). Whatever is in flight finishes first: a fill into the old
    /// frames must not complete into the new ones mapped at the same place.
    pub(crate) fn cache_retry(&mut self) {
        let now = rt::sys::now_us();
        if !self.cache_lost || now < self.cache_retry_at {
            return;
        }
        self.cache_retry_at = now + CACHE_RETRY_US;
        self.drain();
        if let Ok(slots) = attach_cache_at(self.cache) {
            self.cache_lost = false;
            self.cache_block = slots;
            self.hints = Hints::new(slots);
            self.attached += 1;
            println!("blk: attached to the new cache server ({} slots; attach {})", slots, self.attached);
        }
    }

    /// Ask the cache about `n` blocks from `first`: per block `slot | state << 32`, or
    /// `u64::MAX` (go around the cache: it is full of fills, or unreachable). For a read
    /// whose blocks are all where blk saw them, no call (`direct`).
    pub(crate) fn lookup(&mut self, first: u64, n: u64, owner: u32, write: bool) -> [u64; pc::MAX_LOOKUP as usize] {
        if self.looked.front().is_some_and(|l| (l.0, l.1, l.2) == (first, n, owner)) {
            return self.looked.pop_front().unwrap().3;
        }
        if !write {
            if let Some(out) = self.direct(first, n, true) {
                return out;
            }
        }
        self.drop_looked();
        let mut out = [u64::MAX; pc::MAX_LOOKUP as usize];
        self.cache_retry();
        if self.cache_lost {
            return out;
        }
        let n = (n as usize).min(out.len());
        // The slots it answered with are all mapped here; a block it took since is not
        // handed out until it is.
        let r = pc::client::lookup(self.cache, first, owner, &mut out[..n]);
        match self.cached(r) {
            Some(Some(first)) => self.map_cache_block(first),
            Some(None) => {}
            None => out = [u64::MAX; pc::MAX_LOOKUP as usize],
        }
        for (k, &w) in out[..n].iter().enumerate() {
            self.hints.saw(first + k as u64, w);
        }
        out
    }

    /// The `n` (≤ `MAX_LOOKUP`) blocks from `first` as hits without a call, if each is
    /// where blk saw it: its slot below the cache's limit and its tag naming it. With
    /// `touch`, they go on the touch ring (all or none: a full ring is a miss here, and
    /// the call that follows drains it); the answer is good until blk's next call to the
    /// cache, as a lookup's.
    fn direct(&mut self, first: u64, n: u64, touch: bool) -> Option<[u64; pc::MAX_LOOKUP as usize]> {
        let l = self.hints.layout?;
        let limit = Frames.read(tags::LIMIT_AT).min(self.hints.mapped);
        let mut out = [u64::MAX; pc::MAX_LOOKUP as usize];
        let n = (n as usize).min(out.len());
        let run = tags::run_entry(first, n as u64)?;
        for (k, o) in out[..n].iter_mut().enumerate() {
            let b = first.checked_add(k as u64)?;
            let s = self.hints.slot(b)?;
            if s as u64 >= limit || l.reserved(s) || Frames.read(l.tag_at(s)) != tags::tag(b) {
                return None;
            }
            *o = s as u64 | pc::HIT << 32;
        }
        if touch && !tags::push(&Frames, &l, &[run]) {
            return None;
        }
        Some(out)
    }

    /// Ask the cache in one `LOOKUPS` about the runs the batch's first operations will
    /// look up, as far as they are plain buffered reads (`plain_read`): one call for the
    /// batch instead of one per operation (under TCG each costs two address-space
    /// switches, about fifty IPCs within a task). `lookup` then takes the answers in
    /// order; the first run it asks about that is not next drops the rest.
    pub(crate) fn prefetch(&mut self, hid: u64, ops: &[[u64; 4]]) {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut blocks = 0;
        let owner = self.handles[&hid].owner;
        'ops: for w in ops {
            let Some(pieces) = self.plain_read(hid, w) else { break };
            for (f, n) in pieces {
                let block = self.handles[&hid].start + f;
                let mut k = 0;
                while k < n {
                    let m = (n - k).min(pc::MAX_LOOKUP);
                    if blocks + m > pc::MAX_RUN_BLOCKS {
                        break 'ops;
                    }
                    // A run whose blocks are all where blk saw them needs no call.
                    if self.direct(block + k, m, false).is_some() {
                        k += m;
                        continue;
                    }
                    runs.push((block + k, m));
                    blocks += m;
                    k += m;
                }
            }
        }
        // One run is what `lookup` would ask anyway.
        if runs.len() < 2 || self.cache_lost {
            return;
        }
        let mut words = [u64::MAX; pc::MAX_RUN_BLOCKS as usize];
        let r = pc::client::lookups(self.cache, owner, &runs, &mut words);
        let Some((looked, map)) = self.cached(r) else { return };
        let mut at = 0;
        for &(f, n) in &runs[..looked] {
            let mut out = [u64::MAX; pc::MAX_LOOKUP as usize];
            out[..n as usize].copy_from_slice(&words[at..at + n as usize]);
            at += n as usize;
            for (k, &w) in out[..n as usize].iter().enumerate() {
                self.hints.saw(f + k as u64, w);
            }
            self.looked.push_back((f, n, owner, out));
        }
        if let Some(first) = map {
            let kept = core::mem::take(&mut self.looked);
            self.map_cache_block(first);
            self.looked = kept;
        }
    }

    /// Forget the answers `prefetch` got that were not taken (before any other call to
    /// the cache): a slot the cache gave to fill is answered as not filled.
    pub(crate) fn drop_looked(&mut self) {
        for (first, _, _, words) in core::mem::take(&mut self.looked) {
            for (k, f) in words.iter().enumerate() {
                if *f != u64::MAX && f >> 32 == pc::FILL {
                    self.cache_filled(first + k as u64, false);
                }
            }
        }
    }

    /// The pieces of the segment (first block, blocks) operation `w` reads, if it is a
    /// plain buffered read `op` will look up in the cache a run at a time: valid, within
    /// the segment's written blocks and its bytes, not a logical disk's.
    pub(crate) fn plain_read(&self, hid: u64, w: &[u64; 4]) -> Option<Vec<(u64, u64)>> {
        let h = &self.handles[&hid];
        let (kind, first, count) = (w[0], w[1], w[2] & 0xffff_ffff);
        if kind != p::READ_OP | p::BUFFERED
            || self.op_error(hid, w).is_some()
            || (first + count) * BLOCK as u64 > h.bytes
            || self.ldisks.contains_key(&h.start)
        {
            return None;
        }
        let pieces = self.pieces(hid, first, count);
        pieces.iter().all(|&(f, n)| f + n <= h.written).then_some(pieces)
    }

    /// Map the cache's block of frames whose first slot is `first` (it grew), for DMA
    /// too; or tell it this service's kernel quota cannot pay for more.
    pub(crate) fn map_cache_block(&mut self, first: u64) {
        use abi::kquota::{NODES_PER_PAGE, PAGES_PER_TABLE};
        let pages = self.cache_block;
        let cost = pages.div_ceil(NODES_PER_PAGE) + pages.div_ceil(PAGES_PER_TABLE) + 2 + CACHE_KQUOTA_SLACK;
        let room = matches!(rt::sys::task_info(cap::SELF_TASK), Ok((_, q, used)) if q.saturating_sub(used) >= cost);
        let aligned = pages.is_power_of_two()
            && first.is_multiple_of(pages)
            && first.checked_mul(BLOCK as u64).is_some_and(|o| o < CACHE_SPAN);
        let va = CACHE_VA + first * BLOCK as u64;
        let window = (room && aligned).then(|| (va, 12 + pages.trailing_zeros() as u64));
        if self.cache_lost {
            return;
        }
        let r = pc::client::map(self.cache, window);
        if let Some(Some((f, slots, phys))) = self.cached(r) {
            if f == first && slots == pages {
                virtio::register_dma(va, phys, pages);
                self.cache_grown = true;
                self.hints.mapped_to(first + pages);
            }
        }
    }

    /// Tell the cache this service is between operations (`SYNC`): it may give back a
    /// block it stopped using; map one it took.
    pub(crate) fn cache_sync(&mut self) {
        self.drop_looked();
        self.cache_retry();
        if self.cache_lost {
            return;
        }
        let r = pc::client::sync(self.cache);
        if let Some((map, grown)) = self.cached(r) {
            self.cache_grown = grown;
            if let Some(first) = map {
                self.map_cache_block(first);
            }
        }
    }

    /// Tell the cache the fill of `block` ended (`FILLED`).
    pub(crate) fn cache_filled(&mut self, block: u64, ok: bool) {
        self.drop_looked();
        if !self.cache_lost {
            let r = pc::client::filled(self.cache, block, ok);
            self.cached(r);
        }
    }

    /// Tell the cache blocks `first .. first + n` were written behind it (`INVALIDATE`).
    /// (Without a cache nothing is to be told: the new one starts empty, and blk
    /// attaches to it only once nothing is in flight.)
    pub(crate) fn cache_invalidate(&mut self, first: u64, n: u64) {
        self.drop_looked();
        if !self.cache_lost {
            let r = pc::client::invalidate(self.cache, first, n);
            self.cached(r);
        }
    }

    /// After copying out of the cache's frames: they held what the cache said only if
    /// the cache still lives (its frames vanish with it, and read as zeros) and is the
    /// one attached when the copying began (`since`: `self.attached` then). False: the
    /// operation that copied fails.
    pub(crate) fn cache_alive(&mut self, since: u64) -> bool {
        if !self.cache_lost && rt::sys::cap_info(self.cache).is_err() {
            self.lose_cache();
        }
        !self.cache_lost && self.attached == since
    }
}
