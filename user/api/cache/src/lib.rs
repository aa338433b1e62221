//! The shared block cache's protocol (`cache` server; its client is the block service,
//! which alone moves data; the cache decides what stays).
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;
use rt::server::{Args, Decode};

/// Opens a memory window first: the reply maps the cache's frames (read-write);
/// MR2 = their physical address (contiguous: for DMA), MR3 = slots (blocks).
pub const ATTACH: u64 = 0x90;
/// MR1 = first block, MR2 = n ≤ `MAX_LOOKUP`, MR3 = the principal owning the blocks
/// (whose eviction graft, if any, may pick victims among its blocks): reply MR2.. = per block
/// `slot | state << 32`, state `HIT` (the data is in the slot), `FILL` (the slot is the
/// caller's to fill, then `FILLED` — with 0 if it does not fill it after all: every
/// `FILL` must be answered, or the block stays `BUSY`), `BUSY` (being filled after an
/// earlier `FILL`: the blocks after it are not looked up and answer `u64::MAX`; ask
/// again from it once the fill is over); `u64::MAX` when every slot is busy. The word
/// after them: 0, or 1 + the first slot of a block of frames the cache took that the
/// caller has not mapped yet (`MAP` it).
pub const LOOKUP: u64 = 0x91;
/// MR1 = block, MR2 = 1 if the slot now holds it, 0 if the fill failed.
pub const FILLED: u64 = 0x92;
/// MR1 = first block, MR2 = n: forget these blocks (written behind the cache).
pub const INVALIDATE: u64 = 0x93;
/// Reply: MR2 = hits, MR3 = misses, MR4 = resident, MR5 = slots, MR6 = evictions,
/// MR7 = evictions a graft chose, MR8 = grafts loaded, MR9 = grafts unloaded for failing,
/// MR10 = blocks of frames held, MR11 = blocks taken so far (growing), MR12 = blocks given
/// back so far, MR13 = pages per block, MR14 = lookup calls (`LOOKUP`, `LOOKUPS`) served.
pub const STATS: u64 = 0x94;
/// (The bound client.) Opens a memory window of one block of frames at 1 + the first
/// slot a `LOOKUP` or `SYNC` named: MR1 = 1, map that block (reply MR2 = its first slot,
/// MR3 = its slots, MR4 = its physical address, and the map item; its slots are handed
/// out from now on); MR1 = 0, the caller cannot map more (its kernel quota): the cache
/// gives the block back and grows no more.
pub const MAP: u64 = 0x95;
/// (The bound client.) It is between operations: no copy from the cache's frames is under
/// way (fills may be). Lets the cache give back a block it stopped using. Reply MR2 = as
/// `LOOKUP`'s last word, MR3 = 1 if the cache holds blocks it may give back (the caller
/// says `SYNC` now and then while it does, even when idle).
pub const SYNC: u64 = 0x96;
/// `LOOKUP` for several runs at once (the buffered reads of one batch: one call to the
/// cache instead of one per operation — under TCG an address-space switch costs about
/// fifty IPCs within one): MR1 = the principal owning the blocks, MR2.. = runs, each
/// `first | n << RUN_SHIFT` with 1 ≤ n ≤ `MAX_LOOKUP` and `first` < 2^`RUN_SHIFT`, at most
/// `MAX_RUN_BLOCKS` blocks in all. Each run is looked up as `LOOKUP` would, in order;
/// after a run with a `BUSY` block the rest are not looked up. Reply MR2 = runs looked
/// up, MR3.. = their blocks' words as `LOOKUP`'s, then `LOOKUP`'s last word.
pub const LOOKUPS: u64 = 0x97;
pub use baio::cache::runs::{run_of, run_word, runs_fit, MAX_LOOKUP, MAX_RUN_BLOCKS, RUN_SHIFT};
pub const HIT: u64 = 0;
pub const FILL: u64 = 1;
pub const BUSY: u64 = 2;
// Any program: the graft protocol (`graft_api`), graft point `evict`; the
// reconfiguration protocol (`swap_api`), component 0 `policy` (lru, mru, auto).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Attach,
    Lookup { first: u64, n: u64, owner: u32 },
    /// Runs as `first | n << RUN_SHIFT` (checked: each 1 ≤ n ≤ `MAX_LOOKUP`, in all at
    /// most `MAX_RUN_BLOCKS`).
    Lookups { owner: u32, runs: &'a [u64] },
    Filled { block: u64, ok: bool },
    Invalidate { first: u64, n: u64 },
    Stats,
    Map { take: bool },
    Sync,
    Graft(graft_api::Request<'a>),
    Swap(swap_api::Request),
    /// A live update (`swap_api::Update`).
    Update(swap_api::Update),
}

impl<'a> Decode<'a> for Request<'a> {
    fn decode(a: &Args<'a>) -> Result<Self, Error> {
        Ok(match a.msg.label() {
            ATTACH => Request::Attach,
            LOOKUP => {
                let [first, n, owner] = a.words()?;
                if n > MAX_LOOKUP || owner > u32::MAX as u64 {
                    return Err(Error::InvalidArg);
                }
                Request::Lookup { first, n, owner: owner as u32 }
            }
            LOOKUPS => {
                let [owner] = a.words()?;
                let runs = &a.all()[1..];
                if owner > u32::MAX as u64 || !runs_fit(runs) {
                    return Err(Error::InvalidArg);
                }
                Request::Lookups { owner: owner as u32, runs }
            }
            l if graft_api::is_graft_label(l) => Request::Graft(graft_api::Request::decode(a)?),
            l if swap_api::is_swap_label(l) => Request::Swap(swap_api::Request::decode(a)?),
            l if swap_api::is_update_label(l) => Request::Update(swap_api::Update::decode(a)?),
            FILLED => {
                let [block, ok] = a.words()?;
                Request::Filled { block, ok: ok == 1 }
            }
            INVALIDATE => {
                let [first, n] = a.words()?;
                Request::Invalidate { first, n }
            }
            STATS => Request::Stats,
            MAP => {
                let [take] = a.words()?;
                Request::Map { take: take == 1 }
            }
            SYNC => Request::Sync,
            _ => return Err(Error::Unsupported),
        })
    }
}

/// Client stubs: `srv` is the slot of a capability to the cache.
pub mod client {
    use super::*;

    /// The counters (`STATS`): hits, misses, resident, slots, evictions, grafted
    /// evictions, grafts loaded, grafts unloaded, blocks held, blocks taken, blocks given
    /// back, pages per block, lookup calls served.
    pub fn stats(srv: u64) -> Result<[u64; 13], Error> {
        let mut m = rt::ipc::Msg::new(STATS, &[]);
        rt::server::request(srv, &mut m)?;
        Ok(core::array::from_fn(|k| m.word(2 + k)))
    }
}
