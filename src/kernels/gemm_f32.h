/* gemm_f32.h — cache-blocked F32 matrix multiply for training (src/train): C (+)= op(A) . op(B).
 *
 * One routine serves the three products a linear layer needs, because operands are described by
 * element strides rather than by a transpose flag: element (i, k) of A is A[i*ars + k*acs] and
 * element (k, j) of B is B[k*brs + j*bcs]. With W stored (out, in) row-major as in GGUF:
 *   forward   Y  = X . W^T   : A = X (ars = in, acs = 1),   B = W (brs = 1,  bcs = in)
 *   backward  dX = dY . W    : A = dY (ars = out, acs = 1), B = W (brs = in, bcs = 1)
 *   backward  dW += dY^T . X : A = dY (ars = 1, acs = out), B = X (brs = in, bcs = 1)
 * The operands are packed into MR-row / NR-column panels (BLIS-style: a KC-deep micro-panel of B
 * stays in L1, an MC x KC block of A in L2), so every layout runs the same register-blocked
 * microkernel: AVX-512 12x32, AVX2 6x16, or a plain-C one. kern_gemm_f32_ref is the triple loop
 * (double accumulation) that tests compare against.
 *
 * The BF16 paths (gemm_bf16.c) compute the same product with both operands rounded to BF16
 * (round to nearest even) as they are packed and the products summed in F32: vdpbf16ps on CPUs
 * with AVX512-BF16 (about twice the F32 FMA rate), and a plain-C path with the same packing and
 * summation for tests. Their error is that of the rounding, |C - AB| <= (2^-7 + 2^-16 + K 2^-24)
 * sum_k |A(i,k) B(k,j)| about, not F32's: callers choose them (the trainer's "matmul": "bf16").
 *
 * Summation order depends only on K and the path (not on threads or tiling of M/N), so results
 * are identical for any thread count. */
#ifndef TERN_KERNELS_GEMM_F32_H
#define TERN_KERNELS_GEMM_F32_H

#include <stdbool.h>
#include <stddef.h>

#include "util/threadpool.h"

enum kern_gemm_path {
    KERN_GEMM_AUTO = 0,  /* the best microkernel this CPU runs (TERN_KERNELS narrows it) */
    KERN_GEMM_SCALAR,    /* blocked driver, plain-C microkernel */
    KERN_GEMM_AVX2,
    KERN_GEMM_AVX512,
    KERN_GEMM_BF16_SCALAR, /* operands rounded to BF16, F32 sums: plain C (tests) */
    KERN_GEMM_BF16_AVX512, /* the same with vdpbf16ps (AVX512-BF16) */
};

struct kern_gemm {
    int M, N, K;
    const float *A;
    ptrdiff_t ars, acs;  /* A(i, k) = A[i*ars + k*acs] */
    const float *B;
    ptrdiff_t brs, bcs;  /* B(k, j) = B[k*brs + j*bcs] */
    float *C;
    ptrdiff_t ldc;       /* C(i, j) = C[i*ldc + j] */
    bool accumulate;     /* C += product (else C = product) */
};

/* Floats of packing workspace one thread needs (any shape). */
size_t kern_gemm_ws_floats(void);
/* The path AUTO resolves to (always F32), and a path's name ("avx512", "avx2", "scalar",
 * "avx512-bf16", "scalar-bf16"). */
enum kern_gemm_path kern_gemm_best(void);
const char *kern_gemm_path_name(enum kern_gemm_path p);
/* true for the BF16 paths */
bool kern_gemm_path_bf16(enum kern_gemm_path p);
/* false if this CPU cannot run path p. */
bool kern_gemm_path_ok(enum kern_gemm_path p);

/* Single-threaded product on workspace ws (kern_gemm_ws_floats() floats, 64-byte aligned). */
void kern_gemm_f32(const struct kern_gemm *g, enum kern_gemm_path path, float *ws);
/* The same product cut into tiles of C shared out over pool tp; ws holds one workspace per
 * thread (tid * kern_gemm_ws_floats()). Same result as the single-threaded call, bit for bit. */
void kern_gemm_f32_mt(const struct kern_gemm *g, enum kern_gemm_path path, float *ws,
                      struct tp *tp);
/* Products a and b (independent: neither reads what the other writes) side by side, each
 * on its own share of the pool's threads; the same results as two kern_gemm_f32_mt calls. */
void kern_gemm_f32_mt2(const struct kern_gemm *a, const struct kern_gemm *b, enum kern_gemm_path path,
                       float *ws, struct tp *tp);
/* Reference: C (+)= A . B with double accumulation, no blocking. */
void kern_gemm_f32_ref(const struct kern_gemm *g);

#endif
