//! The null graft (per-call floor).
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(graft_examples::null, 0);
