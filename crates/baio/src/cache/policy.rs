//! The replacement policies, a swappable component (`swap`, K42): the recency order of
//! the valid slots (`Recency`, a doubly linked list over slot numbers), evicted from its
//! least recently used end (`Lru`) or its most recently used end (`Mru`), and the state
//! formats in which the order moves from one policy to the other when they are swapped.

use super::NIL;
use alloc::boxed::Box;
use alloc::vec::Vec;
use swap::{Component, Formats, State};

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
