/*
 * The Linux side of Scion's `wasi` suite (`kbench=wasi` on the command line): the same
 * workloads as Scion's WASI programs, `/wasibench` and `/sql` (user/wasi-programs built
 * natively for Linux, static, by `cargo xtask bench`), each run as a
 * whole program: rdtsc from fork to waitpid's answer (guest instructions under -icount
 * shift=0), exec and start-up included as Scion's SPAWN and start-up are. Prints
 * `BENCH wasi_<cpu|sqlmem|sqlfile>_native …`. The workloads: `/wasibench cpu 1`, and
 * `/sql DB /speedtest.sql` (bench/wasi/speedtest.sql) on `:memory:` and on a new file of
 * the initramfs's root each run (RAM: no disk under it, unlike Scion's, on baiofs).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsc.h"

extern int kb_smoke;

static int cmp64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Run argv `samples` times; an argument "{}" is a database new for each run. */
static void run(const char *name, char *const argv0[], int samples) {
    uint64_t v[8];
    int n = 0;
    for (int i = 0; i < samples && i < 8; i++) {
        char db[64];
        char *argv[8];
        snprintf(db, sizeof db, "/bench-native-%d.db", i);
        for (int k = 0; k < 8; k++) {
            argv[k] = argv0[k] && !strcmp(argv0[k], "{}") ? db : argv0[k];
            if (!argv0[k]) break;
        }
        fflush(stdout);
        uint64_t t0 = tsc();
        pid_t p = fork();
        if (p == 0) {
            execv(argv[0], argv);
            _exit(127);
        }
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("wasi: %s: the run failed (status %d)\n", name, st);
            continue;
        }
        v[n++] = tsc() - t0;
    }
    if (n == 0)
        return;
    qsort(v, n, sizeof v[0], cmp64);
    printf("BENCH %s median=%llu min=%llu max=%llu samples=%d unit=ticks/run\n", name,
           (unsigned long long)v[n / 2], (unsigned long long)v[0], (unsigned long long)v[n - 1], n);
    fflush(stdout);
}

void wasi_main(const char *cmd) {
    (void)cmd;
    int samples = kb_smoke ? 1 : 3;
    char *start[] = {"/wasibench", "cpu", "0", 0};
    char *cpu[] = {"/wasibench", "cpu", "1", 0};
    char *sqlmem[] = {"/sql", ":memory:", "/speedtest.sql", 0};
    char *sqlfile[] = {"/sql", "{}", "/speedtest.sql", 0};
    run("wasi_start_native", start, samples);
    run("wasi_cpu_native", cpu, samples);
    run("wasi_sqlmem_native", sqlmem, samples);
    run("wasi_sqlfile_native", sqlfile, samples);
}
