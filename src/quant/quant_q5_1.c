/* quant_q5_1.c — Q5_1: 32 weights per block, fp16 scale d and min m, 5-bit codes q in 0..31
 * laid out as in Q5_0 (low nibbles in qs, fifth bits in the 32-bit qh): x = d*q + m. Its
 * activations are Q8_1 (Q8_0 plus s = d*sum(qs)), so the min term of a block dot is m*s.
 * Read quant.h and quant_q5_0.c first.
 *
 * The quantizer follows quantize_row_q5_1_ref: d = (max - min)/31, m = min, codes
 * trunc((x - min)/d + 0.5) (no clamp: the largest value lands on 31 or, by rounding, 31.5).
 * The Q8_1 activation quantizer follows ggml-cpu's x86 path (127/amax, round half to even, s
 * from the float d), like quant_q8_0_from_float_act. */
#include "quant/quant.h"
#include "util/check.h"

#include <float.h>
#include <math.h>

#include "util/fp16.h"

void quant_q5_1_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    struct quant_block_q5_1 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++, x += QUANT_QK5_0) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QUANT_QK5_0; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp16_from_f32(d);
        y[b].m = fp16_from_f32(min);
        uint32_t qh = 0;
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            const uint8_t q0 = (uint8_t)((x[j] - min) * id + 0.5f);
            const uint8_t q1 = (uint8_t)((x[j + 16] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
        }
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

void quant_q5_1_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    const struct quant_block_q5_1 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++, y += QUANT_QK5_0) {
        const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            const int q0 = (x[b].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = q0 * d + m;
            y[j + 16] = q1 * d + m;
        }
    }
}

float quant_q5_1_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    const struct quant_block_q5_1 *w = vw;
    const struct quant_block_q8_1 *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++) {
        uint32_t qh;
        memcpy(&qh, w[b].qh, sizeof qh);
        int32_t s = 0;
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            const int q0 = (w[b].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            const int q1 = (w[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            s += q0 * a[b].qs[j] + q1 * a[b].qs[j + 16];
        }
        sum += (fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d)) * (float)s +
               fp16_to_f32(w[b].m) * fp16_to_f32(a[b].s);
    }
    return sum;
}

void quant_q8_1_from_float_act(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    struct quant_block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++, x += QUANT_QK8_0) {
        float amax = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[b].d = fp16_from_f32(d);
        int sum = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) {
            y[b].qs[j] = (int8_t)nearbyintf(x[j] * id); /* half to even, like vroundps */
            sum += y[b].qs[j];
        }
        y[b].s = fp16_from_f32(d * (float)sum);
    }
}

void quant_q8_1_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK8_0 == 0, "a row is whole blocks");
    const struct quant_block_q8_1 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QUANT_QK8_0; j++) y[b * QUANT_QK8_0 + j] = x[b].qs[j] * d;
    }
}
