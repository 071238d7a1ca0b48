/* kern_neon_impl.h — the NEON integer kernels (Q4_0, Q5_0, Q8_0 x Q8_0; Q5_1, Q4_1 x Q8_1;
 * Q4/5/6_K x Q8_K) written
 * once and compiled twice: by kern_neon.c with KERN_DOTPROD 1 (ARMv8.2 SDOT: 16 int8 products
 * summed into 4 int32 lanes in one instruction) and by kern_neon_base.c with KERN_DOTPROD 0
 * (any ARMv8.0 core: widening multiply to int16, then pairwise add into int32). Also
 * KN_DEFINE_MATMUL (kern_tile.h's driver at this path's tile size), which kern_neon_base.c
 * reuses for the float formats. Include only from those files.
 *
 * Read first: src/quant/quant.h (block layouts), kernels.h (the kern_matmul contract), and
 * kern_simd_impl.h: the x86 kernels have the same shape, a tile of KN_MR weight rows x KN_MT
 * tokens whose activation blocks are loaded once per block and whose weight blocks are
 * unpacked once, then every (row, token) pair does its integer dot and one FMA into its own
 * float accumulator. With fewer than KN_MT tokens (decode) rows are taken one at a time so
 * the weights stream from memory sequentially.
 *
 * Unlike x86 (no signed x signed byte dot), NEON multiplies signed bytes directly, so weight
 * codes are recentred in int8 (q - 8, q - 16, q - 32) and no activation-sum correction is needed
 * except for Q4_K's mins. Integer block sums are exact, so results differ from the scalar
 * reference only by float summation order. */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_kquant.h"
#include "kernels/kern_tile.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#define KN_INLINE static inline __attribute__((always_inline))
#define KN_MR 4
#define KN_MT 2

KN_INLINE float kn_h2f(uint16_t h)
{
    __fp16 f; /* storage-only half: the conversion is one fcvt on every AArch64 core */
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* the float vector of kern_tile.h's tile bodies */
#define KERN_VF float32x4_t
#define KERN_VF_LANES 4
#define KERN_VF_ZERO() vdupq_n_f32(0)
#define KERN_VF_ADD(a, b) vaddq_f32(a, b)
#define KERN_VF_FMA(acc, w, a) vfmaq_f32(acc, w, a)
#define KERN_VF_HSUM(v) vaddvq_f32(v)

/* acc + the dot products of a and b, 4 consecutive bytes per lane (dotprod) or another
 * grouping (fallback): only the sum over the lanes is meaningful. */
KN_INLINE int32x4_t kn_dot(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#if KERN_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    /* |a*b| <= 128*128 fits int16; vpadalq adds neighbouring pairs into the int32 lanes */
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* ------------------------------------------------------------------ tile driver
 * KN_DEFINE_MATMUL(fmt): fmt##_matmul from fmt##_tile, by the driver every ISA shares
 * (kern_tile.h) with this path's tile size. */
#define KN_DEFINE_MATMUL(fmt) KERN_TILE_MATMUL(fmt, KN_MR, KN_MT)

/* ------------------------------------------------------------------ Q4_0 / Q5_0 / Q8_0 x Q8_0
 * KN_BLOCK32_TILE(fmt): the block step from fmt##_load (one weight block, recentred), in
 * kern_tile.h's block tile. */

/* The 32 weights of block b of row i as two int8x16 (elements 0-15, 16-31), recentred. */
KN_INLINE void q4_0_load(const uint8_t *w, int64_t b, int8x16_t *lo, int8x16_t *hi, float *d)
{
    const struct quant_block_q4_0 *wb = (const struct quant_block_q4_0 *)w + b;
    const uint8x16_t x = vld1q_u8(wb->qs);
    const int8x16_t eight = vdupq_n_s8(8);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0F))), eight);
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(x, 4)), eight);
    *d = kn_h2f(wb->d);
}

/* Q5_0 / Q5_1 codes 0..31: the fifth bit of element e is bit e of qh; byte e of a vector takes
 * byte e/8 of qh and tests its bit e%8 (vtst: all ones where set), which becomes 0x10. */
KN_INLINE void kn_q5_codes(const uint8_t *qs, const uint8_t *qhp, uint8x16_t *q0, uint8x16_t *q1)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t qh;
    memcpy(&qh, qhp, sizeof qh);
    const uint8x8_t hb = vcreate_u8((uint64_t)qh); /* lane i = byte i of qh */
    const uint8x16_t sel0 = vcombine_u8(vdup_lane_u8(hb, 0), vdup_lane_u8(hb, 1));
    const uint8x16_t sel1 = vcombine_u8(vdup_lane_u8(hb, 2), vdup_lane_u8(hb, 3));
    const uint8x16_t bits = vld1q_u8(bit), b4 = vdupq_n_u8(0x10);
    const uint8x16_t x = vld1q_u8(qs);
    *q0 = vorrq_u8(vandq_u8(x, vdupq_n_u8(0x0F)), vandq_u8(vtstq_u8(sel0, bits), b4));
    *q1 = vorrq_u8(vshrq_n_u8(x, 4), vandq_u8(vtstq_u8(sel1, bits), b4));
}

