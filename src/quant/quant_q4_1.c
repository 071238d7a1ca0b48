/* quant_q4_1.c — Q4_1: 32 weights per block, fp16 scale d and min m, 4-bit codes q in 0..15
 * (low nibbles are elements 0..15, high nibbles 16..31, as in Q4_0): x = d*q + m. Like Q5_1 it
 * multiplies Q8_1 activations, whose s = d_a * sum(a) carries the min term (m * s per block).
 * Read quant.h and quant_q5_1.c first: Q4_1 is Q5_1 without the fifth bits.
 *
 * The quantizer follows llama.cpp's quantize_row_q4_1_ref: d = (max - min)/15, m = min, codes
 * min(15, trunc((x - min)/d + 0.5)) (unlike Q5_1, the code is clamped). */
#include "quant/quant.h"
#include "util/check.h"

#include <float.h>

#include "util/fp16.h"

void quant_q4_1_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    struct quant_block_q4_1 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++, x += QUANT_QK4_0) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QUANT_QK4_0; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 15;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp16_from_f32(d);
        y[b].m = fp16_from_f32(min);
        for (int j = 0; j < QUANT_QK4_0 / 2; j++) {
            /* the int8 truncation of the reference, then its clamp to 15 */
            const int8_t t0 = (int8_t)((x[j] - min) * id + 0.5f);
            const int8_t t1 = (int8_t)((x[j + 16] - min) * id + 0.5f);
            const uint8_t q0 = (uint8_t)(t0 < 15 ? t0 : 15), q1 = (uint8_t)(t1 < 15 ? t1 : 15);
            y[b].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        }
    }
}

void quant_q4_1_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    const struct quant_block_q4_1 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++, y += QUANT_QK4_0) {
        const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
        for (int j = 0; j < QUANT_QK4_0 / 2; j++) {
            y[j] = (x[b].qs[j] & 15) * d + m;
            y[j + 16] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

float quant_q4_1_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    const struct quant_block_q4_1 *w = vw;
    const struct quant_block_q8_1 *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++) {
        int32_t s = 0;
        for (int j = 0; j < QUANT_QK4_0 / 2; j++)
            s += (w[b].qs[j] & 15) * a[b].qs[j] + (w[b].qs[j] >> 4) * a[b].qs[j + 16];
        sum += (fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d)) * (float)s +
               fp16_to_f32(w[b].m) * fp16_to_f32(a[b].s);
    }
    return sum;
}
