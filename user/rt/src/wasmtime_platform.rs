//! The custom-platform functions Wasmtime's `no_std` runtime needs when it runs without
//! virtual memory or signals (as `graftcode::aot` configures it): two pointers of
//! per-thread state (slot 0, the runtime's; slot 1, asynchronous components'). Here in
//! `rt` because cargo unifies features across a workspace build, so any program that
//! links the graft crates may link Wasmtime's runtime; a server runs its grafts on one
//! thread, so one pair per program serves.

use core::sync::atomic::{AtomicPtr, Ordering};

static TLS: [AtomicPtr<u8>; 2] = [AtomicPtr::new(core::ptr::null_mut()), AtomicPtr::new(core::ptr::null_mut())];

/// Wasmtime's state `slot` for the calling thread.
#[no_mangle]
pub extern "C" fn wasmtime_tls_get(slot: usize) -> *mut u8 {
    TLS.get(slot).map_or(core::ptr::null_mut(), |p| p.load(Ordering::Relaxed))
}

/// Set Wasmtime's state `slot` for the calling thread.
#[no_mangle]
pub extern "C" fn wasmtime_tls_set(slot: usize, p: *mut u8) {
    if let Some(s) = TLS.get(slot) {
        s.store(p, Ordering::Relaxed);
    }
}
