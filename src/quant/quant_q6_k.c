/* quant_q6_k.c — Q6_K: 256-weight super-blocks of 16 sub-blocks of 16, each with a signed 8-bit
 * scale: x = d * scales[s] * (q - 32), q in 0..63.
 *
 * Bit layout, per 128-element half h (ql += 64*h, qh += 32*h), for l in 0..31:
 *   element l      : low nibble of ql[l],    bits 0-1 of qh[l]
 *   element l + 32 : low nibble of ql[l+32], bits 2-3 of qh[l]
 *   element l + 64 : high nibble of ql[l],   bits 4-5 of qh[l]
 *   element l + 96 : high nibble of ql[l+32],bits 6-7 of qh[l]
 * The quantizer reproduces quantize_row_q6_K_ref (llama-quantize without importance matrix):
 * a weighted search for each sub-block's scale (fit_scale_sym), then the 16 scales quantized
 * to int8 against the one of largest magnitude. */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

/* Fit x ~ scale * (L - nmax), L in 0..2*nmax-1, weights x^2, trying inverse scales around
 * -nmax/max. Returns scale (llama.cpp: make_qx_quants with rmse_type 1, no importance). */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = quant_nearest_int(iscale * x[i]);
                l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void quant_q6_K_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    struct quant_block_q6_K *y = vy;
    int8_t L[QUANT_QK_K];
    float scales[16];
    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int s = 0; s < 16; s++) {
            scales[s] = fit_scale_sym(16, 32, x + 16 * s, L + 16 * s);
            if (fabsf(scales[s]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }
        if (max_abs_scale < 1e-15f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[b].d = fp16_from_f32(1 / iscale);
        for (int s = 0; s < 16; s++) {
            const int v = quant_nearest_int(iscale * scales[s]);
            y[b].scales[s] = (int8_t)(v < 127 ? v : 127);
        }
        for (int s = 0; s < 16; s++) {
            const float d = fp16_to_f32(y[b].d) * y[b].scales[s];
            if (d == 0) continue;
            for (int i = 0; i < 16; i++) {
                int l = quant_nearest_int(x[16 * s + i] / d);
                l = l < -32 ? -32 : l > 31 ? 31 : l;
                L[16 * s + i] = (int8_t)(l + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = y[b].ql + 64 * h, *qh = y[b].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* The 256 codes of a block as signed values q - 32, in element order. */
static void q6k_unpack(const struct quant_block_q6_K *x, int8_t *q)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *qq = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            qq[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            qq[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            qq[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            qq[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

void quant_q6_K_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q6_K *x = vx;
    int8_t q[QUANT_QK_K];
    for (int64_t b = 0; b < n / QUANT_QK_K; b++, y += QUANT_QK_K) {
        const float d = fp16_to_f32(x[b].d);
        q6k_unpack(&x[b], q);
        for (int i = 0; i < QUANT_QK_K; i++) y[i] = d * x[b].scales[i / 16] * q[i];
    }
}

float quant_q6_K_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q6_K *w = vw;
    const struct quant_block_q8_K *a = va;
    int8_t q[QUANT_QK_K];
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++) {
        q6k_unpack(&w[b], q);
        int32_t sumi = 0;
        for (int s = 0; s < 16; s++) {
            int32_t t = 0;
            for (int i = 0; i < 16; i++) t += q[16 * s + i] * a[b].qs[16 * s + i];
            sumi += w[b].scales[s] * t;
        }
        sum += (fp16_to_f32(w[b].d) * a[b].d) * (float)sumi;
    }
    return sum;
}
