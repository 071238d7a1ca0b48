/* attn.c — scalar reference attention loops, their block versions, and the run-time choice of
 * path (see attn.h). The scalar block kernels simply run the per-query loops: they define what
 * every SIMD block kernel must reproduce per query. */
#include "kernels/attn.h"
#include "util/check.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/vexp.h"
#include "util/fp16.h"
#if defined(__aarch64__)
#include "kernels/attn_neon.h"
#endif

void attn_scores_scalar(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    TERN_ASSERT(n_keys >= 0 && hd > 0);
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        float dot = 0.0f;
        for (int j = 0; j < hd; j++) dot += q[j] * fp16_to_f32(kr[j]);
        s[p] = dot * scale;
    }
}

void attn_wsum_scalar(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    TERN_ASSERT(n_keys >= 0 && hd > 0);
    for (int j = 0; j < hd; j++) out[j] = 0.0f;
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *vr = v + (size_t)p * hd;
        for (int j = 0; j < hd; j++) out[j] += w[p] * fp16_to_f32(vr[j]);
    }
}

/* The exponentials are vexp_f32 (the same bits on every path, vexp.h) and the sum runs in
 * double in key order, so the weights are the same bits whichever ISA computed the max and the
 * normalization (those two are exact in any order). */
static float max_scalar(const float *s, int n)
{
    float mx = -INFINITY;
    for (int p = 0; p < n; p++) mx = s[p] > mx ? s[p] : mx;
    return mx;
}

static void normalize_scalar(float *s, int n, float inv)
{
    for (int p = 0; p < n; p++) s[p] = fp16_to_f32(fp16_from_f32(s[p] * inv));
}

void attn_softmax_scalar(float *s, int n)
{
    TERN_ASSERT(n >= 1, "a softmax over at least one key");
    const double sum = vexp_sum_scalar(s, n, max_scalar(s, n));
    normalize_scalar(s, n, (float)(1.0 / sum));
}

/* G rows from row[0], their common first e entries with G chains in lockstep, then each row's
 * rest with its own chain: every row's additions stay in index order. */
static inline __attribute__((always_inline)) void sum_group(float *const *row, const int *n,
                                                            const int G, double *sum)
{
    double acc[8];
    int e = n[0];
    for (int i = 0; i < G; i++) {
        acc[i] = 0.0;
        e = n[i] < e ? n[i] : e;
    }
    for (int p = 0; p < e; p++)
        for (int i = 0; i < G; i++) acc[i] += (double)row[i][p];
    for (int i = 0; i < G; i++) {
        for (int p = e; p < n[i]; p++) acc[i] += (double)row[i][p];
        sum[i] = acc[i];
    }
}

static void sum_rows(float *const *row, const int *n, int nq, double *sum)
{
    int i = 0;
    for (; i + 8 <= nq; i += 8) sum_group(row + i, n + i, 8, sum + i);
    if (i + 4 <= nq) {
        sum_group(row + i, n + i, 4, sum + i);
        i += 4;
    }
    if (i + 2 <= nq) {
        sum_group(row + i, n + i, 2, sum + i);
        i += 2;
    }
    if (i < nq) sum_group(row + i, n + i, 1, sum + i);
}

void attn_bsoftmax_with(float *s, size_t ss, const int *off, const int *n, int nq, attn_max_fn max,
                        void (*exp_sub)(float *s, int n, float mx), attn_norm_fn norm)
{
    float *row[ATTN_BLOCK_MAX] = {0};
    double sum[ATTN_BLOCK_MAX];
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX, "row and sum hold ATTN_BLOCK_MAX rows");
    for (int i = 0; i < nq; i++) {
        /* once per row, not per score: the row lies inside its ss floats, and is not empty */
        TERN_ASSERT(n[i] >= 1 && off[i] >= 0 && (size_t)off[i] + (size_t)n[i] <= ss);
        row[i] = s + (size_t)i * ss + off[i];
        exp_sub(row[i], n[i], max(row[i], n[i]));
    }
    sum_rows(row, n, nq, sum);
    for (int i = 0; i < nq; i++) norm(row[i], n[i], (float)(1.0 / sum[i]));
}

void attn_bsoftmax_scalar(float *s, size_t ss, const int *off, const int *n, int nq)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX, "a block holds at most ATTN_BLOCK_MAX queries");
    attn_bsoftmax_with(s, ss, off, n, nq, max_scalar, vexp_sub_scalar, normalize_scalar);
}

void attn_bscores_scalar(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                         float scale, float *s, size_t ss, float *tile)
{
    TERN_ASSERT(nq >= 1 && n_keys >= 0 && hd > 0);
    TERN_ASSERT(ss >= ((size_t)n_keys + 15) / 16 * 16, "score rows have room for n_keys rounded up to 16");
    (void)tile;
    for (int i = 0; i < nq; i++) attn_scores_scalar(q + (size_t)i * hd, k, n_keys, hd, scale, s + i * ss);
}

void attn_bwsum_scalar(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                       float *const *out)
{
    TERN_ASSERT(nq >= 1 && nq <= ATTN_BLOCK_MAX && hd > 0);
    for (int i = 0; i < nq; i++) attn_wsum_scalar(w + i * ws, v, nk[i], hd, out[i]);
}

void attn_round_f16_scalar(const float *x, float *y, int n)
{
    TERN_ASSERT(n >= 0);
    for (int i = 0; i < n; i++) y[i] = fp16_to_f32(fp16_from_f32(x[i]));
}

struct attn_kernels attn_select(int hd)
{
    TERN_ASSERT(hd > 0, "a head dimension from a model that loaded");
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512") && hd % 16 == 0)
        return (struct attn_kernels){attn_scores_avx512, attn_wsum_avx512, attn_softmax_avx512,
                                     attn_bscores_avx512, attn_bwsum_avx512, attn_bsoftmax_avx512,
                                     attn_round_f16_avx512, "avx512"};
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) && hd % 8 == 0)
        return (struct attn_kernels){attn_scores_avx2, attn_wsum_avx2, attn_softmax_avx2,
                                     attn_bscores_avx2, attn_bwsum_avx2, attn_bsoftmax_avx2,
                                     attn_round_f16_avx2, "avx2"};
#elif defined(__aarch64__)
    if (!strcmp(isa, "neon") && hd % 8 == 0)
        return (struct attn_kernels){attn_scores_neon, attn_wsum_neon, attn_softmax_neon,
                                     attn_bscores_neon, attn_bwsum_neon, attn_bsoftmax_neon,
                                     attn_round_f16_scalar, "neon"};
#endif
    (void)hd;
    (void)isa;
    return (struct attn_kernels){attn_scores_scalar, attn_wsum_scalar, attn_softmax_scalar,
                                 attn_bscores_scalar, attn_bwsum_scalar, attn_bsoftmax_scalar,
                                 attn_round_f16_scalar, "scalar"};
}
