/* Hostile: scribbles on its state, then answers a victim that is not a candidate. */
#include "graft.h"
GRAFT u64 graft(struct evict_ctx *c) {
    c->state[0] = 0xeeeeeeeeeeeeeeeeULL;
    c->state[1] = 0xeeeeeeeeeeeeeeeeULL;
    return c->in_len / 8 + 5;
}
