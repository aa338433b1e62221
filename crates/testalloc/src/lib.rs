//! A global allocator for host tests and tools (`std`): each allocation is charged to
//! the scope its thread has entered, if any, and a scope past its limit says so. The
//! servers measure what a graft's engine holds with arenas of their own (`rt::heap`);
//! this is the same bookkeeping on the host, where the graft crate's engines are
//! tested. Declare it in the test binary:
//! `#[global_allocator] static A: testalloc::Counting = testalloc::Counting;`

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const SCOPES: usize = 1024;
/// Each block starts with a header naming its scope (0: none), before the caller's part.
const HEADER: usize = 16;

static USED: [AtomicUsize; SCOPES] = [const { AtomicUsize::new(0) }; SCOPES];
static PEAK: [AtomicUsize; SCOPES] = [const { AtomicUsize::new(0) }; SCOPES];
static LIMIT: [AtomicUsize; SCOPES] = [const { AtomicUsize::new(usize::MAX) }; SCOPES];
static OVER: [AtomicBool; SCOPES] = [const { AtomicBool::new(false) }; SCOPES];
static TAKEN: [AtomicBool; SCOPES] = [const { AtomicBool::new(false) }; SCOPES];

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// The allocator.
pub struct Counting;

// SAFETY: every block is the system allocator's, `align` bytes longer than asked; the
// caller's part starts `align` bytes in (so it keeps the alignment asked) and the word
// before it names the scope. Only this allocator reads or writes that word, and it
// frees each block with the layout it was allocated with.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let align = layout.align().max(HEADER);
        let Ok(l) = Layout::from_size_align(layout.size() + align, align) else { return std::ptr::null_mut() };
        // SAFETY: `l` has a non-zero size (at least the header).
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            return p;
        }
        let s = CURRENT.try_with(|c| c.get()).unwrap_or(0);
        if s != 0 {
            let used = USED[s].fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK[s].fetch_max(used, Ordering::Relaxed);
            if used > LIMIT[s].load(Ordering::Relaxed) {
                OVER[s].store(true, Ordering::Relaxed);
            }
        }
        // SAFETY: the block is `align` (≥ 16) bytes longer than asked: `q` and the word
        // before it lie inside it.
        unsafe {
            let q = p.add(align);
            (q.sub(8) as *mut usize).write(s);
            q
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let align = layout.align().max(HEADER);
        // SAFETY: `ptr` came from `alloc` with this layout: the word before it names its
        // scope and the system's block starts `align` bytes before it, `align` longer.
        unsafe {
            let s = (ptr.sub(8) as *const usize).read();
            if s != 0 {
                USED[s].fetch_sub(layout.size(), Ordering::Relaxed);
            }
            System.dealloc(ptr.sub(align), Layout::from_size_align_unchecked(layout.size() + align, align));
        }
    }
}

/// A scope allocations are charged to; given back when dropped.
pub struct Scope(usize);

impl Scope {
    /// A scope with a limit of `limit` bytes; `None` when all are taken.
    pub fn new(limit: usize) -> Option<Scope> {
        let k = (1..SCOPES)
            .find(|&k| TAKEN[k].compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok())?;
        USED[k].store(0, Ordering::Relaxed);
        PEAK[k].store(0, Ordering::Relaxed);
        LIMIT[k].store(limit, Ordering::Relaxed);
        OVER[k].store(false, Ordering::Relaxed);
        Some(Scope(k))
    }

    /// Run `f` with this thread's allocations charged to the scope.
    pub fn within<R>(&self, f: impl FnOnce() -> R) -> R {
        let before = CURRENT.with(|c| c.replace(self.0));
        struct Back(usize);
        impl Drop for Back {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _back = Back(before);
        f()
    }

    /// Bytes charged to it and not freed.
    pub fn used(&self) -> usize {
        USED[self.0].load(Ordering::Relaxed)
    }

    /// The most it held at once.
    pub fn peak(&self) -> usize {
        PEAK[self.0].load(Ordering::Relaxed)
    }

    pub fn over(&self) -> bool {
        OVER[self.0].load(Ordering::Relaxed)
    }

    pub fn clear_over(&self) {
        OVER[self.0].store(self.used() > LIMIT[self.0].load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Start counting afresh (what it held was leaked on purpose).
    pub fn reset(&self) {
        USED[self.0].store(0, Ordering::Relaxed);
        OVER[self.0].store(false, Ordering::Relaxed);
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        TAKEN[self.0].store(false, Ordering::Release);
    }
}

/// Is the scope this thread is in over its limit?
pub fn current_over() -> bool {
    CURRENT.try_with(|c| c.get()).is_ok_and(|s| s != 0 && OVER[s].load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static A: Counting = Counting;

    #[test]
    fn allocations_are_charged_to_the_scope_they_are_made_in() {
        let s = Scope::new(1000).unwrap();
        let v = s.within(|| vec![0u8; 600]);
        assert!(s.used() >= 600 && !s.over());
        let w = s.within(|| vec![0u8; 600]);
        assert!(s.over() && !current_over(), "over, and this thread is not in it now");
        assert!(s.peak() >= 1200);
        drop(v);
        drop(w);
        assert_eq!(s.used(), 0, "freed wherever they are freed");
        s.clear_over();
        assert!(!s.over());
        let outside = vec![0u8; 5000];
        assert_eq!(s.used(), 0);
        drop(outside);
    }
}
