/* attn_avx2.c — AVX2 + F16C attention loops (see attn.h); compiled with -mavx2 -mfma -mf16c. */
#include <immintrin.h>

#include "model/attn.h"

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void attn_scores_avx2(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < hd; j += 8) {
            __m256 kv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + j)));
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), kv, acc);
        }
        s[p] = hsum256(acc) * scale;
    }
}

void attn_wsum_avx2(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    for (int j = 0; j < hd; j += 8) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int p = 0;
        for (; p + 1 < n_keys; p += 2) {
            __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)p * hd + j)));
            __m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)(p + 1) * hd + j)));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(w[p]), v0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(w[p + 1]), v1, acc1);
        }
        if (p < n_keys) {
            __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)p * hd + j)));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(w[p]), v0, acc0);
        }
        _mm256_storeu_ps(out + j, _mm256_add_ps(acc0, acc1));
    }
}
