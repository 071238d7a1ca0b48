/* kern_packed_avx2.c — the matmul over weights repacked at load (kern_packed.h) for AVX2 CPUs
 * without AVX-VNNI: the 256-bit panel tile of kern_panel_avx2.h with the vpmaddubsw + vpmaddwd
 * dots. Compiled with the AVX2 flags; called only through kern_dispatch.c once it has checked
 * the CPU (and, on a CPU with AVX-VNNI, only when TERN_AVXVNNI=0 or a test asks for it). */
#define P2_VNNI 0
#include "kernels/kern_panel_avx2.h"

#include "kernels/kern_packed.h"
#include "util/check.h"

#include <limits.h>

void kern_avx2_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok, int64_t k,
                          int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    p2_matmul(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
}

/* kern_packed.h: the per-call panels (kern_panel_avx2.h), vpmaddubsw variant */
void kern_avx2_panel_run(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                         int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    /* kern_matmul routes here only types with a panel (kern_avx2_panel_min_tok is INT_MAX else) */
    TERN_ASSERT(p2_panel_matmul(wtype) != NULL && n_tok >= 1);
    p2_panel_matmul(wtype)(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

int kern_avx2_panel_min_tok(int wtype)
{
    return p2_panel_matmul(wtype) ? p2_panel_min_tok(wtype) : INT_MAX;
}
