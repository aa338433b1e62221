//! The program heap: a first-fit allocator over a region of the address space that
//! the program's pager fills on demand (demand-zero pages), with a free list per size
//! class in front of it for blocks of up to 512 bytes (taken and given back in O(1);
//! the first fit walks its holes on every allocation and free, and a server of a
//! thousand connections has many). It grows in 256 KiB steps
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
//! the arena's limit, which is hard: an allocation that would take it past the limit
//! (or that the arena's pages cannot hold) *fails*, at once — the arena says so
//! (`over`) and answers a null pointer, never memory of the program's heap. The code
//! in it then hears an error (`try_reserve`) or panics (a plain `Vec` push), and as it
//! runs guarded (`guard`), the panic leaves the call, not the program. A free goes to
//! the heap the address lies in, whoever frees it. An arena whose code was stopped
//! half-way is `reset`, and an arena is dropped when its graft goes: either way
//! everything in it is forgotten at once and its pages go back whole — unmapped and
//! their reservation ended at the memory server (`proto::RELEASE`), or, in a program
//! paged by sigma0 (a memory server), the frames given back to sigma0 (which an
//! arena there takes with `ALLOC`, a step at a time) — so a graft, however it ends,
//! leaves the program holding no more pages than before it.

use crate::sync::Lock;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use linked_list_allocator::Heap;

const HEAP_BASE: u64 = crate::layout::HEAP;
const STEP: u64 = 256 * 1024;
const HEAP_MAX: u64 = 256 * 1024 * 1024;

/// Arenas: `ARENAS` of them, each in `ARENA_SPAN` bytes of address space of its own.
const ARENA_BASE: u64 = crate::layout::ARENAS;
const ARENA_SPAN: u64 = 1 << 28;
pub const ARENAS: usize = 64;
const ARENA_STEP: u64 = 64 * 1024;
/// sigma0's `ALLOC` of one arena step (16 pages), and the steps one arena may hold in a
/// program sigma0 pages (their frames are noted, to be given back): 8 MiB.
const STEP_LOG2: u64 = 4;
const MAX_STEPS: usize = 128;
/// sigma0's requests an arena makes (`sigma0_api`'s `ALLOC` and `FREE`; that crate
/// speaks through `rt`, so the labels are repeated here).
const SIGMA0_ALLOC: u64 = 0x50;
const SIGMA0_FREE: u64 = 0x54;

/// Where arenas' pages come from: not known yet, the program's memory server
/// (`RESERVE` / `RELEASE`), or sigma0 (`ALLOC` / `FREE`: a program without a memory
/// server, as the memory servers themselves).
const SOURCE_UNKNOWN: u8 = 0;
const SOURCE_PAGER: u8 = 1;
const SOURCE_SIGMA0: u8 = 2;
static SOURCE: AtomicU8 = AtomicU8::new(SOURCE_UNKNOWN);

struct Arena {
    heap: Heap,
    /// Bytes of address space taken so far (`heap` covers them; each page of it set
    /// aside at the memory server, or mapped from sigma0).
    size: u64,
    /// Bytes of live allocations, and the most at once.
    used: usize,
    peak: usize,
    limit: usize,
    /// How far the heap may grow: the limit and as much again of slack (for the
    /// allocator's fragmentation; allocations stay within `limit`).
    hard: u64,
    taken: bool,
    /// From sigma0: the frame (physical address) of each step taken.
    frames: [u64; MAX_STEPS],
}

impl Arena {
    const EMPTY: Arena = Arena {
        heap: Heap::empty(),
        size: 0,
        used: 0,
        peak: 0,
        limit: 0,
        hard: 0,
        taken: false,
        frames: [0; MAX_STEPS],
    };

    fn base(k: usize) -> u64 {
        ARENA_BASE + k as u64 * ARENA_SPAN
    }

    fn grow(&mut self, k: usize, at_least: u64) -> bool {
        let by = at_least.div_ceil(ARENA_STEP).max(1) * ARENA_STEP;
        if self.size + by > self.hard || !self.take_pages(Self::base(k) + self.size, by) {
            return false;
        }
        if self.size == 0 {
            // SAFETY: the arena's span belongs to it alone; its pages arrive from the
            // pager (zeroed) when first touched, or were just mapped from sigma0.
            unsafe { self.heap.init(Self::base(k) as *mut u8, by as usize) };
        } else {
            // SAFETY: the new range directly follows the arena's current end, inside
            // its span, and is used by nothing else.
            unsafe { self.heap.extend(by as usize) };
        }
        self.size += by;
        true
    }

