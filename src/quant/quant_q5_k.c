/* quant_q5_k.c — Q5_K: Q4_K's super-block (8 sub-blocks of 32 with 6-bit scales and mins,
 * x = d*sc*q - dmin*m) with 5-bit codes q in 0..31; the fifth bits of sub-block j are bit j of
 * the 32 qh bytes (element 32j + l <-> qh[l]). Read quant.h and quant_q4_k.c first.
 *
 * The quantizer reproduces llama.cpp's quantize_row_q5_K_ref (llama-quantize without an
 * importance matrix): the same per-sub-block least-squares fit as Q4_K with 31 levels and
 * llama.cpp's Q5_K search parameters (rmin -0.5, 15 steps of 0.1), the same 6-bit packing of
 * scales and mins, then the codes re-derived from the rounded scales. */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

/* code of element l (0..31) of sub-block j */
static inline int q5k_code(const struct quant_block_q5_K *b, int j, int l)
{
    const uint8_t nib = (b->qs[32 * (j / 2) + l] >> (4 * (j & 1))) & 0xF;
    return nib | ((b->qh[l] >> j) & 1) << 4;
}

void quant_q5_K_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    struct quant_block_q5_K *y = vy;
    uint8_t L[QUANT_QK_K];

    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        /* llama.cpp's Q5_K search: 31 levels, rmin -0.5, 15 steps of 0.1 */
        quant_kquant_fit_superblock(x, 31, -0.5f, 0.1f, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qs[32 * c + l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
                y[b].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
            }
    }
}

void quant_q5_K_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q5_K *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++) {
        const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_q4k_scale_min(j, x[b].scales, &sc, &m);
            const float dj = d * sc, mj = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = dj * q5k_code(&x[b], j, l) - mj;
        }
    }
}

float quant_q5_K_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q5_K *w = vw;
    const struct quant_block_q8_K *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_q4k_scale_min(j, w[b].scales, &sc, &m);
            const int8_t *aq = a[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 32; l++) s += q5k_code(&w[b], j, l) * aq[l];
            sumi += sc * s;
            summ += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        const float d = a[b].d * fp16_to_f32(w[b].d);
        const float dmin = a[b].d * fp16_to_f32(w[b].dmin);
        sum += d * (float)sumi - dmin * (float)summ;
    }
    return sum;
}
