/* The Linux side of the `grafts` suite's MD5 (Table 5): the same compression
 * function as Scion's eBPF graft, as an XDP program the guest's kernel verifies,
 * JIT-compiles and runs through BPF_PROG_TEST_RUN on a packet of 1 KiB and 16 bytes:
 * MD5 of the first 1024 bytes (a fresh state each run, the padding block included),
 * the digest written into the 16 bytes after them (every run of a repeated test sees
 * the same 1024). Not a Scion graft (no graft file is made of it). */
#include "md5.h"

struct xdp_md {
    unsigned int data;
    unsigned int data_end;
    unsigned int data_meta;
    unsigned int ingress_ifindex;
    unsigned int rx_queue_index;
    unsigned int egress_ifindex;
};

#define LEN 1024

__attribute__((section("scion_graft"), used)) int md5_xdp(struct xdp_md *ctx) {
    u8 *data = (u8 *)(unsigned long)ctx->data;
    u8 *end = (u8 *)(unsigned long)ctx->data_end;
    if (data + LEN + 16 > end)
        return 1;
    u32 h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    /* A bounded loop: Linux's verifier takes those (Scion's does not). */
#pragma clang loop unroll(disable)
    for (int k = 0; k < LEN / 64; k++)
        block(h, data + k * 64);
    u8 pad[64];
#pragma clang loop unroll(full)
    for (int k = 0; k < 8; k++)
        ((u64 *)pad)[k] = 0;
    pad[0] = 0x80;
    *(u64 *)(pad + 56) = (u64)LEN * 8;
    block(h, pad);
    *(u32 *)(data + LEN + 0) = h[0];
    *(u32 *)(data + LEN + 4) = h[1];
    *(u32 *)(data + LEN + 8) = h[2];
    *(u32 *)(data + LEN + 12) = h[3];
    return 2;
}
