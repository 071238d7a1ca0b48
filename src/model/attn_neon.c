/* attn_neon.c — NEON attention loops over the F16 KV cache (see attn.h, attn_neon.h). Uses
 * only ARMv8.0 Advanced SIMD (FCVTL half -> float, FMLA), so it runs on every AArch64 core;
 * products are accumulated in float, like the scalar reference. */
#include "model/attn_neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <stddef.h>


/* 8 halves -> two float32x4 */
static inline void load8_f16(const uint16_t *p, float32x4_t *lo, float32x4_t *hi)
{
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}

void attn_scores_neon(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
        for (int j = 0; j < hd; j += 8) {
            float32x4_t k0, k1;
            load8_f16(kr + j, &k0, &k1);
            acc0 = vfmaq_f32(acc0, vld1q_f32(q + j), k0);
            acc1 = vfmaq_f32(acc1, vld1q_f32(q + j + 4), k1);
        }
        s[p] = vaddvq_f32(vaddq_f32(acc0, acc1)) * scale;
    }
}

void attn_wsum_neon(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    for (int j = 0; j < hd; j += 8) {
        /* two keys per step in separate accumulators: the FMA chains overlap */
        float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
        float32x4_t b0 = vdupq_n_f32(0), b1 = vdupq_n_f32(0);
        int p = 0;
        for (; p + 1 < n_keys; p += 2) {
            float32x4_t v0, v1, u0, u1;
            load8_f16(v + (size_t)p * hd + j, &v0, &v1);
            load8_f16(v + (size_t)(p + 1) * hd + j, &u0, &u1);
            a0 = vfmaq_n_f32(a0, v0, w[p]);
            a1 = vfmaq_n_f32(a1, v1, w[p]);
            b0 = vfmaq_n_f32(b0, u0, w[p + 1]);
            b1 = vfmaq_n_f32(b1, u1, w[p + 1]);
        }
        if (p < n_keys) {
            float32x4_t v0, v1;
            load8_f16(v + (size_t)p * hd + j, &v0, &v1);
            a0 = vfmaq_n_f32(a0, v0, w[p]);
            a1 = vfmaq_n_f32(a1, v1, w[p]);
        }
        vst1q_f32(out + j, vaddq_f32(a0, b0));
        vst1q_f32(out + j + 4, vaddq_f32(a1, b1));
    }
}

#else
typedef int attn_neon_unused_on_this_target; /* ISO C wants a declaration in every file */
#endif
