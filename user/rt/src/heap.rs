//! The program heap: a first-fit allocator over a region of the address space that
//! the program's pager fills on demand (demand-zero pages). It grows in 256 KiB steps
//! up to `HEAP_MAX`; before each step it asks its memory server to set the step's pages
//! aside (`proto::RESERVE` through `abi::cap::PAGER`), so that past the program's page
//! limit — or when memory runs out — an allocation fails (a null pointer: `try_reserve`
//! sees an error, a plain `Vec` push ends the program with a panic's message) instead
//! of a page fault nobody answers. A program with no memory server (root and the
//! memory servers, paged by sigma0: the slot is empty) grows without asking.
//! Nothing is touched before the first allocation, so a program without a pager
//! (sigma0) works as long as it does not allocate.
//!
//! **Arenas**: heaps of their own for code the program does not trust to bound its
//! memory — a graft's engine and everything it allocates (`graft-host`). While a thread
//! has entered an arena, its allocations come from there and are charged to it, up to
//! the arena's limit; past it the arena says so (`over`), so that the caller can stop
//! the code, and keeps serving the allocation (from its slack, then from the program's
//! heap) rather than fail it — a failed allocation would end the whole program. A
//! free goes to the heap the address lies in, whoever frees it. An arena whose code was
//! stopped half-way is `reset`: everything in it is forgotten at once.

use crate::sync::Lock;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use linked_list_allocator::Heap;

const HEAP_BASE: u64 = crate::layout::HEAP;
const STEP: u64 = 256 * 1024;
const HEAP_MAX: u64 = 256 * 1024 * 1024;

/// Arenas: `ARENAS` of them, each in `ARENA_SPAN` bytes of address space of its own.
const ARENA_BASE: u64 = crate::layout::ARENAS;
const ARENA_SPAN: u64 = 1 << 28;
pub const ARENAS: usize = 64;
const ARENA_STEP: u64 = 64 * 1024;

struct Arena {
    heap: Heap,
    /// Bytes of address space taken so far (`heap` covers them).
    size: u64,
    /// Bytes of live allocations, and the most at once.
    used: usize,
    peak: usize,
    limit: usize,
    /// How far the heap may grow: the limit and as much again of slack.
    hard: u64,
    taken: bool,
    /// Given up (dropped while it still held allocations): never handed out again.
    lost: bool,
}

impl Arena {
    const EMPTY: Arena =
        Arena { heap: Heap::empty(), size: 0, used: 0, peak: 0, limit: 0, hard: 0, taken: false, lost: false };

    fn base(k: usize) -> u64 {
        ARENA_BASE + k as u64 * ARENA_SPAN
    }

    fn grow(&mut self, k: usize, at_least: u64) -> bool {
        let by = at_least.div_ceil(ARENA_STEP).max(1) * ARENA_STEP;
        if self.size + by > self.hard || !reserve(Self::base(k) + self.size, by) {
            return false;
        }
        if self.size == 0 {
            // SAFETY: the arena's span belongs to it alone; its pages arrive from the
            // pager (zeroed) when first touched.
            unsafe { self.heap.init(Self::base(k) as *mut u8, by as usize) };
        } else {
            // SAFETY: the new range directly follows the arena's current end, inside
            // its span, and is used by nothing else.
            unsafe { self.heap.extend(by as usize) };
        }
        self.size += by;
        true
    }
}

struct State {
    heap: Heap,
    size: u64,
    arenas: [Arena; ARENAS],
}

static HEAP: Lock<State> = Lock::new(State { heap: Heap::empty(), size: 0, arenas: [Arena::EMPTY; ARENAS] });
/// Each arena: an allocation went past its limit since the last `clear_over` (apart
/// from the lock, so that code can ask at each step for the price of a load).
static OVER: [AtomicBool; ARENAS] = [const { AtomicBool::new(false) }; ARENAS];

/// The arena entered (its index + 1; 0: none) and the thread that entered it (its
/// UTCB's address): other threads keep allocating from the program's heap.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static CURRENT_THREAD: AtomicU64 = AtomicU64::new(0);

struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// Ask the memory server to set `bytes` of pages aside before they are touched: false
/// when it refuses (past the page limit, or no memory). Yes without a memory server.
/// The thread's IPC state a caller may be reading (the length of the last string it
/// received) is kept.
fn reserve(at: u64, bytes: u64) -> bool {
    let u = crate::ipc::utcb();
    let kept = u.recv_str_len;
    let r = crate::proto::reserve(abi::cap::PAGER, bytes.div_ceil(abi::layout::PAGE_SIZE), at);
    crate::ipc::utcb().recv_str_len = kept;
    !matches!(r, Err(e) if e != abi::Error::InvalidCap)
}

fn grow(st: &mut State, at_least: u64) -> bool {
    let by = at_least.div_ceil(STEP).max(1) * STEP;
    if st.size + by > HEAP_MAX || !reserve(HEAP_BASE + st.size, by) {
        return false;
    }
    if st.size == 0 {
        // SAFETY: the region belongs to the heap alone; its pages arrive from the pager
        // (zeroed) when first touched.
        unsafe { st.heap.init(HEAP_BASE as *mut u8, by as usize) };
    } else {
        // SAFETY: the new range directly follows the heap's current end and is used by
        // nothing else.
        unsafe { st.heap.extend(by as usize) };
    }
    st.size += by;
    true
}

/// The arena this thread has entered, if any.
fn current() -> Option<usize> {
    let c = CURRENT.load(Ordering::Relaxed);
    (c != 0 && CURRENT_THREAD.load(Ordering::Relaxed) == crate::ipc::utcb_addr()).then(|| c - 1)
}

