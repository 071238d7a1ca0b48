/* kern_tile.h — what the row x token matmul kernels of every ISA share: the tile driver, and
 * the tile bodies that are the same loop on every ISA (32-element blocks with two accumulator
 * sets; K-quant super-blocks; the float formats). The x86 kernels of kern_simd_impl.h (AVX2,
 * AVX-512) and the NEON ones of kern_neon_impl.h / kern_neon_base.c instantiate them. Plain C
 * over a few vector operations the including ISA names (below, "tile bodies").
 *
 * Read first: kernels.h (the kern_matmul contract). A format provides
 *     fmt##_tile(W, ws, A, as, k, nr, nt, out)
 * computing out[i*nt + j] = dot(W row i, A row j) for i < nr, j < nt, with nr and nt
 * compile-time constants once inlined. KERN_TILE_MATMUL(fmt, MR, MT) makes the four tile
 * shapes the driver needs (MR x MT, MR x 1, 1 x MT, 1 x 1) and fmt##_matmul, a kern_matmul_fn.
 * A macro, not an inline function taking the tiles as pointers: called by name, gcc makes the
 * same inlining choices as when each ISA had its own copy (through pointers it inlined some
 * tiles into the driver and split others out: different code, objdump).
 *
 * The driver: with at least MT tokens, tiles of MR rows x MT tokens (the weights of a tile read
 * once for all its tokens), then the leftover tokens and rows. With fewer than MT tokens
 * (decode) it takes one weight row at a time, so the weights are read as one sequential stream:
 * several interleaved row streams cut DRAM bandwidth by a third or more. */
#ifndef TERN_KERN_TILE_H
#define TERN_KERN_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/fp16.h"

#define KERN_TILE_MATMUL(fmt, MR, MT)                                                          \
    static void fmt##_tile_full(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,      \
                                int64_t k, float *out)                                         \
    {                                                                                          \
        fmt##_tile(W, ws, A, as, k, MR, MT, out);                                              \
    }                                                                                          \
    static void fmt##_tile_r1(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,        \
                              int64_t k, float *out)                                           \
    {                                                                                          \
        fmt##_tile(W, ws, A, as, k, MR, 1, out);                                               \
    }                                                                                          \
    static void fmt##_tile_1t(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,        \
                              int64_t k, float *out)                                           \
    {                                                                                          \
        fmt##_tile(W, ws, A, as, k, 1, MT, out);                                               \
    }                                                                                          \
    static void fmt##_tile_11(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,        \
                              int64_t k, float *out)                                           \
    {                                                                                          \
        fmt##_tile(W, ws, A, as, k, 1, 1, out);                                                \
    }                                                                                          \
    /* unused where a path routes the format elsewhere (kern_avx512.c's F16, BF16) */          \
    __attribute__((unused)) static void fmt##_matmul(const void *W, size_t w_stride,           \
                                                     const void *A, size_t a_stride,           \
                                                     int n_tok, int64_t k, int64_t r0,         \
                                                     int64_t r1, float *Y, int64_t ldy)        \
    {                                                                                          \
        const uint8_t *Wb = W, *Ab = A;                                                        \
        float out[(MR) * (MT)];                                                                \
        int64_t r = r0;                                                                        \
        if (n_tok >= (MT))                                                                     \
            for (; r + (MR) <= r1; r += (MR)) {                                                \
                const uint8_t *w = Wb + (size_t)r * w_stride;                                  \
                int t = 0;                                                                     \
                for (; t + (MT) <= n_tok; t += (MT)) {                                         \
                    fmt##_tile_full(w, w_stride, Ab + (size_t)t * a_stride, a_stride, k, out); \
                    for (int i = 0; i < (MR); i++)                                             \
                        for (int j = 0; j < (MT); j++)                                         \
                            Y[(t + j) * ldy + r + i] = out[i * (MT) + j];                      \
                }                                                                              \
                for (; t < n_tok; t++) {                                                       \
                    fmt##_tile_r1(w, w_stride, Ab + (size_t)t * a_stride, a_stride, k, out);   \
                    for (int i = 0; i < (MR); i++) Y[t * ldy + r + i] = out[i];                \
                }                                                                              \
            }                                                                                  \
        for (; r < r1; r++) {                                                                  \
            const uint8_t *w = Wb + (size_t)r * w_stride;                                      \
            int t = 0;                                                                         \
            for (; t + (MT) <= n_tok; t += (MT)) {                                             \
                fmt##_tile_1t(w, w_stride, Ab + (size_t)t * a_stride, a_stride, k, out);       \
                for (int j = 0; j < (MT); j++) Y[(t + j) * ldy + r] = out[j];                  \
            }                                                                                  \
            for (; t < n_tok; t++) {                                                           \
                fmt##_tile_11(w, w_stride, Ab + (size_t)t * a_stride, a_stride, k, out);       \
                Y[t * ldy + r] = out[0];                                                       \
            }                                                                                  \
        }                                                                                      \
    }

