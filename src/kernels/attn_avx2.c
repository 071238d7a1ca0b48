/* attn_avx2.c — AVX2 + F16C attention loops (see attn.h); compiled with -mavx2 -mfma -mf16c.
 *
 * The per-query kernels define the numerics: a dot product is an 8-lane vector reduced by
 * hsum256 (lanes paired at distance 4, 2, 1). The block kernels convert a tile of 8 keys to
 * float once per block and reduce 8 (query, key) vectors at once with a butterfly pairing lanes
 * at the same distances, so every score has the per-query kernel's bits. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "util/check.h"
#include "kernels/vexp.h"
#include "util/fp16.h"

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void attn_scores_avx2(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
    int p = 0;
    for (; p + 4 <= n_keys; p += 4) { /* four keys' chains side by side, each in j order */
        const uint16_t *kr = k + (size_t)p * hd;
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int j = 0; j < hd; j += 8) {
            const __m256 qv = _mm256_loadu_ps(q + j);
            for (int r = 0; r < 4; r++)
                acc[r] = _mm256_fmadd_ps(qv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + (size_t)r * hd + j))),
                                         acc[r]);
        }
        for (int r = 0; r < 4; r++) s[p + r] = hsum256(acc[r]) * scale;
    }
    for (; p < n_keys; p++) {
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
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
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

void attn_round_f16_avx2(const float *x, float *y, int n)
{
    TERN_ASSERT(n >= 0);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) y[i] = fp16_to_f32(fp16_from_f32(x[i]));
}

static float max_avx2(const float *s, int n)
{
    /* max in any order is exact; NaN scores are skipped as in the scalar loop (vmaxps returns
     * its second operand, the running max, when the first is NaN) */
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    int p = 0;
    for (; p + 8 <= n; p += 8) vmx = _mm256_max_ps(_mm256_loadu_ps(s + p), vmx);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float mx = _mm_cvtss_f32(m4);
    for (; p < n; p++) mx = s[p] > mx ? s[p] : mx;
    return mx;
}

static void normalize_avx2(float *s, int n, float inv)
{
    const __m256 vi = _mm256_set1_ps(inv);
    int p = 0;
    for (; p + 8 <= n; p += 8) {
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + p), vi);
        _mm256_storeu_ps(s + p, _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)));
    }
    for (; p < n; p++) s[p] = fp16_to_f32(fp16_from_f32(s[p] * inv));
}

void attn_softmax_avx2(float *s, int n)
{
    TERN_ASSERT(n >= 1, "a softmax over at least one key");
    const double sum = vexp_sum_avx2(s, n, max_avx2(s, n));
    normalize_avx2(s, n, (float)(1.0 / sum));
}

void attn_bsoftmax_avx2(float *s, size_t ss, const int *off, const int *n, int nq)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX, "a block holds at most ATTN_BLOCK_MAX queries");
    attn_bsoftmax_with(s, ss, off, n, nq, max_avx2, vexp_sub_avx2, normalize_avx2);
}

/* Butterfly levels: each adds lanes at one distance for two vectors at a time. */
static inline __m256 pair4(__m256 x, __m256 y)
{
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}
static inline __m256 pair2(__m256 x, __m256 y)
{
    return _mm256_add_ps(_mm256_shuffle_ps(x, y, 0x44), _mm256_shuffle_ps(x, y, 0xEE));
}
static inline __m256 pair1(__m256 x, __m256 y)
{
    return _mm256_add_ps(_mm256_shuffle_ps(x, y, 0x88), _mm256_shuffle_ps(x, y, 0xDD));
}

/* Eight reductions at once: the reduction of d[s] lands in lane 4 * (s % 2) + s / 2, so the
 * tile holds key slot_key[s] (the same formula) in row s and the lanes come out in key order. */
static inline __m256 reduce8(const __m256 *d)
{
    const __m256 a0 = pair4(d[0], d[1]), a1 = pair4(d[2], d[3]);
    const __m256 a2 = pair4(d[4], d[5]), a3 = pair4(d[6], d[7]);
    return pair1(pair2(a0, a1), pair2(a2, a3));
}

static const int slot_key[8] = {0, 4, 1, 5, 2, 6, 3, 7};

