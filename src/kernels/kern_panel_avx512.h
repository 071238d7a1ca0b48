/* kern_panel_avx512.h — what the AVX-512 panel kernels share: the in-register transposes of the
 * on-the-fly packing and the token tile itself (the panel layout's constants, the formats'
 * shapes and the activation side are ISA-neutral: kern_panel_layout.h, kern_panel_act.h). Two files
 * include it: kern_panel_avx512.c (weights repacked on the fly, per call, into struct pn_panel on
 * the stack) and kern_packed_avx512.c (weights repacked once, at model load, into a stored layout
 * that keeps each format's bytes: docs/kernels.md "Weights repacked at load").
 *
 * Read kern_panel_avx512.c's opening comment first: it explains the panels. Everything here is
 * static inline, for files compiled with the AVX-512 flags only. The tile reads its weights
 * through pn_src, so both layouts run the same float operations in the same order, which is
 * what keeps a token's result the same bits whatever the batch (docs/kernels.md "Integer sums and batch
 * invariance"). */
#ifndef TERN_KERN_PANEL_AVX512_H
#define TERN_KERN_PANEL_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_panel_act.h"
#include "kernels/kern_panel_layout.h"
#include "quant/quant.h"

/* acc + u8 x s8 4-byte dots of w (16 rows) with the 4 bytes at p broadcast to every lane.
 * Inline asm: gcc 12 surrounds the intrinsic with register copies and does not fold the
 * broadcast load into it (see ../shared/anchors/machine.md §2). */
PN_INLINE __m512i pn_dot_bcast(__m512i acc, __m512i w, const void *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

/* Four zmm, each holding four rows' 16 bytes (128-bit lane j of z[m] = row m + 4j, dwords =
 * groups G0..G0+3), become the panel's groups G0..G0+3 (lane i = row i). Two rounds of
 * in-lane unpacks: lane j of the result's dword q is lane j of z[q], i.e. row q + 4j at
 * element 4j + q. */
PN_INLINE void pn_t4(__m512i z0, __m512i z1, __m512i z2, __m512i z3, __m512i out[4])
{
    const __m512i a0 = _mm512_unpacklo_epi32(z0, z1), a1 = _mm512_unpackhi_epi32(z0, z1);
    const __m512i a2 = _mm512_unpacklo_epi32(z2, z3), a3 = _mm512_unpackhi_epi32(z2, z3);
    out[0] = _mm512_unpacklo_epi64(a0, a2);
    out[1] = _mm512_unpackhi_epi64(a0, a2);
    out[2] = _mm512_unpacklo_epi64(a1, a3);
    out[3] = _mm512_unpackhi_epi64(a1, a3);
}

/* The 16 bytes at p + off of rows m, m + 4, m + 8, m + 12 (rows ws bytes apart) in one zmm. */
PN_INLINE __m512i pn_ld4(const uint8_t *p, size_t ws, int m, size_t off)
{
    const uint8_t *q = p + (size_t)m * ws + off;
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)q));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(q + 4 * ws)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(q + 8 * ws)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(q + 12 * ws)), 3);
}

/* ---------------------------------------------------------------- token tile
 * src is a struct pn_panel (st = 0) or a stored chunk (st = 1); these read it. */

/* the 16 rows' unsigned codes of sub-block s, group g */
PN_INLINE __m512i pn_w(int fmt, int st, const uint8_t *src, int s, int g)
{
    if (!st) return _mm512_load_si512((const void *)((const struct pn_panel *)src)->q[s * PN_GS(fmt) + g]);
    if (fmt == PN_Q8_0) return _mm512_load_si512((const void *)(src + 64 * (8 * s + g)));
    const struct pn_st_group L = pn_st_group(fmt, s, g);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i raw = _mm512_load_si512((const void *)(src + 64 * L.line));
    const __m512i nib = L.high ? _mm512_srli_epi16(raw, 4) : raw;
    if (!PN_ST_HIGH_BITS(fmt)) return _mm512_and_si512(nib, m4);
    /* Q5_0, Q6_K: (nibble & 0x0F) | (high bits moved to bit 4 & mask); ternary logic 0xEC is (A & C) | B */
    const __m512i hb = _mm512_load_si512((const void *)(src + 64 * L.hline));
    const __m512i hs = L.hshift > 0 ? _mm512_slli_epi16(hb, L.hshift) : L.hshift < 0 ? _mm512_srli_epi16(hb, -L.hshift) : hb;
    return _mm512_ternarylogic_epi32(nib, _mm512_and_si512(hs, _mm512_set1_epi8((char)L.hmask)), m4, 0xEC);
}

