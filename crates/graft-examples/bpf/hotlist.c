/* Hot-list eviction (VINO §3.1), as `grafts::hotlist`: the index of the first
 * candidate that is not in the hot list (state word 0 = entries, then the blocks),
 * or 0 when all of them are. Plain loops: Scion's verifier follows each round (as
 * Linux's does), with the bounds the tests prove — at most 8 candidates, 64 entries. */
#include "graft.h"
#define HOT_MAX 64

GRAFT u64 graft(struct evict_ctx *c) {
    u64 n = c->in_len / 8;
    u64 hot = c->state_len >= 8 ? c->state[0] : 0;
    if (n > EVICT_INPUT / 8)
        n = EVICT_INPUT / 8;
    if (hot > HOT_MAX)
        hot = HOT_MAX;
#pragma clang loop unroll(disable)
    for (u64 i = 0; i < n; i++) {
        u64 b = c->cand[i];
        int found = 0;
#pragma clang loop unroll(disable)
        for (u64 j = 0; j < hot; j++) {
            if (c->state[1 + j] == b) {
                found = 1;
                break;
            }
        }
        if (!found)
            return i;
    }
    return 0;
}
