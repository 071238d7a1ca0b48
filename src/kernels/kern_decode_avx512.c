/* kern_decode_avx512.c — decode-shaped matmul (a few tokens) for Q4_0 and Q8_0 weights on
 * AVX-512 VNNI: stream each weight row once, two 32-element blocks per zmm. Compiled with the
 * AVX-512 flags; reached only through kern_avx512.c after kern_dispatch.c checked the CPU.
 *
 * Read first: kernels.h (the kern_matmul contract), src/quant/quant.h (block layouts),
 * kern_panel_avx512.c (the prefill kernels; same offset trick).
 *
 * Why: decode reads every weight byte once per token, so the goal is the DRAM ceiling; the
 * 256-bit tile kernels spend ~15 instructions per Q4_0 block (nibble unpack, a second dot for
 * the -8 offset, two scalar f16 conversions, a scalar product and a broadcast per block) and
 * top out near 12 GB/s per core. Here everything that depends only on the activations is done
 * once per call, into a small stack buffer (per token, per pair of blocks):
 *   qs[64]    both blocks' activation bytes, contiguous (one aligned zmm load)
 *   init[16]  -sum(a) of the block in each of its 8 lanes: the 8 lanes of a block's dot then
 *             sum to dot(w_u8, a) - off*sum(a) with off = 8 (eight lanes) — and for Q8_0,
 *             whose weights become w + 128, the init is -16*sum(a) per lane (16*8 = 128)
 *   da[16]    the activation scale of each block, in its 8 lanes
 * Per block pair and token the work is then one vpdpbusd (starting from init), one conversion,
 * one multiply (row scales x activation scales) and one FMA. Integer dots are exact, so only
 * the float summation order differs from the scalar reference. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"

#define DC_MAX_TOK 8
/* activation pack budget: pairs x tokens (192 bytes each); larger problems go token by token
 * and, past one token's budget, to the tile kernels (the caller's fallback) */
#define DC_MAX_SLOTS 384

struct dc_pair {
    int8_t qs[64];
    int32_t init[16];
    float da[16];
};

#define DC_INLINE static inline __attribute__((always_inline))

/* Pack nt tokens' activations (Q8_0 rows) for weights whose u8 form carries offset off. */
static void dc_pack_act(struct dc_pair *P, int npair, const uint8_t *A, size_t as, int nt,
                        int64_t nb, int off)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const int lane_mul = off / 8;
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)(A + (size_t)j * as);
        for (int p = 0; p < npair; p++) {
            struct dc_pair *d = &P[(size_t)j * npair + p];
            for (int h = 0; h < 2; h++) {
                const int64_t b = 2 * (int64_t)p + h;
                if (b >= nb) { /* odd block count: a zero phantom block */
                    memset(d->qs + 32 * h, 0, 32);
                    for (int l = 0; l < 8; l++) d->init[8 * h + l] = 0, d->da[8 * h + l] = 0;
                    continue;
                }
                const __m256i x = _mm256_loadu_si256((const __m256i *)ab[b].qs);
                _mm256_storeu_si256((__m256i *)(d->qs + 32 * h), x);
                const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(x, flip), _mm256_setzero_si256());
                const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                const int sum = (int)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
                const float da = _cvtsh_ss(ab[b].d);
                for (int l = 0; l < 8; l++) d->init[8 * h + l] = -lane_mul * sum, d->da[8 * h + l] = da;
            }
        }
    }
}

/* Row scales of blocks b, b+1 (f16 at byte offsets o0, o1 of the row), each in 8 lanes. */
DC_INLINE __m512 dc_scales(uint16_t d0, uint16_t d1)
{
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

/* Weights of blocks b and b+1 as 64 unsigned bytes in element order; `two` false: block b only
 * (the upper half is zero). */
DC_INLINE __m512i dc_q4_0_pair(const struct quant_block_q4_0 *wb, int two, __m512 *dw)
{
    const __m128i x0 = _mm_loadu_si128((const __m128i *)wb[0].qs);
    const __m128i x1 = two ? _mm_loadu_si128((const __m128i *)wb[1].qs) : _mm_setzero_si128();
    const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
    /* [lo_b, hi_b, lo_b1, hi_b1] in 16-byte units */
    const __m512i idx = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    *dw = dc_scales(wb[0].d, two ? wb[1].d : 0);
    return _mm512_permutex2var_epi64(_mm512_castsi256_si512(lo), idx, _mm512_castsi256_si512(hi));
}

DC_INLINE __m512i dc_q8_0_pair(const struct quant_block_q8_0 *wb, int two, __m512 *dw)
{
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)wb[0].qs);
    const __m256i x1 = two ? _mm256_loadu_si256((const __m256i *)wb[1].qs) : _mm256_set1_epi8((char)0x80);
    *dw = dc_scales(wb[0].d, two ? wb[1].d : 0);
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
    return _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80)); /* s8 -> u8 = w + 128 */
}

