/* kern_panel_avx512.c — prefill matmul (many tokens) for Q8_0, Q4_0, Q5_0/1, Q4/5/6_K weights on
 * AVX-512 VNNI, as cache-tiled matrix-matrix work. Compiled with the AVX-512 flags; reached only through
 * kern_avx512.c once kern_dispatch.c has checked the CPU.
 *
 * Read first: kernels.h (the kern_matmul contract), src/quant/quant.h (block layouts), and
 * kern_simd_impl.h (the row-at-a-time kernels this replaces when n_tok is large).
 *
 * Why a different shape: the tile kernels of kern_simd_impl.h give each (row, token) pair its
 * own accumulator, so every 32-element block costs a sign fix, a dot, a conversion, a scale
 * product and an FMA per pair — one vpdpbusd in five instructions. Here the weights are
 * repacked on the fly into panels of 16 rows interleaved by 4 bytes, so one zmm holds bytes
 * 4g..4g+3 of one block for 16 rows; one vpdpbusd against a token's 4 activation bytes
 * (broadcast from memory) advances 16 row dots at once, and after the block's 8 groups the 16
 * int32 lanes ARE the 16 block dots — scaled with one vector of row scales, stored to Y as 16
 * consecutive floats. Per block and token: 8 vpdpbusd + 3 other instructions.
 *
 * vpdpbusd multiplies u8 x s8, so the packed weights are unsigned (Q8_0: w + 128, Q4_0 and
 * Q4_K: the raw code 0..15, Q5_0 and Q5_K: 0..31, Q6_K: 0..63) and the activations stay signed bytes,
 * read in place from their Q8_0 / Q8_K blocks. Offsets are removed exactly in the integer dot,
 * which starts from -off*sum(a) of its sub-block (Q8_0 128, Q4_0 8, Q5_0 16, Q6_K 32; the sums come from
 * the Q8_K bsums or are computed once per token tile). Each sub-block (the span of one scale:
 * 32 elements, 16 for Q6_K) is one int32 dot per lane, converted and scaled by the row's
 * d*scale times the token's scale; Q4_K's and Q5_K's mins term is one more FMA per sub-block with the
 * token's sub-block sum.
 *
 * Blocking (all buffers on the stack, about 80 KB, nothing allocated):
 *   row block  PN_MB panels x 16 rows (128 rows)   — repacked weights stay in L2
 *   k chunk    512 elements (128 groups of 4)      — one panel chunk is 8 KB (+ scales)
 *   token tile PN_NT tokens (8)                    — 8 zmm float accumulators + 8 int32 dots
 * Y accumulates over k chunks (the first chunk stores). Rows past r1 in the last panel are
 * packed as zeros (scale 0) and masked out of the stores.
 *
 * Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices loaded with repacking (the default) do not come here: their
 * matrices were repacked once at load and kern_packed_avx512.c runs the same token tile
 * (kern_panel_avx512.h) over that copy. This file serves the other formats, mmap-only loads
 * (--no-repack) and direct kern_matmul callers. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_panel_avx512.h"
#include "kernels/kern_panel_rows.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"
#include "util/check.h"



/* ---------------------------------------------------------------- whole-panel packing
 * The packers above go row by row and place each 4-byte group with its own store: 16 rows x 8
 * groups of scalar stores per block, which cost 4-5x the panel's own arithmetic when a call
 * has only a few tokens to spread them over (the batched decode step: at 1-8 tokens a 256 MB
 * Q8_0 matrix took 38-44 ms of packing against 9 ms for the decode kernel). The packers below
 * fill a full panel (16 rows) at once with in-register transposes, so the bytes go from the
 * weight rows to the panel as whole zmm stores; the panel's contents are the same bytes. */

PN_INLINE void pn_t4_store(struct pn_panel *P, int G0, __m512i z0, __m512i z1, __m512i z2,
                           __m512i z3)
{
    __m512i t[4];
    pn_t4(z0, z1, z2, z3, t);
    for (int q = 0; q < 4; q++) _mm512_store_si512((void *)P->q[G0 + q], t[q]);
}