/* Q6_K stored: the 16 rows' d x int8 scale of sub-block s (the product pn_pack_q6_K makes) */
PN_INLINE __m512 pn_k6_scale(const uint8_t *sc, int s)
{
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sc + pn_st_q6k_d_off(s))));
    const __m512i v = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(sc + pn_st_q6k_scale_off(s))));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
}

/* Q4_K stored: sub-block s's six-bit scale (mins = 0) or min (mins = 1) of the 16 rows, times d
 * (dmin): the same products as pn_pack16_q4_K (kern_panel_avx512.c) makes. */
PN_INLINE __m512 pn_k4_scale(const uint8_t *hdr, int j, int mins)
{
    const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i k30 = _mm512_set1_epi32(0x30303030), kff = _mm512_set1_epi32(0xff);
    const __m512i h0 = _mm512_load_si512((const void *)hdr);
    const __m512i h1 = _mm512_load_si512((const void *)(hdr + 64));
    const __m512i h2 = _mm512_load_si512((const void *)(hdr + 128));
    const __m512i h3 = _mm512_load_si512((const void *)(hdr + 192));
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(mins ? _mm512_srli_epi32(h0, 16) : h0));
    __m512i v;
    if (!mins)
        v = j < 4 ? _mm512_and_si512(h1, k3f)
                  : _mm512_or_si512(_mm512_and_si512(h3, k0f), _mm512_and_si512(_mm512_srli_epi32(h1, 2), k30));
    else
        v = j < 4 ? _mm512_and_si512(h2, k3f)
                  : _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h3, 4), k0f),
                                    _mm512_and_si512(_mm512_srli_epi32(h2, 2), k30));
    v = _mm512_and_si512(_mm512_srli_epi32(v, 8 * (j & 3)), kff);
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
}

/* the 16 rows' scale (mins = 0) or min scale (mins = 1) of sub-block s; nbc: blocks in the chunk;
 * xs: NULL, or those of the stored chunk src already as floats (pn_st_scales) */
PN_INLINE __m512 pn_ws(int fmt, int st, const uint8_t *src, const float *xs, int nbc, int s, int mins)
{
    if (st && xs) return _mm512_load_ps(xs + PN_ROWS * (s + (mins ? PN_ST_NS : 0)));
    if (!st) {
        const struct pn_panel *P = (const struct pn_panel *)src;
        return _mm512_load_ps(mins ? P->m[s] : P->d[s]);
    }
    const uint8_t *sc = src + (size_t)nbc * PN_ST_CODES(fmt);
    if (fmt == PN_Q4_K) return pn_k4_scale(sc + 256 * (s >> 3), s & 7, mins);
    if (fmt == PN_Q6_K) return pn_k6_scale(sc, s);
    if (fmt == PN_Q4_1 && mins) { /* -m, as the per-call packer stores it: the tile subtracts m * am */
        const __m256i m = _mm256_load_si256((const __m256i *)(sc + pn_st_d_off(fmt, s) + 32));
        return _mm512_xor_ps(_mm512_cvtph_ps(m), _mm512_set1_ps(-0.0f));
    }
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sc + pn_st_d_off(fmt, s))));
}

/* The scales and mins of every sub-block of stored chunk src as pn_ws gives them, into xs
 * (2 * PN_ST_NS * PN_ROWS floats, 64-byte aligned): for Q4_K, whose scales cost some fifteen
 * instructions a sub-block to unpack, once per chunk instead of once per token tile. */
PN_INLINE void pn_st_scales(int fmt, const uint8_t *src, int nbc, float *xs)
{
    for (int s = 0; s < nbc * PN_SPB(fmt); s++) {
        _mm512_store_ps(xs + PN_ROWS * s, pn_ws(fmt, 1, src, NULL, nbc, s, 0));
        if (PN_MINS(fmt)) _mm512_store_ps(xs + PN_ROWS * (PN_ST_NS + s), pn_ws(fmt, 1, src, NULL, nbc, s, 1));
    }
}

