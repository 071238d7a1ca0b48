/* gemm_f32_micro.h — the register-blocked microkernels of gemm_f32.c, one per ISA file.
 *
 * Each computes one full MR x NR tile: C (+)= sum over k < kc of ap[k*MR + r] * bp[k*NR + j]
 * (ap, bp packed by gemm_f32.c), summing from zero in registers in k order, then adding to (or
 * storing into) C with row stride ldc. Only called after the CPU was checked for the ISA. */
#ifndef TERN_KERNELS_GEMM_F32_MICRO_H
#define TERN_KERNELS_GEMM_F32_MICRO_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*gemm_micro_fn)(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc,
                              bool acc);

#if defined(__x86_64__)
void gemm_micro_avx512(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, bool acc); /* 12 x 32 */
void gemm_micro_avx2(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, bool acc);   /* 6 x 16 */
#endif

#endif
