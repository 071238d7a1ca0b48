/* attn_neon.h — the AArch64 NEON versions of the two attention inner loops of attn.h (same
 * contract: q and w already rounded to F16 precision, K/V rows of hd halves, hd % 8 == 0).
 * Defined in attn_neon.c, which only exists in AArch64 builds; attn_select() picks them when
 * the kernel path is "neon". They differ from the scalar loops only in summation order. */
#ifndef TERN_MODEL_ATTN_NEON_H
#define TERN_MODEL_ATTN_NEON_H

#include <stdint.h>

void attn_scores_neon(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_neon(const float *w, const uint16_t *v, int n_keys, int hd, float *out);

#endif
