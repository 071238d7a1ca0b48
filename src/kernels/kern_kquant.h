/* kern_kquant.h — the scalar parts of the K-quant kernels, the same on every ISA (plain C): the
 * eight 6-bit sub-block scales and mins packed in a Q4_K / Q5_K block's 12 scale bytes, and the
 * value a Q8_K activation block is scaled by. Included by kern_simd_impl.h (AVX2, AVX-512),
 * kern_decode_avx512.c, kern_neon_impl.h and kern_neon_base.c.
 *
 * Read first: the Q4_K and Q8_K layouts in src/quant/quant.h (quant_q4k_scale_min is the same
 * unpacking, one sub-block at a time). */
#ifndef TERN_KERN_KQUANT_H
#define TERN_KERN_KQUANT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The 12 scale bytes q -> sc[j], m[j] for sub-blocks j < 8, four at a time in 32-bit words:
 * sub-blocks 0-3 are the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7 a nibble of
 * bytes 8-11 plus the top 2 bits of bytes 0-3 / 4-7. */
static inline __attribute__((always_inline)) void kern_q4k_scales(const uint8_t *q, uint8_t sc[8],
                                                                 uint8_t m[8])
{
    uint32_t a, b, c;
    memcpy(&a, q, 4);
    memcpy(&b, q + 4, 4);
    memcpy(&c, q + 8, 4);
    const uint32_t sc_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
    const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    memcpy(sc, &sc_lo, 4);
    memcpy(sc + 4, &sc_hi, 4);
    memcpy(m, &m_lo, 4);
    memcpy(m + 4, &m_hi, 4);
}

/* The first of the n values x[j] with |x[j]| == amax (their largest magnitude, amax > 0), with
 * its sign: Q8_K's scale is -127 / it, as the scalar reference (quant_q8_K_from_float) takes it. */
static inline __attribute__((always_inline)) float kern_q8k_first_max(const float *x, int n,
                                                                      float amax)
{
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) == amax) return x[j];
    return 0;
}

#endif
