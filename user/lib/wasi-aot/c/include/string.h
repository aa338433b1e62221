/* Scion's freestanding headers for wasm2c's output (user/lib/wasi-aot/c): the memory
   functions, which the Rust side of the program defines (compiler_builtins'). */
#ifndef SCION_STRING_H
#define SCION_STRING_H
#include <stddef.h>
void* memcpy(void* dst, const void* src, size_t n);
void* memmove(void* dst, const void* src, size_t n);
void* memset(void* dst, int c, size_t n);
int memcmp(const void* a, const void* b, size_t n);
#endif