/* The fp16 scales at p of 16 rows (ws bytes apart), as floats, lane i = row i. */
PN_INLINE __m512 pn_d16(const uint8_t *p, size_t ws)
{
    __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
    uint16_t v;
#define PN_INS(x, i, l)                                                                        \
    memcpy(&v, p + (size_t)(i) * ws, 2);                                                       \
    x = _mm_insert_epi16(x, v, l)
    PN_INS(lo, 0, 0); PN_INS(lo, 1, 1); PN_INS(lo, 2, 2); PN_INS(lo, 3, 3);
    PN_INS(lo, 4, 4); PN_INS(lo, 5, 5); PN_INS(lo, 6, 6); PN_INS(lo, 7, 7);
    PN_INS(hi, 8, 0); PN_INS(hi, 9, 1); PN_INS(hi, 10, 2); PN_INS(hi, 11, 3);
    PN_INS(hi, 12, 4); PN_INS(hi, 13, 5); PN_INS(hi, 14, 6); PN_INS(hi, 15, 7);
#undef PN_INS
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* Prefetch the block at p of the next panel's 16 rows (the same block, 16 rows down): the
 * panel after this one is the next one packed at this chunk. The 16 rows are 16 streams the
 * hardware prefetchers do not keep ahead of; without this a 256 MB Q8_0 matrix took 21 ms to
 * pack (1 token, k = 4864, 1 thread), with it 12.6 ms (the decode kernel: 10 ms). */
PN_INLINE void pn_prefetch_next(const uint8_t *p, size_t ws)
{
    for (int i = 0; i < PN_ROWS; i++) _mm_prefetch((const char *)p + (size_t)(PN_ROWS + i) * ws, _MM_HINT_T0);
}

/* Q8_0, 16 rows from row pointer w (the panel's first row): w + 128 per byte, as pn_pack_q8_0. */
static void pn_pack16_q8_0(struct pn_panel *P, const uint8_t *w, size_t ws, int64_t b0, int nbc)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    const size_t bs = sizeof(struct quant_block_q8_0);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bs;
        pn_prefetch_next(blk, ws);
        _mm512_store_ps(P->d[b], pn_d16(blk, ws));
        for (int h = 0; h < 2; h++) { /* groups 0-3, then 4-7 */
            const size_t off = offsetof(struct quant_block_q8_0, qs) + 16 * (size_t)h;
            pn_t4_store(P, 8 * b + 4 * h, _mm512_xor_si512(pn_ld4(blk, ws, 0, off), x80),
                        _mm512_xor_si512(pn_ld4(blk, ws, 1, off), x80),
                        _mm512_xor_si512(pn_ld4(blk, ws, 2, off), x80),
                        _mm512_xor_si512(pn_ld4(blk, ws, 3, off), x80));
        }
    }
}

/* Q4_0, 16 rows: the 16 code bytes give groups 0-3 (low nibbles) and 4-7 (high ones). */
static void pn_pack16_q4_0(struct pn_panel *P, const uint8_t *w, size_t ws, int64_t b0, int nbc)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const size_t bs = sizeof(struct quant_block_q4_0), off = offsetof(struct quant_block_q4_0, qs);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bs;
        if (b % 2 == 0) pn_prefetch_next(blk, ws); /* 18-byte blocks: every other one */
        _mm512_store_ps(P->d[b], pn_d16(blk, ws));
        __m512i z[4];
        for (int m = 0; m < 4; m++) z[m] = pn_ld4(blk, ws, m, off);
        pn_t4_store(P, 8 * b, _mm512_and_si512(z[0], m4), _mm512_and_si512(z[1], m4),
                    _mm512_and_si512(z[2], m4), _mm512_and_si512(z[3], m4));
        pn_t4_store(P, 8 * b + 4, _mm512_and_si512(_mm512_srli_epi16(z[0], 4), m4),
                    _mm512_and_si512(_mm512_srli_epi16(z[1], 4), m4),
                    _mm512_and_si512(_mm512_srli_epi16(z[2], 4), m4),
                    _mm512_and_si512(_mm512_srli_epi16(z[3], 4), m4));
    }
}

/* Q4_K, 16 rows. The block's first 16 bytes (d, dmin, the 12 scale bytes) of the 16 rows,
 * transposed like the codes, give lane = row words: the six-bit scales and mins come out of
 * them four at a time as kern_q4k_scales takes them out of one row (same values, so the same
 * d * (float)sc products as pn_pack_q4_K). Codes: chunk c's 32 bytes, 16 at a time: low nibbles
 * are elements 64c + 16h.., high ones 64c + 32 + 16h.. */
