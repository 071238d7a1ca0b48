/* attn_neon.c — NEON attention loops over the F16 KV cache (see attn.h, attn_neon.h). Uses
 * only ARMv8.0 Advanced SIMD (FCVTL half -> float, FMLA), so it runs on every AArch64 core;
 * products are accumulated in float, like the scalar reference.
 *
 * The per-query kernels define the numerics: a dot product is a 4-lane vector reduced by
 * vaddvq_f32 ((l0 + l1) + (l2 + l3)). The block kernels convert a tile of 4 keys to float once
 * per block and reduce 4 (query, key) vectors with two pairwise adds (vpaddq_f32), which pair
 * the lanes the same way, so every score has the per-query kernel's bits. */
#include "kernels/attn.h"
#include "util/check.h"
#include "kernels/attn_neon.h"
#include "kernels/vexp.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
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
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
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
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
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

static float max_neon(const float *s, int n)
{
    /* max in any order is exact; FMAXNM skips a NaN operand like the scalar loop does */
    float32x4_t vmx = vdupq_n_f32(-INFINITY);
    int p = 0;
    for (; p + 4 <= n; p += 4) vmx = vmaxnmq_f32(vld1q_f32(s + p), vmx);
    float mx = vmaxnmvq_f32(vmx);
    for (; p < n; p++) mx = s[p] > mx ? s[p] : mx;
    return mx;
}

static void normalize_neon(float *s, int n, float inv)
{
    int p = 0;
    for (; p + 4 <= n; p += 4) /* FCVTN rounds to nearest even (the default FPCR mode) */
        vst1q_f32(s + p, vcvt_f32_f16(vcvt_f16_f32(vmulq_n_f32(vld1q_f32(s + p), inv))));
    for (; p < n; p++) {
        const float16x4_t h = vcvt_f16_f32(vdupq_n_f32(s[p] * inv));
        s[p] = vgetq_lane_f32(vcvt_f32_f16(h), 0);
    }
}

void attn_softmax_neon(float *s, int n)
{
    TERN_ASSERT(n >= 1, "a softmax over at least one key");
    const double sum = vexp_sum_scalar(s, n, max_neon(s, n));
    normalize_neon(s, n, (float)(1.0 / sum));
}

void attn_bsoftmax_neon(float *s, size_t ss, const int *off, const int *n, int nq)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX, "a block holds at most ATTN_BLOCK_MAX queries");
    attn_bsoftmax_with(s, ss, off, n, nq, max_neon, vexp_sub_scalar, normalize_neon);
}

void attn_bscores_neon(const float *q, int nq, const uint16_t *k, int n_keys, int hd, float scale,
                       float *s, size_t ss, float *tile)
{
    TERN_ASSERT(nq >= 1 && n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
    TERN_ASSERT(ss >= ((size_t)n_keys + 15) / 16 * 16, "score rows have room for n_keys rounded up to 16");
    for (int p0 = 0; p0 < n_keys; p0 += 4) {
        const int nt = n_keys - p0 < 4 ? n_keys - p0 : 4;
        for (int r = 0; r < 4; r++) { /* rows past the last key are zero: finite, unused */
            float *tr = tile + (size_t)r * hd;
            if (r >= nt) {
                for (int j = 0; j < hd; j += 4) vst1q_f32(tr + j, vdupq_n_f32(0));
                continue;
            }
            const uint16_t *kr = k + (size_t)(p0 + r) * hd;
            for (int j = 0; j < hd; j += 8) {
                float32x4_t k0, k1;
                load8_f16(kr + j, &k0, &k1);
                vst1q_f32(tr + j, k0);
                vst1q_f32(tr + j + 4, k1);
            }
        }
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * hd;
            float32x4_t d[4];
            for (int r = 0; r < 4; r++) {
                const float *tr = tile + (size_t)r * hd;
                float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
                for (int j = 0; j < hd; j += 8) {
                    acc0 = vfmaq_f32(acc0, vld1q_f32(qi + j), vld1q_f32(tr + j));
                    acc1 = vfmaq_f32(acc1, vld1q_f32(qi + j + 4), vld1q_f32(tr + j + 4));
                }
                d[r] = vaddq_f32(acc0, acc1);
            }
            const float32x4_t r4 = vpaddq_f32(vpaddq_f32(d[0], d[1]), vpaddq_f32(d[2], d[3]));
            vst1q_f32(s + i * ss + p0, vmulq_n_f32(r4, scale));
        }
    }
}

