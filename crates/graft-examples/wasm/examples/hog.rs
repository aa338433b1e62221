//! Hostile: asks for 1 GiB of memory and writes to the end of it (the memory limit
//! must refuse the growth; the write then traps).
#![no_std]
#![no_main]
fn hog(_input: &[u8], state: &mut [u8]) -> u64 {
    let pages = core::arch::wasm32::memory_grow(0, 16384);
    let end = (core::arch::wasm32::memory_size(0) * 65536 + 16384 * 65536 - 8) as *mut u64;
    // SAFETY: none — hostile on purpose; a refused growth leaves `end` out of bounds.
    unsafe { core::ptr::write_volatile(end, pages as u64) };
    state[0] = 1;
    0
}
scion_wasm_grafts::graft!(hog, 8);
