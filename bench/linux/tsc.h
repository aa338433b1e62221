/* The benchmarks' clocks: rdtsc, ordered (guest instructions under -icount shift=0,
 * guest cycles under TCG), the monotonic clock, and the CPU's idle time. */
#pragma once
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t tsc(void) {
    uint32_t lo, hi;
    __asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* Nanoseconds CPU 0 has been idle (tick-sched's idle_sleeptime plus iowait_sleeptime:
 * idle while a task waits for I/O is counted apart), or from /proc/stat. */
static inline uint64_t idle_ns(void) {
    static char buf[1 << 16];
    int fd = open("/proc/timer_list", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = 0, r;
        while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += r;
        close(fd);
        buf[n] = 0;
        char *p = strstr(buf, ".idle_sleeptime"), *q = strstr(buf, ".iowait_sleeptime");
        if (p && (p = strchr(p, ':'))) {
            uint64_t idle = strtoull(p + 1, 0, 10);
            if (q && (q = strchr(q, ':'))) idle += strtoull(q + 1, 0, 10);
            return idle;
        }
    }
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long u, ni, sy, id = 0, io = 0;
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io) == 5) {
        fclose(f);
        return (id + io) * 10000000ull;
    }
    return 0;
}
