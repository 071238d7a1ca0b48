/* quant_q5_0.c — Q5_0: 32 weights per block, one fp16 scale, 5-bit codes offset by 16. The low
 * 4 bits of the codes are packed like Q4_0's (byte j: element j low, element j+16 high); the
 * fifth bits sit in a 32-bit word qh, bit j for element j. Read quant.h first.
 *
 * The quantizer follows llama.cpp's quantize_row_q5_0_ref (what llama-quantize writes when no
 * importance matrix is given): the scale is the signed value of largest magnitude divided by
 * -16, so that value maps to code 0 and the others fall in 1..31 (rounded half up, clamped). */
#include "quant/quant.h"
#include "util/check.h"

#include <math.h>

#include "util/fp16.h"

static uint32_t q5_0_high_bits(const struct quant_block_q5_0 *b)
{
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh); /* little-endian, as in the file */
    return qh;
}

void quant_q5_0_from_float(const float *x, void *vy, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    struct quant_block_q5_0 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++, x += QUANT_QK5_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < QUANT_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp16_from_f32(d);
        uint32_t qh = 0;
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            /* x*id lies in [-16, 16]: truncation after +16.5 is round-half-up of x/d + 16 */
            int q0 = (int)(x[j] * id + 16.5f);
            int q1 = (int)(x[j + 16] * id + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[b].qs[j] = (uint8_t)((q0 & 15) | ((q1 & 15) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

void quant_q5_0_to_float(const void *vx, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    const struct quant_block_q5_0 *x = vx;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++, y += QUANT_QK5_0) {
        const float d = fp16_to_f32(x[b].d);
        const uint32_t qh = q5_0_high_bits(&x[b]);
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            const int q0 = (x[b].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (q0 - 16) * d;
            y[j + 16] = (q1 - 16) * d;
        }
    }
}

float quant_q5_0_dot_ref(int64_t n, const void *vw, const void *va)
{
    TERN_ASSERT(n >= 0 && n % QUANT_QK5_0 == 0, "a row is whole blocks");
    const struct quant_block_q5_0 *w = vw;
    const struct quant_block_q8_0 *a = va;
    float sum = 0;
    for (int64_t b = 0; b < n / QUANT_QK5_0; b++) {
        const uint32_t qh = q5_0_high_bits(&w[b]);
        int32_t s = 0;
        for (int j = 0; j < QUANT_QK5_0 / 2; j++) {
            const int q0 = (w[b].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            const int q1 = (w[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            s += (q0 - 16) * a[b].qs[j];
            s += (q1 - 16) * a[b].qs[j + 16];
        }
        sum += (float)s * (fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d));
    }
    return sum;
}
