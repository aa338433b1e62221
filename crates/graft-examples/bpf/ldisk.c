/* A log-structured logical disk (VINO §3.3), as `grafts::ldisk`: a write takes the next
 * free physical block from the log's head (the old one is free again); a read answers
 * where the block is, or the segment's blocks for one never written. State: head
 * (u32), 512 map entries (u32: physical + 1), a bitmap of 1024 physical blocks. The
 * search for a free block is a plain loop of up to 1024 rounds, which Scion's verifier
 * follows round by round. The block it takes is masked to the bitmap's size (it is
 * below p ≤ 1024 anyway), so the verifier sees every access inside the state. */
#include "graft.h"

#define LOGICAL 512
#define PHYSICAL 1024
#define MAP 4
#define BITMAP (4 + 4 * LOGICAL)

struct ld_ctx {
    u64 in_len;
    u64 state_len;
    u64 in[3];
    u8 st[];
};

static __attribute__((always_inline)) unsigned int get32(struct ld_ctx *c, u64 at) {
    return (unsigned int)c->st[at] | (unsigned int)c->st[at + 1] << 8 | (unsigned int)c->st[at + 2] << 16 | (unsigned int)c->st[at + 3] << 24;
}

static __attribute__((always_inline)) void put32(struct ld_ctx *c, u64 at, unsigned int v) {
    c->st[at] = v;
    c->st[at + 1] = v >> 8;
    c->st[at + 2] = v >> 16;
    c->st[at + 3] = v >> 24;
}

GRAFT u64 graft(struct ld_ctx *c) {
    if (c->in_len < 24 || c->state_len < BITMAP + PHYSICAL / 8)
        return ~0ULL;
    u64 l = c->in[0], p = c->in[1];
    int write = c->in[2] != 0;
    if (l >= LOGICAL || p == 0 || p > PHYSICAL)
        return ~0ULL;
    u64 at = MAP + 4 * l;
    u64 mapped = get32(c, at);
    if (!write)
        return (mapped == 0 || mapped > p) ? p : mapped - 1;
    u64 head = get32(c, 0) % p;
    u64 free = 0;
#pragma clang loop unroll(disable)
    for (u64 k = 0; k < p; k++) {
        u64 b = head + k;
        if (b >= p)
            b -= p;
        b = BOUND(b, PHYSICAL - 1);
        if (!(c->st[BITMAP + (b >> 3)] & (1 << (b & 7)))) {
            free = b;
            goto found;
        }
    }
    return ~0ULL;
found:
    if (mapped != 0 && mapped <= p)
        c->st[BITMAP + ((mapped - 1) >> 3)] &= ~(1 << ((mapped - 1) & 7));
    c->st[BITMAP + (free >> 3)] |= 1 << (free & 7);
    put32(c, at, free + 1);
    put32(c, 0, (free + 1) % p);
    return free;
}
