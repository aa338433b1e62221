/* Scion's freestanding headers for wasm2c's output (crates/graft-examples/sfi): only what the
   generated code names. The generated code asserts that the runtime is initialized,
   which the harness's entries make true before anything else runs. */
#ifndef SCION_ASSERT_H
#define SCION_ASSERT_H
#define assert(x) ((void)sizeof(x))
#endif