/* ---------------------------------------------------------------- tile bodies
 * Before instantiating these, the ISA names its float vector and the operations on it:
 *   KERN_VF                 the type (__m256, float32x4_t)     KERN_VF_LANES  its lanes
 *   KERN_VF_ZERO()          KERN_VF_ADD(a, b)                  KERN_VF_HSUM(v)  lane sum
 *   KERN_VF_FMA(acc, w, a)  acc + w * a, fused
 * Each body defines fmt##_tile (nr <= MR rows, nt <= MT tokens) and, by KERN_TILE_MATMUL,
 * fmt##_matmul. */

/* Formats in blocks of 32 (Q4_0, Q5_0, Q8_0, ...), from the ISA's fmt##_block(W, ws, A, as, b,
 * nr, nt, acc): block b of the tile's rows and tokens, added into acc[i][j]. Small tiles
 * (decode: 1 row x 1 token) would chain every block's FMA into one accumulator and wait on its
 * latency; they alternate two accumulator sets instead. */
#define KERN_TILE_NACC(nr, nt) ((nr) * (nt) >= 4 ? 1 : 2)
#define KERN_TILE_BLOCK32(fmt, MR, MT)                                                         \
    static inline __attribute__((always_inline)) void fmt##_tile(                              \
        const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k, int nr, int nt,   \
        float *out)                                                                            \
    {                                                                                          \
        KERN_VF acc[2][MR][MT];                                                                \
        const int nacc = KERN_TILE_NACC(nr, nt);                                               \
        for (int u = 0; u < nacc; u++)                                                         \
            for (int i = 0; i < nr; i++)                                                       \
                for (int j = 0; j < nt; j++) acc[u][i][j] = KERN_VF_ZERO();                    \
        const int64_t nb = k / 32;                                                             \
        int64_t b = 0;                                                                         \
        if (nacc == 2)                                                                         \
            for (; b + 2 <= nb; b += 2) {                                                      \
                fmt##_block(W, ws, A, as, b, nr, nt, acc[0]);                                  \
                fmt##_block(W, ws, A, as, b + 1, nr, nt, acc[1]);                              \
            }                                                                                  \
        for (; b < nb; b++) fmt##_block(W, ws, A, as, b, nr, nt, acc[0]);                      \
        for (int i = 0; i < nr; i++)                                                           \
            for (int j = 0; j < nt; j++)                                                       \
                out[i * nt + j] = KERN_VF_HSUM(nacc == 2 ? KERN_VF_ADD(acc[0][i][j], acc[1][i][j]) \
                                                         : acc[0][i][j]);                      \
    }                                                                                          \
    KERN_TILE_MATMUL(fmt, MR, MT)

/* F32, F16, BF16 rows (elements e of row p: load(p, e), KERN_VF_LANES of them as floats;
 * kern_##fmt##_elem(p, e) one). Activation vectors are converted once per tile and shared by
 * its rows. Small tiles (nr * nt < 4) run 4 accumulator sets over consecutive vector steps,
 * larger ones nacc_big (FMA latency against the ISA's registers); k % KERN_VF_LANES elements
 * are summed in scalar after the lanes. */
