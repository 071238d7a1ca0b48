/* kern_decode_avx512.c — decode-shaped matmul (a few tokens) for Q4_0 and Q8_0 weights (and
 * Q4_K / Q6_K, built but not routed: kern_avx512_decode_kquant in kernels.h) on AVX-512 VNNI, computing every output with exactly the float operations of the
 * prefill panels (kern_panel_avx512.c), so a token's result does not depend on how many tokens
 * shared its batch. Compiled with the AVX-512 flags; reached only through kern_avx512.c after
 * kern_dispatch.c checked the CPU.
 *
 * Read first: kernels.h (the kern_matmul contract), src/quant/quant.h (block layouts),
 * kern_panel_avx512.c (the prefill kernels, whose summation order is the one defined here).
 *
 * The order (per output row r and token t), shared with the panels: each sub-block s (the span
 * of one weight scale: 32 elements, 16 for Q6_K) gives one exact int32 dot x_s (weight offsets
 * removed in the integer domain), and
 *     acc = 0;  for s in order:  acc = fma((float)x_s, dw_r,s * da_t,s, acc)
 *                               [Q4_K: acc = acc - dm_r,s * am_t,s, one fused fnmadd]
 * The panels get that for free (a zmm lane is a row). Decode streams one weight row at a time
 * (one sequential DRAM stream), where a zmm holds two or four sub-blocks of one row. So the work
 * is split in two phases per group of 16 rows:
 *   rows phase   each row, streamed once, gives its sub-block dots: vpdpbusd over the unpacked
 *                weights (lanes = 4-byte groups), then a shuffle-and-add tree folds the 8 (4)
 *                lanes of each sub-block into one int32 — 16 sub-blocks per zmm, stored to a
 *                small buffer; the row's sub-block scales likewise (lane = sub-block)
 *   chain phase  16 x 16 transposes turn those buffers into lane = row vectors, and one FMA
 *                (plus one for Q4_K mins) per sub-block advances all 16 rows' chains.
 * Integer sums are exact in any order, so only the chain matters and it is the panels' one.
 * Long rows are cut into segments of DC_SEG sub-blocks (the chains carry over), so every k
 * is covered with buffers of fixed size (about 100 KB of stack: four tokens of prepared activations and the 16-row buffers). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_kquant.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"
#include "util/check.h"

#define DC_RG 16   /* rows per group: the lanes of the chains */
#define DC_SEG 256 /* sub-blocks per segment (a multiple of 16 and of every format's per-block count) */
#define DC_TG 4    /* tokens whose activations are prepared together */

#define DC_INLINE static inline __attribute__((always_inline))

enum { DC_Q8_0, DC_Q4_0, DC_Q4_K, DC_Q6_K };
/* sub-blocks per weight block, elements per sub-block */
#define DC_SPB(f) ((f) == DC_Q4_K ? 8 : (f) == DC_Q6_K ? 16 : 1)
#define DC_SBE(f) ((f) == DC_Q6_K ? 16 : 32)

/* What one token contributes to one segment: its sub-blocks' dot offsets (-off * sum(a)),
 * scales, and (Q4_K) scale x sub-block sum; for Q8_0 activations also their bytes, contiguous
 * (Q8_K bytes are read in place: they already are). */
struct dc_act {
    int8_t qs[DC_SEG * 32] __attribute__((aligned(64)));
    int32_t off[DC_SEG];
    float da[DC_SEG];
    float am[DC_SEG];
};

/* One group of rows x one segment: the rows phase's output. Rows DC_LD apart, not DC_SEG: the
 * chain reads a column of 16 rows, and 1 KB strides put them all in 4 sets of the L1. */
#define DC_LD (DC_SEG + 16)
struct dc_rows {
    int32_t dot[DC_RG][DC_LD] __attribute__((aligned(64)));
    float dw[DC_RG][DC_LD] __attribute__((aligned(64)));
    float dm[DC_RG][DC_LD] __attribute__((aligned(64)));
};

