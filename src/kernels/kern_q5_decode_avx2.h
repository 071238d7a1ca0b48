/* kern_q5_decode_avx2.h — Q5_0 / Q5_1 / Q4_1 decode (a few tokens) on the avx2 path, streaming each
 * weight row once. Compiled twice: kern_q5_avxvnni.c (Q5D_VNNI 1: the u8 x s8 dot is one
 * VEX-encoded vpdpbusd) and kern_q5_avx2.c (Q5D_VNNI 0: vpmaddubsw + vpmaddwd); kern_q5_avx2.c's
 * route picks one at run time.
 *
 * Read first: kern_q5_avx512.c's decode kernel, which this one follows with one block per ymm
 * where that one takes two per zmm. Everything that depends only on the activations is done once
 * per call: per token and block a 96-byte record with its 32 activation bytes, the start value of
 * the integer dot in each of the 8 lanes (-2 * sum(a): the block's 8 lanes then sum to
 * dot(code, a) - 16 * sum(a), Q5_0's offset removed exactly; Q5_1: 0) and the activation scale
 * per lane. Per block and token that leaves one dot (VNNI) or two instructions and an add, one
 * conversion, one multiply and one FMA; the weights cost a nibble split and the fifth bits spread
 * into 16s with a byte shuffle and a compare, once for all the call's tokens.
 *
 * Why: the 4 x 2 tiles unpack every block's codes per tile of 4 rows x 2 tokens and reduce per
 * (row, token) pair, 14 GB/s of weights at one token on this Zen 5 where Q8_0 reads 30-36;
 * Q5_0 is most of a Q4_K_M file of the 0.5B-1.5B shapes (rows of 896 or 1536 cannot hold Q4_K). */
#ifndef TERN_KERN_Q5_DECODE_AVX2_H
#define TERN_KERN_Q5_DECODE_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_q5_layout.h"
#include "tern.h"
#include "util/check.h"

#ifndef Q5D_VNNI
#error "define Q5D_VNNI (0 or 1) before including kern_q5_decode_avx2.h"
#endif

#define Q5D_MAX_TOK 4     /* tokens per pass over the rows */
#define Q5D_MAX_SLOTS 768 /* activation records (blocks x tokens) on the stack: 72 KB (+24 KB) */
#define Q5D_INLINE static inline __attribute__((always_inline))

struct q5d_rec {
    int8_t qs[32];    /* the token's activation bytes of the block */
    int32_t init[8];  /* the dot's start per lane: -2 * sum(a) (Q5_0), 0 (Q5_1) */
    float da[8];      /* the block's activation scale in every lane */
};

/* Records for nt tokens of nb blocks; SA: Q5_1's and Q4_1's s / 8 per lane (the min term). fm:
 * the format (kern_q5_layout.h). */
static void q5d_pack_act(struct q5d_rec *R, float (*SA)[8], int64_t nb, const uint8_t *A, size_t as,
                         int nt, int fm)
{
    const struct q5_fmt *f = q5_fmt_get(fm);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int j = 0; j < nt; j++) {
        const uint8_t *row = A + (size_t)j * as;
        for (int64_t b = 0; b < nb; b++) {
            struct q5d_rec *d = &R[(size_t)j * nb + b];
            const uint8_t *ab = row + (size_t)b * f->abytes;
            const __m256i x = _mm256_loadu_si256((const __m256i *)(ab + f->aqs_off));
            int32_t init = 0;
            if (fm == Q5F_Q5_0) {
                /* sum of the signed bytes: sad of the bytes + 128, minus 32 * 128 */
                const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(x, flip), _mm256_setzero_si256());
                const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                init = -2 * ((int32_t)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128);
            } else {
                const float sa = 0.125f * _cvtsh_ss(q5_u16(ab + 2));
                for (int l = 0; l < 8; l++) SA[(size_t)j * nb + b][l] = sa;
            }
            _mm256_storeu_si256((__m256i *)d->qs, x);
            const float da = _cvtsh_ss(q5_u16(ab));
            for (int l = 0; l < 8; l++) d->init[l] = init, d->da[l] = da;
        }
    }
}

/* The block's 32 codes (0..31; Q4_1 0..15) in element order, its scale and (Q5_1, Q4_1) min in
 * every lane. */
Q5D_INLINE __m256i q5d_codes(const uint8_t *w, int fm, __m256 *dw, __m256 *mw)
{
    const struct q5_fmt *f = q5_fmt_get(fm);
    /* the 16 nibble bytes in both halves (a load, no ALU work), shifted by 0 / 4 per half:
     * low nibbles are elements 0-15, high ones 16-31 */
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + f->qs_off)));
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                        _mm256_set1_epi8(0x0F));
    *dw = _mm256_cvtph_ps(_mm_set1_epi16((short)q5_u16(w)));
    if (fm != Q5F_Q5_0) *mw = _mm256_cvtph_ps(_mm_set1_epi16((short)q5_u16(w + f->m_off)));
    if (fm == Q5F_Q4_1) return lo;
    uint32_t qh;
    memcpy(&qh, w + f->qh_off, sizeof qh);
    /* byte e takes byte e/8 of qh, keeps bit e%8, and becomes 0x10 where it was set */
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                              0x0303030303030303ll);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(lo, hi);
}

