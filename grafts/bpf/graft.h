#pragma once
/* The memory an eBPF graft gets in r1 (Scion's `graft::engine::bpf`): the input's
 * length, the state's length, the point's input area, then the state. Jumps must go
 * forward only (Scion's verifier), so every loop here is unrolled. */
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
