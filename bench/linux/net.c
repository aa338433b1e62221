/* The Linux side of the `net` and `cue` suites: the guest's virtio-net driver (modules
 * from the initramfs), a static address (10.0.2.15/24, what QEMU's user network gives
 * by DHCP), and two servers the host measures through forwarded ports:
 *   port 80: a small HTTP/1.1 server, a process per connection (keep-alive, GET of the
 *            files in /www, made here with the same bytes as xtask's
 *            `nettest::pattern`): by a read/write loop (`/PATH`, `/.rw/PATH`) or by
 *            sendfile (`/.sendfile/PATH`); GET /.busy answers "busy tsc meter ctxt 0":
 *            the busy ticks of the CPU so far (rdtsc minus idle time: guest
 *            instructions under -icount shift=0), the TSC, the metering process's units
 *            and the context switches so far (/proc/stat: Linux does not count them by
 *            cause machine-wide); GET /.meter/on and /.meter/off start and stop the
 *            metering process (the Cue paper's: CPU-bound, at the servers' priority,
 *            counting units of work the same as Scion's `meter`);
 *   port 7:  a TCP echo server (request/response latency).
 * Prints "lhttpd: serving" when ready; the host stops the machine when it is done. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tsc.h"

static uint64_t t_boot, n_boot, i_boot;

/* Shared with the metering process: [0] units done, [1] working. */
static volatile uint64_t *meter;

/* One unit of the metering process's work: meter_api::unit. */
static uint64_t unit(uint64_t x) {
    for (int i = 0; i < 1000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static void metering(void) {
    volatile uint64_t x = 0x9e3779b97f4a7c15ull;
    for (;;) {
        if (!meter[1]) {
            usleep(10000);
            continue;
        }
        x = unit(x);
        meter[0]++;
    }
}

/* Context switches so far, machine-wide (/proc/stat's ctxt). */
static uint64_t ctxt(void) {
    static char b[8192];
    int fd = open("/proc/stat", O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) return 0;
    b[n] = 0;
    char *p = strstr(b, "\nctxt ");
    return p ? strtoull(p + 6, 0, 10) : 0;
}

/* Busy ticks since this program started: ticks minus idle time in ticks (the idle time
 * since it started: before, the kernel may have idled for seconds, e.g. while e1000e's
 * probe waited for the link, which would hide the busy ticks of the first minutes). */
static uint64_t busy_ticks(void) {
    uint64_t t = tsc() - t_boot, n = now_ns() - n_boot, i = idle_ns() - i_boot;
    uint64_t idle_t = n ? (uint64_t)((double)i * (double)t / (double)n) : 0;
    return t > idle_t ? t - idle_t : 0;
}

/* xtask's nettest::pattern. */
static void pattern(uint64_t seed, uint8_t *out, size_t len) {
    uint64_t x = (seed * 0x9e3779b97f4a7c15ull) | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (uint8_t)x;
    }
}

static void make_file(const char *name, uint64_t seed, size_t len) {
    uint8_t *b = malloc(len ? len : 1);
    pattern(seed, b, len);
    char path[128];
    snprintf(path, sizeof path, "/www/%s", name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, b, len) != (ssize_t)len) printf("lhttpd: cannot make %s: %s\n", path, strerror(errno));
    close(fd);
    free(b);
}

static int load(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = syscall(__NR_finit_module, fd, "", 0);
    close(fd);
    return r < 0 && errno != EEXIST ? -1 : 0;
}

static int ifreq_addr(int s, const char *ifn, unsigned long req, const char *a) {
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strncpy(r.ifr_name, ifn, IFNAMSIZ - 1);
    struct sockaddr_in *sin = (struct sockaddr_in *)&r.ifr_addr;
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, a, &sin->sin_addr);
    return ioctl(s, req, &r);
}

static int up(int s, const char *ifn) {
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strncpy(r.ifr_name, ifn, IFNAMSIZ - 1);
    if (ioctl(s, SIOCGIFFLAGS, &r) < 0) return -1;
    r.ifr_flags |= IFF_UP | IFF_RUNNING;
    return ioctl(s, SIOCSIFFLAGS, &r);
}

static int listener(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 64) < 0) {
        printf("lhttpd: cannot listen on %d: %s\n", port, strerror(errno));
        return -1;
    }
    return s;
}

static int write_all(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) return -1;
        b += k;
        n -= k;
    }
    return 0;
}

static char buf[65536];

