/* Scion's freestanding headers for wasm2c's output (crates/graft-examples/sfi): the four functions a
   freestanding C program must provide, defined in harness.c (inside each image). */
#ifndef SCION_STRING_H
#define SCION_STRING_H
#include <stddef.h>
void* memcpy(void* dst, const void* src, size_t n);
void* memmove(void* dst, const void* src, size_t n);
void* memset(void* dst, int c, size_t n);
int memcmp(const void* a, const void* b, size_t n);
#endif