void attn_bscores_avx2(const float *q, int nq, const uint16_t *k, int n_keys, int hd, float scale,
                       float *s, size_t ss, float *tile)
{
    TERN_ASSERT(nq >= 1 && n_keys >= 0 && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
    TERN_ASSERT(ss >= ((size_t)n_keys + 15) / 16 * 16, "score rows have room for n_keys rounded up to 16");
    const __m256 vs = _mm256_set1_ps(scale);
    for (int p0 = 0; p0 < n_keys; p0 += 8) {
        const int nt = n_keys - p0 < 8 ? n_keys - p0 : 8;
        for (int r = 0; r < 8; r++) { /* rows past the last key are zero: finite, unused */
            float *tr = tile + (size_t)r * hd;
            const int key = slot_key[r];
            if (key >= nt) {
                for (int j = 0; j < hd; j += 8) _mm256_storeu_ps(tr + j, _mm256_setzero_ps());
                continue;
            }
            const uint16_t *kr = k + (size_t)(p0 + key) * hd;
            for (int j = 0; j < hd; j += 8)
                _mm256_storeu_ps(tr + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + j))));
        }
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * hd;
            /* the eight keys' chains side by side (each one alone waits on its fma's latency at
             * every step); each chain still adds its terms in j order, as the per-query kernel */
            __m256 d[8];
            for (int r = 0; r < 8; r++) d[r] = _mm256_setzero_ps();
            for (int j = 0; j < hd; j += 8) {
                const __m256 qv = _mm256_loadu_ps(qi + j);
                for (int r = 0; r < 8; r++) d[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(tile + (size_t)r * hd + j), d[r]);
            }
            _mm256_storeu_ps(s + i * ss + p0, _mm256_mul_ps(reduce8(d), vs));
        }
    }
}

/* ng queries (a compile-time count once inlined) against V columns j..j+7: one conversion of
 * each V row serves the group; the common even prefix of keys runs together, then each query
 * finishes its own tail, with the even/odd accumulators of the per-query loop. */
static inline __attribute__((always_inline)) void wsum_group(const float *w, size_t ws,
                                                             const int *nk, const int ng,
                                                             const uint16_t *v, int hd, int j,
                                                             float *const *out)
{
    __m256 a0[6], a1[6];
    int e = nk[0];
    for (int i = 1; i < ng; i++) e = nk[i] < e ? nk[i] : e;
    e &= ~1;
    for (int i = 0; i < ng; i++) a0[i] = a1[i] = _mm256_setzero_ps();
    for (int p = 0; p < e; p += 2) {
        const __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)p * hd + j)));
        const __m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)(p + 1) * hd + j)));
        for (int i = 0; i < ng; i++) {
            a0[i] = _mm256_fmadd_ps(_mm256_set1_ps(w[i * ws + p]), v0, a0[i]);
            a1[i] = _mm256_fmadd_ps(_mm256_set1_ps(w[i * ws + p + 1]), v1, a1[i]);
        }
    }
    for (int i = 0; i < ng; i++) {
        const float *wi = w + i * ws;
        int p = e;
        for (; p + 1 < nk[i]; p += 2) {
            const __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)p * hd + j)));
            const __m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)(p + 1) * hd + j)));
            a0[i] = _mm256_fmadd_ps(_mm256_set1_ps(wi[p]), v0, a0[i]);
            a1[i] = _mm256_fmadd_ps(_mm256_set1_ps(wi[p + 1]), v1, a1[i]);
        }
        if (p < nk[i]) {
            const __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)p * hd + j)));
            a0[i] = _mm256_fmadd_ps(_mm256_set1_ps(wi[p]), v0, a0[i]);
        }
        _mm256_storeu_ps(out[i] + j, _mm256_add_ps(a0[i], a1[i]));
    }
}

void attn_bwsum_avx2(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                     float *const *out)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX && hd > 0 && hd % 8 == 0, "attn_select picks this path only for head_dim % 8 == 0");
    for (int j = 0; j < hd; j += 8)
        for (int i0 = 0; i0 < nq; i0 += 6) {
            const float *wi = w + i0 * ws;
            const int *ni = nk + i0;
            float *const *oi = out + i0;
            switch (nq - i0 < 6 ? nq - i0 : 6) {
            case 1: wsum_group(wi, ws, ni, 1, v, hd, j, oi); break;
            case 2: wsum_group(wi, ws, ni, 2, v, hd, j, oi); break;
            case 3: wsum_group(wi, ws, ni, 3, v, hd, j, oi); break;
            case 4: wsum_group(wi, ws, ni, 4, v, hd, j, oi); break;
            case 5: wsum_group(wi, ws, ni, 5, v, hd, j, oi); break;
            default: wsum_group(wi, ws, ni, 6, v, hd, j, oi); break;
            }
        }
}