/* One connection: requests until the client closes. */
static void serve(int c) {
    static char req[16384];
    size_t have = 0;
    for (;;) {
        char *end;
        while (!(end = memmem(req, have, "\r\n\r\n", 4))) {
            if (have == sizeof req) return;
            ssize_t k = read(c, req + have, sizeof req - have);
            if (k <= 0) return;
            have += k;
        }
        size_t head = end + 4 - req;
        char path[512] = "", hdr[256];
        if (sscanf(req, "GET %500s HTTP/1.", path) != 1) {
            const char *r = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            write_all(c, r, strlen(r));
            return;
        }
        if (!strcmp(path, "/.busy") || !strncmp(path, "/.meter/", 8)) {
            char body[160];
            int bl;
            if (!strcmp(path, "/.busy")) {
                uint64_t t = tsc(), b = busy_ticks();
                bl = snprintf(body, sizeof body, "%lu %lu %lu %lu 0\n", (unsigned long)b, (unsigned long)t, (unsigned long)meter[0], (unsigned long)ctxt());
            } else {
                meter[1] = !strcmp(path + 8, "on");
                bl = snprintf(body, sizeof body, "meter\n");
            }
            int hl = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", bl);
            if (write_all(c, hdr, hl) || write_all(c, body, bl)) return;
        } else {
            char fpath[600];
            const char *p = path;
            int use_sendfile = 0;
            if (!strncmp(p, "/.sendfile/", 11)) {
                p += 10;
                use_sendfile = 1;
            } else if (!strncmp(p, "/.rw/", 5)) {
                p += 4;
            }
            snprintf(fpath, sizeof fpath, "/www%s", p);
            int fd = open(fpath, O_RDONLY);
            struct stat st;
            if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
                if (fd >= 0) close(fd);
                if (write_all(c, r, strlen(r))) return;
            } else {
                int hl = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nContent-Type: application/octet-stream\r\n\r\n", (long long)st.st_size);
                if (write_all(c, hdr, hl)) {
                    close(fd);
                    return;
                }
                ssize_t k;
                if (use_sendfile) {
                    off_t off = 0;
                    while (off < st.st_size)
                        if (sendfile(c, fd, &off, st.st_size - off) <= 0) {
                            close(fd);
                            return;
                        }
                } else {
                    while ((k = read(fd, buf, sizeof buf)) > 0)
                        if (write_all(c, buf, k)) {
                            close(fd);
                            return;
                        }
                }
                close(fd);
            }
        }
        memmove(req, req + head, have - head);
        have -= head;
    }
}

static void echo(int c) {
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ssize_t k;
    while ((k = read(c, buf, sizeof buf)) > 0)
        if (write_all(c, buf, k)) break;
}

/* nginx from the initramfs (xtask/src/bench/nginx.rs: Debian's package, our configuration:
 * the files of /www by sendfile on port 8080), in the background; ready once it takes
 * a connection on its port. */
static int start_nginx(void) {
    mkdir("/tmp", 01777);
    if (fork() == 0) {
        execl("/usr/sbin/nginx", "nginx", "-e", "stderr", "-c", "/etc/nginx/nginx.conf", "-p", "/tmp/", (char *)0);
        printf("lhttpd: cannot run nginx: %s\n", strerror(errno));
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(8080), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        close(s);
        if (ok) {
            printf("lhttpd: nginx serving on 8080\n");
            return 0;
        }
        usleep(10000);
    }
    printf("lhttpd: nginx did not come up in 10 s\n");
    return -1;
}

int net_main(const char *cmd) {
    printf("kbench: net suite\n");
    mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
    /* `nic=e1000e`: an Intel 82574 (the e1000e driver, /m/17.ko) rather than virtio-net. */
    const char *virtio_mods[] = {"/m/1.ko", "/m/2.ko", "/m/3.ko", "/m/4.ko", "/m/5.ko", "/m/7.ko", "/m/8.ko", "/m/9.ko"};
    const char *e1000e_mods[] = {"/m/17.ko"};
    int e1000e = strstr(cmd, "nic=e1000e") != 0;
    const char **mods = e1000e ? e1000e_mods : virtio_mods;
    for (int i = 0; i < (e1000e ? 1 : 8); i++)
        if (load(mods[i]) < 0) printf("lhttpd: loading %s: %s\n", mods[i], strerror(errno));
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int ok = -1;
    for (int i = 0; i < 500 && ok < 0; i++) {
        ok = up(s, "eth0");
        if (ok < 0) usleep(10000);
    }
    if (ok < 0 || ifreq_addr(s, "eth0", SIOCSIFADDR, "10.0.2.15") < 0 || ifreq_addr(s, "eth0", SIOCSIFNETMASK, "255.255.255.0") < 0) {
        printf("lhttpd: cannot configure eth0: %s\n", strerror(errno));
        return 1;
    }
    up(s, "lo");
    mkdir("/proc", 0755);
    mount("proc", "/proc", "proc", 0, 0);
    meter = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (meter == MAP_FAILED) {
        printf("lhttpd: no shared page for the meter: %s\n", strerror(errno));
        return 1;
    }
    if (fork() == 0) metering();
    signal(SIGCHLD, SIG_IGN);
    mkdir("/www", 0755);
    /* The same bytes as Scion's (xtask's `nettest::SMALL`). */
    int sf = open("/www/small.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (sf < 0 || write(sf, "Hello from Scion's httpd.\n", 26) != 26) printf("lhttpd: cannot make /www/small.txt\n");
    close(sf);
    make_file("64k.bin", 64, 64 << 10);
    make_file("1m.bin", 1, 1 << 20);
    make_file("16m.bin", 16, 16 << 20);
    int h = listener(80), e = listener(7);
    if (h < 0 || e < 0) return 1;
    if (strstr(cmd, "nginx=1") && start_nginx() < 0) return 1;
    t_boot = tsc();
    n_boot = now_ns();
    i_boot = idle_ns();
    printf("lhttpd: serving\n");
    fflush(stdout);
    for (;;) {
        struct pollfd p[2] = {{.fd = h, .events = POLLIN}, {.fd = e, .events = POLLIN}};
        if (poll(p, 2, -1) <= 0) continue;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & POLLIN)) continue;
            int c = accept(p[i].fd, 0, 0);
            if (c < 0) continue;
            /* A process per connection: transfers run in parallel. */
            if (fork() == 0) {
                close(h);
                close(e);
                if (i == 0)
                    serve(c);
                else
                    echo(c);
                _exit(0);
            }
            close(c);
        }
    }
}
