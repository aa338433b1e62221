//! The null graft (per-call floor).
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(grafts::null, 0);
