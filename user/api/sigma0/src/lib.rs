//! sigma0's protocol. Requests carry the client's badge (given by root; root's own is
//! 1); replies carry MR1 = 0 or an error code, then a typed item where memory or ports
//! are handed out. sigma0 is also the pager of root and the memory servers: their page
//! faults arrive as kernel fault messages, not as requests.
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request in rt::labels::SIGMA0;
    client client;
    requests {
        /// MR1 = log2 of the number of pages (0..=`MAX_LOG2`), MR2 = hot spot. Reply: MR2 =
        /// physical address of the first page (the run is physically contiguous: usable for
        /// DMA), and the map item.
        ALLOC = 0x50, fn alloc(log2, hot)
            => Alloc { log2: u64, hot: u64 } = Request::Alloc { log2: log2_at_most(log2, MAX_LOG2)?, hot };
        /// As `ALLOC`, but the frames are lent: counted in `STATS`' MR4 until the same client
        /// gives them back (`FREE`). The borrower (the shared cache) gives them back when it sees
        /// `STATS`' refused counter move; a memory server refused while frames
        /// are lent waits a little for them rather than refuse its client at once. At most
        /// `MAX_LENDERS` clients borrow at once (`NoSpace` past them).
        LEND = 0x58, fn lend(log2, hot)
            => Lend { log2: u64, hot: u64 } = Request::Lend { log2: log2_at_most(log2, MAX_LOG2)?, hot };
        /// MR1 = physical address, MR2 = log2 pages, MR3 = hot spot: these very frames, if
        /// free or already this client's (idempotent).
        PHYS = 0x51, fn phys(pa, log2, hot)
            => Phys { pa: u64, log2: u64, hot: u64 } = Request::Phys { pa, log2: log2_at_most(log2, MAX_LOG2)?, hot };
        /// MR1 = physical address in the device window, MR2 = log2 pages (≤ `MAX_MMIO_LOG2`),
        /// MR3 = hot spot.
        MMIO = 0x52, fn mmio(pa, log2, hot)
            => Mmio { pa: u64, log2: u64, hot: u64 }
            = Request::Mmio { pa, log2: log2_at_most(log2, MAX_MMIO_LOG2)?, hot };
        /// (root only) MR1 = first port, MR2 = log2 ports: an I/O item.
        IO = 0x53, fn io(first, log2)
            => Io { first: u64, log2: u64 } = Request::Io { first, log2: log2_at_most(log2, 16)? };
        /// MR1 = physical address, MR2 = log2 pages: give frames back (every mapping of
        /// them is revoked). Reply MR2 = frames freed.
        FREE = 0x54, fn free(pa, log2) -> [freed]
            => Free { pa: u64, log2: u64 } = Request::Free { pa, log2: log2_at_most(log2, MAX_LOG2)? };
        /// Reply: MR2 = free frames, MR3 = all frames, MR4 = frames lent (`LEND`) and not
        /// given back, MR5 = frames refused so far (a counter: `ALLOC`s refused for want of
        /// memory), MR6 = frames kept for page faults (requests that would take them are refused).
        STATS = 0x55, fn stats() -> [free, all, lent, refused, kept] => Stats;
        /// (root only) MR1 = a client's badge: take back everything it holds. Reply MR2 = frames.
        RECLAIM = 0x56, fn reclaim(client) -> [frames] => Reclaim { client: u64 };
        /// (root only) MR1 = physical address, MR2 = log2 pages, MR3 = a client's badge, MR4 =
        /// another's: these frames, every one held by the first, are the second's from now on
        /// (a live update's successor took them over by grant; without this they would be
        /// taken back, and every mapping of them revoked, when the old program ends).
        /// `NoRights` and nothing moved if any is not the first's. Reply MR2 = frames moved.
        MOVE = 0x57, fn move_frames(pa, log2, from, to) -> [moved]
            => Move { pa: u64, log2: u64, from: u64, to: u64 }
            = Request::Move { pa, log2: log2_at_most(log2, MAX_LOG2)?, from, to };
        /// (root only) Who holds sigma0's frames, for `mem`'s accounting: MR1 = the lowest client
        /// number to list. Reply MR2 = frames sigma0 keeps for itself (its owner table),
        /// MR3 = the client number to ask from next (0: none left), then up to
        /// `HOLDERS_MAX` triples (client, frames it holds, of them lent), by client number,
        /// of the clients from MR1 on that hold any (root is client 1; a program is its
        /// id plus 2). One walk of the owner table per request.
        HOLDERS = 0x59, fn holders(from) => Holders { from: u64 };
    }
}

/// `l` if it is at most `max`, else `InvalidArg`.
fn log2_at_most(l: u64, max: u64) -> Result<u64, Error> {
    if l <= max {
        Ok(l)
    } else {
        Err(Error::InvalidArg)
    }
}

pub const MAX_LENDERS: usize = 4;

/// Triples one `HOLDERS` answer carries at most (MR4 up to MR63).
pub const HOLDERS_MAX: usize = 20;

pub const MAX_LOG2: u64 = 10;
/// One message maps at most `abi::ipc::MAX_ITEM_PAGES` pages.
pub const MAX_MMIO_LOG2: u64 = 10;