/* ng queries (compile-time once inlined) against V columns j..j+7: one conversion of each V
 * row serves the group; the common even prefix of keys runs together, then each query finishes
 * its own tail, with the even/odd accumulators of the per-query loop. */
static inline __attribute__((always_inline)) void wsum_group(const float *w, size_t ws,
                                                             const int *nk, const int ng,
                                                             const uint16_t *v, int hd, int j,
                                                             float *const *out)
{
    float32x4_t a0[6], a1[6], b0[6], b1[6];
    int e = nk[0];
    for (int i = 1; i < ng; i++) e = nk[i] < e ? nk[i] : e;
    e &= ~1;
    for (int i = 0; i < ng; i++) a0[i] = a1[i] = b0[i] = b1[i] = vdupq_n_f32(0);
    for (int p = 0; p < e; p += 2) {
        float32x4_t v0, v1, u0, u1;
        load8_f16(v + (size_t)p * hd + j, &v0, &v1);
        load8_f16(v + (size_t)(p + 1) * hd + j, &u0, &u1);
        for (int i = 0; i < ng; i++) {
            const float wp = w[i * ws + p], wq = w[i * ws + p + 1];
            a0[i] = vfmaq_n_f32(a0[i], v0, wp);
            a1[i] = vfmaq_n_f32(a1[i], v1, wp);
            b0[i] = vfmaq_n_f32(b0[i], u0, wq);
            b1[i] = vfmaq_n_f32(b1[i], u1, wq);
        }
    }
    for (int i = 0; i < ng; i++) {
        const float *wi = w + i * ws;
        int p = e;
        for (; p + 1 < nk[i]; p += 2) {
            float32x4_t v0, v1, u0, u1;
            load8_f16(v + (size_t)p * hd + j, &v0, &v1);
            load8_f16(v + (size_t)(p + 1) * hd + j, &u0, &u1);
            a0[i] = vfmaq_n_f32(a0[i], v0, wi[p]);
            a1[i] = vfmaq_n_f32(a1[i], v1, wi[p]);
            b0[i] = vfmaq_n_f32(b0[i], u0, wi[p + 1]);
            b1[i] = vfmaq_n_f32(b1[i], u1, wi[p + 1]);
        }
        if (p < nk[i]) {
            float32x4_t v0, v1;
            load8_f16(v + (size_t)p * hd + j, &v0, &v1);
            a0[i] = vfmaq_n_f32(a0[i], v0, wi[p]);
            a1[i] = vfmaq_n_f32(a1[i], v1, wi[p]);
        }
        vst1q_f32(out[i] + j, vaddq_f32(a0[i], b0[i]));
        vst1q_f32(out[i] + j + 4, vaddq_f32(a1[i], b1[i]));
    }
}

void attn_bwsum_neon(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                     float *const *out)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
    for (int j = 0; j < hd; j += 8)
        for (int i0 = 0; i0 < nq; i0 += 6) {
            const float *wi = w + i0 * ws;
            const int *ni = nk + i0;
            float *const *oi = out + i0;
            switch (nq - i0 < 6 ? nq - i0 : 6) {
            case 1: wsum_group(wi, ws, ni, 1, v, hd, j, oi); break;
            case 2: wsum_group(wi, ws, ni, 2, v, hd, j, oi); break;
            case 3: wsum_group(wi, ws, ni, 3, v, hd, j, oi); break;
            case 4: wsum_group(wi, ws, ni, 4, v, hd, j, oi); break;
            case 5: wsum_group(wi, ws, ni, 5, v, hd, j, oi); break;
            default: wsum_group(wi, ws, ni, 6, v, hd, j, oi); break;
            }
        }
}

#else
typedef int attn_neon_unused_on_this_target; /* ISO C wants a declaration in every file */
#endif
