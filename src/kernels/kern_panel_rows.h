/* kern_panel_rows.h — the row-by-row packers of the on-the-fly panels: one weight row's blocks
 * into one row of a struct pn_panel (kern_panel_layout.h), for every panel format. AVX2 code
 * (256-bit integer intrinsics and F16C), so both the AVX-512 panels (kern_panel_avx512.c, which
 * adds whole-panel packers of its own) and the 256-bit ones (kern_panel_avx2.h) use them: the
 * packed bytes and scales are the same on both paths, so are the results.
 *
 * Read first: kern_panel_avx512.c (what a panel is and why the codes are unsigned). */
#ifndef TERN_KERN_PANEL_ROWS_H
#define TERN_KERN_PANEL_ROWS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_panel_layout.h"
#include "quant/quant.h"

/* byte e of the result is 0xFF where bit e of x is set, else 0 */
PN_INLINE __m256i pn_bits32(uint32_t x)
{
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x),
                                              _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                               2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

/* ---------------------------------------------------------------- packing
 * Each packer fills the panel for rows [r, r + nrow) (nrow <= 16), blocks [b0, b0 + nbc) of
 * its format, from one row's bytes unpacked to 4-byte groups in element order. */

PN_INLINE void pn_put_groups(struct pn_panel *P, int G0, int ng, int i, const uint8_t *u)
{
    for (int g = 0; g < ng; g++) memcpy(&P->q[G0 + g][4 * i], u + 4 * g, 4);
}

static inline void pn_zero_row(struct pn_panel *P, int i, int ng, int ns)
{
    for (int g = 0; g < ng; g++) memset(&P->q[g][4 * i], 0, 4);
    for (int s = 0; s < ns; s++) P->d[s][i] = P->m[s][i] = 0;
}

static inline void pn_pack_q8_0(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    const struct quant_block_q8_0 *wb = (const struct quant_block_q8_0 *)w + b0;
    for (int b = 0; b < nbc; b++) {
        P->d[b][i] = _cvtsh_ss(wb[b].d);
        uint8_t u[32];
        _mm256_storeu_si256((__m256i *)u, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wb[b].qs),
                                                          _mm256_set1_epi8((char)0x80))); /* w + 128 */
        pn_put_groups(P, 8 * b, 8, i, u);
    }
}

static inline void pn_pack_q4_0(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    const struct quant_block_q4_0 *wb = (const struct quant_block_q4_0 *)w + b0;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int b = 0; b < nbc; b++) {
        P->d[b][i] = _cvtsh_ss(wb[b].d);
        const __m128i x = _mm_loadu_si128((const __m128i *)wb[b].qs);
        uint8_t u[32]; /* elements 0..15 are the low nibbles, 16..31 the high ones */
        _mm_storeu_si128((__m128i *)u, _mm_and_si128(x, m4));
        _mm_storeu_si128((__m128i *)(u + 16), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        pn_put_groups(P, 8 * b, 8, i, u);
    }
}

/* Q5_0 (q51 = 0) and Q5_1 (q51 = 1): the 5-bit codes 0..31 in element order; Q5_1's min goes to
 * P->m. q51 is a constant after inlining, so each format gets its own loop. */
PN_INLINE void pn_pack_q5(int q51, struct pn_panel *P, const uint8_t *w, int i, int64_t b0,
                          int nbc)
{
    const size_t bbytes = q51 ? sizeof(struct quant_block_q5_1) : sizeof(struct quant_block_q5_0);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bbytes;
        const struct quant_block_q5_0 *w0 = (const void *)blk; /* the one of q51 is read */
        const struct quant_block_q5_1 *w1 = (const void *)blk;
        P->d[b][i] = _cvtsh_ss(q51 ? w1->d : w0->d);
        if (q51) P->m[b][i] = -_cvtsh_ss(w1->m); /* the tile subtracts m * am: this adds m * s */
        const __m128i x = _mm_loadu_si128((const __m128i *)(q51 ? w1->qs : w0->qs));
        uint32_t qh;
        memcpy(&qh, q51 ? w1->qh : w0->qh, sizeof qh);
        const __m256i lo = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4), _mm_and_si128(x, m4));
        const __m256i hi = _mm256_and_si256(pn_bits32(qh), _mm256_set1_epi8(0x10)); /* bit e -> 16 */
        uint8_t u[32];
        _mm256_storeu_si256((__m256i *)u, _mm256_or_si256(lo, hi));
        pn_put_groups(P, 8 * b, 8, i, u);
    }
}
static inline void pn_pack_q5_0(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    pn_pack_q5(0, P, w, i, b0, nbc);
}
static inline void pn_pack_q5_1(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    pn_pack_q5(1, P, w, i, b0, nbc);
}

