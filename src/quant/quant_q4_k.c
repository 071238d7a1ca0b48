/* quant_q4_k.c — Q4_K: 256-weight super-blocks of 8 sub-blocks of 32, each sub-block with its
 * own 6-bit scale and 6-bit min: x = d*sc*q - dmin*m, q in 0..15.
 *
 * The quantizer reproduces quantize_row_q4_K_ref (what llama-quantize writes without an
 * importance matrix): per sub-block a weighted least-squares search over candidate scales
 * (fit_scale_min below), then the scales and mins are themselves quantized to 6 bits against
 * the largest of each, and the weights are re-quantized with the rounded scales. Float
 * operations are kept in llama.cpp's order so that files come out byte-identical.
 *
 * Packing of scales[12] for sub-block j: j < 4: sc = scales[j] & 63, m = scales[j+4] & 63;
 * j >= 4: low 4 bits in scales[j+4] (sc low nibble, m high nibble), high 2 bits in the top
 * bits of scales[j-4] (sc) and scales[j] (m). */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

void quant_q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    TERN_ASSERT(j >= 0 && j < 8, "a super-block has 8 sub-blocks");
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Fit x ~ scale*L + min (min <= 0, L in 0..nmax) minimising sum w*(err^2), trying nstep+1
 * candidate inverse scales (rmin + rdelta*is + nmax)/(max - min). Returns scale; *neg_min
 * receives -min. (llama.cpp: make_qkx2_quants with use_mad = false.) */
float quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                          float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    TERN_ASSERT(n >= 1 && n <= 32 && nmax >= 1 && nstep >= 0, "a sub-block of at most 32 weights (L, Laux)");
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

void quant_kquant_pack_scales(const float scales[8], const float mins[8], uint8_t packed[12],
                              uint16_t *d, uint16_t *dmin)
{
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(packed, 0, 12);
    for (int j = 0; j < 8; j++) {
        /* llama.cpp stores nearest_int into a uint8_t before clamping: keep that wrap */
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls = ls > 63 ? 63 : ls;
        lm = lm > 63 ? 63 : lm;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = fp16_from_f32(max_scale / 63.f);
    *dmin = fp16_from_f32(max_min / 63.f);
}

void quant_kquant_fit_superblock(const float *x, int nmax, float rmin, float rdelta, int nstep,
                                 uint8_t packed[12], uint16_t *d, uint16_t *dmin, uint8_t *L)
{
    uint8_t Laux[32];
    float w[32], mins[8], scales[8];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = quant_fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux, rmin, rdelta,
                                        nstep);
    }
    quant_kquant_pack_scales(scales, mins, packed, d, dmin);

    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant_q4k_scale_min(j, packed, &sc, &m);
        const float dj = fp16_to_f32(*d) * sc;
        if (dj == 0) continue; /* keeps the fit's codes, as llama.cpp does */
        const float dm = fp16_to_f32(*dmin) * m;
        for (int i = 0; i < 32; i++) {
            int l = quant_nearest_int((x[32 * j + i] + dm) / dj);
            L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        }
    }
}

void quant_q4_K_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    struct quant_block_q4_K *y = vy;
    uint8_t L[QUANT_QK_K];

    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        /* llama.cpp's Q4_K search: 15 levels, rmin -1, 20 steps of 0.1 */
        quant_kquant_fit_superblock(x, 15, -1.f, 0.1f, 20, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void quant_q4_K_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q4_K *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++) {
        const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_q4k_scale_min(2 * c, x[b].scales, &sc0, &m0);
            quant_q4k_scale_min(2 * c + 1, x[b].scales, &sc1, &m1);
            const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
            const uint8_t *q = x[b].qs + 32 * c;
            for (int l = 0; l < 32; l++) *y++ = d0 * (q[l] & 0xF) - mm0;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] >> 4) - mm1;
        }
    }
}

float quant_q4_K_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q4_K *w = vw;
    const struct quant_block_q8_K *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_q4k_scale_min(j, w[b].scales, &sc, &m);
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int shift = (j & 1) * 4;
            const int8_t *aq = a[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 32; l++) s += ((q[l] >> shift) & 0xF) * aq[l];
            sumi += sc * s;
            summ += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        const float d = a[b].d * fp16_to_f32(w[b].d);
        const float dmin = a[b].d * fp16_to_f32(w[b].dmin);
        sum += d * (float)sumi - dmin * (float)summ;
    }
    return sum;
}
