//! The program heap: a first-fit allocator over a region of the address space that
//! the program's pager fills on demand (demand-zero pages). It grows in 256 KiB steps
//! up to `HEAP_MAX` without any system call: touching a new page is the request.
//! Nothing is touched before the first allocation, so a program without a pager
//! (sigma0) works as long as it does not allocate.

use crate::sync::Lock;
use core::alloc::{GlobalAlloc, Layout};
use linked_list_allocator::Heap;

const HEAP_BASE: u64 = crate::layout::HEAP;
const STEP: u64 = 256 * 1024;
const HEAP_MAX: u64 = 256 * 1024 * 1024;

struct State {
    heap: Heap,
    size: u64,
}

static HEAP: Lock<State> = Lock::new(State { heap: Heap::empty(), size: 0 });

struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

fn grow(st: &mut State, at_least: u64) -> bool {
    let by = at_least.div_ceil(STEP).max(1) * STEP;
    if st.size + by > HEAP_MAX {
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

// SAFETY: the lock serialises all access to the heap.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut st = HEAP.lock();
        loop {
            if st.size > 0 {
                if let Ok(p) = st.heap.allocate_first_fit(layout) {
                    return p.as_ptr();
                }
            }
            let need = (layout.size() + layout.align()) as u64;
            if !grow(&mut st, need) {
                return core::ptr::null_mut();
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(p) = core::ptr::NonNull::new(ptr) {
            // SAFETY: `ptr` came from `alloc` with this layout.
            unsafe { HEAP.lock().heap.deallocate(p, layout) };
        }
    }
}
