/* vec_avx512.c — the vector steps of vec.h in 512-bit registers: four 16-lane accumulators for
 * the dot (a fixed order: lanes, then the four summed pairwise, then the lanes reduced), masked
 * loads for the tail. */
#include "kernels/vec.h"

#include <immintrin.h>

float kern_vec_dot_avx512(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void kern_vec_axpy_avx512(float c, const float *x, float *y, int64_t n)
{
    const __m512 vc = _mm512_set1_ps(c);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vc, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(vc, _mm512_maskz_loadu_ps(m, x + i),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* F16 first operands: 16 halves widened per register (vcvtph2ps), the F32 order above. */
#define LD16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))

float kern_vec_dot_f16_avx512(const uint16_t *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(LD16(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(LD16(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(LD16(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(LD16(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(LD16(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 av = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
        s1 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void kern_vec_axpy_f16_avx512(float c, const uint16_t *x, float *y, int64_t n)
{
    const __m512 vc = _mm512_set1_ps(c);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vc, LD16(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 xv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(vc, xv, _mm512_maskz_loadu_ps(m, y + i)));
    }
}
