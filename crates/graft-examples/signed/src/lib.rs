//! The trusted harness around signed grafts: one `extern "C"` entry per graft of
//! `graft-examples` (safe Rust, `forbid(unsafe_code)`, the same source as the native
//! built-ins), called by a server as `entry(input, input_len, state, state_len)`.
//! This file is Scion's, not a graft author's: it turns the server's pointers into the
//! two slices the graft may touch, and it gives the graft no way to panic — the panic
//! handler calls a function that exists nowhere, so a graft from which a panic can be
//! reached does not link (xtask links each entry alone, its unreachable code removed).
#![no_std]

/// Entries named `scion_graft_<name>`.
macro_rules! entry {
    ($name:ident, $f:path) => {
        #[no_mangle]
        pub extern "C" fn $name(input: *const u8, input_len: usize, state: *mut u8, state_len: usize) -> u64 {
            // SAFETY: the server passes its point's input and the graft's own state, two
            // buffers that do not overlap and that nothing else touches during the call.
            let (input, state) = unsafe { (core::slice::from_raw_parts(input, input_len), core::slice::from_raw_parts_mut(state, state_len)) };
            $f(input, state)
        }
    };
}

entry!(scion_graft_null, graft_examples::null);
entry!(scion_graft_hotlist, graft_examples::hotlist);
entry!(scion_graft_md5, graft_examples::md5);
entry!(scion_graft_ldisk, graft_examples::ldisk);
entry!(scion_graft_spin, graft_examples::spin);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    extern "Rust" {
        // Defined nowhere: a reachable panic is a link error.
        fn scion_signed_graft_can_panic() -> !;
    }
    // SAFETY: never runs: linking fails when this is reachable.
    unsafe { scion_signed_graft_can_panic() }
}
