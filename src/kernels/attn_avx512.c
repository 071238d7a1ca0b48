/* attn_avx512.c — AVX-512 attention loops (see attn.h); head_dim a multiple of 16.
 *
 * The per-query kernels define the numerics. A score sums the head dimension in two chains, even
 * and odd elements (attn_scores_avx512); the block kernel computes exactly that with a zmm lane
 * per key over a converted, transposed tile of keys, so every score has the per-query kernel's
 * bits. The weighted sum keeps a lane per element of the head dimension. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "util/check.h"
#include "kernels/vexp.h"

/* The score of one (query, key) in this path's summation order: two chains over the head
 * dimension, a over the even elements and b over the odd ones (each a product, then FMAs in
 * element order), then (a + b) * scale. That is the order in which the block kernel below, with
 * a zmm lane per key, sums each lane; this per-query form spells it out element by element (it
 * is the reference test_attn holds the block kernel to, bit for bit). */
void attn_scores_avx512(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 16 == 0, "attn_select picks this path only for head_dim % 16 == 0");
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        float a = q[0] * _cvtsh_ss(kr[0]), b = q[1] * _cvtsh_ss(kr[1]);
        for (int j = 2; j < hd; j += 2) {
            a = fmaf(q[j], _cvtsh_ss(kr[j]), a);
            b = fmaf(q[j + 1], _cvtsh_ss(kr[j + 1]), b);
        }
        s[p] = (a + b) * scale;
    }
}

void attn_wsum_avx512(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    TERN_ASSERT(n_keys >= 0 && hd > 0 && hd % 16 == 0, "attn_select picks this path only for head_dim % 16 == 0");
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

void attn_round_f16_avx512(const float *x, float *y, int n)
{
    TERN_ASSERT(n >= 0);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
    }
}

static float max_avx512(const float *s, int n)
{
    /* max in any order is exact; NaN scores are skipped as in the scalar loop (vmaxps returns
     * its second operand, the running max, when the first is NaN) */
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    int p = 0;
    for (; p + 16 <= n; p += 16) vmx = _mm512_max_ps(_mm512_loadu_ps(s + p), vmx);
    float mx = _mm512_reduce_max_ps(vmx);
    for (; p < n; p++) mx = s[p] > mx ? s[p] : mx;
    return mx;
}

static void normalize_avx512(float *s, int n, float inv_f)
{
    const __m512 inv = _mm512_set1_ps(inv_f);
    for (int p = 0; p < n; p += 16) {
        const __mmask16 m = n - p >= 16 ? 0xffff : (__mmask16)((1u << (n - p)) - 1);
        const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + p), inv);
        const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(s + p, m, _mm512_cvtph_ps(h));
    }
}

void attn_softmax_avx512(float *s, int n)
{
    TERN_ASSERT(n >= 1, "a softmax over at least one key");
    const double sum = vexp_sum_avx512(s, n, max_avx512(s, n));
    normalize_avx512(s, n, (float)(1.0 / sum));
}

void attn_bsoftmax_avx512(float *s, size_t ss, const int *off, const int *n, int nq)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX, "a block holds at most ATTN_BLOCK_MAX queries");
    attn_bsoftmax_with(s, ss, off, n, nq, max_avx512, vexp_sub_avx512, normalize_avx512);
}

/* 16 rows of 16 floats (r[i] = row i) become their columns (r[c] = column c), in registers. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* r[i + e]: element e (+ 4 per 128-bit lane) of rows i..i+3 */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int e = 0; e < 4; e++) { /* then the 128-bit lanes gathered across the four row groups */
        t[e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);
        t[4 + e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xDD);
        t[8 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
        t[12 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xDD);
    }
    for (int e = 0; e < 4; e++) {
        r[e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0xDD);
        r[4 + e] = _mm512_shuffle_f32x4(t[4 + e], t[12 + e], 0x88);
        r[12 + e] = _mm512_shuffle_f32x4(t[4 + e], t[12 + e], 0xDD);
    }
}

