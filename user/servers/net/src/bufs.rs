//! The TCP sockets' buffers: frames from sigma0, not the heap. A connection's buffers
//! (`RX` bytes in, `TX` out) are one slot of a pool that grows a chunk of
//! `CHUNK_LOG2` pages at a time, mapped at `rt::layout::NET_BUFFERS` on; a slot comes
//! when a connection does (its SYN, or CONNECT) and goes back when smoltcp's socket is
//! removed, for the next connection. The heap stays for the stack's own tables, which
//! are small: a memory server pages the heap, and its pool is bounded by its own
//! kernel memory (a thousand connections' 80 MiB did not fit: net faulted).
//!
//! Each page mapped here costs this server kernel memory (a mapping-database node,
//! and page tables): how many connections there may be is bounded by that too
//! (`Net::share`).

use abi::fpage::Fpage;
use alloc::vec::Vec;
use rt::ipc::Msg;
use rt::server;
use sigma0_api as s0;

/// A connection's receive and send buffers.
pub const RX: usize = 16 * 1024;
pub const TX: usize = 64 * 1024;
/// One slot: both, one after the other.
pub const SLOT: u64 = (RX + TX) as u64;
/// Pages from sigma0 at a time (2 MiB: 25 slots).
const CHUNK_LOG2: u64 = 9;
const CHUNK: u64 = 4096 << CHUNK_LOG2;
const PER_CHUNK: u64 = CHUNK / SLOT;

pub struct Pool {
    sigma0: u64,
    /// Chunks mapped so far (from `NET_BUFFERS` on, one after another).
    chunks: u64,
    /// Slots of the mapped chunks not in use.
    free: Vec<u32>,
}

impl Pool {
    pub fn new(sigma0: u64) -> Pool {
        Pool { sigma0, chunks: 0, free: Vec::new() }
    }

    /// Bytes of frames mapped for buffers (in use or free).
    pub fn mapped(&self) -> u64 {
        self.chunks * CHUNK
    }

    /// A slot's (receive, send) buffers, or None if sigma0 has no frames for another
    /// chunk. They are the caller's until it gives the slot back (`give`).
    pub fn take(&mut self) -> Option<(u32, &'static mut [u8], &'static mut [u8])> {
        if self.free.is_empty() {
            let va = rt::layout::NET_BUFFERS + self.chunks * CHUNK;
            let mut m = Msg::new(s0::ALLOC, &[CHUNK_LOG2, va]);
            server::request_mapping(
                self.sigma0,
                [Fpage::mem(va, 12 + CHUNK_LOG2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0)],
                &mut m,
            )
            .ok()?;
            if m.items() != 1 {
                return None;
            }
            let first = (self.chunks * PER_CHUNK) as u32;
            self.free.extend((first..first + PER_CHUNK as u32).rev());
            self.chunks += 1;
        }
        let i = self.free.pop()?;
        let va = rt::layout::NET_BUFFERS + (i as u64 / PER_CHUNK) * CHUNK + (i as u64 % PER_CHUNK) * SLOT;
        // SAFETY: slot i lies inside a chunk sigma0 mapped read-write at NET_BUFFERS +
        // chunk * CHUNK (the window of its ALLOC was exactly that chunk), which stays
        // mapped for the server's life; slots do not overlap (PER_CHUNK of SLOT bytes fit
        // a chunk), and slot i was on the free list, so nothing else refers to its bytes
        // until `give(i)`, which the caller does only once the socket holding these
        // slices is gone (removed from smoltcp's set and dropped).
        let (rx, tx) = unsafe {
            (
                core::slice::from_raw_parts_mut(va as *mut u8, RX),
                core::slice::from_raw_parts_mut((va + RX as u64) as *mut u8, TX),
            )
        };
        Some((i, rx, tx))
    }

    /// Slot `i` is free again (the socket holding its buffers is gone).
    pub fn give(&mut self, i: u32) {
        debug_assert!(!self.free.contains(&i));
        self.free.push(i);
    }
}
