/* delta_avx512.c — the DeltaNet head of delta.h, 16 value components per vector. The state is
 * read once per pass: v' and o accumulate over the key components c (in order) for 64 value
 * components at a time (8 independent FMA chains), then the update streams the rows. */
#include <immintrin.h>

#include "kernels/delta.h"

void delta_head_avx512(const float *S0, float *S, const float *q, const float *k, const float *v,
                       float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                       int hv)
{
    float u[1024] __attribute__((aligned(64)));
    const __m512 vbeta = _mm512_set1_ps(beta), vbd = _mm512_set1_ps(bd);
    const __m512 vattn = _mm512_set1_ps(attn), vds = _mm512_set1_ps(ds);
    int j = 0;
    for (; j + 64 <= hv; j += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m512 o0 = a0, o1 = a0, o2 = a0, o3 = a0;
        if (S0)
            for (int c = 0; c < hk; c++) {
                const float *row = S0 + (size_t)c * hv + j;
                const __m512 kc = _mm512_set1_ps(k[c]), qc = _mm512_set1_ps(q[c]);
                const __m512 s0 = _mm512_loadu_ps(row), s1 = _mm512_loadu_ps(row + 16);
                const __m512 s2 = _mm512_loadu_ps(row + 32), s3 = _mm512_loadu_ps(row + 48);
                a0 = _mm512_fmadd_ps(s0, kc, a0);
                a1 = _mm512_fmadd_ps(s1, kc, a1);
                a2 = _mm512_fmadd_ps(s2, kc, a2);
                a3 = _mm512_fmadd_ps(s3, kc, a3);
                o0 = _mm512_fmadd_ps(s0, qc, o0);
                o1 = _mm512_fmadd_ps(s1, qc, o1);
                o2 = _mm512_fmadd_ps(s2, qc, o2);
                o3 = _mm512_fmadd_ps(s3, qc, o3);
            }
        const __m512 a[4] = {a0, a1, a2, a3}, o[4] = {o0, o1, o2, o3};
        for (int i = 0; i < 4; i++) {
            const __m512 uu = _mm512_fmsub_ps(_mm512_loadu_ps(v + j + 16 * i), vbeta,
                                              _mm512_mul_ps(a[i], vbd));
            _mm512_store_ps(u + j + 16 * i, uu);
            _mm512_storeu_ps(out + j + 16 * i, _mm512_fmadd_ps(uu, vattn, _mm512_mul_ps(o[i], vds)));
        }
    }
    for (; j < hv; j += 16) {
        __m512 a0 = _mm512_setzero_ps(), o0 = a0;
        if (S0)
            for (int c = 0; c < hk; c++) {
                const __m512 s0 = _mm512_loadu_ps(S0 + (size_t)c * hv + j);
                a0 = _mm512_fmadd_ps(s0, _mm512_set1_ps(k[c]), a0);
                o0 = _mm512_fmadd_ps(s0, _mm512_set1_ps(q[c]), o0);
            }
        const __m512 uu = _mm512_fmsub_ps(_mm512_loadu_ps(v + j), vbeta, _mm512_mul_ps(a0, vbd));
        _mm512_store_ps(u + j, uu);
        _mm512_storeu_ps(out + j, _mm512_fmadd_ps(uu, vattn, _mm512_mul_ps(o0, vds)));
    }
    const __m512 vdec = _mm512_set1_ps(decay), lo = _mm512_set1_ps(-1e6f), hi = _mm512_set1_ps(1e6f);
    for (int c = 0; c < hk; c++) {
        const __m512 kc = _mm512_set1_ps(k[c]);
        const float *row0 = S0 ? S0 + (size_t)c * hv : NULL;
        float *row = S + (size_t)c * hv;
        for (int jj = 0; jj < hv; jj += 16) {
            const __m512 s0 = row0 ? _mm512_mul_ps(_mm512_loadu_ps(row0 + jj), vdec) : _mm512_setzero_ps();
            const __m512 x = _mm512_fmadd_ps(_mm512_load_ps(u + jj), kc, s0);
            _mm512_storeu_ps(row + jj, _mm512_min_ps(_mm512_max_ps(x, lo), hi));
        }
    }
}
