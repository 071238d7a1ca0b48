/* gemm_f32_micro.h — the register-blocked microkernels of gemm_f32.c, one per ISA file.
 *
 * Each computes one full MR x NR tile: C (+)= sum over k < kc of A(r, k) * bp[k*NR + j], where bp
 * is B packed by gemm_f32.c (NR-wide, zero-padded) and A is read in place: A(r, k) =
 * a[k*ask + r*asr]. Two variants, because the compiler must know one stride to keep the 12
 * broadcast addresses cheap: _t has asr = 1 (A transposed in memory, or packed: ask = MR) and
 * _r has ask = 1 (A row-major, asr = its row stride). Both sum from zero in registers in k
 * order, then add to (or store into) C with row stride ldc. Only called after the CPU was
 * checked for the ISA. */
#ifndef TERN_KERNELS_GEMM_F32_MICRO_H
#define TERN_KERNELS_GEMM_F32_MICRO_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*gemm_micro_fn)(int kc, const float *a, ptrdiff_t as, const float *bp, float *c,
                              ptrdiff_t ldc, bool acc);

#if defined(__x86_64__)
/* 12 x 32 */
void gemm_micro_avx512_t(int kc, const float *a, ptrdiff_t ask, const float *bp, float *c, ptrdiff_t ldc, bool acc);
void gemm_micro_avx512_r(int kc, const float *a, ptrdiff_t asr, const float *bp, float *c, ptrdiff_t ldc, bool acc);
/* B (k, j) = B[j*bcs + k] (unit row stride: W^T, K^T, V^T), k < kc, j < nc, into 32-wide panels
 * (zero past nc), as gemm_f32.c's pack_b lays them out; 16 x 16 transposes */
void gemm_pack_bt_avx512(const float *B, ptrdiff_t bcs, int kc, int nc, float *dst);
/* A (r, k) = A[r*ars + k] (row-major), r < rows <= 12, k < kc, into one 12-tall panel: for each
 * k, 12 values side by side (zero past rows), as gemm_f32.c's pack_a lays them out */
void gemm_pack_a12_avx512(const float *A, ptrdiff_t ars, int rows, int kc, float *dst);
/* 6 x 16 */
void gemm_micro_avx2_t(int kc, const float *a, ptrdiff_t ask, const float *bp, float *c, ptrdiff_t ldc, bool acc);
void gemm_micro_avx2_r(int kc, const float *a, ptrdiff_t asr, const float *bp, float *c, ptrdiff_t ldc, bool acc);
/* the same for the AVX2 path's 16-wide panels; 8 x 8 transposes */
void gemm_pack_bt_avx2(const float *B, ptrdiff_t bcs, int kc, int nc, float *dst);
#endif

#endif