KN_INLINE void q5_0_load(const uint8_t *w, int64_t b, int8x16_t *lo, int8x16_t *hi, float *d)
{
    const struct quant_block_q5_0 *wb = (const struct quant_block_q5_0 *)w + b;
    uint8x16_t q0, q1;
    kn_q5_codes(wb->qs, wb->qh, &q0, &q1);
    const int8x16_t sixteen = vdupq_n_s8(16);
    *lo = vsubq_s8(vreinterpretq_s8_u8(q0), sixteen);
    *hi = vsubq_s8(vreinterpretq_s8_u8(q1), sixteen);
    *d = kn_h2f(wb->d);
}

KN_INLINE void q8_0_load(const uint8_t *w, int64_t b, int8x16_t *lo, int8x16_t *hi, float *d)
{
    const struct quant_block_q8_0 *wb = (const struct quant_block_q8_0 *)w + b;
    *lo = vld1q_s8(wb->qs);
    *hi = vld1q_s8(wb->qs + 16);
    *d = kn_h2f(wb->d);
}

#define KN_BLOCK32_TILE(fmt)                                                                   \
    KN_INLINE void fmt##_block(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,       \
                               int64_t b, int nr, int nt, float32x4_t acc[KN_MR][KN_MT])       \
    {                                                                                          \
        int8x16_t a0[KN_MT], a1[KN_MT];                                                        \
        float da[KN_MT];                                                                       \
        for (int j = 0; j < nt; j++) {                                                         \
            const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)(A + j * as) + b; \
            a0[j] = vld1q_s8(ab->qs);                                                          \
            a1[j] = vld1q_s8(ab->qs + 16);                                                     \
            da[j] = kn_h2f(ab->d);                                                             \
        }                                                                                      \
        for (int i = 0; i < nr; i++) {                                                         \
            int8x16_t w0, w1;                                                                  \
            float dw;                                                                          \
            fmt##_load(W + i * ws, b, &w0, &w1, &dw);                                          \
            for (int j = 0; j < nt; j++) {                                                     \
                const int32x4_t s = kn_dot(kn_dot(vdupq_n_s32(0), w0, a0[j]), w1, a1[j]);      \
                acc[i][j] = vfmaq_n_f32(acc[i][j], vcvtq_f32_s32(s), dw * da[j]);              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    KERN_TILE_BLOCK32(fmt, KN_MR, KN_MT)

KN_BLOCK32_TILE(q4_0)
KN_BLOCK32_TILE(q5_0)
KN_BLOCK32_TILE(q8_0)

/* Q5_1 and Q4_1 x Q8_1: codes (0..31, Q4_1 0..15) as they are (no offset); the min adds m * s
 * per block, with s the activation block's d * sum(a). Q4_1 is Q5_1 without the fifth bits (q4
 * a constant after inlining). */
KN_INLINE void kn_min_block(int q4, const uint8_t *W, size_t ws, const uint8_t *A, size_t as,
                            int64_t b, int nr, int nt, float32x4_t acc[KN_MR][KN_MT],
                            float msum[KN_MR][KN_MT])
{
    int8x16_t a0[KN_MT], a1[KN_MT];
    float da[KN_MT], sa[KN_MT];
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_1 *ab = (const struct quant_block_q8_1 *)(A + j * as) + b;
        a0[j] = vld1q_s8(ab->qs);
        a1[j] = vld1q_s8(ab->qs + 16);
        da[j] = kn_h2f(ab->d);
        sa[j] = kn_h2f(ab->s);
    }
    for (int i = 0; i < nr; i++) {
        uint8x16_t q0, q1;
        float dw, mw;
        if (q4) {
            const struct quant_block_q4_1 *wb = (const struct quant_block_q4_1 *)(W + i * ws) + b;
            const uint8x16_t x = vld1q_u8(wb->qs);
            q0 = vandq_u8(x, vdupq_n_u8(0x0F));
            q1 = vshrq_n_u8(x, 4);
            dw = kn_h2f(wb->d), mw = kn_h2f(wb->m);
        } else {
            const struct quant_block_q5_1 *wb = (const struct quant_block_q5_1 *)(W + i * ws) + b;
            kn_q5_codes(wb->qs, wb->qh, &q0, &q1);
            dw = kn_h2f(wb->d), mw = kn_h2f(wb->m);
        }
        for (int j = 0; j < nt; j++) {
            const int32x4_t s = kn_dot(kn_dot(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), a0[j]),
                                       vreinterpretq_s8_u8(q1), a1[j]);
            acc[i][j] = vfmaq_n_f32(acc[i][j], vcvtq_f32_s32(s), dw * da[j]);
            msum[i][j] += mw * sa[j];
        }
    }
}

