//! The program heap: a first-fit allocator over pages obtained with `MEM_ALLOC`,
//! grown on demand in 256 KiB steps up to `HEAP_MAX`.

use crate::sync::Lock;
use abi::{cap, mem};
use core::alloc::{GlobalAlloc, Layout};
use linked_list_allocator::Heap;

const HEAP_BASE: u64 = 0x0000_2000_0000_0000;
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
    let at = HEAP_BASE + st.size;
    if crate::sys::mem_alloc(cap::SELF_TASK, at, by / 4096, mem::READ | mem::WRITE).is_err() {
        return false;
    }
    if st.size == 0 {
        // SAFETY: the range was just mapped for the heap and nothing else uses it.
        unsafe { st.heap.init(at as *mut u8, by as usize) };
    } else {
        // SAFETY: the new pages directly follow the heap's current end.
        unsafe { st.heap.extend(by as usize) };
    }
    st.size += by;
    true
}

/// Map the first part of the heap.
pub fn init() {
    let mut st = HEAP.lock();
    if st.size == 0 {
        grow(&mut st, STEP);
    }
}

// SAFETY: the lock serialises all access to the heap.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut st = HEAP.lock();
        loop {
            if let Ok(p) = st.heap.allocate_first_fit(layout) {
                return p.as_ptr();
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
