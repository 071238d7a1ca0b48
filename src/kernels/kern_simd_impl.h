/* kern_simd_impl.h — the 256-bit SIMD kernels, written once and compiled twice: by kern_avx2.c
 * (AVX2 + FMA + F16C) and by kern_avx512.c (same code, plus AVX-512 VL/VNNI: the u8 x s8 dot
 * becomes one vpdpbusd, and 32 vector registers let the tiles grow); kern_q5_avx2.c and
 * kern_q5_avx512.c add the Q5 formats (kern_q5_simd.h) to it. Include only from those files,
 * after defining:
 *   KERN_VNNI  1 to use vpdpbusd for the u8*s8 -> i32 dot, 0 for maddubs + madd
 *   KERN_MR    rows per tile, KERN_MT tokens per tile
 *
 * Read first: src/quant/quant.h (block layouts), kernels.h (the kern_matmul contract) and
 * kern_tile.h (the driver and tile bodies every ISA shares; this file gives them the 256-bit
 * block steps).
 *
 * Shape of every matmul: the row range is cut into tiles of KERN_MR weight rows x KERN_MT
 * tokens. Inside a tile, for each block index, the activation blocks of the tile's tokens are
 * loaded once (plus what every row needs from them: scales, block sums) and each weight block
 * is unpacked once, then every (row, token) pair does its integer dot and one FMA into its own
 * float accumulator vector. The weights of a tile are read from memory once for all tokens; for
 * decode (one token) the loop streams each weight byte exactly once.
 *
 * Integer formats compute exactly the block sums of the scalar reference, so results differ
 * from scalar only by float summation order. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_kquant.h"
#include "kernels/kern_tile.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "util/fp16.h"

#define KS_INLINE static inline __attribute__((always_inline))

KS_INLINE float ks_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KS_INLINE float ks_h2f(uint16_t h) { return _cvtsh_ss(h); }

/* the float vector of kern_tile.h's tile bodies */
#define KERN_VF __m256
#define KERN_VF_LANES 8
#define KERN_VF_ZERO() _mm256_setzero_ps()
#define KERN_VF_ADD(a, b) _mm256_add_ps(a, b)
#define KERN_VF_FMA(acc, w, a) _mm256_fmadd_ps(w, a, acc)
#define KERN_VF_HSUM(v) ks_hsum(v)

/* acc + per-4-byte-group dot of unsigned u (0..255; <= 63 unless VNNI) and signed s */
KS_INLINE __m256i ks_dot_u8s8(__m256i acc, __m256i u, __m256i s)
{
#if KERN_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    const __m256i p = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

/* ------------------------------------------------------------------ tile driver
 * KS_DEFINE_MATMUL(fmt): fmt##_matmul from fmt##_tile, by the driver every ISA shares
 * (kern_tile.h) with this path's tile size. */
#define KS_DEFINE_MATMUL(fmt) KERN_TILE_MATMUL(fmt, KERN_MR, KERN_MT)

/* ------------------------------------------------------------------ Q4_0 (and Q5_0) x Q8_0
 * Codes stay unsigned (Q4_0 0..15, Q5_0 0..31): sum((q-off)*a) = sum(q*a) - off*sum(a), and
 * off*sum(a) is one dot of the activation with a vector of offs (8, 16), computed once per
 * token per block. KS_OFFSET_BLOCK(fmt, off) makes fmt##_block from fmt##_codes(w, b, &dw):
 * block b of weight row w as 32 unsigned codes in element order, and its scale. */
#define KS_OFFSET_BLOCK(fmt, off)                                                              \
    KS_INLINE void fmt##_block(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,       \
                               int64_t b, int nr, int nt, __m256 acc[KERN_MR][KERN_MT])        \
    {                                                                                          \
        const __m256i offs = _mm256_set1_epi8(off);                                            \
        __m256i a[KERN_MT], ao[KERN_MT];                                                       \
        float da[KERN_MT];                                                                     \
        for (int j = 0; j < nt; j++) {                                                         \
            const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)(A + j * as) + b; \
            a[j] = _mm256_loadu_si256((const __m256i *)ab->qs);                                \
            ao[j] = ks_dot_u8s8(_mm256_setzero_si256(), offs, a[j]);                           \
            da[j] = ks_h2f(ab->d);                                                             \
        }                                                                                      \
        for (int i = 0; i < nr; i++) {                                                         \
            float dw;                                                                          \
            const __m256i q = fmt##_codes(W + i * ws, b, &dw);                                 \
            for (int j = 0; j < nt; j++) {                                                     \
                __m256i s = ks_dot_u8s8(_mm256_setzero_si256(), q, a[j]);                      \
                s = _mm256_sub_epi32(s, ao[j]);                                                \
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * da[j]), \
                                            acc[i][j]);                                        \
            }                                                                                  \
        }                                                                                      \
    }

