/* Hot-list eviction (VINO §3.1), as `grafts::hotlist`: the index of the first
 * candidate that is not in the hot list (state word 0 = entries, then the blocks),
 * or 0 when all of them are. */
#include "graft.h"
#define HOT_MAX 64

GRAFT u64 graft(struct evict_ctx *c) {
    u64 n = c->in_len / 8;
    u64 hot = c->state_len >= 8 ? c->state[0] : 0;
    if (hot > HOT_MAX)
        hot = HOT_MAX;
#pragma clang loop unroll(full)
    for (int i = 0; i < EVICT_INPUT / 8; i++) {
        if (i >= n)
            break;
        u64 b = c->cand[i];
        int is_hot = 0;
        /* No early exit: clang unrolls only loops without one, and an eBPF graft
         * must be loop-free. */
#pragma clang loop unroll(full)
        for (int j = 0; j < HOT_MAX; j++) {
            if (j < hot && c->state[1 + j] == b)
                is_hot = 1;
        }
        if (!is_hot)
            return i;
    }
    return 0;
}