/* ---------------------------------------------------------------- activations */

DC_INLINE int dc_sum32(const int8_t *p)
{
    const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(x, _mm256_setzero_si256()); /* of a + 128 */
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
}

/* Token row `a` (Q8_0 or Q8_K blocks), sub-blocks [s0, s0 + ns). */
static void dc_act_prepare(int fmt, const uint8_t *a, int64_t s0, int ns, struct dc_act *S)
{
    if (fmt == DC_Q8_0 || fmt == DC_Q4_0) {
        const int off = fmt == DC_Q8_0 ? 128 : 8;
        const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)a + s0;
        for (int b = 0; b < ns; b++) {
            memcpy(S->qs + 32 * b, ab[b].qs, 32);
            S->off[b] = -off * dc_sum32(ab[b].qs);
            S->da[b] = _cvtsh_ss(ab[b].d);
        }
        if (ns & 1) memset(S->qs + 32 * ns, 0, 32); /* the phantom block of an odd count */
        return;
    }
    const int spb = DC_SPB(fmt);
    const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)a + s0 / spb;
    for (int s = 0; s < ns; s++) {
        const struct quant_block_q8_K *blk = ab + s / spb;
        const int j = s % spb;
        S->da[s] = blk->d;
        if (fmt == DC_Q4_K) {
            S->off[s] = 0;
            S->am[s] = blk->d * (float)(blk->bsums[2 * j] + blk->bsums[2 * j + 1]);
        } else {
            S->off[s] = -32 * blk->bsums[j];
        }
    }
}

/* ---------------------------------------------------------------- the fold tree
 * Lane bookkeeping (128-bit lanes L0..L3 of a zmm). The 8-lane formats give, per zmm, sub-block
 * 2p in L0-L1 and 2p+1 in L2-L3; dc_fold8 turns two such zmm into one with one sub-block per
 * 128-bit lane (4 partial sums each), which is what Q6_K's zmm already are. dc_fold4 merges two
 * of those into [sb L: 2 sums, sb 4+L: 2 sums] per lane, and dc_fold2 merges two of these into
 * [sb L, sb 4+L, sb 8+L, sb 12+L]: element 4L+q of the result is sub-block L+4q (DC_PERM). */
DC_INLINE __m512i dc_fold8(__m512i p0, __m512i p1)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
}
DC_INLINE __m512i dc_fold4(__m512i q0, __m512i q1)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi64(q0, q1), _mm512_unpackhi_epi64(q0, q1));
}
DC_INLINE __m512i dc_fold2(__m512i s0, __m512i s1)
{
    const __m512 a = _mm512_castsi512_ps(s0), b = _mm512_castsi512_ps(s1);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}
/* element of the folded vector that holds sub-block t (0..15) */
#define DC_PERM(t) (4 * ((t) & 3) + ((t) >> 2))

/* ---------------------------------------------------------------- rows phase, per format
 * dc_dots_*: the sub-block dots of one row against one token, sub-blocks [s0, s0 + ns) (s0 a
 * multiple of 16), stored folded (DC_PERM order) per 16, padded with zeros to a multiple of 16.
 * dc_scales_*: the row's scales of those sub-blocks in natural order (dm: Q4_K min scales). */

/* the row's fp16 d of n <= 16 blocks, bs bytes apart, as floats (zero past n). Inserted word by
 * word in registers: a vpgatherdd costs more on Zen 5, and 16 stores read back as one vector
 * stall on store forwarding. */
DC_INLINE uint16_t dc_ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
#define DC_INS8(x, p, bs, t0)                                                                  \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 0) * bs), 0);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 1) * bs), 1);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 2) * bs), 2);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 3) * bs), 3);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 4) * bs), 4);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 5) * bs), 5);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 6) * bs), 6);                          \
    x = _mm_insert_epi16(x, dc_ld16(p + (size_t)(t0 + 7) * bs), 7)