KS_INLINE __m256i q4_0_codes(const uint8_t *w, int64_t b, float *dw)
{
    const struct quant_block_q4_0 *wb = (const struct quant_block_q4_0 *)w + b;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i x = _mm_loadu_si128((const __m128i *)wb->qs);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4),
                                       _mm_and_si128(x, m4));
    *dw = ks_h2f(wb->d);
    return q;
}
KS_OFFSET_BLOCK(q4_0, 8)

/* ------------------------------------------------------------------ Q8_0 x Q8_0
 * Signed x signed through the u8 x s8 dot: |w| * (a with w's sign). */
KS_INLINE void q8_0_block(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t b,
                          int nr, int nt, __m256 acc[KERN_MR][KERN_MT])
{
    __m256i a[KERN_MT];
    float da[KERN_MT];
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)(A + j * as) + b;
        a[j] = _mm256_loadu_si256((const __m256i *)ab->qs);
        da[j] = ks_h2f(ab->d);
    }
    for (int i = 0; i < nr; i++) {
        const struct quant_block_q8_0 *wb = (const struct quant_block_q8_0 *)(W + i * ws) + b;
        const __m256i w = _mm256_loadu_si256((const __m256i *)wb->qs);
        const __m256i aw = _mm256_sign_epi8(w, w);
        const float dw = ks_h2f(wb->d);
        for (int j = 0; j < nt; j++) {
            const __m256i s = ks_dot_u8s8(_mm256_setzero_si256(), aw, _mm256_sign_epi8(a[j], w));
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * da[j]),
                                        acc[i][j]);
        }
    }
}

/* fmt##_tile over fmt##_block (kern_tile.h) */
#define KS_BLOCK32_TILE(fmt) KERN_TILE_BLOCK32(fmt, KERN_MR, KERN_MT)

KS_BLOCK32_TILE(q4_0)
KS_BLOCK32_TILE(q8_0)

/* ------------------------------------------------------------------ Q4_K x Q8_K
 * Per sub-block j: maddubs gives int16 pair sums of q*a (<= 2*15*127), and madd with the
 * broadcast 6-bit scale turns them into scaled int32 sums. The mins term uses the activation's
 * 16-element block sums: sum_j m_j * (bsums[2j] + bsums[2j+1]) = one madd with m duplicated. */
KS_INLINE __m256i ks_maddubs_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale16)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16));
}

/* One weight super-block of a K-quant with 6-bit scales and mins (Q4_K, Q5_K: the codes q[8]
 * already unpacked to unsigned bytes, one vector per sub-block of 32) against block b of nt
 * tokens' Q8_K activations, accumulated into acc[0..nt): maddubs pair sums scaled by the
 * sub-block scale in one madd, the mins through the activation's 16-element block sums. */
KS_INLINE void ks_kquant_min_block(__m256 *acc, const __m256i q[8], const uint8_t sc[8],
                                   const uint8_t mn[8], float dw, float dmw, const uint8_t *A,
                                   size_t as, int64_t b, int nt)
{
    __m128i m8;
    memcpy(&m8, mn, 8); /* low 8 bytes used */
    const __m128i m16 = _mm_cvtepu8_epi16(m8);
    const __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16),
                                          _mm_unpacklo_epi16(m16, m16));
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)(A + j * as) + b;
        __m256i s = _mm256_setzero_si256();
        for (int sb = 0; sb < 8; sb++)
            s = ks_maddubs_scaled(s, q[sb], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * sb)),
                                  _mm256_set1_epi16(sc[sb]));
        const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), mdup);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * ab->d), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(dmw * ab->d), acc[j]);
    }
}

/* fmt##_tile over fmt##_superblock (kern_tile.h): Q4_K, Q5_K (kern_q5_simd.h), Q6_K */
#define KS_SUPERBLOCK_TILE(fmt) KERN_TILE_SUPERBLOCK(fmt, KERN_MR, KERN_MT)

