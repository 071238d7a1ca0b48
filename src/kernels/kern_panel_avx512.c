/* kern_panel_avx512.c — prefill matmul (many tokens) for Q8_0 and Q4_0 weights on AVX-512
 * VNNI, as cache-tiled matrix-matrix work. Compiled with the AVX-512 flags; reached only through
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
 * vpdpbusd multiplies u8 x s8, so the packed weights are unsigned (Q8_0: w + 128, Q4_0: the raw
 * code 0..15) and the activations stay signed bytes, read in place from the Q8_0 blocks. The
 * offset is removed exactly: sum((w+128)*a) - 128*sum(a), sum((q)*a) - 8*sum(a); the int32 dot
 * of each block starts from -off*sum(a), the token's block sum computed once per token tile.
 *
 * Blocking (all buffers on the stack, about 80 KB, nothing allocated):
 *   row block  PN_MB panels x 16 rows (128 rows)   — repacked weights stay in L2
 *   k chunk    PN_KB blocks (512 elements)         — one panel chunk is 8 KB, in L1
 *   token tile PN_NT tokens (8)                    — 8 zmm float accumulators + 8 int32 dots
 * Y accumulates over k chunks (the first chunk stores). Rows past r1 in the last panel are
 * packed as zeros (scale 0) and masked out of the stores. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"

#define PN_ROWS 16
#define PN_KB 16
#define PN_MB 8
#define PN_NT 8

/* One panel (16 rows) x one k chunk: q[b][g][4*i + c] = byte c of group g of block b of row i
 * (unsigned), d[b][i] = that row's block scale. */
struct pn_panel {
    uint8_t q[PN_KB][8][64];
    float d[PN_KB][PN_ROWS];
};

#define PN_INLINE static inline __attribute__((always_inline))

/* acc + u8 x s8 4-byte dots of w (16 rows) with the 4 bytes at p broadcast to every lane.
 * Inline asm: gcc 12 surrounds the intrinsic with register copies and does not fold the
 * broadcast load into it (see ../shared/anchors/machine.md §2). */
PN_INLINE __m512i pn_dot_bcast(__m512i acc, __m512i w, const void *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

/* ---------------------------------------------------------------- packing */

/* Rows [r, r + nrow) (nrow <= 16; the rest of the panel zero), blocks [b0, b0 + nbc). */
static void pn_pack_q8_0(struct pn_panel *P, const uint8_t *W, size_t ws, int64_t r, int nrow,
                         int64_t b0, int nbc)
{
    for (int i = 0; i < PN_ROWS; i++) {
        if (i >= nrow) {
            for (int b = 0; b < nbc; b++) {
                P->d[b][i] = 0;
                for (int g = 0; g < 8; g++) memset(&P->q[b][g][4 * i], 0, 4);
            }
            continue;
        }
        const struct quant_block_q8_0 *wb = (const struct quant_block_q8_0 *)(W + (size_t)(r + i) * ws) + b0;
        for (int b = 0; b < nbc; b++) {
            P->d[b][i] = _cvtsh_ss(wb[b].d);
            uint32_t v[8];
            memcpy(v, wb[b].qs, 32);
            for (int g = 0; g < 8; g++) {
                const uint32_t u = v[g] ^ 0x80808080u; /* s8 -> u8 = w + 128 */
                memcpy(&P->q[b][g][4 * i], &u, 4);
            }
        }
    }
}

static void pn_pack_q4_0(struct pn_panel *P, const uint8_t *W, size_t ws, int64_t r, int nrow,
                         int64_t b0, int nbc)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int i = 0; i < PN_ROWS; i++) {
        if (i >= nrow) {
            for (int b = 0; b < nbc; b++) {
                P->d[b][i] = 0;
                for (int g = 0; g < 8; g++) memset(&P->q[b][g][4 * i], 0, 4);
            }
            continue;
        }
        const struct quant_block_q4_0 *wb = (const struct quant_block_q4_0 *)(W + (size_t)(r + i) * ws) + b0;
        for (int b = 0; b < nbc; b++) {
            P->d[b][i] = _cvtsh_ss(wb[b].d);
            const __m128i x = _mm_loadu_si128((const __m128i *)wb[b].qs);
            uint32_t v[8]; /* elements 0..15 are the low nibbles, 16..31 the high ones */
            _mm_storeu_si128((__m128i *)v, _mm_and_si128(x, m4));
            _mm_storeu_si128((__m128i *)(v + 4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
            for (int g = 0; g < 8; g++) memcpy(&P->q[b][g][4 * i], &v[g], 4);
        }
    }
}

/* ---------------------------------------------------------------- token tile */

/* For nt tokens of the tile and the chunk's blocks: corr = -off * sum(a) (int32, the start of
 * each block dot) and the activation scale as float. */
static void pn_act_sums(const uint8_t *A, size_t as, int nt, int64_t b0, int nbc, int off,
                        int32_t corr[PN_NT][PN_KB], float da[PN_NT][PN_KB])
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int j = 0; j < nt; j++) {
        const struct quant_block_q8_0 *ab = (const struct quant_block_q8_0 *)(A + (size_t)j * as) + b0;
        for (int b = 0; b < nbc; b++) {
            /* psadbw of (a + 128) against zero: four partial sums of 8 bytes each */
            const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)ab[b].qs), flip);
            const __m256i s = _mm256_sad_epu8(x, _mm256_setzero_si256());
            const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const int sum = (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
            corr[j][b] = -off * sum;
            da[j][b] = _cvtsh_ss(ab[b].d);
        }
    }
}