#define DC_INS1C(x, p, bs, t, i, n)                                                            \
    if ((t) + (i) < (n)) x = _mm_insert_epi16(x, dc_ld16(p + (size_t)((t) + (i)) * bs), i)
#define DC_INS8C(x, p, bs, t0, n)                                                              \
    DC_INS1C(x, p, bs, t0, 0, n);                                                              \
    DC_INS1C(x, p, bs, t0, 1, n);                                                              \
    DC_INS1C(x, p, bs, t0, 2, n);                                                              \
    DC_INS1C(x, p, bs, t0, 3, n);                                                              \
    DC_INS1C(x, p, bs, t0, 4, n);                                                              \
    DC_INS1C(x, p, bs, t0, 5, n);                                                              \
    DC_INS1C(x, p, bs, t0, 6, n);                                                              \
    DC_INS1C(x, p, bs, t0, 7, n)
DC_INLINE __m512 dc_f16_scales(const uint8_t *first_d, int bs, int n)
{
    if (n == 16) {
        __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
        DC_INS8(lo, first_d, bs, 0);
        DC_INS8(hi, first_d, bs, 8);
        return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    }
    /* a row's last, partial chunk: the same inserts, each under a branch that is taken the same
     * way for every row of the matrix (k of the qwen2.5-0.5b matrices ends in one) */
    __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
    DC_INS8C(lo, first_d, bs, 0, n);
    DC_INS8C(hi, first_d, bs, 8, n);
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* Software prefetch of [p, p + bytes): the dots of a row prefetch the same span of the row four
 * rows ahead. The chain phase issues no loads; without the prefetch DRAM idles through it and
 * decode ran at about half the bandwidth (256 MB Q8_0 matrix, 1 thread: 17.6 -> 30 GB/s). */
DC_INLINE void dc_prefetch(const uint8_t *p, int bytes)
{
    for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Q4_0 / Q8_0 weight pair (blocks b, b+1; `two` false: b only) as 64 unsigned bytes in element
 * order (Q8_0: w + 128). Built from broadcast loads, masked merges and a masked shift: no
 * shuffle instructions (the fold and the transposes below keep the shuffle pipes busy). */
DC_INLINE __m512i dc_q4_0_pair(const struct quant_block_q4_0 *wb, int two)
{
    __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)wb[0].qs));
    x = two ? _mm512_mask_broadcast_i32x4(x, 0xFF00, _mm_loadu_si128((const __m128i *)wb[1].qs))
            : _mm512_maskz_mov_epi32(0x00FF, x);
    x = _mm512_mask_srli_epi16(x, 0xFF00FF00u, x, 4); /* [lo b, hi b, lo b+1, hi b+1] */
    return _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
}
DC_INLINE __m512i dc_q8_0_pair(const struct quant_block_q8_0 *wb, int two)
{
    __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)wb[0].qs));
    x = two ? _mm512_mask_broadcast_i64x4(x, 0xF0, _mm256_loadu_si256((const __m256i *)wb[1].qs))
            : _mm512_mask_mov_epi64(x, 0xF0, _mm512_set1_epi8((char)0x80));
    return _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80));
}