KS_INLINE void q4_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               __m256 *acc)
{
    const struct quant_block_q4_K *wb = (const struct quant_block_q4_K *)w + b;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    uint8_t sc[8], mn[8];
    kern_q4k_scales(wb->scales, sc, mn);
    __m256i q[8];
    for (int c = 0; c < 4; c++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c));
        q[2 * c] = _mm256_and_si256(x, m4);
        q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
    }
    ks_kquant_min_block(acc, q, sc, mn, ks_h2f(wb->d), ks_h2f(wb->dmin), A, as, b, nt);
}
KS_SUPERBLOCK_TILE(q4_K)

/* ------------------------------------------------------------------ Q6_K x Q8_K
 * Codes unsigned 0..63: sum(sc*(q-32)*a) = sum(sc*q*a) - 32*sum_s(sc_s*bsums[s]). Each 32-wide
 * group spans two 16-element sub-blocks, so its madd scale vector is [sc_s x8, sc_s+1 x8]. */
KS_INLINE void q6_K_superblock(const uint8_t *w, int64_t b, const uint8_t *A, size_t as, int nt,
                               __m256 *acc)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const struct quant_block_q6_K *wb = (const struct quant_block_q6_K *)w + b;
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    __m256i q[8];
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
        const __m256i hh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
        q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(hh, m3), 4));
        q[4 * h + 1] = _mm256_or_si256(
            _mm256_and_si256(l1, m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m3), 4));
        q[4 * h + 2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m3), 4));
        q[4 * h + 3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m3), 4));
    }
    /* scv[g] = [sc_2g x8 | sc_2g+1 x8]: each half of sc16 in both lanes, then one byte shuffle
     * per group; the two broadcasts and an insert per group this replaces cost ~40 instructions
     * a block (bench_kernels Q6_K decode, one token: avx2 23.3 -> 26.4 GB/s, avx512 26.7 -> 31.0) */
    __m256i scv[8];
    const __m256i s_lo = _mm256_permute4x64_epi64(sc16, 0x44), s_hi = _mm256_permute4x64_epi64(sc16, 0xEE);
    for (int g = 0; g < 8; g++) {
        const int e = 2 * (g & 3); /* word of sc_2g within its half */
        const __m256i pick = _mm256_setr_epi8(2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1,
                                              2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1,
                                              2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3,
                                              2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3,
                                              2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3);
        scv[g] = _mm256_shuffle_epi8(g < 4 ? s_lo : s_hi, pick);
    }
    const float dw = ks_h2f(wb->d);
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_K *ab = (const struct quant_block_q8_K *)(A + j * as) + b;
        __m256i s = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++)
            s = ks_maddubs_scaled(s, q[g], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * g)),
                                  scv[g]);
        const __m256i bs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), sc16);
        s = _mm256_sub_epi32(s, _mm256_slli_epi32(bs, 5));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * ab->d), acc[j]);
    }
}
KS_SUPERBLOCK_TILE(q6_K)

/* ------------------------------------------------------------------ float formats
 * 8 elements per step; the activation vectors are converted once per tile and shared by its
 * rows. */
KS_INLINE __m256 ks_load_f32(const uint8_t *p, int64_t e) { return _mm256_loadu_ps((const float *)p + e); }
KS_INLINE __m256 ks_load_f16(const uint8_t *p, int64_t e)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + e)));
}
KS_INLINE __m256 ks_load_bf16(const uint8_t *p, int64_t e)
{
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + e)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* kern_tile.h's float tile, one accumulator set per (row, token) in full tiles */
#define KS_FLOAT_TILE(fmt, load) KERN_TILE_FLOAT(fmt, load, KERN_MR, KERN_MT, 1)

KS_FLOAT_TILE(f32, ks_load_f32)
KS_FLOAT_TILE(f16, ks_load_f16)
KS_FLOAT_TILE(bf16, ks_load_bf16)

/* ------------------------------------------------------------------ AVX-512 routing
 * KS_ROUTE(fmt, wtype, min_tok, decode) makes fmt##_route, the AVX-512 path's kernel for
 * wtype: from min_tok tokens on, the repacked-panel kernel of kern_panel_avx512.c (its
 * per-call repacking is paid back over the tokens); below that, decode (a kernel that may
 * decline the job, returning false with nothing written: a k beyond its buffers), or NULL for
 * none, then these tiles. One routine for the formats of kern_avx512.c and kern_q5_avx512.c. */
