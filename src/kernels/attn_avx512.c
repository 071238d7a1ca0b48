/* attn_avx512.c — AVX-512 attention loops (see attn.h); head_dim a multiple of 16.
 *
 * The per-query kernels define the numerics: a dot product is a 16-lane vector (for head sizes
 * that are multiples of 32 the sum of two chains, even and odd 16-element chunks: dot_ab) reduced
 * by _mm512_reduce_add_ps (lanes paired at distance 8, 4, 2, 1). The block kernels convert a tile
 * of 16 keys to float once per block, build the same 16-lane vector for each (query, key), and
 * reduce 16 such vectors at once with a butterfly that pairs lanes at the same distances in the
 * same order, so every score has the per-query kernel's bits. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "kernels/vexp.h"

/* q . t over hd floats as two chains: a over the even 16-lane chunks, b over the odd ones (each
 * a multiply, then FMAs in chunk order), then a + b: the summation tree of every head size that
 * is a multiple of 32 (for 64 it is the one the hd == 64 loops below spell out). Two chains
 * instead of one halve the latency a dot waits on; the block kernel's 16 keys then have 32. */
static inline __attribute__((always_inline)) __m512 dot_ab(const float *q, const float *t, int hd)
{
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(t));
    __m512 b = _mm512_mul_ps(_mm512_loadu_ps(q + 16), _mm512_loadu_ps(t + 16));
    for (int j = 32; j < hd; j += 32) {
        a = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(t + j), a);
        b = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), _mm512_loadu_ps(t + j + 16), b);
    }
    return _mm512_add_ps(a, b);
}

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
    if (hd % 32 == 0) { /* dot_ab's tree, the key row converted as it is read */
        for (int p = 0; p < n_keys; p++) {
            const uint16_t *kr = k + (size_t)p * hd;
            __m512 a = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)kr)));
            __m512 b = _mm512_mul_ps(_mm512_loadu_ps(q + 16),
                                     _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + 16))));
            for (int j = 32; j < hd; j += 32) {
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + j),
                                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + j))), a);
                b = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16),
                                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + j + 16))), b);
            }
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

void attn_round_f16_avx512(const float *x, float *y, int n)
{
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
    const double sum = vexp_sum_avx512(s, n, max_avx512(s, n));
    normalize_avx512(s, n, (float)(1.0 / sum));
}

void attn_bsoftmax_avx512(float *s, size_t ss, const int *off, const int *n, int nq)
{
    attn_bsoftmax_with(s, ss, off, n, nq, max_avx512, vexp_sub_avx512, normalize_avx512);
}

/* Butterfly levels: each adds lanes at one distance for two vectors at a time. */
static inline __m512 pair8(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
}
static inline __m512 pair4(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
}
static inline __m512 pair2(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xEE));
}
static inline __m512 pair1(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD));
}

/* Sixteen reductions at once: the reduction of d[s] lands in lane 4 * (s % 4) + s / 4, so the
 * tile holds key slot_key[s] (the same formula) in row s and the lanes come out in key order. */
static inline __m512 reduce16(const __m512 *d)
{
    const __m512 a0 = pair8(d[0], d[1]), a1 = pair8(d[2], d[3]), a2 = pair8(d[4], d[5]);
    const __m512 a3 = pair8(d[6], d[7]), a4 = pair8(d[8], d[9]), a5 = pair8(d[10], d[11]);
    const __m512 a6 = pair8(d[12], d[13]), a7 = pair8(d[14], d[15]);
    const __m512 b0 = pair4(a0, a1), b1 = pair4(a2, a3), b2 = pair4(a4, a5), b3 = pair4(a6, a7);
    return pair1(pair2(b0, b1), pair2(b2, b3));
}

static const int slot_key[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

void attn_bscores_avx512(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                         float scale, float *s, size_t ss, float *tile)
{
    const __m512 vs = _mm512_set1_ps(scale);
    for (int p0 = 0; p0 < n_keys; p0 += 16) {
        const int nt = n_keys - p0 < 16 ? n_keys - p0 : 16;
        for (int r = 0; r < 16; r++) { /* rows past the last key are zero: finite, unused */
            float *tr = tile + (size_t)r * hd;
            const int key = slot_key[r];
            if (key >= nt) {
                for (int j = 0; j < hd; j += 16) _mm512_storeu_ps(tr + j, _mm512_setzero_ps());
                continue;
            }
            const uint16_t *kr = k + (size_t)(p0 + key) * hd;
            for (int j = 0; j < hd; j += 16)
                _mm512_storeu_ps(tr + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + j))));
        }
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * hd;
            __m512 d[16];
            if (hd == 64) {
                const __m512 q0 = _mm512_loadu_ps(qi), q1 = _mm512_loadu_ps(qi + 16);
                const __m512 q2 = _mm512_loadu_ps(qi + 32), q3 = _mm512_loadu_ps(qi + 48);
                for (int r = 0; r < 16; r++) {
                    const float *tr = tile + r * 64;
                    __m512 a = _mm512_mul_ps(q0, _mm512_loadu_ps(tr));
                    __m512 b = _mm512_mul_ps(q1, _mm512_loadu_ps(tr + 16));
                    a = _mm512_fmadd_ps(q2, _mm512_loadu_ps(tr + 32), a);
                    b = _mm512_fmadd_ps(q3, _mm512_loadu_ps(tr + 48), b);
                    d[r] = _mm512_add_ps(a, b);
                }
            } else if (hd == 128) { /* dot_ab's tree with q in registers */
                __m512 qv[8];
                for (int c = 0; c < 8; c++) qv[c] = _mm512_loadu_ps(qi + 16 * c);
                for (int r = 0; r < 16; r++) {
                    const float *tr = tile + r * 128;
                    __m512 a = _mm512_mul_ps(qv[0], _mm512_loadu_ps(tr));
                    __m512 b = _mm512_mul_ps(qv[1], _mm512_loadu_ps(tr + 16));
                    for (int c = 2; c < 8; c += 2) {
                        a = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(tr + 16 * c), a);
                        b = _mm512_fmadd_ps(qv[c + 1], _mm512_loadu_ps(tr + 16 * c + 16), b);
                    }
                    d[r] = _mm512_add_ps(a, b);
                }
            } else if (hd % 32 == 0) {
                for (int r = 0; r < 16; r++) d[r] = dot_ab(qi, tile + (size_t)r * hd, hd);
            } else {
                for (int r = 0; r < 16; r++) {
                    const float *tr = tile + (size_t)r * hd;
                    __m512 acc = _mm512_setzero_ps();
                    for (int j = 0; j < hd; j += 16)
                        acc = _mm512_fmadd_ps(_mm512_loadu_ps(qi + j), _mm512_loadu_ps(tr + j), acc);
                    d[r] = acc;
                }
            }
            _mm512_storeu_ps(s + i * ss + p0, _mm512_mul_ps(reduce16(d), vs));
        }
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
