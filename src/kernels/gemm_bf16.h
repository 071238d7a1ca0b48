/* gemm_bf16.h — internals of the BF16 GEMM paths (read gemm_f32.h first): the blocked driver in
 * gemm_bf16.c, the AVX512-BF16 packers and microkernels in gemm_bf16_avx512.c.
 *
 * Operands are rounded to BF16 (nearest even) while they are packed, two consecutive k into one
 * 32-bit word, lower k in the low half, which is how vdpbf16ps pairs them: one instruction adds
 * A(r, 2p) B(2p, j) + A(r, 2p+1) B(2p+1, j) to 16 F32 sums. With kcp = ceil(kc / 2) pairs (the
 * last one padded with zero when kc is odd), the packed layouts are:
 *   B, NR = 32 column panels: panel q holds, for each pair p, the words of columns
 *     q*32 .. q*32+31 at dst[q*32*kcp + p*32 + j] (zero past the last column);
 *   A, rows form (A stored row-major, acs = 1: the forward and dX products): row r of the
 *     block at dst[r*kcp + p], rows past the block zero up to a multiple of MR; the
 *     microkernel broadcasts from MR rows (the F32 _r kernel's pattern);
 *   A, panel form (any other A; ars = 1 is dY^T of the weight gradient): MR-row panels,
 *     panel q at dst[q*MR*kcp + p*MR + r].
 * The microkernels compute one MR x NR tile from zero in registers, pair by pair in order, then
 * add it to (acc) or store it into C. */
#ifndef TERN_KERNELS_GEMM_BF16_H
#define TERN_KERNELS_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm_f32.h"

#define GEMM_BF16_MR 12
#define GEMM_BF16_NR 32

/* Floats of workspace gemm_bf16_block needs (no more than kern_gemm_ws_floats()). */
size_t gemm_bf16_ws_floats(void);
/* C rows [i0, i1) x cols [j0, j1) of g's product on the BF16 path (simd: AVX512-BF16, else
 * plain C), with workspace ws (kern_gemm_ws_floats() floats, 64-byte aligned). */
void gemm_bf16_block(const struct kern_gemm *g, bool simd, float *ws, int i0, int i1, int j0,
                     int j1);

#if defined(__x86_64__)
/* B rows [k0, k0+kc) x cols [j0, j0+nc) into panels (either of B's strides may be 1, or none) */
void gemm_bf16_pack_b_avx512(const struct kern_gemm *g, int k0, int kc, int j0, int nc,
                             uint32_t *dst);
/* rows form of A rows [i0, i0+mc), k [k0, k0+kc); A must have acs = 1 */
void gemm_bf16_pack_a_rows_avx512(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                                  uint32_t *dst);
/* panel form of the same; A must have ars = 1 */
void gemm_bf16_pack_a_panels_avx512(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                                    uint32_t *dst);
/* one 12 x 32 tile: _r reads A(r, p) at a[r*as + p] (rows form), _t at a[p*12 + r] (panel) */
void gemm_bf16_micro_avx512_r(int kcp, const uint32_t *a, ptrdiff_t as, const uint32_t *bp,
                              float *c, ptrdiff_t ldc, bool acc);
void gemm_bf16_micro_avx512_t(int kcp, const uint32_t *a, const uint32_t *bp, float *c,
                              ptrdiff_t ldc, bool acc);
#endif

#endif
