/* gemm_tile_avx512.h — the 12 x 32 accumulator tile the AVX-512 GEMM microkernels share (F32
 * in gemm_f32_avx512.c, BF16 in gemm_bf16_avx512.c): 24 zmm sums c<row><half>, their prefetch
 * and their store to C (c, ldc, acc in scope); and the 16 x 16 transpose of 32-bit lanes their
 * packers use. Include only from files compiled for AVX-512. */
#ifndef TERN_KERNELS_GEMM_TILE_AVX512_H
#define TERN_KERNELS_GEMM_TILE_AVX512_H

#include <immintrin.h>

#define ACC_DECL                                                                                   \
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),        \
           c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),        \
           c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),        \
           c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),        \
           c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),        \
           c71 = _mm512_setzero_ps(), c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(),        \
           c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps(), ca0 = _mm512_setzero_ps(),        \
           ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();

#define OUT(r, x0, x1)                                                                             \
    if (acc) {                                                                                     \
        x0 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc), x0);                                    \
        x1 = _mm512_add_ps(_mm512_loadu_ps(c + (r) * ldc + 16), x1);                               \
    }                                                                                              \
    _mm512_storeu_ps(c + (r) * ldc, x0);                                                           \
    _mm512_storeu_ps(c + (r) * ldc + 16, x1);

/* C's tile is read (acc) and written once, after kc iterations: fetch its 24 lines now, so
 * that the stores at the end do not wait for L2/L3 (C of a weight gradient is re-read once per
 * K slice and often no longer in L1) */
#define PREFETCH_C                                                                                 \
    for (int r = 0; r < 12; r++) {                                                                 \
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);                                    \
        _mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T0);                               \
    }

#define STORE_ALL                                                                                  \
    OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)                            \
    OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)                            \
    OUT(8, c80, c81) OUT(9, c90, c91) OUT(10, ca0, ca1) OUT(11, cb0, cb1)

/* r[i] lane j -> r[j] lane i, 16 x 16 words: pairs within 128-bit lanes, then quads, then the
 * lanes across registers */
static inline void gemm_transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + e], lane L: rows 4i..4i+3 of column 4L + e */
    __m512i u[16];
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int e = 0; e < 4; e++) {
        const __m512i ab_lo = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);
        const __m512i ab_hi = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
        const __m512i cd_lo = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
        const __m512i cd_hi = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
        r[e] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0xDD);
        r[4 + e] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0xDD);
    }
}

#endif
