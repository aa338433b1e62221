/* Scion's freestanding headers for wasm2c's output (user/lib/wasi-aot/c): only what the
   generated code names. The generated code asserts that the runtime is initialized,
   which it is (wasm_rt_is_initialized answers yes). */
#ifndef SCION_ASSERT_H
#define SCION_ASSERT_H
#define assert(x) ((void)sizeof(x))
#endif
