/* Hot-list eviction (VINO §3.1), as `grafts::hotlist`: the index of the first
 * candidate that is not in the hot list (state word 0 = entries, then the blocks),
 * or 0 when all of them are. An eBPF graft may not loop (Scion's verifier), so the
 * scans are unrolled by macros into straight lines with early exits (clang's own
 * unrolling of such loops spills 64 flags to the stack and runs ~50x longer). */
#include "graft.h"
#define HOT_MAX 64

#define CHECK(j)                  \
    if ((j) >= hot)               \
        return 0;                 \
    if (c->state[1 + (j)] == b)   \
        return 1;
#define C4(j) CHECK(j) CHECK((j) + 1) CHECK((j) + 2) CHECK((j) + 3)
#define C16(j) C4(j) C4((j) + 4) C4((j) + 8) C4((j) + 12)
#define C64 C16(0) C16(16) C16(32) C16(48)

/* Is block b among the first `hot` entries of the hot list? */
static __attribute__((always_inline)) int is_hot(struct evict_ctx *c, u64 hot, u64 b) {
    C64
    return 0;
}

#define CAND(i)                           \
    if ((i) >= n)                         \
        return 0;                         \
    if (!is_hot(c, hot, c->cand[i]))      \
        return i;

GRAFT u64 graft(struct evict_ctx *c) {
    u64 n = c->in_len / 8;
    u64 hot = c->state_len >= 8 ? c->state[0] : 0;
    if (hot > HOT_MAX)
        hot = HOT_MAX;
    CAND(0) CAND(1) CAND(2) CAND(3) CAND(4) CAND(5) CAND(6) CAND(7)
    return 0;
}
