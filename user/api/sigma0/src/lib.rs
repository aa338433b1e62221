//! sigma0's protocol. Requests carry the client's badge (given by root; root's own is
//! 1); replies carry MR1 = 0 or an error code, then a typed item where memory or ports
//! are handed out. sigma0 is also the pager of root and the memory servers: their page
//! faults arrive as kernel fault messages, not as requests.
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;
use rt::server::{Args, Decode};

/// MR1 = log2 of the number of pages (0..=`MAX_LOG2`), MR2 = hot spot. Reply: MR2 =
/// physical address of the first page (the run is physically contiguous: usable for
/// DMA), and the map item.
pub const ALLOC: u64 = 0x50;
/// MR1 = physical address, MR2 = log2 pages, MR3 = hot spot: these very frames, if
/// free or already this client's (idempotent).
pub const PHYS: u64 = 0x51;
/// MR1 = physical address in the device window, MR2 = log2 pages (≤ `MAX_MMIO_LOG2`),
/// MR3 = hot spot.
pub const MMIO: u64 = 0x52;
/// (root only) MR1 = first port, MR2 = log2 ports: an I/O item.
pub const IO: u64 = 0x53;
/// MR1 = physical address, MR2 = log2 pages: give frames back (every mapping of
/// them is revoked). Reply MR2 = frames freed.
pub const FREE: u64 = 0x54;
/// Reply: MR2 = free frames, MR3 = all frames, MR4 = frames lent (`LEND`) and not
/// given back, MR5 = frames refused so far (a counter: `ALLOC`s refused for want of
/// memory), MR6 = frames kept for page faults (requests that would take them are refused).
pub const STATS: u64 = 0x55;
/// (root only) MR1 = a client's badge: take back everything it holds. Reply MR2 = frames.
pub const RECLAIM: u64 = 0x56;
/// (root only) MR1 = physical address, MR2 = log2 pages, MR3 = a client's badge, MR4 =
/// another's: these frames, every one held by the first, are the second's from now on
/// (a live update's successor took them over by grant; without this they would be
/// taken back, and every mapping of them revoked, when the old program ends).
/// `NoRights` and nothing moved if any is not the first's. Reply MR2 = frames moved.
pub const MOVE: u64 = 0x57;
/// As `ALLOC`, but the frames are lent: counted in `STATS`' MR4 until the same client
/// gives them back (`FREE`). The borrower (the shared cache) gives them back when it sees
/// `STATS`' refused counter move (issue 35 item 5); a memory server refused while frames
/// are lent waits a little for them rather than refuse its client at once. At most
/// `MAX_LENDERS` clients borrow at once (`NoSpace` past them).
pub const LEND: u64 = 0x58;

// Its labels lie in its range of the registry (`rt::labels`), checked when it builds.
const _: () =
    assert!(rt::labels::all_in(rt::labels::SIGMA0, &[ALLOC, PHYS, MMIO, IO, FREE, STATS, RECLAIM, MOVE, LEND]));

pub const MAX_LENDERS: usize = 4;

pub const MAX_LOG2: u64 = 10;
/// One message maps at most `abi::ipc::MAX_ITEM_PAGES` pages.
pub const MAX_MMIO_LOG2: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Alloc { log2: u64, hot: u64 },
    Lend { log2: u64, hot: u64 },
    Phys { pa: u64, log2: u64, hot: u64 },
    Mmio { pa: u64, log2: u64, hot: u64 },
    Io { first: u64, log2: u64 },
    Free { pa: u64, log2: u64 },
    Stats,
    Reclaim { client: u64 },
    Move { pa: u64, log2: u64, from: u64, to: u64 },
}

impl Decode<'_> for Request {
    fn decode(a: &Args<'_>) -> Result<Self, Error> {
        let log2 = |l: u64, max: u64| if l <= max { Ok(l) } else { Err(Error::InvalidArg) };
        Ok(match a.msg.label() {
            ALLOC => {
                let [l, hot] = a.words()?;
                Request::Alloc { log2: log2(l, MAX_LOG2)?, hot }
            }
            LEND => {
                let [l, hot] = a.words()?;
                Request::Lend { log2: log2(l, MAX_LOG2)?, hot }
            }
            PHYS => {
                let [pa, l, hot] = a.words()?;
                Request::Phys { pa, log2: log2(l, MAX_LOG2)?, hot }
            }
            MMIO => {
                let [pa, l, hot] = a.words()?;
                Request::Mmio { pa, log2: log2(l, MAX_MMIO_LOG2)?, hot }
            }
            IO => {
                let [first, l] = a.words()?;
                Request::Io { first, log2: log2(l, 16)? }
            }
            FREE => {
                let [pa, l] = a.words()?;
                Request::Free { pa, log2: log2(l, MAX_LOG2)? }
            }
            STATS => Request::Stats,
            RECLAIM => {
                let [client] = a.words()?;
                Request::Reclaim { client }
            }
            MOVE => {
                let [pa, l, from, to] = a.words()?;
                Request::Move { pa, log2: log2(l, MAX_LOG2)?, from, to }
            }
            _ => return Err(Error::Unsupported),
        })
    }
}
