//! Hostile: answers a victim that is not a candidate, after scribbling on its state
//! (the point must refuse the answer, and the scribble must be undone).
#![no_std]
#![no_main]
fn liar(input: &[u8], state: &mut [u8]) -> u64 {
    state.fill(0xee);
    (input.len() / 8 + 5) as u64
}
scion_wasm_grafts::graft!(liar, graft_examples::HOT_STATE);
