//! The glue every WebAssembly graft shares: the exports Scion's Wasm engines look for
//! (`graft_input`, `graft_state`, `graft_run`) around one safe-Rust graft function
//! (`graft-examples`). `graft!(f, STATE_BYTES)` in an example makes it a graft module.
#![no_std]

/// The most input any graft point hands a graft (the stream point's 1 KiB).
pub const MAX_INPUT: usize = 1024;

#[macro_export]
macro_rules! graft {
    ($f:path, $state:expr) => {
        static mut INPUT: [u8; $crate::MAX_INPUT] = [0; $crate::MAX_INPUT];
        static mut STATE: [u8; $state] = [0; $state];

        #[no_mangle]
        pub extern "C" fn graft_input() -> i32 {
            core::ptr::addr_of!(INPUT) as i32
        }

        #[no_mangle]
        pub extern "C" fn graft_state() -> i32 {
            core::ptr::addr_of!(STATE) as i32
        }

        #[no_mangle]
        pub extern "C" fn graft_run(len: i32) -> i64 {
            let n = (len as usize).min($crate::MAX_INPUT);
            // SAFETY: a Wasm module runs one call at a time (no threads), so nothing
            // else holds a reference to the two buffers while this one runs.
            let (input, state) = unsafe { (&(&*core::ptr::addr_of!(INPUT))[..n], &mut *core::ptr::addr_of_mut!(STATE)) };
            $f(input, state) as i64
        }

        #[panic_handler]
        fn panic(_: &core::panic::PanicInfo) -> ! {
            core::arch::wasm32::unreachable()
        }
    };
}
