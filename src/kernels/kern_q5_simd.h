/* kern_q5_simd.h — the Q5_0, Q5_1 (and Q4_1) and Q5_K steps of the 256-bit tile kernels, compiled twice: by
 * kern_q5_avx2.c (maddubs + madd) and kern_q5_avx512.c (vpdpbusd). Include only from those two
 * files, after kern_simd_impl.h (its KERN_* settings, ks_dot_u8s8 and tile driver).
 *
 * Read first: the Q5_0 layout in src/quant/quant.h, and Q4_0 in kern_simd_impl.h: the same
 * offset trick with 16 instead of 8, through the same block step (KS_OFFSET_BLOCK). The 5-bit
 * codes are rebuilt unsigned (0..31), so sum((q-16)*a) = sum(q*a) - 16*sum(a), and 16*sum(a)
 * is one dot of the activation block with a vector of 16s, once per token per block. Integer
 * sums are exact, as in the scalar reference. */
#ifndef TERN_KERN_Q5_SIMD_H
#define TERN_KERN_Q5_SIMD_H

/* The 32 codes of a Q5_0 / Q5_1 block (16 bytes of nibbles, 4 of fifth bits) as unsigned bytes
 * in element order. */
KS_INLINE __m256i q5_codes(const uint8_t *qs, const uint8_t *qhp)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i x = _mm_loadu_si128((const __m128i *)qs);
    const __m256i lo = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4),
                                        _mm_and_si128(x, m4));
    uint32_t qh;
    memcpy(&qh, qhp, sizeof qh);
#if KERN_VNNI
    /* AVX-512 BW/VL: bit e of qh selects 0x10 for byte e in one masked move */
    const __m256i hi = _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
#else
    /* byte e takes byte e/8 of qh, keeps bit e%8, and becomes 0x10 where it was set */
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                              0x0303030303030303ll);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
    const __m256i hi = _mm256_and_si256(h, _mm256_set1_epi8(0x10));
#endif
    return _mm256_or_si256(lo, hi);
}

KS_INLINE __m256i q5_0_codes(const uint8_t *w, int64_t b, float *dw)
{
    const struct quant_block_q5_0 *wb = (const struct quant_block_q5_0 *)w + b;
    const __m256i q = q5_codes(wb->qs, wb->qh);
    *dw = ks_h2f(wb->d);
    return q;
}
KS_OFFSET_BLOCK(q5_0, 16)
KS_BLOCK32_TILE(q5_0)

/* Q5_1 and Q4_1 x Q8_1: unsigned codes, no offset; the min adds m * s per block (s = d_a * sum(a)
 * from the activation block), spread over the 8 lanes (x 1/8, exact) so the tile's lane sum
 * carries it. Q4_1 is Q5_1 without the fifth bits (q4 a constant after inlining). */
KS_INLINE void ks_min_block(int q4, const uint8_t *W, size_t ws, const uint8_t *A, size_t as,
                            int64_t b, int nr, int nt, __m256 acc[KERN_MR][KERN_MT])
{
    __m256i a[KERN_MT];
    float da[KERN_MT], sa[KERN_MT];
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_1 *ab = (const struct quant_block_q8_1 *)(A + j * as) + b;
        a[j] = _mm256_loadu_si256((const __m256i *)ab->qs);
        da[j] = ks_h2f(ab->d);
        sa[j] = 0.125f * ks_h2f(ab->s);
    }
    for (int i = 0; i < nr; i++) {
        __m256i q;
        float dw, mw;
        if (q4) {
            const struct quant_block_q4_1 *wb = (const struct quant_block_q4_1 *)(W + i * ws) + b;
            const __m128i x = _mm_loadu_si128((const __m128i *)wb->qs), m4 = _mm_set1_epi8(0x0F);
            q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4), _mm_and_si128(x, m4));
            dw = ks_h2f(wb->d), mw = ks_h2f(wb->m);
        } else {
            const struct quant_block_q5_1 *wb = (const struct quant_block_q5_1 *)(W + i * ws) + b;
            q = q5_codes(wb->qs, wb->qh);
            dw = ks_h2f(wb->d), mw = ks_h2f(wb->m);
        }
        for (int j = 0; j < nt; j++) {
            const __m256i s = ks_dot_u8s8(_mm256_setzero_si256(), q, a[j]);
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * da[j]),
                                        _mm256_add_ps(acc[i][j], _mm256_set1_ps(mw * sa[j])));
        }
    }
}
KS_INLINE void q5_1_block(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t b,
                          int nr, int nt, __m256 acc[KERN_MR][KERN_MT])
{
    ks_min_block(0, W, ws, A, as, b, nr, nt, acc);
}
KS_INLINE void q4_1_block(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t b,
                          int nr, int nt, __m256 acc[KERN_MR][KERN_MT])
{
    ks_min_block(1, W, ws, A, as, b, nr, nt, acc);
}

KS_BLOCK32_TILE(q4_1)
KS_BLOCK32_TILE(q5_1)

/* Q8_1 activations (Q5_1 and Q4_1 matmuls): ks_q8_block of kern_simd_impl.h plus s = d * sum(q), the
 * float d as ggml-cpu's x86 path uses it. Bit-identical to quant_q8_1_from_float_act. */
static void q8_1_quant(const float *x, void *vy, int64_t n)
{
    struct quant_block_q8_1 *y = vy;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float d;
        const __m256i q = ks_q8_block(x, &y[b].d, y[b].qs, &d);
        /* sum of the signed bytes: sad of the bytes + 128, minus 32 * 128 */
        const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256());
        const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        const int sum = (int)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
        y[b].s = fp16_from_f32(d * (float)sum);
    }
}

/* ------------------------------------------------------------------ Q5_K x Q8_K
 * As Q4_K in kern_simd_impl.h (maddubs pair sums scaled by the sub-block's 6-bit scale in one
 * madd; the mins through the activation's block sums) with codes 0..31: sub-block j adds bit j
 * of each qh byte, moved to bit 4. Pair sums stay below 2*31*127, inside int16. */
KS_INLINE void q5_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               __m256 *acc)
{
    const struct quant_block_q5_K *wb = (const struct quant_block_q5_K *)w + b;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    uint8_t sc[8], mn[8];
    kern_q4k_scales(wb->scales, sc, mn);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)wb->qh);
    __m256i q[8];
    for (int c = 0; c < 4; c++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c));
        const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
        const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
        q[2 * c] = _mm256_or_si256(_mm256_and_si256(x, m4), _mm256_slli_epi16(h0, 4));
        q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4),
                                       _mm256_slli_epi16(h1, 4));
    }
    ks_kquant_min_block(acc, q, sc, mn, ks_h2f(wb->d), ks_h2f(wb->dmin), A, as, b, nt);
}
KS_SUPERBLOCK_TILE(q5_K)

#endif