#define KERN_TILE_FLOAT(fmt, load, MR, MT, nacc_big)                                           \
    static inline __attribute__((always_inline)) void fmt##_tile(                              \
        const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k, int nr, int nt,   \
        float *out)                                                                            \
    {                                                                                          \
        KERN_VF acc[4][MR][MT];                                                                \
        const int nacc = nr * nt >= 4 ? (nacc_big) : 4;                                        \
        for (int u = 0; u < nacc; u++)                                                         \
            for (int i = 0; i < nr; i++)                                                       \
                for (int j = 0; j < nt; j++) acc[u][i][j] = KERN_VF_ZERO();                    \
        const int64_t step = KERN_VF_LANES * nacc;                                             \
        int64_t e = 0;                                                                         \
        for (; e + step <= k; e += step)                                                       \
            for (int u = 0; u < nacc; u++) {                                                   \
                KERN_VF a[MT];                                                                 \
                for (int j = 0; j < nt; j++) a[j] = load(A + j * as, e + KERN_VF_LANES * u);   \
                for (int i = 0; i < nr; i++) {                                                 \
                    const KERN_VF w = load(W + i * ws, e + KERN_VF_LANES * u);                 \
                    for (int j = 0; j < nt; j++)                                               \
                        acc[u][i][j] = KERN_VF_FMA(acc[u][i][j], w, a[j]);                     \
                }                                                                              \
            }                                                                                  \
        for (; e + KERN_VF_LANES <= k; e += KERN_VF_LANES) {                                   \
            KERN_VF a[MT];                                                                     \
            for (int j = 0; j < nt; j++) a[j] = load(A + j * as, e);                           \
            for (int i = 0; i < nr; i++) {                                                     \
                const KERN_VF w = load(W + i * ws, e);                                         \
                for (int j = 0; j < nt; j++) acc[0][i][j] = KERN_VF_FMA(acc[0][i][j], w, a[j]); \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < nr; i++)                                                           \
            for (int j = 0; j < nt; j++) {                                                     \
                KERN_VF v = acc[0][i][j];                                                      \
                for (int u = 1; u < nacc; u++) v = KERN_VF_ADD(v, acc[u][i][j]);               \
                float s = KERN_VF_HSUM(v);                                                     \
                for (int64_t t = e; t < k; t++)                                                \
                    s += kern_##fmt##_elem(W + i * ws, t) * kern_##fmt##_elem(A + j * as, t);  \
                out[i * nt + j] = s;                                                           \
            }                                                                                  \
    }                                                                                          \
    KERN_TILE_MATMUL(fmt, MR, MT)

/* K-quant formats in super-blocks of 256 (Q4_K, Q5_K, Q6_K), from the ISA's
 * fmt##_superblock(w, b, A, as, nt, acc): super-block b of weight row w against block b of nt
 * tokens' Q8_K activations, added into acc[0..nt). */
#define KERN_TILE_SUPERBLOCK(fmt, MR, MT)                                                      \
    static inline __attribute__((always_inline)) void fmt##_tile(                              \
        const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k, int nr, int nt,   \
        float *out)                                                                            \
    {                                                                                          \
        KERN_VF acc[MR][MT];                                                                   \
        for (int i = 0; i < nr; i++)                                                           \
            for (int j = 0; j < nt; j++) acc[i][j] = KERN_VF_ZERO();                           \
        for (int64_t b = 0; b < k / 256; b++)                                                  \
            for (int i = 0; i < nr; i++) fmt##_superblock(W + i * ws, b, A, as, nt, acc[i]);   \
        for (int i = 0; i < nr; i++)                                                           \
            for (int j = 0; j < nt; j++) out[i * nt + j] = KERN_VF_HSUM(acc[i][j]);            \
    }                                                                                          \
    KERN_TILE_MATMUL(fmt, MR, MT)

/* element e of a float-format row p */
static inline __attribute__((always_inline)) float kern_f32_elem(const uint8_t *p, int64_t e)
{
    return ((const float *)p)[e];
}
static inline __attribute__((always_inline)) float kern_f16_elem(const uint8_t *p, int64_t e)
{
    return fp16_to_f32(((const uint16_t *)p)[e]);
}
static inline __attribute__((always_inline)) float kern_bf16_elem(const uint8_t *p, int64_t e)
{
    return bf16_to_f32(((const uint16_t *)p)[e]);
}

#endif
