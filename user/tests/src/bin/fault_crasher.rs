//! Faults at once: writes through a null pointer (root must log the fault and remove
//! the program), or with the argument `last` reads the user half's last page
//! (`0x7fff_ffff_f000`, which no pager may map: its memory server declines, and root
//! must remove it just the same rather than leave it waiting).
#![no_std]
#![no_main]

rt::entry!(main);

fn main() -> i32 {
    if rt::args().split(' ').nth(1) == Some("last") {
        // SAFETY: deliberately outside what may be mapped; the fault ends this task.
        unsafe { core::ptr::read_volatile(core::ptr::without_provenance::<u64>(abi::layout::USER_MAP_END as usize)) };
        return 0;
    }
    // SAFETY: deliberately invalid; the kernel turns the page fault into a fault
    // message to root, which destroys this task.
    unsafe { core::ptr::write_volatile(core::ptr::without_provenance_mut::<u64>(8), 1) };
    0
}
