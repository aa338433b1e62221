//! Hostile: reads far outside its memory (the engine must trap it, not the server).
#![no_std]
#![no_main]
fn oob(input: &[u8], state: &mut [u8]) -> u64 {
    let p = (0x7fff_0000usize + input.len()) as *const u64;
    // SAFETY: none — this graft is hostile on purpose; the sandbox must catch it.
    let v = unsafe { core::ptr::read_volatile(p) };
    state[0] = v as u8;
    0
}
scion_wasm_grafts::graft!(oob, 8);