static void pn_pack16_q4_K(struct pn_panel *P, const uint8_t *w, size_t ws, int64_t b0, int nbc)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), k3f = _mm512_set1_epi32(0x3f3f3f3f);
    const __m512i k0f = _mm512_set1_epi32(0x0f0f0f0f), k30 = _mm512_set1_epi32(0x30303030);
    const __m512i kff = _mm512_set1_epi32(0xff);
    const size_t bs = sizeof(struct quant_block_q4_K), off = offsetof(struct quant_block_q4_K, qs);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bs;
        for (size_t o = 0; o < bs; o += 64) pn_prefetch_next(blk + o, ws);
        __m512i h[4]; /* d | dmin << 16, scale bytes 0-3, 4-7, 8-11 */
        pn_t4(pn_ld4(blk, ws, 0, 0), pn_ld4(blk, ws, 1, 0), pn_ld4(blk, ws, 2, 0), pn_ld4(blk, ws, 3, 0), h);
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
        const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
        const __m512i sc[2] = {_mm512_and_si512(h[1], k3f),
                               _mm512_or_si512(_mm512_and_si512(h[3], k0f),
                                               _mm512_and_si512(_mm512_srli_epi32(h[1], 2), k30))};
        const __m512i mn[2] = {_mm512_and_si512(h[2], k3f),
                               _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), k0f),
                                               _mm512_and_si512(_mm512_srli_epi32(h[2], 2), k30))};
        for (int q = 0; q < 2; q++) {
            const __m512i s4[4] = {sc[q], _mm512_srli_epi32(sc[q], 8), _mm512_srli_epi32(sc[q], 16),
                                   _mm512_srli_epi32(sc[q], 24)};
            const __m512i m4s[4] = {mn[q], _mm512_srli_epi32(mn[q], 8), _mm512_srli_epi32(mn[q], 16),
                                    _mm512_srli_epi32(mn[q], 24)};
            for (int t = 0; t < 4; t++) {
                const int j = 8 * b + 4 * q + t;
                _mm512_store_ps(P->d[j], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(s4[t], kff))));
                _mm512_store_ps(P->m[j], _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_and_si512(m4s[t], kff))));
            }
        }
        for (int c = 0; c < 4; c++)
            for (int hh = 0; hh < 2; hh++) {
                const size_t o = off + 32 * (size_t)c + 16 * (size_t)hh;
                __m512i z[4];
                for (int m = 0; m < 4; m++) z[m] = pn_ld4(blk, ws, m, o);
                const int G = 64 * b + 16 * c + 4 * hh;
                pn_t4_store(P, G, _mm512_and_si512(z[0], m4), _mm512_and_si512(z[1], m4),
                            _mm512_and_si512(z[2], m4), _mm512_and_si512(z[3], m4));
                pn_t4_store(P, G + 8, _mm512_and_si512(_mm512_srli_epi16(z[0], 4), m4),
                            _mm512_and_si512(_mm512_srli_epi16(z[1], 4), m4),
                            _mm512_and_si512(_mm512_srli_epi16(z[2], 4), m4),
                            _mm512_and_si512(_mm512_srli_epi16(z[3], 4), m4));
            }
    }
}

/* Q6_K, 16 rows: the 16 signed scales transposed to lane = row words (sign-extended out of
 * them), d by inserts; codes as pn_pack_q6_K builds them, 16 bytes of ql and qh at a time. */