KN_INLINE void kn_min_tile(int q4, const uint8_t *W, size_t ws, const uint8_t *A, size_t as,
                           int64_t k, int nr, int nt, float *out)
{
    float32x4_t acc[KN_MR][KN_MT];
    float msum[KN_MR][KN_MT];
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nt; j++) acc[i][j] = vdupq_n_f32(0), msum[i][j] = 0;
    for (int64_t b = 0; b < k / 32; b++) kn_min_block(q4, W, ws, A, as, b, nr, nt, acc, msum);
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nt; j++) out[i * nt + j] = vaddvq_f32(acc[i][j]) + msum[i][j];
}
KN_INLINE void q5_1_tile(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k,
                         int nr, int nt, float *out)
{
    kn_min_tile(0, W, ws, A, as, k, nr, nt, out);
}
KN_INLINE void q4_1_tile(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k,
                         int nr, int nt, float *out)
{
    kn_min_tile(1, W, ws, A, as, k, nr, nt, out);
}
KN_DEFINE_MATMUL(q4_1)
KN_DEFINE_MATMUL(q5_1)

/* ------------------------------------------------------------------ Q4_K, Q5_K x Q8_K
 * Sub-block j (32 elements) contributes sc_j * dot(q, a) - m_j * sum(a); the activation sums
 * come from the Q8_K block sums of 16 (pairwise-added), so the mins cost one widening
 * multiply per block instead of a second dot. Q5_K is Q4_K with codes 0..31: sub-block j's
 * fifth bits are bit j of the 32 qh bytes, moved to bit 4 and or-ed into the nibbles (codes stay
 * non-negative, as in Q4_K: the mins do the offset). One super-block step serves both
 * (kn_kquant_superblock, in kern_tile.h's super-block tile); only the unpacking of the codes
 * differs. */

/* The codes of one super-block as unsigned bytes: q[2c], q[2c+1] are sub-blocks 2c (low
 * nibbles) and 2c+1 (high) of the 32-byte chunk c, each as two int8x16 halves; with qh (Q5_K),
 * bit 2c (2c+1) of qh added as bit 4. */
KN_INLINE void kn_kquant_codes(const uint8_t *qs, const uint8_t *qhp, int8x16_t q[8][2])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if (qhp) qh[0] = vld1q_u8(qhp), qh[1] = vld1q_u8(qhp + 16);
    for (int c = 0; c < 4; c++)
        for (int h = 0; h < 2; h++) {
            const uint8x16_t x = vld1q_u8(qs + 32 * c + 16 * h);
            uint8x16_t lo = vandq_u8(x, m4), hi = vshrq_n_u8(x, 4);
            if (qhp) {
                lo = vorrq_u8(lo, vandq_u8(vshlq_u8(qh[h], vdupq_n_s8((int8_t)(4 - 2 * c))), b4));
                hi = vorrq_u8(hi, vandq_u8(vshlq_u8(qh[h], vdupq_n_s8((int8_t)(3 - 2 * c))), b4));
            }
            q[2 * c][h] = vreinterpretq_s8_u8(lo);
            q[2 * c + 1][h] = vreinterpretq_s8_u8(hi);
        }
}

/* q5 (0: Q4_K, 1: Q5_K) is a constant after inlining: each format gets its own loop, whose
 * inner loops are instruction for instruction those of the two bodies it replaced
 * (aarch64-linux-gnu-objdump). */