/// The arena an address lies in, if any.
fn arena_of(p: u64) -> Option<usize> {
    (ARENA_BASE..ARENA_BASE + ARENAS as u64 * ARENA_SPAN).contains(&p).then(|| ((p - ARENA_BASE) / ARENA_SPAN) as usize)
}

// SAFETY: the lock serialises all access to the heap and the arenas.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut st = HEAP.lock();
        let need = (layout.size() + layout.align()) as u64;
        if let Some(k) = current() {
            let a = &mut st.arenas[k];
            if a.used + layout.size() > a.limit {
                OVER[k].store(true, Ordering::Relaxed);
            }
            loop {
                if a.size > 0 {
                    if let Ok(p) = a.heap.allocate_first_fit(layout) {
                        a.used += layout.size();
                        a.peak = a.peak.max(a.used);
                        return p.as_ptr();
                    }
                }
                if !a.grow(k, need) {
                    // Past the slack too: the program's heap serves it (the arena is
                    // over, and its code is stopped at its next check).
                    OVER[k].store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        loop {
            if st.size > 0 {
                if let Ok(p) = st.heap.allocate_first_fit(layout) {
                    return p.as_ptr();
                }
            }
            if !grow(&mut st, need) {
                return core::ptr::null_mut();
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(p) = core::ptr::NonNull::new(ptr) else { return };
        let mut st = HEAP.lock();
        match arena_of(ptr as u64) {
            Some(k) => {
                let a = &mut st.arenas[k];
                a.used -= layout.size();
                // SAFETY: `ptr` came from this arena's `alloc` with this layout (an
                // address in an arena's span comes from nowhere else), and the arena has
                // not been reset since (a reset arena's old allocations are never freed:
                // their owner was forgotten).
                unsafe { a.heap.deallocate(p, layout) };
            }
            // SAFETY: `ptr` came from `alloc` with this layout.
            None => unsafe { st.heap.deallocate(p, layout) },
        }
    }
}

/// Is the heap's lock held (by any thread)? A thread stopped while it holds it must
/// not be made to leave its code half-way (`guard`).
pub fn busy() -> bool {
    HEAP.is_locked()
}

/// A heap of its own for untrusted code; given back when dropped.
pub struct ArenaHeap(usize);

impl ArenaHeap {
    /// An arena whose allocations are charged up to `limit` bytes (at most half its
    /// span); `None` when every arena is taken.
    pub fn new(limit: usize) -> Option<ArenaHeap> {
        let limit = limit.min(ARENA_SPAN as usize / 2);
        let mut st = HEAP.lock();
        let k = st.arenas.iter().position(|a| !a.taken && !a.lost)?;
        let a = &mut st.arenas[k];
        a.taken = true;
        a.limit = limit;
        a.hard = (2 * limit as u64).next_multiple_of(ARENA_STEP).max(a.size);
        a.used = 0;
        a.peak = 0;
        OVER[k].store(false, Ordering::Relaxed);
        Some(ArenaHeap(k))
    }

    /// Run `f` with this thread's allocations in the arena (arenas do not nest: the
    /// one entered before is entered again after).
    pub fn within<R>(&self, f: impl FnOnce() -> R) -> R {
        let before = (CURRENT.load(Ordering::Relaxed), CURRENT_THREAD.load(Ordering::Relaxed));
        CURRENT_THREAD.store(crate::ipc::utcb_addr(), Ordering::Relaxed);
        CURRENT.store(self.0 + 1, Ordering::Relaxed);
        let r = f();
        CURRENT.store(before.0, Ordering::Relaxed);
        CURRENT_THREAD.store(before.1, Ordering::Relaxed);
        r
    }

    /// Bytes of live allocations in it.
    pub fn used(&self) -> usize {
        HEAP.lock().arenas[self.0].used
    }

    /// The most it held at once.
    pub fn peak(&self) -> usize {
        HEAP.lock().arenas[self.0].peak
    }

    /// Did an allocation go past the limit (since the last `clear_over`)?
    pub fn over(&self) -> bool {
        OVER[self.0].load(Ordering::Relaxed)
    }

    pub fn clear_over(&self) {
        let st = HEAP.lock();
        let a = &st.arenas[self.0];
        OVER[self.0].store(a.used > a.limit, Ordering::Relaxed);
    }

    /// Forget every allocation in it at once: their owner was stopped half-way and is
    /// never used again (never dropped). Its pages stay for the next allocations.
    pub fn reset(&mut self) {
        let mut st = HEAP.lock();
        let a = &mut st.arenas[self.0];
        a.heap = Heap::empty();
        a.size = 0;
        a.used = 0;
        OVER[self.0].store(false, Ordering::Relaxed);
    }
}

impl Drop for ArenaHeap {
    fn drop(&mut self) {
        let mut st = HEAP.lock();
        let a = &mut st.arenas[self.0];
        a.taken = false;
        // Something it allocated is still alive (a leak of the code's, or a static it
        // filled): the memory stays as it is, and the arena is never used again.
        if a.used != 0 {
            a.lost = true;
        }
    }
}

/// Is the arena this thread has entered over its limit? (Code that cannot be stopped
/// from outside asks this at each step: a script engine's progress callback.)
pub fn current_over() -> bool {
    current().is_some_and(|k| OVER[k].load(Ordering::Relaxed))
}

/// Arenas given up (dropped while they still held allocations).
pub fn arenas_lost() -> usize {
    HEAP.lock().arenas.iter().filter(|a| a.lost).count()
}
