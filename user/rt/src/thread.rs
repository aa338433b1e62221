//! Threads in one's own task: each gets a UTCB page, a stack from the heap, and a
//! capability slot.

use crate::sys;
use abi::{cap, Error};
use alloc::boxed::Box;
use core::sync::atomic::{AtomicU64, Ordering};

const UTCB_BASE: u64 = crate::layout::THREAD_UTCBS;
pub const STACK_SIZE: usize = 64 * 1024;
static NEXT_UTCB: AtomicU64 = AtomicU64::new(0);

pub struct Thread {
    /// Capability slot (SEND | CONTROL) for the thread.
    pub slot: u64,
}

/// A fresh UTCB address in this task.
pub fn alloc_utcb() -> u64 {
    UTCB_BASE + NEXT_UTCB.fetch_add(1, Ordering::Relaxed) * 4096
}

/// Start `f(arg)` on a new thread of this task at priority `prio`.
/// The thread's stack (from the heap) is not reclaimed when the thread ends.
pub fn spawn(f: fn(u64), arg: u64, prio: u64) -> Result<Thread, Error> {
    let slot = crate::alloc_slot();
    sys::thread_create(cap::SELF_TASK, slot, alloc_utcb(), prio)?;
    let stack: &'static mut [u8] = Box::leak(alloc::vec![0u8; STACK_SIZE].into_boxed_slice());
    let top = (stack.as_ptr() as u64 + STACK_SIZE as u64) & !15;
    let start = Box::into_raw(Box::new((f, arg)));
    if let Err(e) = sys::thread_start(slot, thread_entry as *const () as usize as u64, top - 8, start as u64) {
        // SAFETY: the thread never started, so the box is still ours.
        drop(unsafe { Box::from_raw(start) });
        return Err(e);
    }
    Ok(Thread { slot })
}

extern "C" fn thread_entry(start: u64) -> ! {
    // SAFETY: `spawn` passed a pointer from Box::into_raw that only this thread uses.
    let b = unsafe { Box::from_raw(start as *mut (fn(u64), u64)) };
    (b.0)(b.1);
    sys::thread_exit()
}

/// This thread's priority.
pub fn my_priority() -> u64 {
    sys::thread_read_state(cap::SELF_THREAD).map(|(_, p)| p).unwrap_or(abi::sched::DEFAULT_PRIORITY)
}
