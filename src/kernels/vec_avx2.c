/* vec_avx2.c — the vector steps of vec.h in 256-bit registers (four 8-lane accumulators,
 * summed pairwise, then the lanes in a fixed order; a scalar tail). */
#include "kernels/vec.h"

#include <immintrin.h>

#include "util/check.h"
#include "util/fp16.h"

float kern_vec_dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    float l[8];
    _mm256_storeu_ps(l, s);
    float r = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

void kern_vec_axpy_avx2(float c, const float *x, float *y, int64_t n)
{
    /* y is read and written 8 lanes at a time: x is y itself or lies apart from it */
    TERN_ASSERT(n >= 0 && (n == 0 || x == y || x + n <= y || y + n <= x), "y does not partly overlap x");
    const __m256 vc = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vc, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += c * x[i];
}

#define LD8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))

float kern_vec_dot_f16_avx2(const uint16_t *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(LD8(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(LD8(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(LD8(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(LD8(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LD8(a + i), _mm256_loadu_ps(b + i), s0);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    float l[8];
    _mm256_storeu_ps(l, s);
    float r = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
    for (; i < n; i++) r += fp16_to_f32(a[i]) * b[i];
    return r;
}

void kern_vec_axpy_f16_avx2(float c, const uint16_t *x, float *y, int64_t n)
{
    const __m256 vc = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vc, LD8(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += c * fp16_to_f32(x[i]);
}