#if KERN_VNNI
typedef bool (*ks_decode_fn)(int wtype, const void *W, size_t ws, const void *A, size_t as,
                             int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);

KS_INLINE void ks_route(int wtype, int min_tok, ks_decode_fn decode, kern_matmul_fn tiles,
                        const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                        int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    if (n_tok >= min_tok)
        kern_avx512_panel_matmul(wtype)(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
    else if (!decode || !decode(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy))
        tiles(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

#define KS_ROUTE(fmt, wtype, min_tok, decode)                                                  \
    static void fmt##_route(const void *W, size_t ws, const void *A, size_t as, int n_tok,     \
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)          \
    {                                                                                          \
        ks_route(wtype, min_tok, decode, fmt##_matmul, W, ws, A, as, n_tok, k, r0, r1, Y, ldy); \
    }
#endif

/* ------------------------------------------------------------------ activation quantizers
 * Bit-identical to the scalar from_float of quant_q8.c / quant_float.c: the same float
 * operations in the same order per element (amax is order-independent), vroundps for
 * nearbyintf / nearest_int (both round half to even). */
KS_INLINE __m256 ks_abs(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
KS_INLINE float ks_hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* 32 floats (already scaled) -> 32 int8 by round-half-even, in element order */
KS_INLINE __m256i ks_round_pack32(__m256 v0, __m256 v1, __m256 v2, __m256 v3)
{
    /* a macro, not a const int: clang wants the immediate as a constant expression */
#define KS_ROUND_MODE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(v0, KS_ROUND_MODE));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(v1, KS_ROUND_MODE));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(v2, KS_ROUND_MODE));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(v3, KS_ROUND_MODE));
    const __m256i p01 = _mm256_packs_epi32(i0, i1); /* lanes interleave by 128 bits */
    const __m256i p23 = _mm256_packs_epi32(i2, i3);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One block of 32 activations to 8 bits as Q8_0 and Q8_1 share it (127/amax, round half to
 * even): stores the fp16 scale in *d16 and the codes in qs, returns the float scale and the
 * codes (Q8_1 also needs their sum). */
KS_INLINE __m256i ks_q8_block(const float *x, uint16_t *d16, int8_t *qs, float *d_out)
{
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(ks_abs(v0), ks_abs(v1)),
                                   _mm256_max_ps(ks_abs(v2), ks_abs(v3)));
    const float amax = ks_hmax(m);
    const float d = amax / 127.f;
    const float id = amax != 0 ? 127.f / amax : 0.0f;
    *d16 = fp16_from_f32(d);
    *d_out = d;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i q = ks_round_pack32(_mm256_mul_ps(v0, vid), _mm256_mul_ps(v1, vid),
                                      _mm256_mul_ps(v2, vid), _mm256_mul_ps(v3, vid));
    _mm256_storeu_si256((__m256i *)qs, q);
    return q;
}

static void q8_0_quant(const float *x, void *vy, int64_t n)
{
    struct quant_block_q8_0 *y = vy;
    float d;
    for (int64_t b = 0; b < n / 32; b++, x += 32) ks_q8_block(x, &y[b].d, y[b].qs, &d);
}

static void q8_K_quant(const float *x, void *vy, int64_t n)
{
    struct quant_block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QUANT_QK_K; j += 8) m = _mm256_max_ps(m, ks_abs(_mm256_loadu_ps(x + j)));
        const float amax = ks_hmax(m);
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float max = kern_q8k_first_max(x, QUANT_QK_K, amax);
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256 lim = _mm256_set1_ps(127.f);
        for (int j = 0; j < QUANT_QK_K; j += 32) {
            __m256 v[4];
            for (int u = 0; u < 4; u++)
                v[u] = _mm256_min_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * u), vs), lim);
            _mm256_storeu_si256((__m256i *)(y[b].qs + j), ks_round_pack32(v[0], v[1], v[2], v[3]));
        }
        for (int g = 0; g < QUANT_QK_K / 16; g++) {
            const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y[b].qs + 16 * g)));
            __m128i s = _mm_add_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            s = _mm_add_epi16(s, _mm_srli_si128(s, 8));
            s = _mm_add_epi16(s, _mm_srli_si128(s, 4));
            s = _mm_add_epi16(s, _mm_srli_si128(s, 2));
            y[b].bsums[g] = (int16_t)_mm_extract_epi16(s, 0);
        }
        y[b].d = 1 / iscale;
    }
}

static void f16_quant(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = fp16_from_f32(x[i]);
}
