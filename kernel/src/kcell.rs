//! Global kernel state cell.
//!
//! The kernel never runs with interrupts enabled except in the idle loop, which holds
//! no reference to kernel state, and every entry (system call, interrupt, exception)
//! holds the big kernel lock (`klock`) from its start to its return to user mode; the
//! idle loop gives it up while it halts. (The IPC fastpath may run without it while no
//! CPU holds it, through `as_ptr`, touching only its own CPU's threads and per-CPU
//! state: `klock`, `fastpath`.) So, on one CPU or several, every entry runs to
//! completion before the next one starts, and a cell's contents are only ever reached
//! from one entry at a time. (Exceptions: each CPU's own tables in `arch::cpu`, used by
//! that CPU alone, and cells written once at boot before the other CPUs start.) Code must not keep
//! a reference obtained from `get` across a context switch (`sched::switch_to`); the
//! scheduler is written so that nothing runs after a switch returns except the return
//! to user mode.

use core::cell::UnsafeCell;

pub struct KCell<T>(UnsafeCell<T>);

// SAFETY: see the module comment: the kernel lock allows no concurrent entries, so no
// data race.
unsafe impl<T> Sync for KCell<T> {}

impl<T> KCell<T> {
    pub const fn new(v: T) -> Self {
        KCell(UnsafeCell::new(v))
    }

    /// The contents as a raw pointer (for code that runs beside the lock holder and
    /// reaches only its own part: the IPC fastpath without the lock).
    pub const fn as_ptr(&self) -> *mut T {
        self.0.get()
    }

    #[allow(clippy::mut_from_ref)]
    pub fn get(&self) -> &mut T {
        // SAFETY: see the module comment; exclusive access follows from the kernel
        // lock and the run-to-completion entry discipline.
        unsafe { &mut *self.0.get() }
    }
}