KN_INLINE void kn_kquant_superblock(int q5, const uint8_t *w, int64_t b, const uint8_t *A,
                                    size_t as, int nt, float32x4_t *acc)
{
    const size_t bbytes = q5 ? sizeof(struct quant_block_q5_K) : sizeof(struct quant_block_q4_K);
    const uint8_t *blk = w + (size_t)b * bbytes;
    const struct quant_block_q4_K *w4 = (const void *)blk; /* the one of q5 is read */
    const struct quant_block_q5_K *w5 = (const void *)blk;
    uint8_t sc[8], mn[8];
    kern_q4k_scales(q5 ? w5->scales : w4->scales, sc, mn);
    const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    int8x16_t q[8][2];
    kn_kquant_codes(q5 ? w5->qs : w4->qs, q5 ? w5->qh : NULL, q);
    const float dw = kn_h2f(q5 ? w5->d : w4->d), dmw = kn_h2f(q5 ? w5->dmin : w4->dmin);
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)(A + j * as) + b;
        int32x4_t s = vdupq_n_s32(0);
        for (int sb = 0; sb < 8; sb++) {
            int32x4_t d = kn_dot(vdupq_n_s32(0), q[sb][0], vld1q_s8(ab->qs + 32 * sb));
            d = kn_dot(d, q[sb][1], vld1q_s8(ab->qs + 32 * sb + 16));
            s = vmlaq_n_s32(s, d, sc[sb]);
        }
        /* sums of 32 activations per sub-block: |.| <= 4064 fits int16 */
        const int16x8_t bs = vpaddq_s16(vld1q_s16(ab->bsums), vld1q_s16(ab->bsums + 8));
        int32x4_t ms = vmull_s16(vget_low_s16(bs), vget_low_s16(m16));
        ms = vmlal_high_s16(ms, bs, m16);
        acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(s), dw * ab->d);
        acc[j] = vfmsq_f32(acc[j], vcvtq_f32_s32(ms), vdupq_n_f32(dmw * ab->d));
    }
}

KN_INLINE void q4_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               float32x4_t *acc)
{
    kn_kquant_superblock(0, w, b, A, as, nt, acc);
}
KERN_TILE_SUPERBLOCK(q4_K, KN_MR, KN_MT)

KN_INLINE void q5_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               float32x4_t *acc)
{
    kn_kquant_superblock(1, w, b, A, as, nt, acc);
}
KERN_TILE_SUPERBLOCK(q5_K, KN_MR, KN_MT)

/* ------------------------------------------------------------------ Q6_K x Q8_K
 * Each 16-byte vector of codes is exactly one 16-element sub-block with its own int8 scale
 * (bit layout in quant_q6_k.c); codes are recentred to q - 32 in int8. */
KN_INLINE void q6_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               float32x4_t *acc)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    const struct quant_block_q6_K *wb = (const struct quant_block_q6_K *)w + b;
    int8x16_t q[16]; /* q[s]: sub-block s, elements 16s .. 16s+15 */
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = wb->ql + 64 * h, *qh = wb->qh + 32 * h;
        for (int half = 0; half < 2; half++) { /* l in 0-15, then 16-31 */
            const uint8x16_t l0 = vld1q_u8(ql + 16 * half);      /* ql[l]      */
            const uint8x16_t l1 = vld1q_u8(ql + 32 + 16 * half); /* ql[l + 32] */
            const uint8x16_t hh = vld1q_u8(qh + 16 * half);
            const uint8x16_t v0 = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hh, m3), 4));
            const uint8x16_t v1 = vorrq_u8(vandq_u8(l1, m4),
                                           vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 2), m3), 4));
            const uint8x16_t v2 = vorrq_u8(vshrq_n_u8(l0, 4),
                                           vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 4), m3), 4));
            const uint8x16_t v3 = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hh, 6), 4));
            int8x16_t *qq = q + 8 * h + half; /* elements l, l+32, l+64, l+96 */
            qq[0] = vsubq_s8(vreinterpretq_s8_u8(v0), off);
            qq[2] = vsubq_s8(vreinterpretq_s8_u8(v1), off);
            qq[4] = vsubq_s8(vreinterpretq_s8_u8(v2), off);
            qq[6] = vsubq_s8(vreinterpretq_s8_u8(v3), off);
        }
    }
    const float dw = kn_h2f(wb->d);
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)(A + j * as) + b;
        int32x4_t s = vdupq_n_s32(0);
        for (int sb = 0; sb < 16; sb++)
            s = vmlaq_n_s32(s, kn_dot(vdupq_n_s32(0), q[sb], vld1q_s8(ab->qs + 16 * sb)),
                            wb->scales[sb]);
        acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(s), dw * ab->d);
    }
}
KERN_TILE_SUPERBLOCK(q6_K, KN_MR, KN_MT)

/* Integer kernels of this variant, by weight type. */
static kern_matmul_fn kn_int_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q4_0: return q4_0_matmul;
    case TERN_TYPE_Q5_0: return q5_0_matmul;
    case TERN_TYPE_Q5_1: return q5_1_matmul;
    case TERN_TYPE_Q4_1: return q4_1_matmul;
    case TERN_TYPE_Q8_0: return q8_0_matmul;
    case TERN_TYPE_Q4_K: return q4_K_matmul;
    case TERN_TYPE_Q5_K: return q5_K_matmul;
    case TERN_TYPE_Q6_K: return q6_K_matmul;
    default: return NULL;
    }
}