/* acc[j] (16 rows of token j) += the panel's dots over nbc blocks; nt a constant after
 * inlining. */
PN_INLINE void pn_tile(const struct pn_panel *P, int nbc, const uint8_t *A, size_t as,
                       int64_t b0, const int32_t corr[PN_NT][PN_KB],
                       const float da[PN_NT][PN_KB], int nt, __m512 acc[PN_NT])
{
    const uint8_t *a[PN_NT];
    for (int j = 0; j < nt; j++)
        a[j] = A + (size_t)j * as + (size_t)b0 * sizeof(struct quant_block_q8_0) +
               offsetof(struct quant_block_q8_0, qs);
    for (int b = 0; b < nbc; b++) {
        __m512i s[PN_NT];
        for (int j = 0; j < nt; j++) s[j] = _mm512_set1_epi32(corr[j][b]);
        for (int g = 0; g < 8; g++) {
            const __m512i w = _mm512_load_si512((const void *)P->q[b][g]);
            for (int j = 0; j < nt; j++)
                s[j] = pn_dot_bcast(s[j], w, a[j] + (size_t)b * sizeof(struct quant_block_q8_0) + 4 * g);
        }
        const __m512 dw = _mm512_load_ps(P->d[b]);
        for (int j = 0; j < nt; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(da[j][b])), acc[j]);
    }
}

/* One panel x nt tokens x one chunk, accumulated into Y (first chunk: stored). */
PN_INLINE void pn_panel_tokens(const struct pn_panel *P, int nbc, const uint8_t *A, size_t as,
                               int64_t b0, const int32_t corr[PN_NT][PN_KB],
                               const float da[PN_NT][PN_KB], int nt, float *Y, int64_t ldy,
                               __mmask16 m, int first)
{
    __m512 acc[PN_NT];
    for (int j = 0; j < nt; j++)
        acc[j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, Y + j * ldy);
    pn_tile(P, nbc, A, as, b0, corr, da, nt, acc);
    for (int j = 0; j < nt; j++) _mm512_mask_storeu_ps(Y + j * ldy, m, acc[j]);
}

static void pn_panel_run(const struct pn_panel *P, int nbc, const uint8_t *A, size_t as,
                         int64_t b0, const int32_t corr[PN_NT][PN_KB],
                         const float da[PN_NT][PN_KB], int nt, float *Y, int64_t ldy,
                         __mmask16 m, int first)
{
    switch (nt) { /* one specialised copy per tile width: the token loop fully unrolled */
    case 8: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 8, Y, ldy, m, first); break;
    case 7: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 7, Y, ldy, m, first); break;
    case 6: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 6, Y, ldy, m, first); break;
    case 5: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 5, Y, ldy, m, first); break;
    case 4: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 4, Y, ldy, m, first); break;
    case 3: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 3, Y, ldy, m, first); break;
    case 2: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 2, Y, ldy, m, first); break;
    default: pn_panel_tokens(P, nbc, A, as, b0, corr, da, 1, Y, ldy, m, first); break;
    }
}

/* ---------------------------------------------------------------- driver */

typedef void (*pn_pack_fn)(struct pn_panel *, const uint8_t *, size_t, int64_t, int, int64_t, int);

static void pn_matmul(pn_pack_fn pack, int off, const void *W, size_t w_stride, const void *A,
                      size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                      int64_t ldy)
{
    struct pn_panel panels[PN_MB] __attribute__((aligned(64)));
    int32_t corr[PN_NT][PN_KB];
    float da[PN_NT][PN_KB];
    const int64_t nb = k / 32;
    for (int64_t rb = r0; rb < r1; rb += PN_MB * PN_ROWS) {
        const int64_t rb_end = rb + PN_MB * PN_ROWS < r1 ? rb + PN_MB * PN_ROWS : r1;
        const int np = (int)((rb_end - rb + PN_ROWS - 1) / PN_ROWS);
        for (int64_t b0 = 0; b0 < nb; b0 += PN_KB) {
            const int nbc = nb - b0 < PN_KB ? (int)(nb - b0) : PN_KB;
            for (int p = 0; p < np; p++) {
                const int64_t r = rb + (int64_t)p * PN_ROWS;
                pack(&panels[p], W, w_stride, r, rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS,
                     b0, nbc);
            }
            for (int t = 0; t < n_tok; t += PN_NT) {
                const int nt = n_tok - t < PN_NT ? n_tok - t : PN_NT;
                const uint8_t *At = (const uint8_t *)A + (size_t)t * a_stride;
                pn_act_sums(At, a_stride, nt, b0, nbc, off, corr, da);
                for (int p = 0; p < np; p++) {
                    const int64_t r = rb + (int64_t)p * PN_ROWS;
                    const int nrow = rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS;
                    pn_panel_run(&panels[p], nbc, At, a_stride, b0, corr, da, nt,
                                 Y + (size_t)t * ldy + r, ldy, (__mmask16)((1u << nrow) - 1),
                                 b0 == 0);
                }
            }
        }
    }
}

static void pn_q8_0_matmul(const void *W, size_t w_stride, const void *A, size_t a_stride,
                           int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    pn_matmul(pn_pack_q8_0, 128, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
}

static void pn_q4_0_matmul(const void *W, size_t w_stride, const void *A, size_t a_stride,
                           int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    pn_matmul(pn_pack_q4_0, 8, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
}

kern_matmul_fn kern_avx512_panel_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q8_0: return pn_q8_0_matmul;
    case TERN_TYPE_Q4_0: return pn_q4_0_matmul;
    default: return NULL;
    }
}
