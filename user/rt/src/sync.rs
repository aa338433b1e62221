//! A spin lock that yields the CPU while it waits (threads of one task are
//! preempted, so a holder may be off the CPU).

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Tries with a pause between them before `lock` yields.
const SPINS: u32 = 2000;

pub struct Lock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire/release).
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    pub const fn new(v: T) -> Self {
        Lock { locked: AtomicBool::new(false), value: UnsafeCell::new(v) }
    }

    /// Is it held (by any thread)?
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    /// Take it: spin a little while (a holder on another CPU is usually done soon —
    /// a server's request on another CPU), then yield between tries (the holder may be
    /// preempted on this CPU).
    pub fn lock(&self) -> Guard<'_, T> {
        let mut spins = 0u32;
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            if spins < SPINS {
                spins += 1;
                while spins < SPINS && self.locked.load(Ordering::Relaxed) {
                    core::hint::spin_loop();
                    spins += 1;
                }
            } else {
                crate::sys::yield_now();
            }
        }
        Guard { lock: self }
    }
}

pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// A fair lock (a ticket lock): takers are served in the order they came, so a thread
/// that waits is not passed over by one that gives the lock back and takes it again at
/// once (a server's thread on another CPU, request after request). Spins a little, then
/// yields between looks, as `Lock`.
pub struct Fair<T> {
    next: AtomicU32,
    serving: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by the tickets (acquire on taking, release on
// giving back).
unsafe impl<T: Send> Sync for Fair<T> {}

impl<T> Fair<T> {
    pub const fn new(v: T) -> Self {
        Fair { next: AtomicU32::new(0), serving: AtomicU32::new(0), value: UnsafeCell::new(v) }
    }

    pub fn lock(&self) -> FairGuard<'_, T> {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let mut spins = 0u32;
        while self.serving.load(Ordering::Acquire) != ticket {
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
            } else {
                crate::sys::yield_now();
            }
        }
        FairGuard { lock: self }
    }
}

pub struct FairGuard<'a, T> {
    lock: &'a Fair<T>,
}

impl<T> Deref for FairGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock (its ticket is being served).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for FairGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for FairGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.serving.fetch_add(1, Ordering::Release);
    }
}
