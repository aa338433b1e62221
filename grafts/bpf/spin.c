/* Hostile: loops forever (a backward jump: Scion's verifier refuses it at load). */
#include "graft.h"
GRAFT u64 graft(struct evict_ctx *c) {
    volatile u64 x = c->in_len;
    for (;;)
        x = x + 1;
}
