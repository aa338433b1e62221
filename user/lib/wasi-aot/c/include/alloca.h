/* Scion's freestanding headers for wasm2c's output (user/lib/wasi-aot/c). */
#ifndef SCION_ALLOCA_H
#define SCION_ALLOCA_H
#define alloca __builtin_alloca
#endif
