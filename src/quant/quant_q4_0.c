/* quant_q4_0.c — Q4_0: 32 weights per block, one fp16 scale, 4-bit codes offset by 8.
 *
 * The quantizer follows quantize_row_q4_0_ref: the scale is the signed value of largest
 * magnitude divided by -8, so that value maps to code 0 and the others fall in 1..15. */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

void quant_q4_0_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    struct quant_block_q4_0 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++, x += QUANT_QK4_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < QUANT_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp16_from_f32(d);
        for (int j = 0; j < QUANT_QK4_0 / 2; j++) {
            /* truncation after +8.5 is round-half-up of x/d + 8 (values are >= 0 here) */
            int q0 = (int)(x[j] * id + 8.5f);
            int q1 = (int)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_q4_0_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    const struct quant_block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++, y += QUANT_QK4_0) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QUANT_QK4_0 / 2; j++) {
            y[j] = ((x[b].qs[j] & 15) - 8) * d;
            y[j + 16] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

float quant_q4_0_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK4_0 == 0, "a row is whole blocks");
    const struct quant_block_q4_0 *w = vw;
    const struct quant_block_q8_0 *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK4_0; b++) {
        int32_t s = 0;
        for (int j = 0; j < QUANT_QK4_0 / 2; j++) {
            s += ((w[b].qs[j] & 15) - 8) * a[b].qs[j];
            s += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
        }
        sum += (float)s * (fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d));
    }
    return sum;
}
