/* The smp suite's Linux side (`kbench=smp`, the machine with two CPUs): the same
 * measurements as bench_smp where Linux has them. Two IPC pairs (a process and its
 * child ping-ponging 8 bytes through two pipes), both on CPU 0 and then a pair per CPU
 * (sched_setaffinity); the round trip with both ends on one CPU and across CPUs;
 * getpid. Rates in round trips per second of the TSC's time. */
#define _GNU_SOURCE
#include "tsc.h"
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CALLS 20000
#define BATCHES 9
#define PER 2000
/* The counts in use: the constants above, or a few of each in a smoke run (kbench.c). */
extern int kb_smoke;
static int calls = CALLS, nb = BATCHES, per = PER;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static int cmp64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void put(const char *name, uint64_t *v, int n, const char *unit) {
    qsort(v, n, sizeof *v, cmp64);
    printf("BENCH %s median=%lu min=%lu max=%lu samples=%d unit=%s\n", name, (unsigned long)v[n / 2], (unsigned long)v[0],
           (unsigned long)v[n - 1], n, unit);
    fflush(stdout);
}

static void xfer(int fd, char *b, int writing) {
    if ((writing ? write(fd, b, 8) : read(fd, b, 8)) != 8) _exit(1);
}

/* A pair: the client (this process, on `ccpu`) and its echo child (on `scpu`). */
struct pair { int to[2], from[2]; pid_t pid; };

static void pair_start(struct pair *p, int scpu) {
    if (pipe(p->to) || pipe(p->from)) exit(1);
    p->pid = fork();
    if (p->pid == 0) {
        char b[8];
        pin(scpu);
        for (;;) { xfer(p->to[0], b, 0); xfer(p->from[1], b, 1); }
    }
}

static void pair_stop(struct pair *p) {
    kill(p->pid, SIGKILL);
    waitpid(p->pid, 0, 0);
    close(p->to[0]); close(p->to[1]); close(p->from[0]); close(p->from[1]);
}

/* Two pairs whose clients run `calls` round trips each at once; round trips/s. */
static uint64_t pairs_once(int cpu1) {
    struct pair p[2];
    pair_start(&p[0], 0);
    pair_start(&p[1], cpu1);
    int go[2];
    if (pipe(go)) exit(1);
    pid_t c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = fork();
        if (c[i] == 0) {
            char b[8] = {0};
            pin(i == 0 ? 0 : cpu1);
            if (read(go[0], b, 1) != 1) _exit(1);
            for (int k = 0; k < calls; k++) { xfer(p[i].to[1], b, 1); xfer(p[i].from[0], b, 0); }
            _exit(0);
        }
    }
    uint64_t n0 = now_ns();
    if (write(go[1], "gg", 2) != 2) exit(1);
    for (int i = 0; i < 2; i++) waitpid(c[i], 0, 0);
    uint64_t ns = now_ns() - n0;
    close(go[0]); close(go[1]);
    pair_stop(&p[0]);
    pair_stop(&p[1]);
    return ns ? 2ull * calls * 1000000000ull / ns : 0;
}

static void rtt_on(const char *name, int scpu) {
    struct pair p;
    pair_start(&p, scpu);
    char b[8] = {0};
    uint64_t v[BATCHES];
    for (int i = 0; i < 200; i++) { xfer(p.to[1], b, 1); xfer(p.from[0], b, 0); }
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) { xfer(p.to[1], b, 1); xfer(p.from[0], b, 0); }
        v[k] = (tsc() - t0) / per;
    }
    pair_stop(&p);
    put(name, v, nb, "ticks/op");
}

void smp_main(const char *cmd) {
    (void)cmd;
    if (kb_smoke) {
        calls = 200;
        nb = 3;
        per = 20;
    }
    printf("kbench: smp, %ld CPUs\n", sysconf(_SC_NPROCESSORS_ONLN));
    pin(0);
    uint64_t v[BATCHES];
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) syscall(SYS_getpid);
        v[k] = (tsc() - t0) / per;
    }
    put("smp_null_syscall", v, nb, "ticks/op");
    const char *names[2] = {"ipc_pairs_rps_1cpu", "ipc_pairs_rps_2cpu"};
    for (int cpu1 = 0; cpu1 < 2; cpu1++) {
        uint64_t r[3];
        for (int k = 0; k < 3; k++) r[k] = pairs_once(cpu1);
        put(names[cpu1], r, 3, "rps");
    }
    rtt_on("ipc_rtt_same_cpu", 0);
    rtt_on("ipc_rtt_cross_cpu", 1);
}
