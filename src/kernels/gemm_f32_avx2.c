/* gemm_f32_avx2.c — the AVX2 F32 GEMM microkernels (the fallback for CPUs without AVX-512): a
 * 6 x 16 tile of C in 12 ymm accumulators; per k, two loads of packed B and six broadcasts of A
 * feed 12 FMAs. A is read in place (gemm_f32_micro.h): _t with A(r, k) = a[k*ask + r], _r with
 * A(r, k) = a[r*asr + k]. Also the packing of a transposed B (W^T of every forward product) by
 * 8 x 8 register transposes, which the scalar copy did one float at a time. */
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

/* r[0..7] (8 rows of 8) -> its transpose, in registers */
static inline void transpose8(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

void gemm_pack_bt_avx2(const float *B, ptrdiff_t bcs, int kc, int nc, float *dst)
{
    static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < nc; q += 16) {
        float *d = dst + (size_t)q * kc;
        for (int h = 0; h < 16; h += 8) {
            const int cols = nc - q - h < 8 ? (nc - q - h > 0 ? nc - q - h : 0) : 8;
            for (int kk = 0; kk < kc; kk += 8) {
                const int nk = kc - kk < 8 ? kc - kk : 8;
                /* the first nk lanes: a masked load reads nothing past the slice */
                const __m256i m = _mm256_loadu_si256((const __m256i *)(ones + 8 - nk));
                __m256 r[8];
                for (int j = 0; j < 8; j++)
                    r[j] = j < cols ? _mm256_maskload_ps(B + (ptrdiff_t)(q + h + j) * bcs + kk, m)
                                    : _mm256_setzero_ps();
                transpose8(r);
                for (int i = 0; i < nk; i++) _mm256_storeu_ps(d + (size_t)(kk + i) * 16 + h, r[i]);
            }
        }
    }
}