/* m (<= 4) queries q + i * hd against nv (1 or 2) vectors of 16 keys of the transposed tile T
 * (element d of key 16 v + r at T + ATTN_TILE_KEYS d + 16 v); m and nv are constants once inlined. Each lane
 * sums attn_scores_avx512's two chains; per pair of elements 4 tile loads and 8 broadcasts feed
 * 16 FMAs in 16 independent chains. */
static inline __attribute__((always_inline)) void bscores_group(const float *q, int m, int nv, int hd,
                                                                const float *T, __m512 vs, float *s, size_t ss)
{
    __m512 a[4][2], b[4][2];
    for (int i = 0; i < m; i++) {
        const __m512 q0 = _mm512_set1_ps(q[(size_t)i * hd]), q1 = _mm512_set1_ps(q[(size_t)i * hd + 1]);
        for (int v = 0; v < nv; v++) {
            a[i][v] = _mm512_mul_ps(q0, _mm512_loadu_ps(T + 16 * v));
            b[i][v] = _mm512_mul_ps(q1, _mm512_loadu_ps(T + ATTN_TILE_KEYS + 16 * v));
        }
    }
    for (int d = 2; d < hd; d += 2) {
        __m512 u0[2], u1[2];
        for (int v = 0; v < nv; v++) {
            u0[v] = _mm512_loadu_ps(T + ATTN_TILE_KEYS * d + 16 * v);
            u1[v] = _mm512_loadu_ps(T + ATTN_TILE_KEYS * (d + 1) + 16 * v);
        }
        for (int i = 0; i < m; i++) {
            const __m512 q0 = _mm512_set1_ps(q[(size_t)i * hd + d]), q1 = _mm512_set1_ps(q[(size_t)i * hd + d + 1]);
            for (int v = 0; v < nv; v++) {
                a[i][v] = _mm512_fmadd_ps(q0, u0[v], a[i][v]);
                b[i][v] = _mm512_fmadd_ps(q1, u1[v], b[i][v]);
            }
        }
    }
    for (int i = 0; i < m; i++)
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(s + (size_t)i * ss + 16 * v, _mm512_mul_ps(_mm512_add_ps(a[i][v], b[i][v]), vs));
}

static inline __attribute__((always_inline)) void bscores_queries(const float *q, int nq, int nv, int hd,
                                                                  const float *T, __m512 vs, float *s, size_t ss)
{
    int i = 0;
    for (; i + 4 <= nq; i += 4) bscores_group(q + (size_t)i * hd, 4, nv, hd, T, vs, s + i * ss, ss);
    switch (nq - i) {
    case 3: bscores_group(q + (size_t)i * hd, 3, nv, hd, T, vs, s + i * ss, ss); break;
    case 2: bscores_group(q + (size_t)i * hd, 2, nv, hd, T, vs, s + i * ss, ss); break;
    case 1: bscores_group(q + (size_t)i * hd, 1, nv, hd, T, vs, s + i * ss, ss); break;
    default: break;
    }
}

/* Per tile of 32 keys (16 for the last, when that is all that is left): the keys are converted and
 * transposed once (tile: 32 x hd floats), then the block's queries run four at a time against
 * both 16-key vectors, a zmm lane per key. The kernel this replaced kept a lane per element of the
 * head dimension and spent as many shuffles reducing each 16 dot products as FMAs computing them. */