static void pn_pack16_q6_K(struct pn_panel *P, const uint8_t *w, size_t ws, int64_t b0, int nbc)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    const size_t bs = sizeof(struct quant_block_q6_K);
    const size_t o_ql = offsetof(struct quant_block_q6_K, ql), o_qh = offsetof(struct quant_block_q6_K, qh);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * bs;
        for (size_t o = 0; o < bs; o += 64) pn_prefetch_next(blk + o, ws);
        const __m512 d = pn_d16(blk + offsetof(struct quant_block_q6_K, d), ws);
        __m512i h[4];
        const size_t o_sc = offsetof(struct quant_block_q6_K, scales);
        pn_t4(pn_ld4(blk, ws, 0, o_sc), pn_ld4(blk, ws, 1, o_sc), pn_ld4(blk, ws, 2, o_sc), pn_ld4(blk, ws, 3, o_sc), h);
        for (int q = 0; q < 4; q++) {
            const __m512i v[4] = {_mm512_srai_epi32(_mm512_slli_epi32(h[q], 24), 24),
                                  _mm512_srai_epi32(_mm512_slli_epi32(h[q], 16), 24),
                                  _mm512_srai_epi32(_mm512_slli_epi32(h[q], 8), 24),
                                  _mm512_srai_epi32(h[q], 24)};
            for (int t = 0; t < 4; t++)
                _mm512_store_ps(P->d[16 * b + 4 * q + t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(v[t])));
        }
        for (int hf = 0; hf < 2; hf++)
            for (int q = 0; q < 2; q++) {
                __m512i l0[4], l1[4], hb[4];
                for (int m = 0; m < 4; m++) {
                    l0[m] = pn_ld4(blk, ws, m, o_ql + 64 * (size_t)hf + 16 * (size_t)q);
                    l1[m] = pn_ld4(blk, ws, m, o_ql + 64 * (size_t)hf + 32 + 16 * (size_t)q);
                    hb[m] = pn_ld4(blk, ws, m, o_qh + 32 * (size_t)hf + 16 * (size_t)q);
                }
                __m512i o[4][4]; /* [quarter][m]: elements 32 * quarter + 16q .. of this half */
                for (int m = 0; m < 4; m++) {
                    o[0][m] = _mm512_or_si512(_mm512_and_si512(l0[m], m4),
                                              _mm512_slli_epi16(_mm512_and_si512(hb[m], m3), 4));
                    o[1][m] = _mm512_or_si512(_mm512_and_si512(l1[m], m4),
                                              _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb[m], 2), m3), 4));
                    o[2][m] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0[m], 4), m4),
                                              _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb[m], 4), m3), 4));
                    o[3][m] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1[m], 4), m4),
                                              _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb[m], 6), m3), 4));
                }
                for (int k = 0; k < 4; k++)
                    pn_t4_store(P, 64 * b + 32 * hf + 8 * k + 4 * q, o[k][0], o[k][1], o[k][2], o[k][3]);
            }
    }
}

typedef void (*pn_pack16_fn)(struct pn_panel *, const uint8_t *, size_t, int64_t, int);

/* Rows [r, r + nrow) into panel P: a full panel by pack16 when the format has one, otherwise
 * (and for the last, partial panel of a matrix) row by row. */
static void pn_pack(pn_pack_fn pack, pn_pack16_fn pack16, int fmt, struct pn_panel *P,
                    const uint8_t *W, size_t ws, int64_t r, int nrow, int64_t b0, int nbc)
{
    if (pack16 && nrow == PN_ROWS) {
        pack16(P, W + (size_t)r * ws, ws, b0, nbc);
        return;
    }
    pn_pack_rows(pack, fmt, P, W, ws, r, nrow, b0, nbc);
}

/* ---------------------------------------------------------------- driver */