    /// Pages for `bytes` more at `at` (the arena's end): set aside at the memory
    /// server, or mapped from sigma0 a step at a time (their frames noted).
    fn take_pages(&mut self, at: u64, bytes: u64) -> bool {
        if SOURCE.load(Ordering::Relaxed) != SOURCE_SIGMA0 {
            match reserve_at(at, bytes) {
                Ok(()) => {
                    SOURCE.store(SOURCE_PAGER, Ordering::Relaxed);
                    return true;
                }
                Err(abi::Error::InvalidCap) => SOURCE.store(SOURCE_SIGMA0, Ordering::Relaxed),
                Err(_) => return false,
            }
        }
        let first = (self.size / ARENA_STEP) as usize;
        let steps = (bytes / ARENA_STEP) as usize;
        if first + steps > MAX_STEPS {
            return false;
        }
        for i in 0..steps {
            match sigma0_alloc(at + i as u64 * ARENA_STEP) {
                Some(pa) => self.frames[first + i] = pa,
                None => {
                    for &pa in &self.frames[first..first + i] {
                        sigma0_free(pa);
                    }
                    return false;
                }
            }
        }
        true
    }

    /// Forget everything in it and give its pages back: the memory server unmaps them
    /// and ends their reservation, or sigma0 takes the frames back (every mapping of
    /// them revoked).
    fn give_back(&mut self, k: usize) {
        if self.size > 0 {
            match SOURCE.load(Ordering::Relaxed) {
                SOURCE_SIGMA0 => {
                    for &pa in &self.frames[..(self.size / ARENA_STEP) as usize] {
                        sigma0_free(pa);
                    }
                }
                _ => {
                    let u = crate::ipc::utcb();
                    let kept = u.recv_str_len;
                    let pages = self.size / abi::layout::PAGE_SIZE;
                    let _ = crate::proto::release(abi::cap::PAGER, Self::base(k), pages);
                    crate::ipc::utcb().recv_str_len = kept;
                }
            }
        }
        self.heap = Heap::empty();
        self.size = 0;
        self.used = 0;
    }
}

/// One arena step of fresh frames from sigma0, mapped at `at`: their physical address.
/// The thread's IPC state a caller may be reading (its receive windows, the length of
/// the last string it received) is kept.
fn sigma0_alloc(at: u64) -> Option<u64> {
    let u = crate::ipc::utcb();
    let kept = (u.recv_str_len, u.recv_mem, u.recv_caps, u.recv_io);
    let window = abi::fpage::Fpage::mem(at, 12 + STEP_LOG2, abi::mem::READ | abi::mem::WRITE);
    let mut m = crate::ipc::Msg::new(SIGMA0_ALLOC, &[STEP_LOG2, at]);
    crate::ipc::set_windows(window, abi::fpage::Fpage(0), abi::fpage::Fpage(0));
    let r = crate::server::request(abi::cap::SIGMA0_SLOT, &mut m);
    let u = crate::ipc::utcb();
    (u.recv_str_len, u.recv_mem, u.recv_caps, u.recv_io) = kept;
    (r.is_ok() && m.items() == 1).then(|| m.word(2))
}

/// Give an arena step's frames back to sigma0 (which revokes our mapping of them).
fn sigma0_free(pa: u64) {
    let kept = crate::ipc::utcb().recv_str_len;
    let _ = crate::server::request(abi::cap::SIGMA0_SLOT, &mut crate::ipc::Msg::new(SIGMA0_FREE, &[pa, STEP_LOG2]));
    crate::ipc::utcb().recv_str_len = kept;
}

struct State {
    heap: Heap,
    size: u64,
    arenas: [Arena; ARENAS],
    /// Freed small blocks of the program's heap, a list per size class (`SMALL_STEP`
    /// bytes apart, up to `SMALL_MAX`): the address of the first (0: none), each block
    /// holding the next's. `Heap`'s first fit walks its list of holes on every
    /// allocation and free (kept in address order): with a thousand connections' small
    /// allocations interleaved in a server, a request's every allocation walked
    /// hundreds of holes. A small block is taken from and given back to its class's
    /// list, O(1), and never returns to `Heap` (a class holds at most its peak).
    small: [usize; SMALL_CLASSES],
}

/// Small-block classes: sizes up to `SMALL_MAX`, `SMALL_STEP` bytes apart, aligned to
/// `SMALL_STEP`.
const SMALL_STEP: usize = 16;
const SMALL_MAX: usize = 512;
const SMALL_CLASSES: usize = SMALL_MAX / SMALL_STEP;

/// The class of a layout the small lists serve, if they do.
fn small_class(layout: Layout) -> Option<usize> {
    (layout.size() <= SMALL_MAX && layout.align() <= SMALL_STEP).then(|| layout.size().max(1).div_ceil(SMALL_STEP) - 1)
}

