/* Hostile: calls a kernel helper (bpf_ktime_get_ns, 5): refused at load. */
#include "graft.h"
static u64 (*ktime)(void) = (void *)5;
GRAFT u64 graft(struct evict_ctx *c) { return ktime() + c->in_len; }
