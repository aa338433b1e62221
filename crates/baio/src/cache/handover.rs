//! The cache's state handed to its successor in a live update (`encode`), and taken
//! from a predecessor (`decode`, which checks every count, bound and repetition: the
//! state comes from another program).

use super::{tags, Cache, Slot, SlotState, Stats};
use alloc::vec::Vec;

/// What the cache server hands its successor in a live update, format 0:
/// magic, the number of slots, of entries and of slots in the recency order, four
/// counters (hits, misses, evictions, grafted), then per slot in use (slot, block, owner,
/// state: 1 being filled, 2 being filled but invalidated, 3 valid) and the policy's
/// canonical state (the valid slots, least recently used first), little-endian. It comes
/// from another program: `decode` checks every count, bound and repetition.
const HANDOVER_MAGIC: &[u8; 8] = b"SCCACHE0";
pub(super) const HANDOVER_HEAD: usize = 8 + 12 + 32;
pub(super) const HANDOVER_ENTRY: usize = 17;

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
