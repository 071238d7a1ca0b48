/* gemm_f32_avx2.c — the AVX2 F32 GEMM microkernel (the fallback for CPUs without AVX-512): a
 * 6 x 16 tile of C in 12 ymm accumulators; per k, two loads of B and six broadcasts of A feed
 * 12 FMAs. See gemm_f32_micro.h for the packed layout. */
#include <immintrin.h>

#include "kernels/gemm_f32_micro.h"

void gemm_micro_avx2(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, bool acc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        __m256 a;
#define ROW(r, x0, x1)                                                                             \
        a = _mm256_broadcast_ss(ap + (r));                                                         \
        x0 = _mm256_fmadd_ps(a, b0, x0);                                                           \
        x1 = _mm256_fmadd_ps(a, b1, x1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21)
        ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
#undef ROW
        ap += 6;
        bp += 16;
    }
#define OUT(r, x0, x1)                                                                             \
    if (acc) {                                                                                     \
        x0 = _mm256_add_ps(_mm256_loadu_ps(c + (r) * ldc), x0);                                    \
        x1 = _mm256_add_ps(_mm256_loadu_ps(c + (r) * ldc + 8), x1);                                \
    }                                                                                              \
    _mm256_storeu_ps(c + (r) * ldc, x0);                                                           \
    _mm256_storeu_ps(c + (r) * ldc + 8, x1);
    OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21)
    OUT(3, c30, c31) OUT(4, c40, c41) OUT(5, c50, c51)
#undef OUT
}
