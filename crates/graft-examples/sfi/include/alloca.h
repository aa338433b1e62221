/* Scion's freestanding headers for wasm2c's output (crates/graft-examples/sfi). */
#ifndef SCION_ALLOCA_H
#define SCION_ALLOCA_H
#define alloca __builtin_alloca
#endif
