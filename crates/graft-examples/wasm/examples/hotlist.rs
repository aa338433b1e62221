//! Hot-list eviction (VINO §3.1), the same source as the native graft.
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(grafts::hotlist, grafts::HOT_STATE);
