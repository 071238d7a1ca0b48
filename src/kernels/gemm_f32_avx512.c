/* gemm_f32_avx512.c — the AVX-512 F32 GEMM microkernels: a 12 x 32 tile of C in 24 zmm
 * accumulators; per k, two loads of packed B and 12 broadcasts of A feed 24 FMAs. A is read in
 * place (gemm_f32_micro.h): _t with A(r, k) = a[k*ask + r], _r with A(r, k) = a[r*asr + k]. */
#include <immintrin.h>

#include "kernels/gemm_f32_micro.h"
#include "kernels/gemm_tile_avx512.h"

#define ROW(x0, x1, val)                                                                           \
    a = _mm512_set1_ps(val);                                                                       \
    x0 = _mm512_fmadd_ps(a, b0, x0);                                                               \
    x1 = _mm512_fmadd_ps(a, b1, x1);

void gemm_micro_avx512_t(int kc, const float *ap, ptrdiff_t ask, const float *bp, float *c,
                         ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    PREFETCH_C
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        __m512 a;
        ROW(c00, c01, ap[0]) ROW(c10, c11, ap[1]) ROW(c20, c21, ap[2]) ROW(c30, c31, ap[3])
        ROW(c40, c41, ap[4]) ROW(c50, c51, ap[5]) ROW(c60, c61, ap[6]) ROW(c70, c71, ap[7])
        ROW(c80, c81, ap[8]) ROW(c90, c91, ap[9]) ROW(ca0, ca1, ap[10]) ROW(cb0, cb1, ap[11])
        ap += ask;
        bp += 32;
    }
    STORE_ALL
}

void gemm_micro_avx512_r(int kc, const float *ap, ptrdiff_t asr, const float *bp, float *c,
                         ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    PREFETCH_C
    /* three row groups of four: p + {0,1,2,3} * asr, addressed as base + index * scale */
    const float *p0 = ap, *p1 = ap + 4 * asr, *p2 = ap + 8 * asr;
    const ptrdiff_t s1 = asr, s2 = 2 * asr, s3 = 3 * asr;
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        __m512 a;
        ROW(c00, c01, p0[0]) ROW(c10, c11, p0[s1]) ROW(c20, c21, p0[s2]) ROW(c30, c31, p0[s3])
        ROW(c40, c41, p1[0]) ROW(c50, c51, p1[s1]) ROW(c60, c61, p1[s2]) ROW(c70, c71, p1[s3])
        ROW(c80, c81, p2[0]) ROW(c90, c91, p2[s1]) ROW(ca0, ca1, p2[s2]) ROW(cb0, cb1, p2[s3])
        p0++, p1++, p2++;
        bp += 32;
    }
    STORE_ALL
}

void gemm_pack_bt_avx512(const float *B, ptrdiff_t bcs, int kc, int nc, float *dst)
{
    for (int q = 0; q < nc; q += 32) {
        float *d = dst + (size_t)q * kc;
        for (int h = 0; h < 32; h += 16) {
            const int cols = nc - q - h < 16 ? nc - q - h : 16;
            for (int kk = 0; kk < kc; kk += 16) {
                const __mmask16 m = kc - kk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (kc - kk)) - 1);
                __m512i r[16];
                for (int j = 0; j < 16; j++)
                    r[j] = j < cols ? _mm512_castps_si512(_mm512_maskz_loadu_ps(m, B + (ptrdiff_t)(q + h + j) * bcs + kk))
                                    : _mm512_setzero_si512();
                gemm_transpose16(r);
                const int nk = kc - kk < 16 ? kc - kk : 16;
                for (int i = 0; i < nk; i++) _mm512_storeu_si512(d + (size_t)(kk + i) * 32 + h, r[i]);
            }
        }
    }
}

void gemm_pack_a12_avx512(const float *A, ptrdiff_t ars, int rows, int kc, float *dst)
{
    for (int kk = 0; kk < kc; kk += 16) {
        const __mmask16 m = kc - kk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (kc - kk)) - 1);
        __m512i r[16];
        for (int j = 0; j < 16; j++)
            r[j] = j < rows ? _mm512_castps_si512(_mm512_maskz_loadu_ps(m, A + (ptrdiff_t)j * ars + kk))
                            : _mm512_setzero_si512();
        gemm_transpose16(r);
        const int nk = kc - kk < 16 ? kc - kk : 16;
        for (int i = 0; i < nk; i++) _mm512_mask_storeu_epi32(dst + (size_t)(kk + i) * 12, 0x0FFF, r[i]);
    }
}
