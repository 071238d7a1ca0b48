/* gemm_f32_avx512.c — the AVX-512 F32 GEMM microkernels: a 12 x 32 tile of C in 24 zmm
 * accumulators; per k, two loads of packed B and 12 broadcasts of A feed 24 FMAs. A is read in
 * place (gemm_f32_micro.h): _t with A(r, k) = a[k*ask + r], _r with A(r, k) = a[r*asr + k]. */
#include <immintrin.h>

#include "kernels/gemm_f32_micro.h"

#define ACC_DECL                                                                                   \
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),        \
           c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),        \
           c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),        \
           c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),        \
           c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),        \
           c71 = _mm512_setzero_ps(), c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(),        \
           c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps(), ca0 = _mm512_setzero_ps(),        \
           ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();

#define ROW(x0, x1, val)                                                                           \
    a = _mm512_set1_ps(val);                                                                       \
    x0 = _mm512_fmadd_ps(a, b0, x0);                                                               \
    x1 = _mm512_fmadd_ps(a, b1, x1);

#define OUT(r, x0, x1)                                                                             \
    if (acc) {                                                                                     \
        x0 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc), x0);                                    \
        x1 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc + 16), x1);                               \
    }                                                                                              \
    _mm512_storeu_ps(c + (r) * ldc, x0);                                                           \
    _mm512_storeu_ps(c + (r) * ldc + 16, x1);

/* C's tile is read (acc) and written once, after kc iterations: fetch its 24 lines now, so
 * that the stores at the end do not wait for L2/L3 (C of a weight gradient is re-read once per
 * K slice and often no longer in L1) */
#define PREFETCH_C                                                                                 \
    for (int r = 0; r < 12; r++) {                                                                 \
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);                                    \
        _mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T0);                               \
    }

#define STORE_ALL                                                                                  \
    OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)                            \
    OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)                            \
    OUT(8, c80, c81) OUT(9, c90, c91) OUT(10, ca0, ca1) OUT(11, cb0, cb1)

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