#define DC_DOTS_32(fmt, blk)                                                                   \
    static void dc_dots_##fmt(const uint8_t *w, int64_t s0, int ns, const struct dc_act *S,    \
                              const uint8_t *a, int32_t *dot, size_t pf)                       \
    {                                                                                          \
        (void)a;                                                                               \
        const struct blk *wb = (const struct blk *)w + s0;                                     \
        for (int c = 0; c < ns; c += 16) {                                                     \
            __m512i p[8];                                                                      \
            if (pf) dc_prefetch((const uint8_t *)(wb + c) + pf, 16 * (int)sizeof(struct blk));  \
            if (ns - c >= 16) { /* the common case, without branches */                        \
                for (int q = 0; q < 8; q++)                                                    \
                    p[q] = _mm512_dpbusd_epi32(_mm512_setzero_si512(),                         \
                                               dc_##fmt##_pair(wb + c + 2 * q, 1),             \
                                               _mm512_load_si512(S->qs + 32 * (c + 2 * q)));  \
            } else { /* unrolled: p stays in registers, the branches go one way per matrix */  \
                const int np = (ns - c + 1) / 2;                                               \
                _Pragma("GCC unroll 8")                                                        \
                for (int q = 0; q < 8; q++) {                                                  \
                    p[q] = _mm512_setzero_si512();                                             \
                    if (q < np) {                                                              \
                        const int b = c + 2 * q;                                               \
                        const __m512i u = dc_##fmt##_pair(wb + b, b + 1 < ns);                 \
                        p[q] = _mm512_dpbusd_epi32(p[q], u, _mm512_load_si512(S->qs + 32 * b)); \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            const __m512i r = dc_fold2(dc_fold4(dc_fold8(p[0], p[1]), dc_fold8(p[2], p[3])),   \
                                       dc_fold4(dc_fold8(p[4], p[5]), dc_fold8(p[6], p[7])));  \
            _mm512_store_si512(dot + c, r);                                                    \
        }                                                                                      \
    }                                                                                          \
    static void dc_scales_##fmt(const uint8_t *w, int64_t s0, int ns, float *dw, float *dm)    \
    {                                                                                          \
        (void)dm;                                                                              \
        const struct blk *wb = (const struct blk *)w + s0;                                     \
        for (int c = 0; c < ns; c += 16)                                                       \
            _mm512_store_ps(dw + c, dc_f16_scales((const uint8_t *)&wb[c].d,                   \
                                                  (int)sizeof(struct blk),                     \
                                                  ns - c >= 16 ? 16 : ns - c));                \
    }

DC_DOTS_32(q4_0, quant_block_q4_0)
DC_DOTS_32(q8_0, quant_block_q8_0)

/* Q4_K: sub-blocks 2c and 2c+1 of a block are the low and high nibbles of its 32-byte chunk c. */
static void dc_dots_q4_K(const uint8_t *w, int64_t s0, int ns, const struct dc_act *S,
                         const uint8_t *a, int32_t *dot, size_t pf)
{
    (void)S;
    const struct quant_block_q4_K *wb = (const struct quant_block_q4_K *)w + s0 / 8;
    const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)a + s0 / 8;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < ns; c += 16) {
        __m512i p[8];
        const int nblk = ns - c >= 16 ? 2 : 1;
        if (pf) dc_prefetch((const uint8_t *)(wb + c / 8) + pf, nblk * (int)sizeof *wb);
        for (int h = 0; h < 2; h++)
            for (int q = 0; q < 4; q++) {
                __m512i v = _mm512_setzero_si512();
                if (h < nblk) {
                    const int b = c / 8 + h;
                    __m512i u = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * q)));
                    u = _mm512_and_si512(_mm512_mask_srli_epi16(u, 0xFFFF0000u, u, 4), m4);
                    v = _mm512_dpbusd_epi32(v, u, _mm512_loadu_si512(ab[b].qs + 64 * q));
                }
                p[4 * h + q] = v;
            }
        const __m512i r = dc_fold2(dc_fold4(dc_fold8(p[0], p[1]), dc_fold8(p[2], p[3])),
                                   dc_fold4(dc_fold8(p[4], p[5]), dc_fold8(p[6], p[7])));
        _mm512_store_si512(dot + c, r);
    }
}

/* the 8 six-bit scales and mins of a Q4_K block, as bytes of a word */
DC_INLINE void dc_q4k_scales(const uint8_t *q, uint64_t *sc, uint64_t *m)
{
    uint8_t s8[8], m8[8];
    kern_q4k_scales(q, s8, m8);
    memcpy(sc, s8, 8);
    memcpy(m, m8, 8);
}