/* init + the 8 lanes' 4-byte dots of codes q (0..31) with the activation bytes a */
Q5D_INLINE __m256i q5d_dot(__m256i init, __m256i q, __m256i a)
{
#if Q5D_VNNI
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(init) : "x"(q), "x"(a));
    return init;
#else
    /* pairs are at most 2 x 31 x 127 = 7874: int16 holds them */
    return _mm256_add_epi32(init, _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1)));
#endif
}

Q5D_INLINE void q5d_step(const uint8_t *w, int fm, const struct q5d_rec *R, const float (*SA)[8],
                         int64_t nb, int64_t b, int nt, __m256 *acc)
{
    __m256 dw, mw = _mm256_setzero_ps();
    const __m256i q = q5d_codes(w + (size_t)b * q5_fmt_get(fm)->bbytes, fm, &dw, &mw);
    for (int j = 0; j < nt; j++) {
        const struct q5d_rec *d = &R[(size_t)j * nb + b];
        const __m256i s = q5d_dot(_mm256_load_si256((const __m256i *)d->init), q, _mm256_load_si256((const __m256i *)d->qs));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_load_ps(d->da)), acc[j]);
        if (fm != Q5F_Q5_0) acc[j] = _mm256_fmadd_ps(mw, _mm256_load_ps(SA[(size_t)j * nb + b]), acc[j]);
    }
}

Q5D_INLINE float q5d_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One row against nt tokens (nt, fm constants after inlining). */
Q5D_INLINE void q5d_row(const uint8_t *w, int fm, const struct q5d_rec *R, const float (*SA)[8], int64_t nb,
                        int nt, float *out)
{
    __m256 a0[Q5D_MAX_TOK], a1[Q5D_MAX_TOK]; /* two accumulator sets: FMA latency */
    for (int j = 0; j < nt; j++) a0[j] = a1[j] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        q5d_step(w, fm, R, SA, nb, b, nt, a0);
        q5d_step(w, fm, R, SA, nb, b + 1, nt, a1);
    }
    if (b < nb) q5d_step(w, fm, R, SA, nb, b, nt, a0);
    for (int j = 0; j < nt; j++) out[j] = q5d_hsum(_mm256_add_ps(a0[j], a1[j]));
}

#define Q5D_ROWS(name, fm)                                                                      \
    static void name(const void *W, size_t ws, const struct q5d_rec *R, const float (*SA)[8],    \
                     int64_t nb, int nt, int64_t r0, int64_t r1, float *Y, int64_t ldy)          \
    {                                                                                            \
        float out[Q5D_MAX_TOK];                                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                      \
            const uint8_t *w = (const uint8_t *)W + (size_t)r * ws;                              \
            switch (nt) {                                                                        \
            case 1: q5d_row(w, fm, R, SA, nb, 1, out); break;                                   \
            case 2: q5d_row(w, fm, R, SA, nb, 2, out); break;                                   \
            case 3: q5d_row(w, fm, R, SA, nb, 3, out); break;                                   \
            default: q5d_row(w, fm, R, SA, nb, 4, out); break;                                  \
            }                                                                                    \
            for (int j = 0; j < nt; j++) Y[j * ldy + r] = out[j];                                \
        }                                                                                        \
    }
Q5D_ROWS(q5d_rows_q5_0, Q5F_Q5_0)
Q5D_ROWS(q5d_rows_q5_1, Q5F_Q5_1)
Q5D_ROWS(q5d_rows_q4_1, Q5F_Q4_1)

/* The kern_matmul contract for wtype Q5_0 / Q5_1 / Q4_1; false (nothing written) when one token's
 * records do not fit the stack buffer (k > 24576). */
static bool q5d_decode(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                       int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct q5d_rec R[Q5D_MAX_SLOTS] __attribute__((aligned(32)));
    float SA[Q5D_MAX_SLOTS][8] __attribute__((aligned(32))); /* the mins' formats (untouched for Q5_0) */
    const int fm = q5_fmt_of(wtype);
    const int64_t nb = k / 32;
    TERN_ASSERT(k % 32 == 0 && n_tok >= 1, "Q5_0 / Q5_1 / Q4_1 rows are whole 32-element blocks");
    if (nb > Q5D_MAX_SLOTS || nb == 0) return false;
    int group = (int)(Q5D_MAX_SLOTS / nb);
    if (group > Q5D_MAX_TOK) group = Q5D_MAX_TOK;
    for (int t = 0; t < n_tok; t += group) {
        const int nt = n_tok - t < group ? n_tok - t : group;
        TERN_ASSERT(nt >= 1 && nt * nb <= Q5D_MAX_SLOTS, "a group's records fit R and SA");
        q5d_pack_act(R, SA, nb, (const uint8_t *)A + (size_t)t * as, as, nt, fm);
        if (fm == Q5F_Q5_1)
            q5d_rows_q5_1(W, ws, R, (const float (*)[8])SA, nb, nt, r0, r1, Y + (size_t)t * ldy, ldy);
        else if (fm == Q5F_Q4_1)
            q5d_rows_q4_1(W, ws, R, (const float (*)[8])SA, nb, nt, r0, r1, Y + (size_t)t * ldy, ldy);
        else
            q5d_rows_q5_0(W, ws, R, NULL, nb, nt, r0, r1, Y + (size_t)t * ldy, ldy);
    }
    return true;
}

#endif
