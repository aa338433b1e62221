//! WebAssembly compiled ahead of time (VINO's SFI: machine code whose every memory
//! access is checked, here by the compiler that made it). `cargo xtask build` compiles
//! each example's Wasm module with Wasmtime's Cranelift for `x86_64-unknown-none`; a
//! server runs it with Wasmtime's runtime (`user/lib/graftcode`). Both sides take their
//! settings from `config`, so the compiled code is what the runtime expects: bounds
//! checked in the code itself (no guard pages, no signals: a Scion server has neither),
//! fuel counted in the code (the budget), a bounded Wasm stack, no SIMD (the baseline
//! x86-64 the runtime can assume without asking the CPU) and no floating point.

/// The settings of compiler and runtime alike.
pub fn config() -> wasmtime::Config {
    let mut c = wasmtime::Config::new();
    c.signals_based_traps(false);
    c.memory_reservation(0);
    c.memory_guard_size(0);
    c.memory_reservation_for_growth(0);
    c.memory_init_cow(false);
    c.table_lazy_init(false);
    c.consume_fuel(true);
    c.wasm_simd(false);
    c.wasm_relaxed_simd(false);
    // No floating point: x86_64-unknown-none passes floats the soft-float way, Cranelift
    // in SSE registers, so none may cross between them (`graftcode::aot`). A module
    // with a float in it does not compile, and the runtime checks the setting.
    c.wasm_features(wasmtime::WasmFeatures::FLOATS, false);
    c.max_wasm_stack(128 * 1024);
    c
}

/// The target the code is compiled for.
pub const TARGET: &str = "x86_64-unknown-none";