/* One row against nt tokens (nt constant after inlining). */
#define DC_ROW(fmt, blk)                                                                       \
    DC_INLINE void fmt##_dc_step(const struct blk *wb, int two, const struct dc_pair *P,       \
                                 int npair, int p, int nt, __m512 *acc)                        \
    {                                                                                          \
        __m512 dw;                                                                             \
        const __m512i q = fmt##_pair(wb + 2 * p, two, &dw);                                    \
        for (int j = 0; j < nt; j++) {                                                         \
            const struct dc_pair *d = &P[(size_t)j * npair + p];                               \
            const __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(d->init), q,              \
                                                  _mm512_load_si512(d->qs));                  \
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),                                    \
                                     _mm512_mul_ps(dw, _mm512_load_ps(d->da)), acc[j]);        \
        }                                                                                      \
    }                                                                                          \
    DC_INLINE void fmt##_dc_row(const uint8_t *w, const struct dc_pair *P, int npair,          \
                                int64_t nb, int nt, float *out)                                \
    {                                                                                          \
        const struct blk *wb = (const struct blk *)w;                                          \
        __m512 a0[DC_MAX_TOK], a1[DC_MAX_TOK];                                                 \
        for (int j = 0; j < nt; j++) a0[j] = a1[j] = _mm512_setzero_ps();                      \
        const int full = (int)(nb / 2);                                                        \
        int p = 0;                                                                             \
        for (; p + 2 <= full; p += 2) { /* two accumulator sets: FMA latency */                \
            fmt##_dc_step(wb, 1, P, npair, p, nt, a0);                                         \
            fmt##_dc_step(wb, 1, P, npair, p + 1, nt, a1);                                     \
        }                                                                                      \
        if (p < full) fmt##_dc_step(wb, 1, P, npair, p++, nt, a0);                             \
        if (p < npair) fmt##_dc_step(wb, 0, P, npair, p, nt, a1); /* odd block count */        \
        for (int j = 0; j < nt; j++) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0[j], a1[j])); \
    }

DC_ROW(dc_q4_0, quant_block_q4_0)
DC_ROW(dc_q8_0, quant_block_q8_0)

#define DC_MATMUL(fmt, off)                                                                    \
    static void fmt##_dc_rows(const void *W, size_t ws, const struct dc_pair *P, int npair,    \
                              int64_t nb, int nt, int64_t r0, int64_t r1, float *Y,            \
                              int64_t ldy)                                                     \
    {                                                                                          \
        float out[DC_MAX_TOK];                                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const uint8_t *w = (const uint8_t *)W + (size_t)r * ws;                            \
            switch (nt) {                                                                      \
            case 1: fmt##_dc_row(w, P, npair, nb, 1, out); break;                               \
            case 2: fmt##_dc_row(w, P, npair, nb, 2, out); break;                               \
            case 3: fmt##_dc_row(w, P, npair, nb, 3, out); break;                               \
            default: fmt##_dc_row(w, P, npair, nb, 4, out); break;                              \
            }                                                                                  \
            for (int j = 0; j < nt; j++) Y[j * ldy + r] = out[j];                              \
        }                                                                                      \
    }                                                                                          \
    static bool fmt##_decode(const void *W, size_t ws, const void *A, size_t as, int n_tok,    \
                             int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)         \
    {                                                                                          \
        struct dc_pair P[DC_MAX_SLOTS] __attribute__((aligned(64)));                          \
        const int64_t nb = k / 32;                                                             \
        const int64_t npair = (nb + 1) / 2;                                                    \
        if (npair > DC_MAX_SLOTS) return false;                                                \
        /* tokens in groups of up to 4 that fit the pack */                                    \
        int group = (int)(DC_MAX_SLOTS / npair);                                               \
        if (group > 4) group = 4;                                                              \
        for (int t = 0; t < n_tok; t += group) {                                               \
            const int nt = n_tok - t < group ? n_tok - t : group;                              \
            dc_pack_act(P, (int)npair, (const uint8_t *)A + (size_t)t * as, as, nt, nb, off);  \
            fmt##_dc_rows(W, ws, P, (int)npair, nb, nt, r0, r1, Y + (size_t)t * ldy, ldy);     \
        }                                                                                      \
        return true;                                                                           \
    }

DC_MATMUL(dc_q4_0, 8)
DC_MATMUL(dc_q8_0, 128)

bool kern_avx512_decode_matmul(int wtype, const void *W, size_t w_stride, const void *A,
                               size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1,
                               float *Y, int64_t ldy)
{
    switch (wtype) {
    case TERN_TYPE_Q4_0: return dc_q4_0_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
    case TERN_TYPE_Q8_0: return dc_q8_0_decode(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
    default: return false;
    }
}