/* acc[j] (16 rows of token j) += the panel's dots over the chunk's nbc blocks; fmt, st and nt
 * are constants after inlining. next (stored layout only, else NULL): where the caller reads
 * after this chunk (the same chunk of a later panel, or with one segment the stream a fixed
 * distance ahead: PK_DEFINE_FEW), as many lines as this chunk has, prefetched a sub-block's
 * share at a time. The hardware prefetchers stop at every 4 KB page and each chunk is a new
 * stream; without this the copy was slower than repacking on the fly with its prefetches
 * (bench_smallm, 8-16 tokens). */
PN_INLINE void pn_tile(int fmt, int st, const uint8_t *src, const float *xs, const uint8_t *next,
                       int nbc, const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S,
                       int nt, __m512 acc[PN_NT])
{
    const int GS = PN_GS(fmt), SPB = PN_SPB(fmt);
    const int nl = st && next ? (int)(pn_st_chunk_bytes(fmt, nbc) / 64) : 0; /* lines to prefetch */
    const uint8_t *a[PN_NT];
    for (int j = 0; j < nt; j++) a[j] = A + (size_t)j * as + (size_t)b0 * PN_ABYTES(fmt) + PN_AHDR(fmt);
    for (int b = 0; b < nbc; b++) {
        for (int sb = 0; sb < SPB; sb++) {
            const int s = b * SPB + sb;
            /* one token of Q8_0 (a sub-block a block, 8-9 lines a share): the share spread
             * over the group pairs, as kern_panel_avx2.h's one-token Q8_0 tile does (Zen 4,
             * bench_smallm, 255 MB: 14.8-15.3 -> 11.4-13.3 ms) */
            const bool spread = nt == 1 && fmt == PN_Q8_0;
            /* 2 tokens and more prefetch into L2: their tile reads a line over more cycles, and
             * lines fetched into L1 that far ahead held its fill buffers (Zen 4, bench_smallm,
             * 255 MB: Q5_0 3 tokens 20.6-22.3 -> 11.3-11.9 ms, Q4_K 2 tokens 22.2-27.1 ->
             * 12.8-15.0, Q4_0 8 tokens 29.0-35.5 -> 25.6-26.0); one token was a wash */
            if (nl && !spread) pn_prefetch_share(next, nl, nbc * SPB, s, nt > 1);
            __m512i x[PN_NT];
            for (int j = 0; j < nt; j++) x[j] = _mm512_set1_epi32(S->init[j][s]);
            if (nt == 1) { /* two chains of vpdpbusd, not one, for latency (integer sums are exact):
                            * bench_smallm Q4_0, 1 token, 256 MB: 10.6-12.5 -> 9.6-11.6 ms */
                __m512i x1 = _mm512_setzero_si512();
                for (int g = 0; g < GS; g += 2) {
                    if (nl && spread) pn_prefetch_share(next, nl, nbc * SPB * GS / 2, s * GS / 2 + g / 2, 0);
                    const uint8_t *ap = a[0] + (size_t)b * PN_ABYTES(fmt) + 4 * (sb * GS + g);
                    x[0] = pn_dot_bcast(x[0], pn_w(fmt, st, src, s, g), ap);
                    x1 = pn_dot_bcast(x1, pn_w(fmt, st, src, s, g + 1), ap + 4);
                }
                x[0] = _mm512_add_epi32(x[0], x1);
            } else {
                for (int g = 0; g < GS; g++) {
                    const __m512i w = pn_w(fmt, st, src, s, g);
                    for (int j = 0; j < nt; j++)
                        x[j] = pn_dot_bcast(x[j], w, a[j] + (size_t)b * PN_ABYTES(fmt) + 4 * (sb * GS + g));
                }
            }
            const __m512 dw = pn_ws(fmt, st, src, xs, nbc, s, 0);
            for (int j = 0; j < nt; j++)
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x[j]),
                                         _mm512_mul_ps(dw, _mm512_set1_ps(S->da[j][s])), acc[j]);
            if (PN_HAS_MIN(fmt)) {
                const __m512 dm = pn_ws(fmt, st, src, xs, nbc, s, 1);
                for (int j = 0; j < nt; j++)
                    acc[j] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(S->am[j][s]), acc[j]);
            }
        }
    }
}

/* u8 x s8 4-byte dots, acc + w . a, with the activation already broadcast in a register (the
 * intrinsic, again, comes with register copies in gcc 12). */
