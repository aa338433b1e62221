//! Writes through a null pointer: root must log the fault and remove the program.
#![no_std]
#![no_main]

rt::entry!(main);

fn main() -> i32 {
    // SAFETY: deliberately invalid; the kernel turns the page fault into a fault
    // message to root, which destroys this task.
    unsafe { core::ptr::write_volatile(core::ptr::without_provenance_mut::<u64>(8), 1) };
    0
}
