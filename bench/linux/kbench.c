/*
 * The Linux baseline of Scion's `kernel` benchmark suite. Runs as /init in an
 * initramfs that `cargo xtask bench` builds, in the same QEMU machine as Scion,
 * prints `BENCH <metric> median=… min=… max=… samples=… unit=ticks/op` lines
 * (rdtsc ticks: guest instructions under -icount shift=0, guest cycles under TCG),
 * and powers the machine off.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsc.h"

#define BATCHES 15
#define PER 1000
#define PAGES 200

/* `smoke` among init's arguments (the kernel command line; `cargo xtask bench --smoke`):
 * every count cut to a few, to check that each figure is printed and parsed, not to
 * measure. The counts in use: batches per figure and calls per batch (at most the
 * constants above). */
int kb_smoke;
static int nb = BATCHES, per = PER;


static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    printf("BENCH %s median=%lu min=%lu max=%lu samples=%d unit=ticks/op\n", name, (unsigned long)v[n / 2],
           (unsigned long)v[0], (unsigned long)v[n - 1], n);
    fflush(stdout);
}

static void null_syscall(void) {
    uint64_t v[BATCHES];
    for (int i = 0; i < 100; i++) syscall(SYS_getpid);
    for (int b = 0; b < nb; b++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) syscall(SYS_getpid);
        v[b] = (tsc() - t0) / per;
    }
    report("null_syscall", v, nb);
}

static void full(int fd, char *buf, int n, int writing) {
    int done = 0;
    while (done < n) {
        int r = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (r <= 0) exit(1);
        done += r;
    }
}

/* Ping-pong of `size` bytes between two processes: through two pipes, or (unix != 0)
   one Unix stream socket pair. */
static void rtt(const char *name, int size, int unix_socket) {
    int a[2], b[2];
    static char buf[4096];
    memset(buf, 0x5a, sizeof buf);
    if (unix_socket) {
        int s[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, s)) return;
        /* The parent writes and reads s[0], the child s[1]. */
        a[0] = s[1]; a[1] = s[0]; b[0] = s[0]; b[1] = s[1];
    } else if (pipe(a) || pipe(b)) return;
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) {
            full(a[0], buf, size, 0);
            full(b[1], buf, size, 1);
        }
    }
    uint64_t v[BATCHES];
    for (int i = 0; i < 100; i++) { full(a[1], buf, size, 1); full(b[0], buf, size, 0); }
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) { full(a[1], buf, size, 1); full(b[0], buf, size, 0); }
        v[k] = (tsc() - t0) / per;
    }
    kill(pid, SIGKILL);
    waitpid(pid, 0, 0);
    if (unix_socket) { close(a[0]); close(a[1]); }
    else { close(a[0]); close(a[1]); close(b[0]); close(b[1]); }
    report(name, v, nb);
}

static void pipe_rtt(const char *name, int size) { rtt(name, size, 0); }

/* The L4 paper's Figure 3 beside Scion's rpc_str_N: pipes and Unix sockets. */
static void string_curve(void) {
    static const int sizes[] = {8, 64, 256, 512, 1024, 2048, 4096};
    char name[32];
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(name, sizeof name, "rpc_str_%d", sizes[i]);
        rtt(name, sizes[i], 0);
        snprintf(name, sizeof name, "unix_str_%d", sizes[i]);
        rtt(name, sizes[i], 1);
    }
}

static volatile int fa, fb;
static void fwait(volatile int *w) {
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) == 0) syscall(SYS_futex, w, FUTEX_WAIT, 0, 0, 0, 0);
    __atomic_store_n(w, 0, __ATOMIC_RELEASE);
}
static void fwake(volatile int *w) {
    __atomic_store_n(w, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, w, FUTEX_WAKE, 1, 0, 0, 0);
}
static void *futex_peer(void *arg) {
    (void)arg;
    for (;;) { fwait(&fa); fwake(&fb); }
    return 0;
}
static void futex_rtt(void) {
    pthread_t t;
    pthread_create(&t, 0, futex_peer, 0);
    uint64_t v[BATCHES];
    for (int i = 0; i < 100; i++) { fwake(&fa); fwait(&fb); }
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) { fwake(&fa); fwait(&fb); }
        v[k] = (tsc() - t0) / per;
    }
    report("ipc_rtt_8b_same", v, nb);
}

static void yields(void) {
    pid_t pid = fork();
    if (pid == 0) for (;;) sched_yield();
    uint64_t v[BATCHES], h[BATCHES];
    for (int i = 0; i < 100; i++) sched_yield();
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per; i++) sched_yield();
        v[k] = (tsc() - t0) / per;
        h[k] = v[k] / 2;
    }
    kill(pid, SIGKILL);
    waitpid(pid, 0, 0);
    report("yield_pair", v, nb);
    report("thread_switch", h, nb);
}

