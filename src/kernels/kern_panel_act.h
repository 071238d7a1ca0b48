/* kern_panel_act.h — the activation side of a panel token tile (struct pn_act of
 * kern_panel_layout.h): per token and sub-block of a k chunk, the integer dot's start value (the
 * weight offset removed exactly: -off * sum(a)), the activation scale, and the mins term's scale x
 * sub-block sum. Needs AVX2 and F16C: included by the AVX-512 and the 256-bit panel files only. */
#ifndef TERN_KERN_PANEL_ACT_H
#define TERN_KERN_PANEL_ACT_H

#include <immintrin.h>

#include "kernels/kern_panel_layout.h"

/* sum of the 32 signed bytes at p */
PN_INLINE int pn_sum32(const int8_t *p)
{
    const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(x, _mm256_setzero_si256()); /* of a + 128 */
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
}

static inline void pn_act_prepare(int fmt, const uint8_t *A, size_t as, int nt, int64_t b0, int nbc,
                                  struct pn_act *S)
{
    for (int j = 0; j < nt; j++) {
        const uint8_t *row = A + (size_t)j * as;
        if (fmt == PN_Q8_0 || fmt == PN_Q4_0 || fmt == PN_Q5_0) {
            const int off = fmt == PN_Q8_0 ? 128 : fmt == PN_Q5_0 ? 16 : 8;
            const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)row + b0;
            for (int b = 0; b < nbc; b++) {
                S->init[j][b] = -off * pn_sum32(ab[b].qs);
                S->da[j][b] = _cvtsh_ss(ab[b].d);
            }
        } else if (PN_MIN1(fmt)) { /* Q5_1, Q4_1 */
            const struct quant_block_q8_1 *ab = (const struct quant_block_q8_1 *)row + b0;
            for (int b = 0; b < nbc; b++) {
                S->init[j][b] = 0; /* codes carry no offset */
                S->da[j][b] = _cvtsh_ss(ab[b].d);
                S->am[j][b] = _cvtsh_ss(ab[b].s);
            }
        } else {
            const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)row + b0;
            for (int b = 0; b < nbc; b++) {
                if (PN_MINS(fmt))
                    for (int s = 0; s < 8; s++) {
                        S->init[j][8 * b + s] = 0;
                        S->da[j][8 * b + s] = ab[b].d;
                        S->am[j][8 * b + s] = ab[b].d * (float)(ab[b].bsums[2 * s] + ab[b].bsums[2 * s + 1]);
                    }
                else
                    for (int s = 0; s < 16; s++) {
                        S->init[j][16 * b + s] = -32 * ab[b].bsums[s];
                        S->da[j][16 * b + s] = ab[b].d;
                    }
            }
        }
    }
}

#endif
