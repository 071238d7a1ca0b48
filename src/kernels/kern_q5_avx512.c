/* kern_q5_avx512.c — Q5_0 x Q8_0 on the AVX-512 path (compiled with the AVX-512 flags, called
 * only after kern_dispatch.c has checked the CPU). Prefill (many tokens) goes to the repacked
 * panel kernel of kern_panel_avx512.c; fewer tokens run the 256-bit tiles of kern_simd_impl.h
 * with vpdpbusd and the Q5_0 block step of kern_q5_simd.h (4 x 4 tiles, as kern_avx512.c).
 *
 * Read first: kern_avx512.c (the same routing for Q4_0), kern_q5_simd.h. */
#include "kernels/kernels.h"

#define KERN_VNNI 1
#define KERN_MR 4
#define KERN_MT 4
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/kern_simd_impl.h"
#include "kernels/kern_q5_simd.h"
#pragma GCC diagnostic pop

/* from this many tokens on the panel kernel wins (as for Q4_0, whose repack is the same work) */
#define Q5_PANEL_MIN_TOK 6

static void q5_0_route(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                       int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    kern_matmul_fn panel = kern_avx512_panel_matmul(TERN_TYPE_Q5_0);
    if (n_tok >= Q5_PANEL_MIN_TOK && panel)
        panel(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
    else
        q5_0_matmul(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

kern_matmul_fn kern_q5_avx512_matmul(int wtype)
{
    return wtype == TERN_TYPE_Q5_0 ? q5_0_route : NULL;
}
