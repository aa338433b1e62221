/* rdtsc, ordered: guest instructions under -icount shift=0, guest cycles under TCG. */
#pragma once
#include <stdint.h>

static inline uint64_t tsc(void) {
    uint32_t lo, hi;
    __asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
