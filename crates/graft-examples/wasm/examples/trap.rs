//! Hostile: panics (an index out of range) after scribbling on its state.
#![no_std]
#![no_main]
fn trap(input: &[u8], state: &mut [u8]) -> u64 {
    state.fill(0xee);
    let k = input.len() + 100;
    let v = [1u8, 2, 3];
    v[core::hint::black_box(k)] as u64
}
scion_wasm_grafts::graft!(trap, graft_examples::HOT_STATE);
