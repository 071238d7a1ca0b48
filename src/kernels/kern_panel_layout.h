/* kern_panel_layout.h — the panels' shapes, ISA-neutral: the formats the panel kernels cover,
 * a token tile's activation side (struct pn_act), and the stored layout that weights repacked at
 * load take (kern_pack.c writes it; the AVX-512 tile of kern_panel_avx512.h and the 256-bit one of
 * kern_panel_avx2.h read it). Plain C: included by files of every ISA, and by kern_pack.c, which
 * is compiled without SIMD flags so the packing runs on any x86-64 CPU.
 *
 * Read kern_panel_avx512.c's opening comment first: it explains the panels. */
#ifndef TERN_KERN_PANEL_LAYOUT_H
#define TERN_KERN_PANEL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "quant/quant.h"
#include "tern.h"

#define PN_ROWS 16
#define PN_KC 512                 /* elements per k chunk */
#define PN_NG (PN_KC / 4)         /* groups of 4 bytes per chunk */
#define PN_NS 32                  /* max sub-blocks per chunk (Q6_K: 512 / 16) */
#define PN_MB 8
#define PN_NT 8
#define PN_FUSE_TILES 2           /* up to 16 tokens: pack a panel, use it at once */

/* One panel (16 rows) x one k chunk: q[G][4*i + c] = byte c of group G of row i (unsigned),
 * d[s][i] = row i's scale of sub-block s (d, or d*sc), m[s][i] = its min scale (Q4_K:
 * dmin*m). */
struct pn_panel {
    uint8_t q[PN_NG][64];
    float d[PN_NS][PN_ROWS];
    float m[PN_NS][PN_ROWS];
};

/* Per token of the tile and sub-block of the chunk: the dot's start value, the activation
 * scale, and (Q4_K) the activation scale times the sub-block sum. */
struct pn_act {
    int32_t init[PN_NT][PN_NS];
    float da[PN_NT][PN_NS];
    float am[PN_NT][PN_NS];
};

/* The formats: groups per sub-block, sub-blocks per activation block, activation block bytes
 * and the offset of its bytes. */
enum { PN_Q8_0, PN_Q4_0, PN_Q4_K, PN_Q6_K, PN_Q5_0, PN_Q5_K, PN_Q5_1, PN_Q4_1 };
#define PN_MINS(f) ((f) == PN_Q4_K || (f) == PN_Q5_K) /* sub-block mins (x = d*sc*q - dmin*m) */
/* Q5_1 and Q4_1: a min per 32-element block (x = d*q + m) against Q8_1 activations */
#define PN_MIN1(f) ((f) == PN_Q5_1 || (f) == PN_Q4_1)
/* the formats whose tile takes one more FMA per sub-block, acc -= m_row,s * am_tok,s */
#define PN_HAS_MIN(f) (PN_MINS(f) || PN_MIN1(f))
#define PN_GS(f) ((f) == PN_Q6_K ? 4 : 8)
#define PN_SPB(f) (PN_MINS(f) ? 8 : (f) == PN_Q6_K ? 16 : 1)
/* Q5_1's and Q4_1's activations are Q8_1 (Q8_0 plus s = d*sum); their min term m*s takes the
 * mins path with P->m = -m and am = s */
#define PN_ABYTES(f) (PN_MINS(f) || (f) == PN_Q6_K ? (int)sizeof(struct quant_block_q8_K)      \
                      : PN_MIN1(f)                 ? (int)sizeof(struct quant_block_q8_1)      \
                                                   : (int)sizeof(struct quant_block_q8_0))
#define PN_AHDR(f) (PN_MINS(f) || (f) == PN_Q6_K ? (int)offsetof(struct quant_block_q8_K, qs)  \
                    : PN_MIN1(f)                 ? (int)offsetof(struct quant_block_q8_1, qs)  \
                                                 : (int)offsetof(struct quant_block_q8_0, qs))
#define PN_BLK(f) (PN_MINS(f) || (f) == PN_Q6_K ? QUANT_QK_K : 32) /* elements per block */