PN_INLINE __m512i pn_dot_reg(__m512i acc, __m512i w, __m512i a)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
    return acc;
}

/* pn_tile for two panels at once (src0, src1: the same chunk of neighbouring panels, stored
 * chunks with st = 1, struct pn_panel with st = 0) and
 * tokens j0 .. j0 + nt - 1 of S (nt <= 4). Each token's four activation bytes are broadcast once
 * into a register for both panels' dots: pn_tile's memory-operand broadcasts made the prefill
 * tile load-bound (bench_kernels, Q8_0 packed, 1 thread: ~630 GOP/s; with the broadcasts taken
 * out of the loop, ~880), and here 8 dots cost 2 weight loads and 4 broadcasts instead of 1 and
 * 8. Per lane the float operations and their order are pn_tile's, so the bits are the same. */
PN_INLINE void pn_tile2(int fmt, int st, const uint8_t *src0, const uint8_t *src1, const float *xs0,
                        const float *xs1, const uint8_t *next0, const uint8_t *next1, int nbc,
                        const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S, int j0,
                        int nt, __m512 acc0[4], __m512 acc1[4])
{
    const int GS = PN_GS(fmt), SPB = PN_SPB(fmt);
    const int nl = next0 ? (int)(pn_st_chunk_bytes(fmt, nbc) / 64) : 0;
    const uint8_t *a[4];
    for (int j = 0; j < nt; j++)
        a[j] = A + (size_t)(j0 + j) * as + (size_t)b0 * PN_ABYTES(fmt) + PN_AHDR(fmt);
    for (int b = 0; b < nbc; b++) {
        for (int sb = 0; sb < SPB; sb++) {
            const int s = b * SPB + sb;
            if (nl) {
                pn_prefetch_share(next0, nl, nbc * SPB, s, 0);
                pn_prefetch_share(next1, nl, nbc * SPB, s, 0);
            }
            __m512i x0[4], x1[4];
            for (int j = 0; j < nt; j++) x0[j] = x1[j] = _mm512_set1_epi32(S->init[j0 + j][s]);
            for (int g = 0; g < GS; g++) {
                const __m512i w0 = pn_w(fmt, st, src0, s, g), w1 = pn_w(fmt, st, src1, s, g);
                for (int j = 0; j < nt; j++) {
                    int32_t a4; /* the block's codes start 2 bytes in: not 4-byte aligned */
                    memcpy(&a4, a[j] + (size_t)b * PN_ABYTES(fmt) + 4 * (sb * GS + g), 4);
                    const __m512i av = _mm512_set1_epi32(a4);
                    x0[j] = pn_dot_reg(x0[j], w0, av);
                    x1[j] = pn_dot_reg(x1[j], w1, av);
                }
            }
            const __m512 dw0 = pn_ws(fmt, st, src0, xs0, nbc, s, 0), dw1 = pn_ws(fmt, st, src1, xs1, nbc, s, 0);
            for (int j = 0; j < nt; j++) {
                const __m512 da = _mm512_set1_ps(S->da[j0 + j][s]);
                acc0[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x0[j]), _mm512_mul_ps(dw0, da), acc0[j]);
                acc1[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x1[j]), _mm512_mul_ps(dw1, da), acc1[j]);
            }
            if (PN_HAS_MIN(fmt)) {
                const __m512 dm0 = pn_ws(fmt, st, src0, xs0, nbc, s, 1), dm1 = pn_ws(fmt, st, src1, xs1, nbc, s, 1);
                for (int j = 0; j < nt; j++) {
                    const __m512 am = _mm512_set1_ps(S->am[j0 + j][s]);
                    acc0[j] = _mm512_fnmadd_ps(dm0, am, acc0[j]);
                    acc1[j] = _mm512_fnmadd_ps(dm1, am, acc1[j]);
                }
            }
        }
    }
}

/* Two panels (layout st) x tokens j0 .. j0 + nt - 1 x one chunk into Y (the first panel's rows at Y,
 * the second's at Y + 16), masks m0 / m1; first: the first chunk (stored, not added). */