#define PN_DEFINE(name, fmt, packer, packer16)                                                 \
    PN_DEFINE_RUN(name, fmt, 0)                                                                \
    static void name##_matmul(const void *W, size_t ws, const void *A, size_t as, int n_tok,   \
                              int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)        \
    {                                                                                          \
        struct pn_panel panels[PN_MB] __attribute__((aligned(64)));                           \
        struct pn_act S[PN_FUSE_TILES];                                                        \
        const int bpc = PN_KC / PN_BLK(fmt); /* blocks per chunk */                            \
        const int64_t nb = k / PN_BLK(fmt);                                                    \
        TERN_ASSERT(k > 0 && k % PN_BLK(fmt) == 0 && n_tok >= 1, "whole blocks");   \
        /* few tokens: each panel is packed into panels[0] and used at once, from L1 */        \
        const int fused = n_tok <= PN_FUSE_TILES * PN_NT;                                      \
        for (int64_t rb = r0; rb < r1; rb += PN_MB * PN_ROWS) {                                \
            const int64_t rb_end = rb + PN_MB * PN_ROWS < r1 ? rb + PN_MB * PN_ROWS : r1;      \
            const int np = (int)((rb_end - rb + PN_ROWS - 1) / PN_ROWS);                       \
            for (int64_t b0 = 0; b0 < nb; b0 += bpc) {                                         \
                const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;                          \
                if (fused) {                                                                   \
                    for (int t = 0, u = 0; t < n_tok; t += PN_NT, u++)                         \
                        pn_act_prepare(fmt, (const uint8_t *)A + (size_t)t * as, as,           \
                                       n_tok - t < PN_NT ? n_tok - t : PN_NT, b0, nbc, &S[u]); \
                    for (int p = 0; p < np; p++) {                                             \
                        const int64_t r = rb + (int64_t)p * PN_ROWS;                           \
                        const int nrow = rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS;   \
                        pn_pack(packer, packer16, fmt, &panels[0], (const uint8_t *)W, ws, r,  \
                                nrow, b0, nbc);                                                \
                        for (int t = 0, u = 0; t < n_tok; t += PN_NT, u++)                     \
                            name##_run((const uint8_t *)&panels[0], NULL, NULL, nbc, (const uint8_t *)A + (size_t)t * as,   \
                                       as, b0, &S[u], n_tok - t < PN_NT ? n_tok - t : PN_NT,   \
                                       Y + (size_t)t * ldy + r, ldy,                           \
                                       (__mmask16)((1u << nrow) - 1), b0 == 0);                \
                    }                                                                          \
                    continue;                                                                  \
                }                                                                              \
                for (int p = 0; p < np; p++) {                                                 \
                    const int64_t r = rb + (int64_t)p * PN_ROWS;                               \
                    pn_pack(packer, packer16, fmt, &panels[p], (const uint8_t *)W, ws, r,      \
                            rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS, b0, nbc);      \
                }                                                                              \
                for (int t = 0; t < n_tok; t += PN_NT) {                                       \
                    const int nt = n_tok - t < PN_NT ? n_tok - t : PN_NT;                      \
                    const uint8_t *At = (const uint8_t *)A + (size_t)t * as;                   \
                    pn_act_prepare(fmt, At, as, nt, b0, nbc, &S[0]);                           \
                    for (int p = 0; p < np; p++) {                                             \
                        const int64_t r = rb + (int64_t)p * PN_ROWS;                           \
                        const int nrow = rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS;   \
                        name##_run((const uint8_t *)&panels[p], NULL, NULL, nbc, At, as, b0, &S[0], nt,                     \
                                   Y + (size_t)t * ldy + r, ldy,                               \
                                   (__mmask16)((1u << nrow) - 1), b0 == 0);                    \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

PN_DEFINE(pn_q8_0, PN_Q8_0, pn_pack_q8_0, pn_pack16_q8_0)
PN_DEFINE(pn_q4_0, PN_Q4_0, pn_pack_q4_0, pn_pack16_q4_0)
PN_DEFINE(pn_q5_0, PN_Q5_0, pn_pack_q5_0, NULL)
PN_DEFINE(pn_q5_1, PN_Q5_1, pn_pack_q5_1, NULL)
PN_DEFINE(pn_q4_1, PN_Q4_1, pn_pack_q4_1, NULL) /* Q5_1's panel and tile, codes 0..15 */
PN_DEFINE(pn_q4_K, PN_Q4_K, pn_pack_q4_K, pn_pack16_q4_K)
PN_DEFINE(pn_q5_K, PN_Q5_K, pn_pack_q5_K, NULL)
PN_DEFINE(pn_q6_K, PN_Q6_K, pn_pack_q6_K, pn_pack16_q6_K)

kern_matmul_fn kern_avx512_panel_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q8_0: return pn_q8_0_matmul;
    case TERN_TYPE_Q4_0: return pn_q4_0_matmul;
    case TERN_TYPE_Q5_0: return pn_q5_0_matmul;
    case TERN_TYPE_Q5_1: return pn_q5_1_matmul;
    case TERN_TYPE_Q4_1: return pn_q4_1_matmul;
    case TERN_TYPE_Q4_K: return pn_q4_K_matmul;
    case TERN_TYPE_Q5_K: return pn_q5_K_matmul;
    case TERN_TYPE_Q6_K: return pn_q6_K_matmul;
    default: return NULL;
    }
}
