/* Scion's freestanding headers for wasm2c's output (grafts/sfi). */
#ifndef SCION_ALLOCA_H
#define SCION_ALLOCA_H
#define alloca __builtin_alloca
#endif
