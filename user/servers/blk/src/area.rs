//! Shared areas: the DMA memory a handle shares with its client (a control page and
//! the data), taken from sigma0 or reused, parked after a delegated view's close until
//! its holder has stopped reading; and the only places this service touches them.

use crate::Blk;
use abi::fpage::Fpage;
use baio::BLOCK;
use blk_api as p;
use rt::ipc;
use sigma0_api as s0;
use virtio_hal as virtio;

/// Shared areas, one per open segment, mapped here and in the client.
pub(crate) const AREA_VA: u64 = rt::layout::BLK_AREAS;

/// How long the area of a closed delegated handle stays mapped in its holder before it
/// is taken back (see `Blk::parked`).
pub(crate) const PARK_US: u64 = 1_000_000;

/// Shared areas one principal may hold at once (each holds 2 MiB of this service's DMA
/// memory and kernel quota): open segments, attached views, parked areas.
pub(crate) const MAX_OPEN_PER_PRINCIPAL: usize = p::MAX_OPEN_PER_PRINCIPAL as usize;

pub(crate) fn put(addr: u64, v: u64) {
    // SAFETY: every address given here is a word of a control page this service maps
    // (a shared area's); the client may scribble on it, which harms only itself.
    unsafe { core::ptr::write_volatile(addr as *mut u64, v) };
}

pub(crate) fn get(addr: u64) -> u64 {
    // SAFETY: as for `put`; the value is checked before use.
    unsafe { core::ptr::read_volatile(addr as *const u64) }
}

/// Zero `len` bytes of a shared area at `addr` (blocks past a segment's written mark).
pub(crate) fn zero_bytes(addr: u64, len: u64) {
    // SAFETY: callers pass a range of a shared area mapped here that `op` checked to
    // lie inside the area; nothing Rust-owned lives there.
    unsafe { core::ptr::write_bytes(addr as *mut u8, 0, len as usize) };
}

/// Copy bytes of a shared area at `from` (a checked range of one mapped here) out.
pub(crate) fn copy_bytes(from: u64, to: &mut [u8]) {
    // SAFETY: callers pass a range of a shared area mapped here that `op` checked to
    // lie inside the area; `to` is our own buffer, which it cannot overlap.
    unsafe { core::ptr::copy_nonoverlapping(from as *const u8, to.as_mut_ptr(), to.len()) };
}

/// Copy `from` into a shared area at `to` (a checked range of one mapped here).
pub(crate) fn copy_in(from: &[u8], to: u64) {
    // SAFETY: callers pass a range of a shared area mapped here that `op` checked to
    // lie inside the area; `from` is our own buffer, which it cannot overlap.
    unsafe { core::ptr::copy_nonoverlapping(from.as_ptr(), to as *mut u8, from.len()) };
}

pub(crate) fn copy_block(from: u64, to: u64) {
    copy_part(from, to, BLOCK as u64);
}

/// Copy the first `n` (≤ `BLOCK`) bytes of a block.
pub(crate) fn copy_part(from: u64, to: u64, n: u64) {
    // SAFETY: both are block-sized, block-aligned pieces of memory mapped here (a cache
    // slot or a bounce block, and a checked range of a shared area); they never
    // overlap, and `n` is at most a block.
    unsafe { core::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, n.min(BLOCK as u64) as usize) };
}

impl Blk {
    pub(crate) fn area(&mut self) -> Option<u64> {
        self.unpark();
        if let Some((a, dirty)) = self.spare.pop() {
            // SAFETY: a spare area is mapped here and shared with nobody any more; only
            // its first `dirty` bytes were ever mapped to a client or written.
            unsafe { core::ptr::write_bytes(a as *mut u8, 0, dirty.min(p::AREA_BYTES) as usize) };
            return Some(a);
        }
        let va = self.area_next;
        ipc::set_windows(Fpage::mem(va, 12 + p::AREA_LOG2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0));
        let got = s0::client::alloc(self.sigma0, p::AREA_LOG2, va);
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        let m = got.ok().filter(|m| m.items() == 1)?;
        virtio::register_dma(va, m.word(2), p::AREA_PAGES);
        self.area_next = va + p::AREA_BYTES;
        Some(va)
    }

    /// Take back the parked areas whose time has come.
    pub(crate) fn unpark(&mut self) {
        let now = rt::sys::now_us();
        let mut i = 0;
        while i < self.parked.len() {
            if self.parked[i].2 <= now {
                let (area, mapped, _, _) = self.parked.swap_remove(i);
                // SAFETY: as in `close`: only the holder loses the part it had mapped.
                let _ = unsafe { rt::sys::unmap(Fpage::mem(area, mapped.trailing_zeros() as u64, 0), 0) };
                self.spare.push((area, mapped));
            } else {
                i += 1;
            }
        }
    }
}