static void anon_faults(void) {
    uint64_t v[PAGES];
    char *p = mmap(0, PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    for (int i = 0; i < PAGES; i++) {
        uint64_t t0 = tsc();
        p[i * 4096] = 1;
        v[i] = tsc() - t0;
    }
    munmap(p, PAGES * 4096);
    report("page_fault_user_pager", v + 1, PAGES - 1);
}

static int uffd;
static char *src_page;
static void *uffd_handler(void *arg) {
    (void)arg;
    for (;;) {
        struct uffd_msg m;
        struct pollfd pfd = {.fd = uffd, .events = POLLIN};
        poll(&pfd, 1, -1);
        if (read(uffd, &m, sizeof m) != sizeof m || m.event != UFFD_EVENT_PAGEFAULT) continue;
        struct uffdio_copy c = {.dst = m.arg.pagefault.address & ~4095UL, .src = (unsigned long)src_page, .len = 4096};
        ioctl(uffd, UFFDIO_COPY, &c);
    }
    return 0;
}
static void uffd_faults(void) {
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) { printf("kbench: no userfaultfd\n"); return; }
    struct uffdio_api api = {.api = UFFD_API};
    if (ioctl(uffd, UFFDIO_API, &api)) return;
    src_page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    src_page[0] = 1;
    char *p = mmap(0, PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct uffdio_register r = {.range = {.start = (unsigned long)p, .len = PAGES * 4096}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) { printf("kbench: userfaultfd register failed\n"); return; }
    pthread_t t;
    pthread_create(&t, 0, uffd_handler, 0);
    uint64_t v[PAGES];
    for (int i = 0; i < PAGES; i++) {
        uint64_t t0 = tsc();
        p[i * 4096] = 1;
        v[i] = tsc() - t0;
    }
    report("page_fault_uffd", v + 1, PAGES - 1);
}

static void map_unmap(void) {
    uint64_t v[BATCHES];
    for (int k = 0; k < nb; k++) {
        uint64_t t0 = tsc();
        for (int i = 0; i < per / 10; i++) {
            char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            p[0] = 1;
            munmap(p, 4096);
        }
        v[k] = (tsc() - t0) / (per / 10);
    }
    report("map_page_ipc", v, nb);
    report("demap_fanout_64", v, nb);
}

int baio_main(const char *cmd);
int net_main(const char *cmd);
void graft_main(const char *cmd);
void smp_main(const char *cmd);
void wasi_main(const char *cmd);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "smoke")) kb_smoke = 1;
    if (kb_smoke) {
        nb = 3;
        per = 20;
    }
    printf("kbench: Linux baseline starting%s\n", kb_smoke ? " (smoke: a few of each count)" : "");
    fflush(stdout);
    /* `kbench=baio` on the command line: the disk suite (bench/linux/baio.c) instead. */
    static char cmd[4096];
    mkdir("/proc", 0755);
    mount("proc", "/proc", "proc", 0, 0);
    int cfd = open("/proc/cmdline", O_RDONLY);
    if (cfd >= 0) {
        ssize_t n = read(cfd, cmd, sizeof cmd - 1);
        cmd[n > 0 ? n : 0] = 0;
        close(cfd);
    }
    if (strstr(cmd, "kbench=graft")) {
        graft_main(cmd);
        printf("kbench: done\n");
        fflush(stdout);
        reboot(RB_POWER_OFF);
    }
    if (strstr(cmd, "kbench=wasi")) {
        wasi_main(cmd);
        printf("kbench: done\n");
        fflush(stdout);
        reboot(RB_POWER_OFF);
    }
    if (strstr(cmd, "kbench=smp")) {
        smp_main(cmd);
        printf("kbench: done\n");
        fflush(stdout);
        reboot(RB_POWER_OFF);
    }
    if (strstr(cmd, "kbench=net")) {
        net_main(cmd);
        printf("kbench: done\n");
        fflush(stdout);
        reboot(RB_POWER_OFF);
    }
    if (strstr(cmd, "kbench=baio")) {
        baio_main(cmd);
        printf("kbench: done\n");
        fflush(stdout);
        sync();
        reboot(RB_POWER_OFF);
    }
    null_syscall();
    pipe_rtt("ipc_rtt_8b_cross", 8);
    pipe_rtt("ipc_rtt_512b_cross", 512);
    string_curve();
    futex_rtt();
    yields();
    anon_faults();
    uffd_faults();
    map_unmap();
    printf("kbench: done\n");
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    for (;;) pause();
}
