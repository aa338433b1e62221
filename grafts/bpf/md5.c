/* MD5 (RFC 1321) as a stream graft (VINO §3.2), as `grafts::md5`: state = A, B, C, D
 * (all zero: a new stream) and the bytes hashed so far; input of 64 bytes or more
 * is whole blocks, shorter input ends the stream (tail, padding, length) and leaves
 * the digest in the state's first 16 bytes. Answers 0, or 1 for input it cannot
 * take. No loops (Scion's verifier): the 64 steps, the 16 blocks of a 1 KiB input
 * and the tail's bytes are written out or unrolled by macros. */
#include "graft.h"

typedef unsigned int u32;

static __attribute__((always_inline)) u32 rol(u32 x, int s) {
    return (x << s) | (x >> (32 - s));
}

#define F(b, c, d) (((b) & (c)) | (~(b) & (d)))
#define G(b, c, d) (((d) & (b)) | (~(d) & (c)))
#define H(b, c, d) ((b) ^ (c) ^ (d))
#define I(b, c, d) ((c) ^ ((b) | ~(d)))
#define STEP(f, a, b, c, d, x, s, k) a = b + rol(a + f(b, c, d) + (x) + (k), s);

static __attribute__((always_inline)) void block(u32 *h, const u8 *p) {
    u32 x[16];
#pragma clang loop unroll(full)
    for (int k = 0; k < 16; k++)
        x[k] = (u32)p[4 * k] | (u32)p[4 * k + 1] << 8 | (u32)p[4 * k + 2] << 16 | (u32)p[4 * k + 3] << 24;
    u32 a = h[0], b = h[1], c = h[2], d = h[3];
    STEP(F, a, b, c, d, x[0], 7, 0xd76aa478u)
    STEP(F, d, a, b, c, x[1], 12, 0xe8c7b756u)
    STEP(F, c, d, a, b, x[2], 17, 0x242070dbu)
    STEP(F, b, c, d, a, x[3], 22, 0xc1bdceeeu)
    STEP(F, a, b, c, d, x[4], 7, 0xf57c0fafu)
    STEP(F, d, a, b, c, x[5], 12, 0x4787c62au)
    STEP(F, c, d, a, b, x[6], 17, 0xa8304613u)
    STEP(F, b, c, d, a, x[7], 22, 0xfd469501u)
    STEP(F, a, b, c, d, x[8], 7, 0x698098d8u)
    STEP(F, d, a, b, c, x[9], 12, 0x8b44f7afu)
    STEP(F, c, d, a, b, x[10], 17, 0xffff5bb1u)
    STEP(F, b, c, d, a, x[11], 22, 0x895cd7beu)
    STEP(F, a, b, c, d, x[12], 7, 0x6b901122u)
    STEP(F, d, a, b, c, x[13], 12, 0xfd987193u)
    STEP(F, c, d, a, b, x[14], 17, 0xa679438eu)
    STEP(F, b, c, d, a, x[15], 22, 0x49b40821u)
    STEP(G, a, b, c, d, x[1], 5, 0xf61e2562u)
    STEP(G, d, a, b, c, x[6], 9, 0xc040b340u)
    STEP(G, c, d, a, b, x[11], 14, 0x265e5a51u)
    STEP(G, b, c, d, a, x[0], 20, 0xe9b6c7aau)
    STEP(G, a, b, c, d, x[5], 5, 0xd62f105du)
    STEP(G, d, a, b, c, x[10], 9, 0x02441453u)
    STEP(G, c, d, a, b, x[15], 14, 0xd8a1e681u)
    STEP(G, b, c, d, a, x[4], 20, 0xe7d3fbc8u)
    STEP(G, a, b, c, d, x[9], 5, 0x21e1cde6u)
    STEP(G, d, a, b, c, x[14], 9, 0xc33707d6u)
    STEP(G, c, d, a, b, x[3], 14, 0xf4d50d87u)
    STEP(G, b, c, d, a, x[8], 20, 0x455a14edu)
    STEP(G, a, b, c, d, x[13], 5, 0xa9e3e905u)
    STEP(G, d, a, b, c, x[2], 9, 0xfcefa3f8u)
    STEP(G, c, d, a, b, x[7], 14, 0x676f02d9u)
    STEP(G, b, c, d, a, x[12], 20, 0x8d2a4c8au)
    STEP(H, a, b, c, d, x[5], 4, 0xfffa3942u)
    STEP(H, d, a, b, c, x[8], 11, 0x8771f681u)
    STEP(H, c, d, a, b, x[11], 16, 0x6d9d6122u)
    STEP(H, b, c, d, a, x[14], 23, 0xfde5380cu)
    STEP(H, a, b, c, d, x[1], 4, 0xa4beea44u)
    STEP(H, d, a, b, c, x[4], 11, 0x4bdecfa9u)
    STEP(H, c, d, a, b, x[7], 16, 0xf6bb4b60u)
    STEP(H, b, c, d, a, x[10], 23, 0xbebfbc70u)
    STEP(H, a, b, c, d, x[13], 4, 0x289b7ec6u)
    STEP(H, d, a, b, c, x[0], 11, 0xeaa127fau)
    STEP(H, c, d, a, b, x[3], 16, 0xd4ef3085u)
    STEP(H, b, c, d, a, x[6], 23, 0x04881d05u)
    STEP(H, a, b, c, d, x[9], 4, 0xd9d4d039u)
    STEP(H, d, a, b, c, x[12], 11, 0xe6db99e5u)
    STEP(H, c, d, a, b, x[15], 16, 0x1fa27cf8u)
    STEP(H, b, c, d, a, x[2], 23, 0xc4ac5665u)
    STEP(I, a, b, c, d, x[0], 6, 0xf4292244u)
    STEP(I, d, a, b, c, x[7], 10, 0x432aff97u)
    STEP(I, c, d, a, b, x[14], 15, 0xab9423a7u)
    STEP(I, b, c, d, a, x[5], 21, 0xfc93a039u)
    STEP(I, a, b, c, d, x[12], 6, 0x655b59c3u)
    STEP(I, d, a, b, c, x[3], 10, 0x8f0ccc92u)
    STEP(I, c, d, a, b, x[10], 15, 0xffeff47du)
    STEP(I, b, c, d, a, x[1], 21, 0x85845dd1u)
    STEP(I, a, b, c, d, x[8], 6, 0x6fa87e4fu)
    STEP(I, d, a, b, c, x[15], 10, 0xfe2ce6e0u)
    STEP(I, c, d, a, b, x[6], 15, 0xa3014314u)
    STEP(I, b, c, d, a, x[13], 21, 0x4e0811a1u)
    STEP(I, a, b, c, d, x[4], 6, 0xf7537e82u)
    STEP(I, d, a, b, c, x[11], 10, 0xbd3af235u)
    STEP(I, c, d, a, b, x[2], 15, 0x2ad7d2bbu)
    STEP(I, b, c, d, a, x[9], 21, 0xeb86d391u)
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

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
