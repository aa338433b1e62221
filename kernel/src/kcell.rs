//! Global kernel state cell.
//!
//! Scion runs on one CPU and the kernel never runs with interrupts enabled except in
//! the idle loop, which holds no reference to kernel state. Every entry (system call,
//! interrupt, exception) therefore runs to completion before the next one starts, and
//! a cell's contents are only ever reached from one entry at a time. Code must not keep
//! a reference obtained from `get` across a context switch (`kernel::switch_to`); the
//! scheduler is written so that nothing runs after a switch returns except the return
//! to user mode.

use core::cell::UnsafeCell;

pub struct KCell<T>(UnsafeCell<T>);

// SAFETY: see the module comment: one CPU, no concurrent entries, so no data race.
unsafe impl<T> Sync for KCell<T> {}

impl<T> KCell<T> {
    pub const fn new(v: T) -> Self {
        KCell(UnsafeCell::new(v))
    }

    #[allow(clippy::mut_from_ref)]
    pub fn get(&self) -> &mut T {
        // SAFETY: see the module comment; exclusive access follows from the kernel's
        // single-CPU, run-to-completion entry discipline.
        unsafe { &mut *self.0.get() }
    }
}