void attn_bscores_avx512(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                         float scale, float *s, size_t ss, float *tile)
{
    TERN_ASSERT(nq >= 1 && n_keys >= 0 && hd > 0 && hd % 16 == 0, "attn_select picks this path only for head_dim % 16 == 0");
    TERN_ASSERT(ss >= ((size_t)n_keys + 15) / 16 * 16, "score rows have room for n_keys rounded up to 16");
    const __m512 vs = _mm512_set1_ps(scale);
    for (int p0 = 0; p0 < n_keys; p0 += ATTN_TILE_KEYS) { /* two vectors of 16 keys */
        const int nt = n_keys - p0 < ATTN_TILE_KEYS ? n_keys - p0 : ATTN_TILE_KEYS, nv = nt > 16 ? 2 : 1;
        for (int v = 0; v < nv; v++)
            for (int j = 0; j < hd; j += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++) { /* keys past the last are zero: finite, unused */
                    const int key = 16 * v + i;
                    r[i] = key < nt ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + (size_t)(p0 + key) * hd + j)))
                                    : _mm512_setzero_ps();
                }
                transpose16(r);
                for (int c = 0; c < 16; c++) _mm512_storeu_ps(tile + (size_t)(j + c) * ATTN_TILE_KEYS + 16 * v, r[c]);
            }
        if (nv == 2)
            bscores_queries(q, nq, 2, hd, tile, vs, s + p0, ss);
        else
            bscores_queries(q, nq, 1, hd, tile, vs, s + p0, ss);
    }
}

/* ng queries (a compile-time count once inlined) against V columns j..j+15: one conversion of
 * each V row serves the whole group. Keys below the group's smallest even count run together;
 * each query then finishes its own tail, with the even/odd accumulators of the per-query loop. */
static inline __attribute__((always_inline)) void wsum_group(const float *w, size_t ws,
                                                             const int *nk, const int ng,
                                                             const uint16_t *v, int hd, int j,
                                                             float *const *out)
{
    __m512 a0[8], a1[8];
    int e = nk[0];
    for (int i = 1; i < ng; i++) e = nk[i] < e ? nk[i] : e;
    e &= ~1;
    for (int i = 0; i < ng; i++) a0[i] = a1[i] = _mm512_setzero_ps();
    for (int p = 0; p < e; p += 2) {
        const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)p * hd + j)));
        const __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)(p + 1) * hd + j)));
        for (int i = 0; i < ng; i++) {
            a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(w[i * ws + p]), v0, a0[i]);
            a1[i] = _mm512_fmadd_ps(_mm512_set1_ps(w[i * ws + p + 1]), v1, a1[i]);
        }
    }
    for (int i = 0; i < ng; i++) {
        const float *wi = w + i * ws;
        int p = e;
        for (; p + 1 < nk[i]; p += 2) {
            const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)p * hd + j)));
            const __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)(p + 1) * hd + j)));
            a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(wi[p]), v0, a0[i]);
            a1[i] = _mm512_fmadd_ps(_mm512_set1_ps(wi[p + 1]), v1, a1[i]);
        }
        if (p < nk[i]) {
            const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)p * hd + j)));
            a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(wi[p]), v0, a0[i]);
        }
        _mm512_storeu_ps(out[i] + j, _mm512_add_ps(a0[i], a1[i]));
    }
}

void attn_bwsum_avx512(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                       float *const *out)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX && hd > 0 && hd % 16 == 0, "attn_select picks this path only for head_dim % 16 == 0");
    for (int j = 0; j < hd; j += 16)
        for (int i0 = 0; i0 < nq; i0 += 8) {
            const float *wi = w + i0 * ws;
            const int *ni = nk + i0;
            float *const *oi = out + i0;
            switch (nq - i0 < 8 ? nq - i0 : 8) {
            case 1: wsum_group(wi, ws, ni, 1, v, hd, j, oi); break;
            case 2: wsum_group(wi, ws, ni, 2, v, hd, j, oi); break;
            case 3: wsum_group(wi, ws, ni, 3, v, hd, j, oi); break;
            case 4: wsum_group(wi, ws, ni, 4, v, hd, j, oi); break;
            case 5: wsum_group(wi, ws, ni, 5, v, hd, j, oi); break;
            case 6: wsum_group(wi, ws, ni, 6, v, hd, j, oi); break;
            case 7: wsum_group(wi, ws, ni, 7, v, hd, j, oi); break;
            default: wsum_group(wi, ws, ni, 8, v, hd, j, oi); break;
            }
        }
}