/* the panels' row scales: d * (float)sc and dmin * (float)m, one rounding each */
static void dc_scales_q4_K(const uint8_t *w, int64_t s0, int ns, float *dw, float *dm)
{
    const struct quant_block_q4_K *wb = (const struct quant_block_q4_K *)w + s0 / 8;
    for (int c = 0; c < ns; c += 16) {
        const int b = c / 8;
        const int two = ns - c >= 16;
        uint64_t sc0, m0, sc1 = 0, m1 = 0;
        dc_q4k_scales(wb[b].scales, &sc0, &m0);
        float d1 = 0, dmin1 = 0;
        if (two) {
            dc_q4k_scales(wb[b + 1].scales, &sc1, &m1);
            d1 = _cvtsh_ss(wb[b + 1].d);
            dmin1 = _cvtsh_ss(wb[b + 1].dmin);
        }
        const float d0 = _cvtsh_ss(wb[b].d), dmin0 = _cvtsh_ss(wb[b].dmin);
        const __m512 vd = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
        const __m512 vm = _mm512_insertf32x8(_mm512_set1_ps(dmin0), _mm256_set1_ps(dmin1), 1);
        const __m512 fsc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x((long long)sc1, (long long)sc0)));
        const __m512 fm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x((long long)m1, (long long)m0)));
        _mm512_store_ps(dw + c, _mm512_mul_ps(vd, fsc));
        _mm512_store_ps(dm + c, _mm512_mul_ps(vm, fm));
    }
}

/* Q6_K: one block is 16 sub-blocks = one fold of four zmm; codes unsigned 0..63 (the -32 is in
 * the token's offsets). Per 128-element half: ql bytes l (64) and qh bytes h (32); element e < 64
 * is (l[e] & 15) | (bits 2*(e/32) .. of h[e % 32]) << 4, element 64 + e uses l[e] >> 4 and the
 * next two bit pairs. */
static void dc_dots_q6_K(const uint8_t *w, int64_t s0, int ns, const struct dc_act *S,
                         const uint8_t *a, int32_t *dot, size_t pf)
{
    (void)S;
    const struct quant_block_q6_K *wb = (const struct quant_block_q6_K *)w + s0 / 16;
    const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)a + s0 / 16;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    for (int b = 0; b < ns / 16; b++) {
        __m512i p[4];
        if (pf) dc_prefetch((const uint8_t *)(wb + b) + pf, (int)sizeof *wb);
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(wb[b].ql + 64 * h);
            const __m256i hh = _mm256_loadu_si256((const __m256i *)(wb[b].qh + 32 * h));
            __m512i hv = _mm512_broadcast_i64x4(hh);
            hv = _mm512_mask_srli_epi16(hv, 0xFFFF0000u, hv, 2); /* upper half: bits 2-3 */
            const __m512i u0 = _mm512_or_si512(_mm512_and_si512(l, m4),
                                               _mm512_slli_epi16(_mm512_and_si512(hv, m3), 4));
            const __m512i u1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                               _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hv, 4), m3), 4));
            p[2 * h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u0,
                                           _mm512_loadu_si512(ab[b].qs + 128 * h));
            p[2 * h + 1] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u1,
                                               _mm512_loadu_si512(ab[b].qs + 128 * h + 64));
        }
        _mm512_store_si512(dot + 16 * b, dc_fold2(dc_fold4(p[0], p[1]), dc_fold4(p[2], p[3])));
    }
}

static void dc_scales_q6_K(const uint8_t *w, int64_t s0, int ns, float *dw, float *dm)
{
    (void)dm;
    const struct quant_block_q6_K *wb = (const struct quant_block_q6_K *)w + s0 / 16;
    for (int b = 0; b < ns / 16; b++) {
        const __m512 fsc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)wb[b].scales)));
        _mm512_store_ps(dw + 16 * b, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(wb[b].d)), fsc));
    }
}

/* ---------------------------------------------------------------- chain phase */

