/* quant_q8.c — the 8-bit formats: Q8_0 (weights and the activations of Q4_0/Q8_0 matmuls) and
 * Q8_K (activations of K-quant matmuls only).
 *
 * Q8_0 has two quantizers on purpose. Files written by llama-quantize use the reference one
 * (d = amax/127, q = roundf(x/d): ties away from zero). Activations are quantized by ggml-cpu's
 * x86 SIMD path (q = round-half-even(x * 127/amax)), and tern must reproduce that bit for bit.
 * Q8_K follows quantize_row_q8_K_ref: the scale comes from the signed value of largest
 * magnitude, so that value maps to exactly -127. */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

void quant_q8_0_from_float_ref(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    struct quant_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++, x += QUANT_QK8_0) {
        float amax = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp16_from_f32(d);
        for (int j = 0; j < QUANT_QK8_0; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void quant_q8_0_from_float_act(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    struct quant_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++, x += QUANT_QK8_0) {
        float amax = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[b].d = fp16_from_f32(d);
        /* nearbyintf rounds half to even in the default rounding mode, like vroundps */
        for (int j = 0; j < QUANT_QK8_0; j++) y[b].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

void quant_q8_0_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    const struct quant_block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QUANT_QK8_0; j++) y[b * QUANT_QK8_0 + j] = x[b].qs[j] * d;
    }
}

float quant_q8_0_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    const struct quant_block_q8_0 *w = vw;
    const struct quant_block_q8_0 *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++) {
        int32_t s = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) s += (int32_t)w[b].qs[j] * a[b].qs[j];
        sum += (float)s * (fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d));
    }
    return sum;
}

void quant_q8_K_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    struct quant_block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < QUANT_QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QUANT_QK_K; j++) {
            const int v = quant_nearest_int(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QUANT_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)s;
        }
        y[b].d = 1 / iscale;
    }
}

void quant_q8_K_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK_K == 0, "a row is whole blocks");
    const struct quant_block_q8_K *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++)
        for (int j = 0; j < QUANT_QK_K; j++) y[b * QUANT_QK_K + j] = x[b].d * x[b].qs[j];
}
