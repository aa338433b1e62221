/* MD5 (RFC 1321) as a stream graft (VINO §3.2), as `grafts::md5`: state = A, B, C, D
 * (all zero: a new stream) and the bytes hashed so far; input of 64 bytes or more
 * is whole blocks, shorter input ends the stream (tail, padding, length) and leaves
 * the digest in the state's first 16 bytes. Answers 0, or 1 for input it cannot
 * take. The 64 steps are written out (the compression function, as every MD5 does);
 * the blocks of a 1 KiB input and the tail's bytes are plain loops, which Scion's
 * verifier follows round by round. */
#include "graft.h"

#include "md5.h"


GRAFT u64 graft(struct stream_ctx *c) {
    u64 n = c->in_len;
    if (c->state_len < 24 || n > STREAM_INPUT)
        return 1;
    u32 h[4] = {c->st[0], c->st[1], c->st[2], c->st[3]};
    if ((h[0] | h[1] | h[2] | h[3]) == 0) {
        h[0] = 0x67452301u;
        h[1] = 0xefcdab89u;
        h[2] = 0x98badcfeu;
        h[3] = 0x10325476u;
    }
    u64 total = (u64)c->st[4] | (u64)c->st[5] << 32;
    if (n >= 64) {
        if (n & 63)
            return 1;
        u64 blocks = n / 64;
#pragma clang loop unroll(disable)
        for (u64 k = 0; k < blocks; k++)
            block(h, c->in + k * 64);
        total += n;
    } else {
        total += n;
        u8 tail[128];
#pragma clang loop unroll(full)
        for (int k = 0; k < 16; k++)
            ((u64 *)tail)[k] = 0;
#pragma clang loop unroll(disable)
        for (u64 k = 0; k < n; k++)
            tail[k] = c->in[k];
        tail[n] = 0x80;
        if (n < 56) {
            *(u64 *)(tail + 56) = total * 8;
            block(h, tail);
        } else {
            *(u64 *)(tail + 120) = total * 8;
            block(h, tail);
            block(h, tail + 64);
        }
    }
    c->st[0] = h[0];
    c->st[1] = h[1];
    c->st[2] = h[2];
    c->st[3] = h[3];
    c->st[4] = (u32)total;
    c->st[5] = (u32)(total >> 32);
    return 0;
}