/// The layout a block of class `c` has in `Heap`.
fn class_layout(c: usize) -> Layout {
    // (Sizes 16..=512, alignment 16: always a valid layout.)
    Layout::from_size_align((c + 1) * SMALL_STEP, SMALL_STEP).unwrap_or(Layout::new::<u128>())
}

static HEAP: Lock<State> =
    Lock::new(State { heap: Heap::empty(), size: 0, arenas: [Arena::EMPTY; ARENAS], small: [0; SMALL_CLASSES] });
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
fn reserve(at: u64, bytes: u64) -> bool {
    !matches!(reserve_at(at, bytes), Err(e) if e != abi::Error::InvalidCap)
}

/// `RESERVE` for `bytes` at `at`: `Err(InvalidCap)` without a memory server. The
/// thread's IPC state a caller may be reading (the length of the last string it
/// received) is kept.
fn reserve_at(at: u64, bytes: u64) -> Result<(), abi::Error> {
    let u = crate::ipc::utcb();
    let kept = u.recv_str_len;
    let r = crate::proto::reserve(abi::cap::PAGER, bytes.div_ceil(abi::layout::PAGE_SIZE), at);
    crate::ipc::utcb().recv_str_len = kept;
    r
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
            // Past the limit, or past what its pages may hold: refused here and now.
            let a = &mut st.arenas[k];
            if a.used + layout.size() > a.limit {
                OVER[k].store(true, Ordering::Relaxed);
                return core::ptr::null_mut();
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
                    OVER[k].store(true, Ordering::Relaxed);
                    return core::ptr::null_mut();
                }
            }
        }
        // A small block: its class's list first, else a block of the class's size.
        let class = small_class(layout);
        let layout = match class {
            Some(c) => {
                let head = st.small[c];
                if head != 0 {
                    // SAFETY: `head` is a freed block of class `c` of this heap (`dealloc`
                    // put it on the list and wrote the next one's address at its start;
                    // blocks are at least 16 bytes, 16-aligned); nobody else refers to it.
                    st.small[c] = unsafe { (head as *const usize).read() };
                    return head as *mut u8;
                }
                class_layout(c)
            }
            None => layout,
        };
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
                // An address past the arena's pages was given back with them (its owner
                // forgotten): nothing to free.
                if ptr as u64 >= Arena::base(k) + a.size {
                    return;
                }
                a.used = a.used.saturating_sub(layout.size());
                // SAFETY: `ptr` came from this arena's `alloc` with this layout (an
                // address in an arena's span comes from nowhere else), and the arena has
                // not been given back since (a reset arena's old allocations are never
                // freed: their owner was forgotten).
                unsafe { a.heap.deallocate(p, layout) };
            }
            None => match small_class(layout) {
                Some(c) => {
                    // SAFETY: `ptr` came from `alloc` with a layout of class `c`, so it is
                    // a block of `class_layout(c)` (at least 16 bytes, 16-aligned) that
                    // its owner no longer uses: it holds the list's next address now.
                    unsafe { (ptr as *mut usize).write(st.small[c]) };
                    st.small[c] = ptr as usize;
                }
                // SAFETY: `ptr` came from `alloc` with this layout.
                None => unsafe { st.heap.deallocate(p, layout) },
            },
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
        let k = st.arenas.iter().position(|a| !a.taken)?;
        let a = &mut st.arenas[k];
        a.taken = true;
        a.limit = limit;
        a.hard = (2 * limit as u64).next_multiple_of(ARENA_STEP);
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
    /// never used again (never dropped). Its pages go back (`give_back`); the next
    /// allocation takes new ones.
    pub fn reset(&mut self) {
        let mut st = HEAP.lock();
        st.arenas[self.0].give_back(self.0);
        OVER[self.0].store(false, Ordering::Relaxed);
    }
}

impl Drop for ArenaHeap {
    /// Its pages go back whole, whatever is still allocated in it: its code is gone, and
    /// what it left (a leak of its own: a script's reference cycle) goes with it. Nothing
    /// outside the code may point in (the engines' statics are filled before any arena
    /// is made: `graft::engine::warm_up`).
    fn drop(&mut self) {
        let mut st = HEAP.lock();
        let a = &mut st.arenas[self.0];
        a.give_back(self.0);
        a.taken = false;
        OVER[self.0].store(false, Ordering::Relaxed);
    }
}

/// Is the arena this thread has entered over its limit? (Code that cannot be stopped
/// from outside asks this at each step: a script engine's progress callback.)
pub fn current_over() -> bool {
    current().is_some_and(|k| OVER[k].load(Ordering::Relaxed))
}

/// Bytes of pages the arenas hold now (taken from the memory server or sigma0, not yet
/// given back).
pub fn arenas_held() -> u64 {
    HEAP.lock().arenas.iter().map(|a| a.size).sum()
}
