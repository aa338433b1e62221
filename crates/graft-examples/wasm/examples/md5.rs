//! MD5 as a stream graft (VINO §3.2), the same source as the native graft.
#![no_std]
#![no_main]
scion_wasm_grafts::graft!(graft_examples::md5, graft_examples::MD5_STATE);
