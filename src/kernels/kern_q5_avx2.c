/* kern_q5_avx2.c — Q5_0 x Q8_0, Q5_1 / Q4_1 x Q8_1 and Q5_K x Q8_K on the AVX2 path (compiled with the AVX2/FMA/F16C flags, called
 * only after kern_dispatch.c has checked the CPU): the shared tile driver of kern_simd_impl.h
 * with the Q5 steps of kern_q5_simd.h, 4 rows x 2 tokens per tile as in kern_avx2.c.
 *
 * A file of its own so the Q5 formats do not touch the other formats' files; the other kernels
 * of kern_simd_impl.h are compiled in kern_avx2.c and unused here. Q5_0 and Q5_1 decode (a few
 * tokens) on the streaming kernel of kern_q5_decode_avx2.h (q5_route); so does Q4_1, whose codes
 * are Q5_1's without the fifth bits. */
#include "kernels/kernels.h"

#define KERN_VNNI 0
#define KERN_MR 4
#define KERN_MT 2
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/kern_simd_impl.h"
#include "kernels/kern_q5_simd.h"
#pragma GCC diagnostic pop
#define Q5D_VNNI 0
#include "kernels/kern_q5_decode_avx2.h"

kern_quant_fn kern_q5_avx2_quant(int act_type)
{
    return act_type == TERN_TYPE_Q8_1 ? q8_1_quant : NULL;
}

/* Up to Q5D_MAX_TOK tokens, the streaming decode kernel (with AVX-VNNI its vpdpbusd variant;
 * kern_matmul sends 3 tokens and more to the per-call panels there); more, or rows too long for
 * its buffer, the tiles. bench_kernels, one token over 256 MB: tiles 14.3 GB/s. */
static void q5_route(int wtype, kern_matmul_fn tiles, const void *W, size_t ws, const void *A, size_t as,
                     int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    if (n_tok <= Q5D_MAX_TOK &&
        (kern_avx2_vnni() ? kern_avxvnni_q5_decode(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy)
                          : q5d_decode(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy)))
        return;
    tiles(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}
static void q5_0_route(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k, int64_t r0,
                       int64_t r1, float *Y, int64_t ldy)
{
    q5_route(TERN_TYPE_Q5_0, q5_0_matmul, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}
static void q5_1_route(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k, int64_t r0,
                       int64_t r1, float *Y, int64_t ldy)
{
    q5_route(TERN_TYPE_Q5_1, q5_1_matmul, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}
static void q4_1_route(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k, int64_t r0,
                       int64_t r1, float *Y, int64_t ldy)
{
    q5_route(TERN_TYPE_Q4_1, q4_1_matmul, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

kern_matmul_fn kern_q5_avx2_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q5_0: return q5_0_route;
    case TERN_TYPE_Q5_1: return q5_1_route;
    case TERN_TYPE_Q4_1: return q4_1_route;
    case TERN_TYPE_Q5_K: return q5_K_matmul;
    default: return NULL;
    }
}
