/*
 * The Linux side of Scion's `grafts` suite: today's in-kernel safe extension, eBPF,
 * run by the guest's kernel through BPF_PROG_TEST_RUN (`kbench=graft` on the command
 * line). A null program (r0 = 0; exit) as a socket filter, run REPEAT times per
 * sample on a 64-byte packet; rdtsc around the call (guest instructions under
 * -icount shift=0), divided by REPEAT. Prints `BENCH ebpf_null …`.
 */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tsc.h"

#define REPEAT 100000
#define SAMPLES 5

static long bpf(int cmd, union bpf_attr *a) {
    return syscall(__NR_bpf, cmd, a, sizeof *a);
}

static int cmp64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int load(const struct bpf_insn *insns, int n, char *log, int loglen) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    a.insns = (uint64_t)(uintptr_t)insns;
    a.insn_cnt = n;
    a.license = (uint64_t)(uintptr_t)"GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = loglen;
    a.log_level = log ? 1 : 0;
    return (int)bpf(BPF_PROG_LOAD, &a);
}

/* Per-call ticks of program `fd` on `pkt`, SAMPLES samples; 0 on failure. */
static int run(const char *name, int fd, void *pkt, int len) {
    uint64_t v[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.test.prog_fd = fd;
        a.test.data_in = (uint64_t)(uintptr_t)pkt;
        a.test.data_size_in = len;
        a.test.repeat = REPEAT;
        uint64_t t0 = tsc();
        long r = bpf(BPF_PROG_TEST_RUN, &a);
        uint64_t t = tsc() - t0;
        if (r < 0) {
            perror("graft: BPF_PROG_TEST_RUN");
            return 0;
        }
        v[s] = t / REPEAT;
    }
    qsort(v, SAMPLES, sizeof v[0], cmp64);
    printf("BENCH %s median=%llu min=%llu max=%llu samples=%d unit=ticks/call\n", name, (unsigned long long)v[SAMPLES / 2], (unsigned long long)v[0],
           (unsigned long long)v[SAMPLES - 1], SAMPLES);
    fflush(stdout);
    return 1;
}

void graft_main(const char *cmd) {
    (void)cmd;
    static char log[65536];
    static unsigned char pkt[64];
    struct bpf_insn null[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    int fd = load(null, 2, log, sizeof log);
    if (fd < 0) {
        perror("graft: BPF_PROG_LOAD (null)");
        printf("%s\n", log);
        return;
    }
    run("ebpf_null", fd, pkt, sizeof pkt);
    close(fd);
}
