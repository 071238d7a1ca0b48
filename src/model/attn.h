/* attn.h — the two inner loops of attention over the F16 KV cache, with SIMD paths.
 *
 * attn_scores:       s[p] = scale * sum_j q[j] * K[p][j]      for p < n_keys
 * attn_weighted_sum: out[j] = sum_p w[p] * V[p][j]
 * q and w hold values already rounded to F16 precision (as llama.cpp rounds them), K and V rows
 * are head_dim halves, contiguous. The scalar versions are the reference; the AVX2 / AVX-512
 * versions differ only in summation order (tested in test_attn). The path follows the kernel
 * ISA chosen at run time (kern_isa_name(), TERN_KERNELS to force one). */
#ifndef TERN_MODEL_ATTN_H
#define TERN_MODEL_ATTN_H

#include <stdint.h>

typedef void (*attn_scores_fn)(const float *q, const uint16_t *k, int n_keys, int hd, float scale,
                               float *s);
typedef void (*attn_wsum_fn)(const float *w, const uint16_t *v, int n_keys, int hd, float *out);

struct attn_kernels {
    attn_scores_fn scores;
    attn_wsum_fn wsum;
    const char *name;
};

/* The kernels for this CPU (and head_dim: SIMD paths need hd % 16 (AVX-512) or % 8 (AVX2)). */
struct attn_kernels attn_select(int hd);

void attn_scores_scalar(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_scalar(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_scores_avx2(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_avx2(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_scores_avx512(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_avx512(const float *w, const uint16_t *v, int n_keys, int hd, float *out);

#endif
