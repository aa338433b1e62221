#include "graft.h"
GRAFT u64 graft(struct evict_ctx *c) { return 0; }
