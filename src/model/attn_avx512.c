/* attn_avx512.c — AVX-512 attention loops (see attn.h); head_dim a multiple of 16. */
#include <immintrin.h>

#include "model/attn.h"

void attn_scores_avx512(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    if (hd == 64) { /* the common head size: keep q in registers */
        const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
        const __m512 q2 = _mm512_loadu_ps(q + 32), q3 = _mm512_loadu_ps(q + 48);
        for (int p = 0; p < n_keys; p++) {
            const uint16_t *kr = k + (size_t)p * 64;
            __m512 a = _mm512_mul_ps(q0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)kr)));
            __m512 b = _mm512_mul_ps(q1, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + 16))));
            a = _mm512_fmadd_ps(q2, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + 32))), a);
            b = _mm512_fmadd_ps(q3, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + 48))), b);
            s[p] = _mm512_reduce_add_ps(_mm512_add_ps(a, b)) * scale;
        }
        return;
    }
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < hd; j += 16)
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + j),
                                  _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + j))), acc);
        s[p] = _mm512_reduce_add_ps(acc) * scale;
    }
}

void attn_wsum_avx512(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    for (int j = 0; j < hd; j += 16) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        int p = 0;
        for (; p + 1 < n_keys; p += 2) {
            __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)p * hd + j)));
            __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)(p + 1) * hd + j)));
            acc0 = _mm512_fmadd_ps(_mm512_set1_ps(w[p]), v0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_set1_ps(w[p + 1]), v1, acc1);
        }
        if (p < n_keys) {
            __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)p * hd + j)));
            acc0 = _mm512_fmadd_ps(_mm512_set1_ps(w[p]), v0, acc0);
        }
        _mm512_storeu_ps(out + j, _mm512_add_ps(acc0, acc1));
    }
}
