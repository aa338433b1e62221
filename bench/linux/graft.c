/*
 * The Linux side of Scion's `grafts` suite: today's in-kernel safe extension, eBPF,
 * run by the guest's kernel through BPF_PROG_TEST_RUN (`kbench=graft` on the command
 * line). A null program (r0 = 0; exit) as a socket filter, run REPEAT times per
 * sample on a 64-byte packet; and MD5 of a 1 KiB packet as an XDP program (the
 * instructions in /md5.bpf, built by `cargo xtask build` from crates/graft-examples/bpf/md5_xdp.c,
 * the same compression function as Scion's eBPF graft), its digest checked. rdtsc
 * around the call (guest instructions under -icount shift=0), divided by the runs.
 * Prints `BENCH ebpf_null …` and `BENCH ebpf_md5_kib …` (ticks per KiB), and
 * `BENCH signal_upcall …`: a signal handled less one ignored (the paper's Table 1).
 */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tsc.h"

#define REPEAT 100000
#define SAMPLES 5
/* A smoke run (kbench.c) runs each program a hundredth as often. */
extern int kb_smoke;

static long bpf(int cmd, union bpf_attr *a) {
    return syscall(__NR_bpf, cmd, a, sizeof *a);
}

static int cmp64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Load a program; on a refusal, load it again with the verifier's log and print its
 * end (a log asked for up front can overflow on a long program: ENOSPC). */
static int load(int type, const struct bpf_insn *insns, int n, char *log, int loglen) {
    for (int with_log = 0; with_log < 2; with_log++) {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.prog_type = type;
        a.insns = (uint64_t)(uintptr_t)insns;
        a.insn_cnt = n;
        a.license = (uint64_t)(uintptr_t)"GPL";
        if (with_log) {
            a.log_buf = (uint64_t)(uintptr_t)log;
            a.log_size = loglen;
            a.log_level = 1;
        }
        int fd = (int)bpf(BPF_PROG_LOAD, &a);
        if (fd >= 0 || !log)
            return fd;
        if (with_log) {
            size_t l = strnlen(log, loglen);
            printf("graft: the verifier's log ends: %s\n", log + (l > 3000 ? l - 3000 : 0));
        }
    }
    return -1;
}

/* Per-call ticks of program `fd` on `pkt`, SAMPLES samples; 0 on failure. `out`
 * (if not null) receives the packet as the program left it. */
static int run(const char *name, int fd, void *pkt, int len, int repeat, void *out) {
    uint64_t v[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.test.prog_fd = fd;
        a.test.data_in = (uint64_t)(uintptr_t)pkt;
        a.test.data_size_in = len;
        a.test.repeat = repeat;
        if (out) {
            a.test.data_out = (uint64_t)(uintptr_t)out;
            a.test.data_size_out = len;
        }
        uint64_t t0 = tsc();
        long r = bpf(BPF_PROG_TEST_RUN, &a);
        uint64_t t = tsc() - t0;
        if (r < 0) {
            perror("graft: BPF_PROG_TEST_RUN");
            return 0;
        }
        v[s] = t / repeat;
    }
    qsort(v, SAMPLES, sizeof v[0], cmp64);
    printf("BENCH %s median=%llu min=%llu max=%llu samples=%d unit=ticks/call\n", name, (unsigned long long)v[SAMPLES / 2], (unsigned long long)v[0],
           (unsigned long long)v[SAMPLES - 1], SAMPLES);
    fflush(stdout);
    return 1;
}

static volatile int handled;
static void on_signal(int s) {
    (void)s;
    handled++;
}

/* Per-signal ticks of SIGUSR1 sent to this process with `how` installed. */
static uint64_t signals(void (*how)(int)) {
    uint64_t v[SAMPLES];
    signal(SIGUSR1, how);
    pid_t me = getpid();
    for (int s = 0; s < SAMPLES; s++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < 1000; i++)
            syscall(SYS_kill, me, SIGUSR1);
        v[s] = (tsc() - t0) / 1000;
    }
    signal(SIGUSR1, SIG_DFL);
    qsort(v, SAMPLES, sizeof v[0], cmp64);
    return v[SAMPLES / 2];
}

void graft_main(const char *cmd) {
    (void)cmd;
    /* VINO's Table 1: what an upcall costs, measured as the paper did by a signal
     * handled, less one ignored. */
    uint64_t with = signals(on_signal), without = signals(SIG_IGN);
    printf("BENCH signal_upcall median=%llu min=%llu max=%llu samples=%d unit=ticks/call\n", (unsigned long long)(with - without), (unsigned long long)(with - without),
           (unsigned long long)(with - without), SAMPLES);
    fflush(stdout);
    static char log[65536];
    static unsigned char pkt[64];
    struct bpf_insn null[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    int fd = load(BPF_PROG_TYPE_SOCKET_FILTER, null, 2, log, sizeof log);
    if (fd < 0) {
        perror("graft: BPF_PROG_LOAD (null)");
        return;
    }
    run("ebpf_null", fd, pkt, sizeof pkt, kb_smoke ? REPEAT / 100 : REPEAT, 0);
    close(fd);

    /* MD5 of 1 KiB (bytes 0..255 four times) as XDP; the digest comes after them. */
    static struct bpf_insn md5[32768];
    int f = open("/md5.bpf", O_RDONLY);
    ssize_t n = f < 0 ? -1 : read(f, md5, sizeof md5);
    if (n <= 0 || n % 8) {
        printf("graft: no /md5.bpf\n");
        return;
    }
    fd = load(BPF_PROG_TYPE_XDP, md5, n / 8, log, sizeof log);
    if (fd < 0) {
        perror("graft: BPF_PROG_LOAD (md5)");
        return;
    }
    static unsigned char kib[1024 + 16], out[1024 + 16];
    for (int i = 0; i < 1024; i++)
        kib[i] = (unsigned char)i;
    const unsigned char want[16] = {0xb2, 0xea, 0x9f, 0x7f, 0xce, 0xa8, 0x31, 0xa4, 0xa6, 0x3b, 0x21, 0x3f, 0x41, 0xa8, 0x85, 0x5b};
    if (run("ebpf_md5_kib", fd, kib, sizeof kib, kb_smoke ? REPEAT / 10000 : REPEAT / 100, out))
        printf("graft: the XDP MD5 digest is %s\n", memcmp(out + 1024, want, 16) == 0 ? "right" : "WRONG");
    fflush(stdout);
    close(fd);
}