/* 16 x 16 transpose of 32-bit elements: v[i] element j -> v[j] element i. */
DC_INLINE void dc_transpose16(__m512 v[16])
{
    __m512 a[16], b[16];
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {
        const __m512d a0 = _mm512_castps_pd(a[4 * k]), a1 = _mm512_castps_pd(a[4 * k + 1]);
        const __m512d a2 = _mm512_castps_pd(a[4 * k + 2]), a3 = _mm512_castps_pd(a[4 * k + 3]);
        b[4 * k + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* b[4k+m], 128-bit lane L: column 4L+m of rows 4k..4k+3 */
    for (int m = 0; m < 4; m++) {
        const __m512 c0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44);
        const __m512 c1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
        const __m512 d0 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44);
        const __m512 d1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
        v[m] = _mm512_shuffle_f32x4(c0, d0, 0x88);
        v[4 + m] = _mm512_shuffle_f32x4(c0, d0, 0xDD);
        v[8 + m] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        v[12 + m] = _mm512_shuffle_f32x4(c1, d1, 0xDD);
    }
}

DC_INLINE void dc_load_cols(const float (*src)[DC_LD], int c, __m512 v[16])
{
    for (int i = 0; i < DC_RG; i++) v[i] = _mm512_load_ps(src[i] + c);
    dc_transpose16(v);
}

/* acc (lane = row of the group) through sub-blocks [0, ns) of the segment. */
DC_INLINE __m512 dc_chain(int fmt, const struct dc_rows *R, const struct dc_act *S, int ns,
                          __m512 acc)
{
    for (int c = 0; c < ns; c += 16) {
        __m512 x[16], dw[16], dm[16];
        dc_load_cols((const float (*)[DC_LD])R->dot, c, x); /* int32 bits, moved as floats */
        dc_load_cols(R->dw, c, dw);
        if (fmt == DC_Q4_K) dc_load_cols(R->dm, c, dm);
        const int n = ns - c < 16 ? ns - c : 16;
        for (int t = 0; t < n; t++) {
            const int s = c + t;
            const __m512i xi = _mm512_add_epi32(_mm512_castps_si512(x[DC_PERM(t)]),
                                                _mm512_set1_epi32(S->off[s]));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(xi), _mm512_mul_ps(dw[t], _mm512_set1_ps(S->da[s])),
                                  acc);
            if (fmt == DC_Q4_K) acc = _mm512_fnmadd_ps(dm[t], _mm512_set1_ps(S->am[s]), acc);
        }
    }
    return acc;
}

/* ---------------------------------------------------------------- driver */

/* how far ahead the dots prefetch: four rows, but at most about 8 KB, so the prefetched rows, the
 * current one, the activations and the chain buffers stay within the 48 KB L1 */
DC_INLINE size_t dc_pf_dist(size_t ws)
{
    const size_t lim = 8192;
    return 4 * ws <= lim ? 4 * ws : ws <= lim ? ws * (lim / ws) : ws;
}

typedef void (*dc_dots_fn)(const uint8_t *, int64_t, int, const struct dc_act *, const uint8_t *,
                           int32_t *, size_t);
typedef void (*dc_scales_fn)(const uint8_t *, int64_t, int, float *, float *);

