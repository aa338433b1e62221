/* Hostile: reads 1 MiB past its memory (rbpf's checks abort the call). */
#include "graft.h"
GRAFT u64 graft(struct evict_ctx *c) {
    volatile u64 *p = (volatile u64 *)((u8 *)c + (1 << 20) + c->in_len);
    return *p;
}
