/*
 * The Linux baseline of Scion's `baio` benchmark suite (BAIO paper, Figures 3-5).
 * Runs as /init (when the kernel command line says `kbench=baio`) in the initramfs
 * `cargo xtask bench` builds: loads the virtio-blk driver from the modules packed next
 * to it, then runs the same pipelined workload as Scion's bench_baio on the same image,
 * on the blocks of the BAIO segment `bench` (`seg=START:BLOCKS`): each request reads (or
 * writes) 8 KiB at a random (or sequential) place in the working set, then processes it
 * (the same checksum); io_uring keeps `depth` requests in flight.
 * `disk=nvme`: the same on an NVMe controller's namespace (/dev/nvme0n1, the nvme
 * driver's modules /m/10.ko … /m/16.ko); `reads`: the random reads alone, through the
 * page cache and io_uring O_DIRECT (the `devices` suite).
 *
 * Prints `BENCH <name>_rps median=...` (requests per second) and `BENCH <name>_ipr
 * median=...` (busy rdtsc ticks per request: total ticks minus the CPU's idle time from
 * /proc/timer_list, i.e. instructions under -icount shift=0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tsc.h"

#define REQ 8192
#define REQ_BLOCKS 2


static uint64_t x = 0x9e3779b9;
static uint64_t rng(void) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

struct run {
    const char *name;
    int direct, ring, write, random;
    uint64_t ws_blocks, n, depth;
};

static uint64_t seg_start;
static int fd_direct, fd_buffered;

static uint64_t place(struct run *r, uint64_t i) {
    uint64_t slots = r->ws_blocks / REQ_BLOCKS;
    uint64_t b = r->random ? (rng() % slots) * REQ_BLOCKS : (i % slots) * REQ_BLOCKS;
    return (seg_start + b) * 4096;
}

static uint64_t process(uint64_t *w, int write, uint64_t i) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < REQ / 8; k++) {
        if (write) w[k] = h ^ i;
        h = (h ^ w[k]) * 0x100000001b3ull;
    }
    return h;
}

/* A minimal io_uring (raw system calls; no liburing in the initramfs). */
struct ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0) return -1;
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED) return -1;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

static void ring_submit(struct ring *r, int write, int fd, void *buf, uint64_t off, uint64_t tag) {
    unsigned t = *r->sq_tail, i = t & *r->sq_mask;
    struct io_uring_sqe *s = &r->sqes[i];
    memset(s, 0, sizeof *s);
    s->opcode = write ? IORING_OP_WRITE : IORING_OP_READ;
    s->fd = fd;
    s->addr = (uint64_t)buf;
    s->len = REQ;
    s->off = off;
    s->user_data = tag;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, t + 1, __ATOMIC_RELEASE);
    syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, 0, 0);
}

/* Wait for one completion: its tag (result in *res). */
static uint64_t ring_wait(struct ring *r, int *res) {
    for (;;) {
        unsigned h = *r->cq_head;
        if (h != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
            struct io_uring_cqe *c = &r->cqes[h & *r->cq_mask];
            uint64_t tag = c->user_data;
            *res = c->res;
            __atomic_store_n(r->cq_head, h + 1, __ATOMIC_RELEASE);
            return tag;
        }
        syscall(__NR_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS, 0, 0);
    }
}

static char *bufs;
static struct ring ring;

static uint64_t one_run(struct run *r, uint64_t *ticks, uint64_t *ns, uint64_t *idle) {
    uint64_t failed = 0;
    int fd = r->direct ? fd_direct : fd_buffered;
    uint64_t t0 = tsc(), n0 = now_ns(), i0 = idle_ns();
    if (!r->ring) {
        uint64_t *w = (uint64_t *)bufs;
        for (uint64_t i = 0; i < r->n; i++) {
            uint64_t off = place(r, i);
            if (r->write) {
                process(w, 1, i);
                failed += pwrite(fd, w, REQ, off) != REQ;
            } else {
                failed += pread(fd, w, REQ, off) != REQ;
                process(w, 0, i);
            }
        }
    } else {
        uint64_t k = r->depth < r->n ? r->depth : r->n;
        for (uint64_t i = 0; i < k; i++) {
            char *b = bufs + (i % r->depth) * REQ;
            if (r->write) process((uint64_t *)b, 1, i);
            ring_submit(&ring, r->write, fd, b, place(r, i), i);
        }
        for (uint64_t i = 0; i < r->n; i++) {
            int res;
            uint64_t tag = ring_wait(&ring, &res);
            failed += res != REQ;
            char *b = bufs + (tag % r->depth) * REQ;
            if (!r->write) process((uint64_t *)b, 0, tag);
            uint64_t next = i + k;
            if (next < r->n) {
                /* The buffer of the request that just completed is the one reused. */
                if (r->write) process((uint64_t *)b, 1, next);
                ring_submit(&ring, r->write, fd, b, place(r, next), tag + r->depth);
            }
        }
    }
    *ticks = tsc() - t0;
    *ns = now_ns() - n0;
    *idle = idle_ns() - i0;
    return failed;
}

static int load(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = syscall(__NR_finit_module, fd, "", 0);
    close(fd);
    return r < 0 && errno != EEXIST ? -1 : 0;
}