#define PN_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- stored layout
 * The layout kern_pack.c stores at load time (read by the tiles with st = 1), for Q8_0, Q4_0, Q4_1,
 * Q5_0, Q4_K and Q6_K:
 * per panel of 16 rows and k chunk of PN_KC elements, the chunk's codes of all its nbc blocks,
 * then their scales, padded to 64 bytes. Each keeps its format's bytes, permuted so that one
 * 64-byte line is one group (or two, as nibbles) of 16 rows:
 *   Q8_0 codes  block b, group g at 64 (8b + g): w + 128, lane = row      (512 B per block)
 *        scales the 16 rows' fp16 d at 32 b                              (32 B per block)
 *   Q4_0 codes  block b at 256 b: line h (0..3) holds groups h (low nibbles) and h + 4 (high
 *               ones): the raw code bytes 4h..4h+3 of the 16 rows       (256 B per block)
 *        scales as Q8_0                                                   (32 B per block)
 *   Q4_1 codes  as Q4_0                                                   (256 B per block)
 *        scales the 16 rows' fp16 d at 64 b, their fp16 m at 64 b + 32   (64 B per block)
 *   Q5_0 codes  block b at 320 b: lines 0..3 the nibbles as Q4_0, line 4 the fifth bits: bit g of
 *               byte 4i + c is the fifth bit of element 4g + c of row i, so group g's bits come
 *               to bit 4 of its code bytes with one 16-bit shift by 4 - g   (320 B per block)
 *        scales as Q8_0                                                   (32 B per block)
 *   Q4_K codes  super-block b at 2048 b: line 8c + g holds group g of sub-blocks 2c (low
 *               nibbles) and 2c + 1 (high ones): raw bytes 32c + 4g.. of qs (2048 B per block)
 *        scales the first 16 bytes of each row's block (d, dmin, 12 scale bytes) as four lines
 *               of lane = row words: d | dmin << 16, scale bytes 0-3, 4-7, 8-11 (256 B per block)
 *   Q6_K codes  super-block b at 3072 b: lines 0..31 the low-bit bytes ql as Q4_K's nibbles (line
 *               m: bytes 4m..4m+3 of the 16 rows' ql; group G of the block, elements 4G..4G+3,
 *               is line 16 (G / 32) + 8 ((G / 8) % 2) + G % 8, high nibbles when (G / 16) % 2),
 *               then 16 lines of high bits rearranged: bits 2j, 2j + 1 of byte 4i + c of line
 *               32 + L are the two high bits of element 4G + c of row i, G = 4L + j, so they
 *               come to bits 4-5 with one 16-bit shift by 4 - 2j        (3072 B per block)
 *        scales the 16 int8 sub-block scales of the 16 rows, lane = row (16 B per sub-block),
 *               then the rows' fp16 d                                    (288 B per block)
 * so the stored copy has exactly as many bytes as the rows it came from (plus padding). The tile
 * unpacks nibbles and scales per panel, not per token: that work is shared by the tile's tokens. */
#define PN_ST_CODES(f)                                                                          \
    ((f) == PN_Q8_0 ? 512 : (f) == PN_Q4_0 || (f) == PN_Q4_1 ? 256 : (f) == PN_Q5_0 ? 320       \
     : (f) == PN_Q6_K ? 3072 : 2048) /* per block */
#define PN_ST_SCALES(f) ((f) == PN_Q4_K ? 256 : (f) == PN_Q6_K ? 288 : (f) == PN_Q4_1 ? 64 : 32)
#define PN_ST_NS 16 /* sub-blocks per stored chunk, at most (512 / 32) */

/* The stored formats whose codes have bits above the nibble, kept in lines of their own. */
#define PN_ST_HIGH_BITS(f) ((f) == PN_Q5_0 || (f) == PN_Q6_K)

/* Where a stored chunk keeps group g of sub-block s for the formats whose codes are split into
 * nibbles (Q4_0, Q4_1, Q5_0, Q4_K, Q6_K): the 64-byte line of its nibble bytes (high: the high nibbles),
 * and for PN_ST_HIGH_BITS formats the line of its high bits, the 16-bit left shift that brings
 * them to bit 4 (negative: right) and the mask that keeps them. The one description both
 * tiles read codes through (pn_w of kern_panel_avx512.h, p2_w of kern_panel_avx2.h); kern_pack.c
 * writes the lines. */
