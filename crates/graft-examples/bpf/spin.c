/* Hostile: loops forever (Scion's verifier follows the loop, finds it back at its head no narrower than before, and refuses it at load). */
#include "graft.h"
GRAFT u64 graft(struct evict_ctx *c) {
    volatile u64 x = c->in_len;
    for (;;)
        x = x + 1;
}
