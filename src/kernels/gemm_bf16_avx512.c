/* gemm_bf16_avx512.c — the AVX512-BF16 packers and microkernels of the BF16 GEMM (read
 * gemm_bf16.h for the layouts). Only called after kern_gemm_path_ok(KERN_GEMM_BF16_AVX512).
 *
 * Rounding is vcvtne2ps2bf16 (nearest even; like every BF16 instruction it treats F32 denormal
 * inputs as zero, which the plain-C path does not: a difference below 2^-126). Two rows of 16
 * F32 become 32 BF16 in one instruction, [row k | row k+1]; vpermw interleaves them into the 16
 * (k, k+1) words vdpbf16ps takes. The microkernel is the F32 one's 12 x 32 tile
 * (gemm_tile_avx512.h) with one vdpbf16ps per FMA: each does two k, so a pair of k costs what
 * one k costs in F32. */
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm_bf16.h"
#include "kernels/gemm_tile_avx512.h"

#define MR GEMM_BF16_MR
#define NR GEMM_BF16_NR

/* word i = (lane i of the low row, lane i of the high row) */
static inline __m512i interleave_idx(void)
{
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                            22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

static inline __mmask16 mask16(int n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 16 words (lo[i], hi[i]) of two rows of up to 16 floats */
static inline __m512i pairs16(__m512 lo, __m512 hi, __m512i idx)
{
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* 16 words of 32 consecutive floats (k order: pairs already adjacent) */
static inline __m512i run32(__m512 first, __m512 second)
{
    return (__m512i)_mm512_cvtne2ps_pbh(second, first);
}

void gemm_bf16_pack_b_avx512(const struct kern_gemm *g, int k0, int kc, int j0, int nc,
                             uint32_t *dst)
{
    const int kcp = (kc + 1) / 2;
    const __m512i idx = interleave_idx();
    if (g->bcs == 1) {
        /* rows of B are contiguous (dX = dY.W, dW = dY^T.X, P.V): two rows -> 16 words */
        for (int q = 0; q < nc; q += NR) {
            uint32_t *d = dst + (size_t)q * kcp;
            const __mmask16 m0 = mask16(nc - q), m1 = mask16(nc - q - 16);
            for (int p = 0; p < kcp; p++) {
                const float *r0 = g->B + (ptrdiff_t)(k0 + 2 * p) * g->brs + j0 + q;
                const bool two = 2 * p + 1 < kc;
                const __m512 a0 = _mm512_maskz_loadu_ps(m0, r0), a1 = _mm512_maskz_loadu_ps(m1, r0 + 16);
                const __m512 b0 = two ? _mm512_maskz_loadu_ps(m0, r0 + g->brs) : _mm512_setzero_ps();
                const __m512 b1 = two ? _mm512_maskz_loadu_ps(m1, r0 + g->brs + 16) : _mm512_setzero_ps();
                _mm512_storeu_si512(d + p * NR, pairs16(a0, b0, idx));
                _mm512_storeu_si512(d + p * NR + 16, pairs16(a1, b1, idx));
            }
        }
        return;
    }
    if (g->brs == 1) {
        /* columns of B are contiguous (the forward's W^T, K^T and V^T of attention): 32 k of a
         * column -> 16 words; 16 columns of those, transposed, are 16 rows of the panel */
        for (int q = 0; q < nc; q += NR) {
            uint32_t *d = dst + (size_t)q * kcp;
            for (int h = 0; h < NR; h += 16) {
                const int cols = nc - q - h < 16 ? nc - q - h : 16;
                const float *s = g->B + (ptrdiff_t)(j0 + q + h) * g->bcs + k0;
                for (int kk = 0; kk < kc; kk += 32) {
                    const __mmask16 m0 = mask16(kc - kk), m1 = mask16(kc - kk - 16);
                    __m512i r[16];
                    for (int j = 0; j < 16; j++) {
                        if (j >= cols) {
                            r[j] = _mm512_setzero_si512();
                            continue;
                        }
                        const float *c = s + (ptrdiff_t)j * g->bcs + kk;
                        r[j] = run32(_mm512_maskz_loadu_ps(m0, c), _mm512_maskz_loadu_ps(m1, c + 16));
                    }
                    gemm_transpose16(r);
                    const int np = kcp - kk / 2 < 16 ? kcp - kk / 2 : 16;
                    uint32_t *dp = d + (size_t)(kk / 2) * NR + h;
                    for (int i = 0; i < np; i++) _mm512_storeu_si512(dp + (size_t)i * NR, r[i]);
                }
            }
        }
        return;
    }
    /* neither stride is 1: no product of the trainer; gather element by element */
    for (int q = 0; q < nc; q += NR) {
        uint32_t *d = dst + (size_t)q * kcp;
        for (int p = 0; p < kcp; p++) {
            float lo[NR], hi[NR];
            for (int j = 0; j < NR; j++) {
                const float *s = g->B + (ptrdiff_t)(j0 + q + j) * g->bcs + (ptrdiff_t)(k0 + 2 * p) * g->brs;
                lo[j] = q + j < nc ? s[0] : 0.0f;
                hi[j] = q + j < nc && 2 * p + 1 < kc ? s[g->brs] : 0.0f;
            }
            _mm512_storeu_si512(d + p * NR, pairs16(_mm512_loadu_ps(lo), _mm512_loadu_ps(hi), idx));
            _mm512_storeu_si512(d + p * NR + 16,
                                pairs16(_mm512_loadu_ps(lo + 16), _mm512_loadu_ps(hi + 16), idx));
        }
    }
}

void gemm_bf16_pack_a_rows_avx512(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                                  uint32_t *dst)
{
    const int kcp = (kc + 1) / 2, mpad = (mc + MR - 1) / MR * MR;
    for (int r = 0; r < mc; r++) {
        const float *s = g->A + (ptrdiff_t)(i0 + r) * g->ars + k0;
        uint32_t *d = dst + (size_t)r * kcp;
        for (int kk = 0; kk < kc; kk += 32) {
            const __m512 x0 = _mm512_maskz_loadu_ps(mask16(kc - kk), s + kk);
            const __m512 x1 = _mm512_maskz_loadu_ps(mask16(kc - kk - 16), s + kk + 16);
            _mm512_mask_storeu_epi32(d + kk / 2, mask16(kcp - kk / 2), run32(x0, x1));
        }
    }
    if (mpad > mc) memset(dst + (size_t)mc * kcp, 0, (size_t)(mpad - mc) * kcp * sizeof *dst);
}

void gemm_bf16_pack_a_panels_avx512(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                                    uint32_t *dst)
{
    const int kcp = (kc + 1) / 2;
    const __m512i idx = interleave_idx();
    for (int q = 0; q < mc; q += MR) {
        const __mmask16 m = mask16(mc - q < MR ? mc - q : MR);
        const float *s = g->A + (ptrdiff_t)(i0 + q) * g->ars + (ptrdiff_t)k0 * g->acs;
        uint32_t *d = dst + (size_t)q * kcp;
        for (int p = 0; p < kcp; p++) {
            const __m512 lo = _mm512_maskz_loadu_ps(m, s + (ptrdiff_t)(2 * p) * g->acs);
            const __m512 hi = 2 * p + 1 < kc ? _mm512_maskz_loadu_ps(m, s + (ptrdiff_t)(2 * p + 1) * g->acs)
                                             : _mm512_setzero_ps();
            _mm512_mask_storeu_epi32(d + p * MR, (__mmask16)0x0FFF, pairs16(lo, hi, idx));
        }
    }
}

#define BROW(x0, x1, word)                                                                         \
    a = (__m512bh)_mm512_set1_epi32((int)(word));                                                  \
    x0 = _mm512_dpbf16_ps(x0, a, b0);                                                              \
    x1 = _mm512_dpbf16_ps(x1, a, b1);

void gemm_bf16_micro_avx512_t(int kcp, const uint32_t *ap, const uint32_t *bp, float *c,
                              ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    PREFETCH_C
    for (int p = 0; p < kcp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
        __m512bh a;
        BROW(c00, c01, ap[0]) BROW(c10, c11, ap[1]) BROW(c20, c21, ap[2]) BROW(c30, c31, ap[3])
        BROW(c40, c41, ap[4]) BROW(c50, c51, ap[5]) BROW(c60, c61, ap[6]) BROW(c70, c71, ap[7])
        BROW(c80, c81, ap[8]) BROW(c90, c91, ap[9]) BROW(ca0, ca1, ap[10]) BROW(cb0, cb1, ap[11])
        ap += MR;
        bp += NR;
    }
    STORE_ALL
}

void gemm_bf16_micro_avx512_r(int kcp, const uint32_t *ap, ptrdiff_t as, const uint32_t *bp,
                              float *c, ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    PREFETCH_C
    /* three row groups of four, addressed as base + index * scale (gemm_f32_avx512.c) */
    const uint32_t *p0 = ap, *p1 = ap + 4 * as, *p2 = ap + 8 * as;
    const ptrdiff_t s1 = as, s2 = 2 * as, s3 = 3 * as;
    for (int p = 0; p < kcp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
        __m512bh a;
        BROW(c00, c01, p0[0]) BROW(c10, c11, p0[s1]) BROW(c20, c21, p0[s2]) BROW(c30, c31, p0[s3])
        BROW(c40, c41, p1[0]) BROW(c50, c51, p1[s1]) BROW(c60, c61, p1[s2]) BROW(c70, c71, p1[s3])
        BROW(c80, c81, p2[0]) BROW(c90, c91, p2[s1]) BROW(ca0, ca1, p2[s2]) BROW(cb0, cb1, p2[s3])
        p0++, p1++, p2++;
        bp += NR;
    }
    STORE_ALL
}