struct pn_st_group {
    int line, high, hline, hshift, hmask;
};
PN_INLINE struct pn_st_group pn_st_group(int fmt, int s, int g)
{
    struct pn_st_group r = {0, 0, 0, 0, 0};
    if (fmt == PN_Q4_0 || fmt == PN_Q4_1 || fmt == PN_Q5_0) {
        const int base = fmt == PN_Q5_0 ? 5 * s : 4 * s; /* lines per block: 4, Q5_0 one more */
        r.line = base + (g & 3);
        r.high = g >= 4;
        if (fmt == PN_Q5_0) r.hline = base + 4, r.hshift = 4 - g, r.hmask = 0x10;
    } else if (fmt == PN_Q4_K) { /* s = 8b + j */
        r.line = 32 * (s >> 3) + 8 * ((s & 7) >> 1) + g;
        r.high = s & 1;
    } else { /* Q6_K: s = 16b + j, group G = 4j + g of block b (48 lines a block) */
        const int b = s >> 4, G = 4 * (s & 15) + g;
        r.line = 48 * b + 16 * (G >> 5) + 8 * ((G >> 3) & 1) + (G & 7);
        r.high = (G >> 4) & 1;
        r.hline = 48 * b + 32 + (G >> 2), r.hshift = 4 - 2 * (G & 3), r.hmask = 0x30;
    }
    return r;
}

/* Q8_0, Q4_0, Q4_1 and Q5_0 stored, block (= sub-block) s of a chunk: where, from the start of the
 * chunk's scales, the 16 rows' fp16 d lie; Q4_1's fp16 m follow them, 32 bytes on. */
PN_INLINE int pn_st_d_off(int fmt, int s)
{
    return PN_ST_SCALES(fmt) * s;
}

/* Q6_K stored, sub-block s of a chunk: where, from the start of the chunk's scales, the 16 rows'
 * int8 scales (lane = row) and their fp16 d lie. */
PN_INLINE int pn_st_q6k_scale_off(int s)
{
    return PN_ST_SCALES(PN_Q6_K) * (s >> 4) + 16 * (s & 15);
}
PN_INLINE int pn_st_q6k_d_off(int s)
{
    return PN_ST_SCALES(PN_Q6_K) * (s >> 4) + 256;
}

/* Bytes of one stored chunk of nbc blocks. */
PN_INLINE size_t pn_st_chunk_bytes(int fmt, int nbc)
{
    return ((size_t)nbc * (PN_ST_CODES(fmt) + PN_ST_SCALES(fmt)) + 63) & ~(size_t)63;
}

/* The stored formats: PN_* format of wtype, or -1. */
PN_INLINE int pn_st_fmt(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q8_0: return PN_Q8_0;
    case TERN_TYPE_Q4_0: return PN_Q4_0;
    case TERN_TYPE_Q4_1: return PN_Q4_1;
    case TERN_TYPE_Q5_0: return PN_Q5_0;
    case TERN_TYPE_Q4_K: return PN_Q4_K;
    case TERN_TYPE_Q6_K: return PN_Q6_K;
    default: return -1;
    }
}

/* Sub-block s's share (of the chunk's ns) of the nl lines of stored chunk next, prefetched into
 * L1, or into L2 when l2 (a constant after inlining). Every tile that streams a stored copy
 * (kern_panel_avx512.h's pn_tile, kern_panel_avx2.h's) fetches the chunk it reads after this one
 * so: the hardware prefetchers stop at every 4 KB page and each chunk is a new stream. A share
 * per sub-block, not per block: Q4_K and Q6_K have 8 and 16 sub-blocks a block and 2 blocks a
 * chunk, so a block's share was a burst of 36 and 52 prefetches, more than the core keeps in
 * flight; the burst stalled the loads behind it, and the dots waited on memory instead of
 * overlapping it (one token over 255 MB, Zen 3: Q4_K 22.7 -> 16.5-17.5 ms, Q6_K 25.8 ->
 * 15.1-15.6; Q8_0's and Q5_0's shares, a sub-block each, were already 8-9 and 5-6 lines).
 * __builtin_prefetch with locality 3 / 2 is prefetcht0 / prefetcht1, in a header that has no
 * ISA of its own. */
PN_INLINE void pn_prefetch_share(const uint8_t *next, int nl, int ns, int s, int l2)
{
    for (int l = s * nl / ns; l < (s + 1) * nl / ns; l++)
        if (l2)
            __builtin_prefetch(next + 64 * l, 0, 2);
        else
            __builtin_prefetch(next + 64 * l, 0, 3);
}

/* Bytes of one stored panel (16 rows x k): its chunks, the last one possibly short. */
PN_INLINE size_t pn_st_panel_bytes(int fmt, int64_t k)
{
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    return (size_t)(nb / bpc) * pn_st_chunk_bytes(fmt, bpc) + pn_st_chunk_bytes(fmt, (int)(nb % bpc));
}

#endif
