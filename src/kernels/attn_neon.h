/* attn_neon.h — the AArch64 NEON versions of the attention inner loops of attn.h (same
 * contract: q and w already rounded to F16 precision, K/V rows of hd halves, hd % 8 == 0).
 * Defined in attn_neon.c, which only exists in AArch64 builds; attn_select() picks them when
 * the kernel path is "neon". They differ from the scalar loops only in summation order. */
#ifndef TERN_KERNELS_ATTN_NEON_H
#define TERN_KERNELS_ATTN_NEON_H

#include <stddef.h>
#include <stdint.h>

void attn_scores_neon(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_neon(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_softmax_neon(float *s, int n);
void attn_bscores_neon(const float *q, int nq, const uint16_t *k, int n_keys, int hd, float scale,
                       float *s, size_t ss, float *tile);
void attn_bsoftmax_neon(float *s, size_t ss, const int *off, const int *n, int nq);
void attn_bwsum_neon(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                     float *const *out);

#endif
