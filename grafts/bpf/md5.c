/* MD5 (RFC 1321) as a stream graft (VINO §3.2), as `grafts::md5`: state = A, B, C, D
 * (all zero: a new stream) and the bytes hashed so far; input of 64 bytes or more
 * is whole blocks, shorter input ends the stream (tail, padding, length) and leaves
 * the digest in the state's first 16 bytes. Answers 0, or 1 for input it cannot
 * take. No loops (Scion's verifier): the 64 steps, the 16 blocks of a 1 KiB input
 * and the tail's bytes are written out or unrolled by macros. */
#include "graft.h"

#include "md5.h"

#define BLK(k)           \
    if ((k) * 64 < n)    \
        block(h, c->in + (k) * 64);
#define CP(k)                 \
    if ((k) < n)              \
        tail[k] = c->in[k];
#define CP4(k) CP(k) CP((k) + 1) CP((k) + 2) CP((k) + 3)
#define CP16(k) CP4(k) CP4((k) + 4) CP4((k) + 8) CP4((k) + 12)

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
        BLK(0) BLK(1) BLK(2) BLK(3) BLK(4) BLK(5) BLK(6) BLK(7)
        BLK(8) BLK(9) BLK(10) BLK(11) BLK(12) BLK(13) BLK(14) BLK(15)
        total += n;
    } else {
        total += n;
        u8 tail[128];
#pragma clang loop unroll(full)
        for (int k = 0; k < 16; k++)
            ((u64 *)tail)[k] = 0;
        CP16(0) CP16(16) CP16(32) CP16(48)
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
