/* gemm_f32_avx2.c — the AVX2 F32 GEMM microkernels (the fallback for CPUs without AVX-512): a
 * 6 x 16 tile of C in 12 ymm accumulators; per k, two loads of packed B and six broadcasts of A
 * feed 12 FMAs. A is read in place (gemm_f32_micro.h): _t with A(r, k) = a[k*ask + r], _r with
 * A(r, k) = a[r*asr + k]. */
#include <immintrin.h>

#include "kernels/gemm_f32_micro.h"

#define ACC_DECL                                                                                   \
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),        \
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),        \
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),        \
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

#define ROW(x0, x1, ptr)                                                                           \
    a = _mm256_broadcast_ss(ptr);                                                                  \
    x0 = _mm256_fmadd_ps(a, b0, x0);                                                               \
    x1 = _mm256_fmadd_ps(a, b1, x1);

#define OUT(r, x0, x1)                                                                             \
    if (acc) {                                                                                     \
        x0 = _mm256_add_ps(_mm256_loadu_ps(c + (r) * ldc), x0);                                    \
        x1 = _mm256_add_ps(_mm256_loadu_ps(c + (r) * ldc + 8), x1);                                \
    }                                                                                              \
    _mm256_storeu_ps(c + (r) * ldc, x0);                                                           \
    _mm256_storeu_ps(c + (r) * ldc + 8, x1);

#define STORE_ALL                                                                                  \
    OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21)                                             \
    OUT(3, c30, c31) OUT(4, c40, c41) OUT(5, c50, c51)

void gemm_micro_avx2_t(int kc, const float *ap, ptrdiff_t ask, const float *bp, float *c,
                       ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    for (int k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        __m256 a;
        ROW(c00, c01, ap) ROW(c10, c11, ap + 1) ROW(c20, c21, ap + 2)
        ROW(c30, c31, ap + 3) ROW(c40, c41, ap + 4) ROW(c50, c51, ap + 5)
        ap += ask;
        bp += 16;
    }
    STORE_ALL
}

void gemm_micro_avx2_r(int kc, const float *ap, ptrdiff_t asr, const float *bp, float *c,
                       ptrdiff_t ldc, bool acc)
{
    ACC_DECL
    const float *p0 = ap, *p1 = ap + 3 * asr;
    const ptrdiff_t s1 = asr, s2 = 2 * asr;
    for (int k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        __m256 a;
        ROW(c00, c01, p0) ROW(c10, c11, p0 + s1) ROW(c20, c21, p0 + s2)
        ROW(c30, c31, p1) ROW(c40, c41, p1 + s1) ROW(c50, c51, p1 + s2)
        p0++, p1++;
        bp += 16;
    }
    STORE_ALL
}
