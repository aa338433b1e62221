//! The log-structured logical disk (VINO §3.3), the same source as the native graft.
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(graft_examples::ldisk, graft_examples::LD_STATE);
