//! Hot-list eviction (VINO §3.1), the same source as the native graft.
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(graft_examples::hotlist, graft_examples::HOT_STATE);