static uint64_t arg(const char *cmd, const char *key, uint64_t dflt) {
    const char *p = strstr(cmd, key);
    return p ? strtoull(p + strlen(key), 0, 10) : dflt;
}

int baio_main(const char *cmd) {
    printf("kbench: baio suite\n");
    mkdir("/proc", 0755);
    mount("proc", "/proc", "proc", 0, 0);
    mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
    int nvme = strstr(cmd, "disk=nvme") != 0, reads_only = strstr(cmd, " reads") != 0;
    const char *virtio_mods[] = {"/m/1.ko", "/m/2.ko", "/m/3.ko", "/m/4.ko", "/m/5.ko", "/m/6.ko"};
    const char *nvme_mods[] = {"/m/10.ko", "/m/11.ko", "/m/12.ko", "/m/13.ko", "/m/14.ko", "/m/15.ko", "/m/16.ko"};
    const char **mods = nvme ? nvme_mods : virtio_mods;
    int nmods = nvme ? 7 : 6;
    const char *dev = nvme ? "/dev/nvme0n1" : "/dev/vda";
    for (int i = 0; i < nmods; i++)
        if (load(mods[i]) < 0) printf("kbench: loading %s: %s\n", mods[i], strerror(errno));
    for (int i = 0; i < 500 && access(dev, F_OK) != 0; i++) usleep(10000);
    fd_direct = open(dev, O_RDWR | O_DIRECT);
    fd_buffered = open(dev, O_RDWR);
    if (fd_direct < 0 || fd_buffered < 0) {
        printf("kbench: no %s: %s\n", dev, strerror(errno));
        return 1;
    }
    seg_start = arg(cmd, "seg=", 0);
    uint64_t seg_blocks = arg(strstr(cmd, "seg=") ? strchr(strstr(cmd, "seg="), ':') : "", ":", 0);
    uint64_t n = arg(cmd, "n=", 2000), depth = arg(cmd, "depth=", 8);
    const char *ws = strstr(cmd, "ws=");
    if (!ws || !seg_blocks || depth < 1 || depth > 64) {
        printf("kbench: want seg=START:BLOCKS ws=MiB,... n= depth=\n");
        return 1;
    }
    if (posix_memalign((void **)&bufs, 4096, 64 * REQ) || ring_init(&ring, 64) < 0) {
        printf("kbench: no io_uring: %s\n", strerror(errno));
        return 1;
    }
    uint64_t list[16], nws = 0;
    for (const char *p = ws + 3; *p && *p != ' ' && nws < 16;) {
        list[nws++] = strtoull(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    struct { const char *name; int direct, ring; } kinds[] = {{"pread_direct", 1, 0}, {"pread_buffered", 0, 0}, {"io_uring_direct", 1, 1}};
    uint64_t failures = 0;
    for (uint64_t w = 0; w < nws; w++) {
        uint64_t wsb = list[w] * 256;
        if (wsb > seg_blocks) wsb = seg_blocks;
        for (int write = 0; write < 2; write++)
            for (int random = 1; random >= 0; random--)
                for (int k = 0; k < 3; k++) {
                    if (!random && !kinds[k].direct) continue;
                    /* `reads`: random reads through the page cache and io_uring alone. */
                    if (reads_only && (write || !random || (kinds[k].direct && !kinds[k].ring))) continue;
                    struct run r = {kinds[k].name, kinds[k].direct, kinds[k].ring, write, random, wsb, n, depth};
                    uint64_t t, ns, idle;
                    struct run warm = r;
                    warm.n = n / 4;
                    one_run(&warm, &t, &ns, &idle);
                    if (!r.direct) { /* read the working set once in order (up to 128 MiB): a cache it fits in is warm */
                        struct run seq = r;
                        seq.write = 0;
                        seq.random = 0;
                        seq.n = wsb / REQ_BLOCKS < 16384 ? wsb / REQ_BLOCKS : 16384;
                        one_run(&seq, &t, &ns, &idle);
                    }
                    failures += one_run(&r, &t, &ns, &idle);
                    /* Idle time in ticks: ticks per ns measured over this very run. */
                    uint64_t idle_ticks = ns ? (uint64_t)((double)idle * (double)t / (double)ns) : 0;
                    char suffix[32] = "", nm[128];
                    if (w + 1 != nws) snprintf(suffix, sizeof suffix, "_ws%lu", (unsigned long)list[w]);
                    /* Synchronous writes are pwrite_*. */
                    const char *base = write && !r.ring ? (r.direct ? "pwrite_direct" : "pwrite_buffered") : r.name;
                    snprintf(nm, sizeof nm, "%s_%s_%s%s", base, random ? "random" : "seq", write ? "write" : "read", suffix);
                    printf("BENCH %s_rps median=%lu samples=%lu unit=requests/s\n", nm, (unsigned long)(ns ? n * 1000000000ull / ns : 0), (unsigned long)n);
                    printf("BENCH %s_ipr median=%lu samples=%lu unit=busy-ticks/request\n", nm, (unsigned long)((t > idle_ticks ? t - idle_ticks : 0) / n), (unsigned long)n);
                    fflush(stdout);
                }
    }
    printf("kbench: baio done (%lu failed requests)\n", (unsigned long)failures);
    return 0;
}
