/* delta_avx2.c — the DeltaNet head of delta.h, 8 value components per vector. The state is
 * read once per pass: v' and o accumulate over the key components c (in order) for 32 value
 * components at a time (8 independent FMA chains), then the update streams the rows. */
#include <immintrin.h>

#include "kernels/delta.h"

void delta_head_avx2(const float *S0, float *S, const float *q, const float *k, const float *v,
                       float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                       int hv)
{
    float u[1024] __attribute__((aligned(32)));
    const __m256 vbeta = _mm256_set1_ps(beta), vbd = _mm256_set1_ps(bd);
    const __m256 vattn = _mm256_set1_ps(attn), vds = _mm256_set1_ps(ds);
    int j = 0;
    for (; j + 32 <= hv; j += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 o0 = a0, o1 = a0, o2 = a0, o3 = a0;
        if (S0)
            for (int c = 0; c < hk; c++) {
                const float *row = S0 + (size_t)c * hv + j;
                const __m256 kc = _mm256_set1_ps(k[c]), qc = _mm256_set1_ps(q[c]);
                const __m256 s0 = _mm256_loadu_ps(row), s1 = _mm256_loadu_ps(row + 8);
                const __m256 s2 = _mm256_loadu_ps(row + 16), s3 = _mm256_loadu_ps(row + 24);
                a0 = _mm256_fmadd_ps(s0, kc, a0);
                a1 = _mm256_fmadd_ps(s1, kc, a1);
                a2 = _mm256_fmadd_ps(s2, kc, a2);
                a3 = _mm256_fmadd_ps(s3, kc, a3);
                o0 = _mm256_fmadd_ps(s0, qc, o0);
                o1 = _mm256_fmadd_ps(s1, qc, o1);
                o2 = _mm256_fmadd_ps(s2, qc, o2);
                o3 = _mm256_fmadd_ps(s3, qc, o3);
            }
        const __m256 a[4] = {a0, a1, a2, a3}, o[4] = {o0, o1, o2, o3};
        for (int i = 0; i < 4; i++) {
            const __m256 uu = _mm256_fmsub_ps(_mm256_loadu_ps(v + j + 8 * i), vbeta,
                                              _mm256_mul_ps(a[i], vbd));
            _mm256_store_ps(u + j + 8 * i, uu);
            _mm256_storeu_ps(out + j + 8 * i, _mm256_fmadd_ps(uu, vattn, _mm256_mul_ps(o[i], vds)));
        }
    }
    for (; j < hv; j += 8) {
        __m256 a0 = _mm256_setzero_ps(), o0 = a0;
        if (S0)
            for (int c = 0; c < hk; c++) {
                const __m256 s0 = _mm256_loadu_ps(S0 + (size_t)c * hv + j);
                a0 = _mm256_fmadd_ps(s0, _mm256_set1_ps(k[c]), a0);
                o0 = _mm256_fmadd_ps(s0, _mm256_set1_ps(q[c]), o0);
            }
        const __m256 uu = _mm256_fmsub_ps(_mm256_loadu_ps(v + j), vbeta, _mm256_mul_ps(a0, vbd));
        _mm256_store_ps(u + j, uu);
        _mm256_storeu_ps(out + j, _mm256_fmadd_ps(uu, vattn, _mm256_mul_ps(o0, vds)));
    }
    const __m256 vdec = _mm256_set1_ps(decay), lo = _mm256_set1_ps(-1e6f), hi = _mm256_set1_ps(1e6f);
    for (int c = 0; c < hk; c++) {
        const __m256 kc = _mm256_set1_ps(k[c]);
        const float *row0 = S0 ? S0 + (size_t)c * hv : NULL;
        float *row = S + (size_t)c * hv;
        for (int jj = 0; jj < hv; jj += 8) {
            const __m256 s0 = row0 ? _mm256_mul_ps(_mm256_loadu_ps(row0 + jj), vdec) : _mm256_setzero_ps();
            const __m256 x = _mm256_fmadd_ps(_mm256_load_ps(u + jj), kc, s0);
            _mm256_storeu_ps(row + jj, _mm256_min_ps(_mm256_max_ps(x, lo), hi));
        }
    }
}
