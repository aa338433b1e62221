//! Hostile: never returns (the fuel budget must stop it).
#![no_std]
#![no_main]
fn spin(input: &[u8], _state: &mut [u8]) -> u64 {
    let mut x = input.len() as u64;
    loop {
        // SAFETY: a volatile write to a local: keeps the loop from being optimized out.
        unsafe { core::ptr::write_volatile(&mut x, x.wrapping_add(1)) };
    }
}
scion_wasm_grafts::graft!(spin, 8);
