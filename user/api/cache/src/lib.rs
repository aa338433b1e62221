//! The shared block cache's protocol (`cache` server; its client is the block service,
//! which alone moves data; the cache decides what stays).
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::CACHE;
    client client via call {
        use super::*;
        use abi::fpage::Fpage;
        use rt::ipc::{self, Msg};

        /// The answer of a lookup: a block of frames the cache took that the caller has not
        /// mapped yet, by its first slot (`MAP` it before using slots past it).
        pub type ToMap = Option<u64>;

        fn to_map(w: u64) -> ToMap {
            w.checked_sub(1)
        }

        /// How every stub calls: an error is the call's (the cache gone:
        /// `rt::env::server_gone`) or the cache's answer (a code it does not know: `Malformed`).
        fn call(srv: u64, m: &mut Msg) -> Result<(), Error> {
            ipc::call(srv, m, ipc::FOREVER)?;
            match m.word(1) {
                0 => Ok(()),
                e => Err(Error::from_code(e).unwrap_or(Error::Malformed)),
            }
        }

        /// `ATTACH` with the cache's first block mapped at `va` (a window of 2^`log2`
        /// bytes): (its physical address, its slots).
        pub fn attach(srv: u64, va: u64, log2: u64) -> Result<(u64, u64), Error> {
            ipc::set_windows(Fpage::mem(va, log2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0));
            let r = attach_raw(srv);
            ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
            let m = r?;
            if m.items() != 1 {
                return Err(Error::Malformed);
            }
            Ok((m.word(2), m.word(3)))
        }

        /// `LOOKUP` of `out.len()` (≤ `MAX_LOOKUP`) blocks from `first` for `owner`: each
        /// block's word into `out`.
        pub fn lookup(srv: u64, first: u64, owner: u32, out: &mut [u64]) -> Result<ToMap, Error> {
            let n = out.len();
            let m = lookup_raw(srv, first, n as u64, owner as u64)?;
            for (k, o) in out.iter_mut().enumerate() {
                *o = m.word(2 + k);
            }
            Ok(to_map(m.word(2 + n)))
        }

        /// `LOOKUPS` of `runs` (first block, blocks) for `owner`: each looked-up run's words
        /// in order into `out` (as long as the runs' blocks together); the runs looked up.
        pub fn lookups(srv: u64, owner: u32, runs: &[(u64, u64)], out: &mut [u64]) -> Result<(usize, ToMap), Error> {
            let mut words = [0u64; MAX_RUN_BLOCKS as usize];
            for (w, &(f, n)) in words.iter_mut().zip(runs) {
                *w = run_word(f, n);
            }
            let m = lookups_raw(srv, owner as u64, &words[..runs.len().min(MAX_RUN_BLOCKS as usize)])?;
            let looked = (m.word(2) as usize).min(runs.len());
            let blocks: usize = runs[..looked].iter().map(|r| r.1 as usize).sum();
            for (k, o) in out.iter_mut().enumerate().take(blocks) {
                *o = m.word(3 + k);
            }
            Ok((looked, to_map(m.word(3 + blocks))))
        }

        /// `FILLED`: the slot given for `block` holds it now (`ok`), or not.
        pub fn filled(srv: u64, block: u64, ok: bool) -> Result<(), Error> {
            filled_raw(srv, block, ok as u64)
        }

        /// `SYNC`: (a block to map, whether the cache holds blocks it may give back).
        pub fn sync(srv: u64) -> Result<(ToMap, bool), Error> {
            let [to, more] = sync_raw(srv)?;
            Ok((to_map(to), more == 1))
        }

        /// `MAP`: with `window` = Some((va, log2)), map the waiting block there: (its first
        /// slot, slots, physical address); with None, say the caller cannot (the cache
        /// gives the block back and grows no more).
        pub fn map(srv: u64, window: Option<(u64, u64)>) -> Result<Option<(u64, u64, u64)>, Error> {
            if let Some((va, log2)) = window {
                ipc::set_windows(Fpage::mem(va, log2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0));
            }
            let r = map_raw(srv, window.is_some() as u64);
            ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
            let m = r?;
            Ok((window.is_some() && m.items() == 1).then(|| (m.word(2), m.word(3), m.word(4))))
        }
    };
    requests {
        /// Opens a memory window first: the reply maps the cache's frames (read-write);
        /// MR2 = their physical address (contiguous: for DMA), MR3 = slots (blocks).
        ATTACH = 0x90, fn attach_raw() => Attach;
        /// MR1 = first block, MR2 = n ≤ `MAX_LOOKUP`, MR3 = the principal owning the blocks
        /// (whose eviction graft, if any, may pick victims among its blocks): reply MR2.. = per block
        /// `slot | state << 32`, state `HIT` (the data is in the slot), `FILL` (the slot is the
        /// caller's to fill, then `FILLED` — with 0 if it does not fill it after all: every
        /// `FILL` must be answered, or the block stays `BUSY`), `BUSY` (being filled after an
        /// earlier `FILL`: the blocks after it are not looked up and answer `u64::MAX`; ask
        /// again from it once the fill is over); `u64::MAX` when every slot is busy. The word
        /// after them: 0, or 1 + the first slot of a block of frames the cache took that the
        /// caller has not mapped yet (`MAP` it).
        LOOKUP = 0x91, fn lookup_raw(first, n, owner)
            => Lookup { first: u64, n: u64, owner: u32 }
            = Request::Lookup { first, n: at_most(n, MAX_LOOKUP)?, owner: principal(owner)? };
        /// `LOOKUP` for several runs at once (the buffered reads of one batch: one call to the
        /// cache instead of one per operation — under TCG an address-space switch costs about
        /// fifty IPCs within one): MR1 = the principal owning the blocks, MR2.. = runs, each
        /// `first | n << RUN_SHIFT` with 1 ≤ n ≤ `MAX_LOOKUP` and `first` < 2^`RUN_SHIFT`, at most
        /// `MAX_RUN_BLOCKS` blocks in all. Each run is looked up as `LOOKUP` would, in order;
        /// after a run with a `BUSY` block the rest are not looked up. Reply MR2 = runs looked
        /// up, MR3.. = their blocks' words as `LOOKUP`'s, then `LOOKUP`'s last word.
        LOOKUPS = 0x97, fn lookups_raw(owner; rest runs)
            => /// Runs as `first | n << RUN_SHIFT` (checked: each 1 ≤ n ≤ `MAX_LOOKUP`, in all at
            /// most `MAX_RUN_BLOCKS`).
            Lookups { owner: u32, runs: &'a [u64] }
            = Request::Lookups { owner: principal(owner)?, runs: fitting(runs)? };
        /// MR1 = block, MR2 = 1 if the slot now holds it, 0 if the fill failed.
        FILLED = 0x92, fn filled_raw(block, ok) -> [] => Filled { block: u64, ok: bool } = Request::Filled { block, ok: ok == 1 };
        /// MR1 = first block, MR2 = n: forget these blocks (written behind the cache).
        INVALIDATE = 0x93, fn invalidate(first, n) -> [] => Invalidate { first: u64, n: u64 };
        /// Reply: MR2 = hits, MR3 = misses, MR4 = resident, MR5 = slots, MR6 = evictions,
        /// MR7 = evictions a graft chose, MR8 = grafts loaded, MR9 = grafts unloaded for failing,
        /// MR10 = blocks of frames held, MR11 = blocks taken so far (growing), MR12 = blocks given
        /// back so far, MR13 = pages per block, MR14 = lookup calls (`LOOKUP`, `LOOKUPS`) served.
        STATS = 0x94, fn stats() -> [
            hits, misses, resident, slots, evictions, grafted, loaded, unloaded, held, taken, given_back, block_pages,
            lookups,
        ] => Stats;
        /// (The bound client.) Opens a memory window of one block of frames at 1 + the first
        /// slot a `LOOKUP` or `SYNC` named: MR1 = 1, map that block (reply MR2 = its first slot,
        /// MR3 = its slots, MR4 = its physical address, and the map item; its slots are handed
        /// out from now on); MR1 = 0, the caller cannot map more (its kernel quota): the cache
        /// gives the block back and grows no more.
        MAP = 0x95, fn map_raw(take) => Map { take: bool } = Request::Map { take: take == 1 };
        /// (The bound client.) It is between operations: no copy from the cache's frames is under
        /// way (fills may be). Lets the cache give back a block it stopped using. Reply MR2 = as
        /// `LOOKUP`'s last word, MR3 = 1 if the cache holds blocks it may give back (the caller
        /// says `SYNC` now and then while it does, even when idle).
        SYNC = 0x96, fn sync_raw() -> [to_map, may_give_back] => Sync;
    }
    nested {
        Graft(graft_api::Request<'a>) if graft_api::is_graft_label,
        Swap(swap_api::Request) if swap_api::is_swap_label,
        /// A live update (`swap_api::Update`).
        Update(swap_api::Update) if swap_api::is_update_label,
    }
}

/// `n` if it is at most `max`, else `InvalidArg`.
fn at_most(n: u64, max: u64) -> Result<u64, Error> {
    if n <= max {
        Ok(n)
    } else {
        Err(Error::InvalidArg)
    }
}

/// A principal (the owner of blocks): 32 bits, else `InvalidArg`.
fn principal(w: u64) -> Result<u32, Error> {
    u32::try_from(w).map_err(|_| Error::InvalidArg)
}

/// Runs that `runs_fit`, else `InvalidArg`.
fn fitting(runs: &[u64]) -> Result<&[u64], Error> {
    if runs_fit(runs) {
        Ok(runs)
    } else {
        Err(Error::InvalidArg)
    }
}

pub use baio::cache::runs::{run_of, run_word, runs_fit, MAX_LOOKUP, MAX_RUN_BLOCKS, RUN_SHIFT};
pub const HIT: u64 = 0;
pub const FILL: u64 = 1;
pub const BUSY: u64 = 2;
// Any program: the graft protocol (`graft_api`), graft point `evict`; the
// reconfiguration protocol (`swap_api`), component 0 `policy` (lru, mru, auto).