PN_INLINE void pn_panels2_tokens(int fmt, int st, const uint8_t *src0, const uint8_t *src1, const float *xs0,
                                 const float *xs1, const uint8_t *next0, const uint8_t *next1,
                                 int nbc, const uint8_t *A, size_t as, int64_t b0,
                                 const struct pn_act *S, int j0, int nt, float *Y, int64_t ldy,
                                 __mmask16 m0, __mmask16 m1, int first)
{
    __m512 acc0[4], acc1[4];
    for (int j = 0; j < nt; j++) {
        acc0[j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, Y + (j0 + j) * ldy);
        acc1[j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, Y + (j0 + j) * ldy + PN_ROWS);
    }
    pn_tile2(fmt, st, src0, src1, xs0, xs1, next0, next1, nbc, A, as, b0, S, j0, nt, acc0, acc1);
    for (int j = 0; j < nt; j++) {
        _mm512_mask_storeu_ps(Y + (j0 + j) * ldy, m0, acc0[j]);
        _mm512_mask_storeu_ps(Y + (j0 + j) * ldy + PN_ROWS, m1, acc1[j]);
    }
}

/* name##_run2: pn_panels2_tokens for fmt and layout st over a tile's nt <= PN_NT tokens, four at
 * a time. */
#define PN_DEFINE_RUN2(name, fmt, st)                                                            \
    static void name##_run2(const uint8_t *src0, const uint8_t *src1, const float *xs0,        \
                            const float *xs1, const uint8_t *next0, const uint8_t *next1,      \
                            int nbc, const uint8_t *A, size_t as, int64_t b0,                  \
                            const struct pn_act *S, int nt, float *Y, int64_t ldy,             \
                            __mmask16 m0, __mmask16 m1, int first)                             \
    {                                                                                          \
        for (int j0 = 0; j0 < nt; j0 += 4) {                                                   \
            const uint8_t *n0 = j0 ? NULL : next0, *n1 = j0 ? NULL : next1;                    \
            switch (nt - j0 < 4 ? nt - j0 : 4) {                                               \
            case 4: pn_panels2_tokens(fmt, st, src0, src1, xs0, xs1, n0, n1, nbc, A, as, b0, S, j0, 4, Y, ldy, m0, m1, first); break; \
            case 3: pn_panels2_tokens(fmt, st, src0, src1, xs0, xs1, n0, n1, nbc, A, as, b0, S, j0, 3, Y, ldy, m0, m1, first); break; \
            case 2: pn_panels2_tokens(fmt, st, src0, src1, xs0, xs1, n0, n1, nbc, A, as, b0, S, j0, 2, Y, ldy, m0, m1, first); break; \
            default: pn_panels2_tokens(fmt, st, src0, src1, xs0, xs1, n0, n1, nbc, A, as, b0, S, j0, 1, Y, ldy, m0, m1, first); break; \
            }                                                                                  \
        }                                                                                      \
    }

/* One panel x nt tokens x one chunk, accumulated into Y (first chunk: stored); m: the rows of
 * the panel to write. */
PN_INLINE void pn_panel_tokens(int fmt, int st, const uint8_t *src, const float *xs,
                               const uint8_t *next, int nbc, const uint8_t *A, size_t as,
                               int64_t b0, const struct pn_act *S, int nt, float *Y, int64_t ldy,
                               __mmask16 m, int first)
{
    __m512 acc[PN_NT];
    for (int j = 0; j < nt; j++)
        acc[j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, Y + j * ldy);
    pn_tile(fmt, st, src, xs, next, nbc, A, as, b0, S, nt, acc);
    for (int j = 0; j < nt; j++) _mm512_mask_storeu_ps(Y + j * ldy, m, acc[j]);
}

/* name##_run: pn_panel_tokens for fmt and layout st, one copy per tile width (the token loops
 * fully unrolled). */
#define PN_DEFINE_RUN(name, fmt, st)                                                           \
    static void name##_run(const uint8_t *src, const float *xs, const uint8_t *next, int nbc,  \
                           const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S,    \
                           int nt, float *Y, int64_t ldy, __mmask16 m, int first)              \
    {                                                                                          \
        switch (nt) {                                                                          \
        case 8: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 8, Y, ldy, m, first); break; \
        case 7: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 7, Y, ldy, m, first); break; \
        case 6: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 6, Y, ldy, m, first); break; \
        case 5: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 5, Y, ldy, m, first); break; \
        case 4: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 4, Y, ldy, m, first); break; \
        case 3: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 3, Y, ldy, m, first); break; \
        case 2: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 2, Y, ldy, m, first); break; \
        default: pn_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, 1, Y, ldy, m, first); break;\
        }                                                                                      \
    }

#endif
