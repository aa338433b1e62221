#pragma once
/* The memory an eBPF graft gets in r1 (Scion's `graft::engine::bpf`): the input's
 * length, the state's length, the point's input area, then the state. Scion's verifier
 * follows every path, loops round by round, so a loop must end within the rounds its
 * tests bound; every load and store must be proven inside that memory, so a computed
 * index is tested or masked. */
typedef unsigned long long u64;
typedef unsigned char u8;

#define EVICT_INPUT 64

struct evict_ctx {
    u64 in_len;
    u64 state_len;
    u64 cand[EVICT_INPUT / 8];
    u64 state[];
};

#define STREAM_INPUT 1024

struct stream_ctx {
    u64 in_len;
    u64 state_len;
    u8 in[STREAM_INPUT];
    unsigned int st[];
};

#define GRAFT __attribute__((section("scion_graft"), used))

/* `v & mask`, kept by clang even where it can prove the mask changes nothing: Scion's
 * verifier (like Linux's) proves each memory access inside the graft's memory from
 * the bounds of the numbers that reach it — constants, tests and masks — and cannot
 * follow clang's own proofs (a modulo computed as a division, a multiplication and a
 * subtraction has no bound it can see). libbpf's `barrier_var` does the same. */
#define BOUND(v, mask) ({ u64 __v = (v); asm volatile("" : "+r"(__v)); __v & (mask); })