/* Q4_1: Q5_1's panel (codes, scale, min; the same tile) with codes 0..15, the nibbles as in
 * Q4_0. */
static inline void pn_pack_q4_1(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    const struct quant_block_q4_1 *wb = (const struct quant_block_q4_1 *)w + b0;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int b = 0; b < nbc; b++) {
        P->d[b][i] = _cvtsh_ss(wb[b].d);
        P->m[b][i] = -_cvtsh_ss(wb[b].m); /* the tile subtracts m * am: this adds m * s */
        const __m128i x = _mm_loadu_si128((const __m128i *)wb[b].qs);
        uint8_t u[32];
        _mm_storeu_si128((__m128i *)u, _mm_and_si128(x, m4));
        _mm_storeu_si128((__m128i *)(u + 16), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        pn_put_groups(P, 8 * b, 8, i, u);
    }
}

/* Q4_K (q5 = 0) and Q5_K (q5 = 1): chunk c's low nibbles are elements 64c.., its high ones
 * 64c+32..; Q5_K adds bit j of qh[l] as 16 for sub-block j. q5 is a constant after inlining. */
PN_INLINE void pn_pack_kquant(int q5, struct pn_panel *P, const uint8_t *w, int i, int64_t b0,
                              int nbc)
{
    const size_t bbytes = q5 ? sizeof(struct quant_block_q5_K) : sizeof(struct quant_block_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bbytes;
        const struct quant_block_q4_K *w4 = (const void *)blk; /* the one of q5 is read */
        const struct quant_block_q5_K *w5 = (const void *)blk;
        const float d = _cvtsh_ss(q5 ? w5->d : w4->d), dmin = _cvtsh_ss(q5 ? w5->dmin : w4->dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_q4k_scale_min(j, q5 ? w5->scales : w4->scales, &sc, &m);
            P->d[8 * b + j][i] = d * (float)sc;
            P->m[8 * b + j][i] = dmin * (float)m;
        }
        const uint8_t *qs = q5 ? w5->qs : w4->qs;
        const __m256i qh =
            q5 ? _mm256_loadu_si256((const __m256i *)w5->qh) : _mm256_setzero_si256();
        uint8_t u[QUANT_QK_K];
        for (int c = 0; c < 4; c++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(x, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
            if (q5) {
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(h0, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(h1, 4));
            }
            _mm256_storeu_si256((__m256i *)(u + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(u + 64 * c + 32), hi);
        }
        pn_put_groups(P, 64 * b, 64, i, u);
    }
}
static inline void pn_pack_q4_K(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    pn_pack_kquant(0, P, w, i, b0, nbc);
}
static inline void pn_pack_q5_K(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    pn_pack_kquant(1, P, w, i, b0, nbc);
}

static inline void pn_pack_q6_K(struct pn_panel *P, const uint8_t *w, int i, int64_t b0, int nbc)
{
    const struct quant_block_q6_K *wb = (const struct quant_block_q6_K *)w + b0;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    for (int b = 0; b < nbc; b++) {
        const float d = _cvtsh_ss(wb[b].d);
        for (int s = 0; s < 16; s++) P->d[16 * b + s][i] = d * (float)wb[b].scales[s];
        uint8_t u[QUANT_QK_K]; /* the 6-bit codes 0..63 in element order */
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * h + 32));
            const __m256i hh = _mm256_loadu_si256((const __m256i *)(wb[b].qh + 32 * h));
            uint8_t *o = u + 128 * h;
            _mm256_storeu_si256((__m256i *)o, _mm256_or_si256(_mm256_and_si256(l0, m4),
                                    _mm256_slli_epi16(_mm256_and_si256(hh, m3), 4)));
            _mm256_storeu_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(l1, m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m3), 4)));
            _mm256_storeu_si256((__m256i *)(o + 64), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m3), 4)));
            _mm256_storeu_si256((__m256i *)(o + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m3), 4)));
        }
        pn_put_groups(P, 64 * b, 64, i, u);
    }
}

typedef void (*pn_pack_fn)(struct pn_panel *, const uint8_t *, int, int64_t, int);

/* Rows [r, r + nrow) of W (row stride ws) into panel P row by row, rows past nrow zero (scale 0:
 * they add nothing and their outputs are masked). */
static inline void pn_pack_rows(pn_pack_fn pack, int fmt, struct pn_panel *P, const uint8_t *W, size_t ws,
                                int64_t r, int nrow, int64_t b0, int nbc)
{
    const int ng = nbc * PN_BLK(fmt) / 4;
    for (int i = 0; i < PN_ROWS; i++) {
        if (i < nrow)
            pack(P, W + (size_t)(r + i) * ws, i, b0, nbc);
        else
            pn_zero_row(P, i, ng, ng / PN_GS(fmt));
    }
}

#endif
