/* gemm_f32_avx512.c — the AVX-512 F32 GEMM microkernel: a 12 x 32 tile of C in 24 zmm
 * accumulators; per k, two loads of B and 12 broadcasts of A feed 24 FMAs. See gemm_f32_micro.h
 * for the packed layout. */
#include <immintrin.h>

#include "kernels/gemm_f32_micro.h"

void gemm_micro_avx512(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, bool acc)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
           c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
           c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
           c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),
           c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),
           c71 = _mm512_setzero_ps(), c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(),
           c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps(), ca0 = _mm512_setzero_ps(),
           ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        __m512 a;
#define ROW(r, x0, x1)                                                                             \
        a = _mm512_set1_ps(ap[r]);                                                                 \
        x0 = _mm512_fmadd_ps(a, b0, x0);                                                           \
        x1 = _mm512_fmadd_ps(a, b1, x1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31)
        ROW(4, c40, c41) ROW(5, c50, c51) ROW(6, c60, c61) ROW(7, c70, c71)
        ROW(8, c80, c81) ROW(9, c90, c91) ROW(10, ca0, ca1) ROW(11, cb0, cb1)
#undef ROW
        ap += 12;
        bp += 32;
    }
#define OUT(r, x0, x1)                                                                             \
    if (acc) {                                                                                     \
        x0 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc), x0);                                    \
        x1 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc + 16), x1);                               \
    }                                                                                              \
    _mm512_storeu_ps(c + (r) * ldc, x0);                                                           \
    _mm512_storeu_ps(c + (r) * ldc + 16, x1);
    OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)
    OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)
    OUT(8, c80, c81) OUT(9, c90, c91) OUT(10, ca0, ca1) OUT(11, cb0, cb1)
#undef OUT
}