DC_INLINE void dc_matmul(int fmt, dc_dots_fn dots, dc_scales_fn scales, const void *W, size_t ws,
                         const void *A, size_t as, int n_tok, int64_t k, int64_t r0, int64_t r1,
                         float *Y, int64_t ldy)
{
    struct dc_act S[DC_TG];
    struct dc_rows R;
    /* whole super-blocks of the format, rows in order; the tiles read no partial block */
    TERN_ASSERT(k > 0 && k % DC_SBE(fmt) == 0 && k % 32 == 0, "k is whole blocks");
    TERN_ASSERT(n_tok >= 1 && r0 >= 0 && (n_tok == 1 || r1 <= r0 || ldy >= r1));
    const int64_t nsb = k / DC_SBE(fmt);
    const int nseg = (int)((nsb + DC_SEG - 1) / DC_SEG);
    for (int t0 = 0; t0 < n_tok; t0 += DC_TG) {
        const int nt = n_tok - t0 < DC_TG ? n_tok - t0 : DC_TG;
        const uint8_t *At = (const uint8_t *)A + (size_t)t0 * as;
        if (nseg == 1) /* one segment: prepared once for every row group */
            for (int j = 0; j < nt; j++) dc_act_prepare(fmt, At + (size_t)j * as, 0, (int)nsb, &S[j]);
        for (int64_t r = r0; r < r1; r += DC_RG) {
            const int nrow = r1 - r < DC_RG ? (int)(r1 - r) : DC_RG;
            __m512 acc[DC_TG];
            for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
            for (int g = 0; g < nseg; g++) {
                const int64_t s0 = (int64_t)g * DC_SEG;
                const int ns = nsb - s0 < DC_SEG ? (int)(nsb - s0) : DC_SEG;
                const int ns16 = (ns + 15) & ~15;
                if (nseg > 1)
                    for (int j = 0; j < nt; j++) dc_act_prepare(fmt, At + (size_t)j * as, s0, ns, &S[j]);
                for (int i = nrow; i < DC_RG; i++) { /* rows past r1: zero chains, not stored */
                    memset(R.dot[i], 0, (size_t)ns16 * sizeof R.dot[i][0]);
                    memset(R.dw[i], 0, (size_t)ns16 * sizeof R.dw[i][0]);
                    memset(R.dm[i], 0, (size_t)ns16 * sizeof R.dm[i][0]);
                }
                for (int j = 0; j < nt; j++) {
                    for (int i = 0; i < nrow; i++) {
                        const uint8_t *w = (const uint8_t *)W + (size_t)(r + i) * ws;
                        dots(w, s0, ns, &S[j], At + (size_t)j * as, R.dot[i], j == 0 ? dc_pf_dist(ws) : 0);
                        /* after the dots: their sequential loads bring the row in, the
                         * scales' gathers then hit the cache (first, they stall on DRAM) */
                        if (j == 0) scales(w, s0, ns, R.dw[i], R.dm[i]);
                    }
                    acc[j] = dc_chain(fmt, &R, &S[j], ns, acc[j]);
                }
            }
            const __mmask16 m = (__mmask16)((1u << nrow) - 1);
            for (int j = 0; j < nt; j++) _mm512_mask_storeu_ps(Y + (size_t)(t0 + j) * ldy + r, m, acc[j]);
        }
    }
}

#define DC_DEFINE(name, fmt)                                                                   \
    static void name##_decode(const void *W, size_t ws, const void *A, size_t as, int n_tok,   \
                              int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)        \
    {                                                                                          \
        dc_matmul(fmt, dc_dots_##name, dc_scales_##name, W, ws, A, as, n_tok, k, r0, r1, Y, ldy); \
    }
DC_DEFINE(q8_0, DC_Q8_0)
DC_DEFINE(q4_0, DC_Q4_0)
DC_DEFINE(q4_K, DC_Q4_K)
DC_DEFINE(q6_K, DC_Q6_K)

bool kern_avx512_decode_matmul(int wtype, const void *W, size_t w_stride, const void *A,
                               size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1,
                               float *Y, int64_t ldy)
{
    switch (wtype) {
    case TERN_TYPE_Q4_0: q4_0_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy); return true;
    case TERN_TYPE_Q8_0: q8_0_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy); return true;
    default: return false;
    }
}

bool kern_avx512_decode_kquant(int wtype, const void *W, size_t w_stride, const void *A,
                               size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1,
                               float *Y, int64_t ldy)
{
    switch (wtype) {
    case TERN_TYPE_Q4_K: q4_K_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy); return true;
    case TERN_TYPE_Q6_K: q6_K_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy); return true;
    default: return false;
    }
}
