/* kern_tile.h — the tile driver of the row x token matmul kernels, one for every ISA: the x86
 * kernels of kern_simd_impl.h (AVX2, AVX-512) and the NEON ones of kern_neon_impl.h both
 * instantiate it. Plain C: it only cuts the job into tiles and stores their results.
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

#endif
