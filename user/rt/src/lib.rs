//! Scion's user runtime: program entry, system calls, IPC, threads, a growing heap,
//! `print!`, capability-slot allocation, the program loader, the protocols every
//! program speaks (root's and the console's), the one server loop and the badge layout
//! (`server`), and the table of regions programs map (`layout`).
#![no_std]

extern crate alloc;

pub mod console;
pub mod env;
pub mod guard;
pub mod heap;
pub mod ipc;
pub mod labels;
pub mod layout;
pub mod loader;
pub mod pci;
pub mod print;
pub mod proto;
pub mod protocol;
pub mod rtc;
pub mod server;
pub mod shared;
pub mod sync;
pub mod sys;
pub mod thread;

use abi::{cap, StartInfo};
use core::sync::atomic::{AtomicU64, Ordering};

pub use abi;

static START: AtomicU64 = AtomicU64::new(0);
static NEXT_SLOT: AtomicU64 = AtomicU64::new(cap::FIRST_FREE);

/// Slots given back by `free_slot`, handed out again first.
static FREE_SLOTS: sync::Lock<alloc::vec::Vec<u64>> = sync::Lock::new(alloc::vec::Vec::new());

/// A capability slot of this task that holds nothing. Panics when none is left: for a
/// program's own needs. A server taking a slot for a client's request uses
/// `try_alloc_slot` and refuses the request instead.
pub fn alloc_slot() -> u64 {
    try_alloc_slot().expect("out of capability slots")
}

/// A capability slot of this task that holds nothing, or None when every slot is taken.
pub fn try_alloc_slot() -> Option<u64> {
    if let Some(s) = FREE_SLOTS.lock().pop() {
        return Some(s);
    }
    NEXT_SLOT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| (s < cap::SLOTS).then_some(s + 1)).ok()
}

/// How many more slots `alloc_slot` can hand out.
pub fn free_slots() -> u64 {
    let fresh = cap::SLOTS.saturating_sub(NEXT_SLOT.load(Ordering::Relaxed));
    fresh + FREE_SLOTS.lock().len() as u64
}

/// `2^log2` fresh slots, the first a multiple of `2^log2` (a capability flexpage's
/// range: a receive window, or capabilities sent together). The fresh slots skipped to
/// align it are kept for `alloc_slot`.
pub fn alloc_slot_block(log2: u32) -> u64 {
    let n = 1u64 << log2;
    let Ok(old) = NEXT_SLOT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| Some(s.next_multiple_of(n) + n))
    else {
        unreachable!("the closure always answers")
    };
    let s = old.next_multiple_of(n);
    assert!(s + n <= cap::SLOTS, "out of capability slots");
    FREE_SLOTS.lock().extend(old..s);
    s
}

/// Two adjacent fresh slots (for calls that fill `slot` and `slot + 1`, as `SPAWN`).
pub fn alloc_slot_pair() -> u64 {
    let s = NEXT_SLOT.fetch_add(2, Ordering::Relaxed);
    assert!(s + 1 < cap::SLOTS, "out of capability slots");
    s
}

/// Give back a slot from `alloc_slot` once it is empty again (its capability deleted,
/// used up, or never filled), so long-running programs do not run out.
pub fn free_slot(slot: u64) {
    let _ = sys::cap_delete(slot);
    FREE_SLOTS.lock().push(slot);
}

/// The start information of this program.
pub fn start_info() -> &'static StartInfo {
    // SAFETY: set once by `rt_start` to the StartInfo on the first thread's stack, which
    // stays mapped and unmodified for the program's life.
    unsafe { &*(START.load(Ordering::Relaxed) as *const StartInfo) }
}

/// The command line: program name and arguments.
pub fn args() -> &'static str {
    let si = start_info();
    let n = (si.args_len as usize).min(abi::START_ARGS_MAX);
    core::str::from_utf8(&si.args[..n]).unwrap_or("")
}

/// The boot image (root only).
pub fn bootfs() -> Option<&'static [u8]> {
    let si = start_info();
    if si.bootfs_addr == 0 {
        return None;
    }
    // SAFETY: the kernel maps the boot image read-only at this address for root's
    // whole life.
    Some(unsafe { core::slice::from_raw_parts(si.bootfs_addr as *const u8, si.bootfs_len as usize) })
}

core::arch::global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
_start:
    and rsp, -16
    xor ebp, ebp
    call rt_start
    ud2
"#
);

extern "Rust" {
    fn __scion_main() -> i32;
}

#[no_mangle]
extern "C" fn rt_start(si: u64) -> ! {
    START.store(si, Ordering::Relaxed);
    let code = if start_info().magic != abi::START_MAGIC {
        127
    } else {
        // SAFETY: `entry!` defines `__scion_main` in the program.
        unsafe { __scion_main() }
    };
    exit(code)
}

/// End the program: tell root (which destroys the task) or, for root itself and
/// programs without a parent, destroy the task.
pub fn exit(code: i32) -> ! {
    let _ = proto::client::exit(cap::PARENT, code as u64);
    let _ = sys::task_destroy(cap::SELF_TASK);
    sys::thread_exit()
}

/// Declare the program's main function: `rt::entry!(main);` with `fn main() -> i32`.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        #[no_mangle]
        fn __scion_main() -> i32 {
            let f: fn() -> i32 = $main;
            f()
        }

        #[panic_handler]
        fn panic(info: &core::panic::PanicInfo) -> ! {
            // A graft's arena refusing an allocation at its limit is how a hostile
            // graft's call ends (its stats say `Memory`): no line on the console each time.
            if !($crate::guard::in_call() && $crate::heap::current_over()) {
                $crate::println!("panic in {}: {}", $crate::args(), info);
            }
            // Inside a guarded call (a graft's), the call is left and the program goes on.
            $crate::guard::leave_on_panic();
            $crate::exit(101)
        }
    };
}
