/* kern_packed_avxvnni.c — the matmul over weights repacked at load (kern_packed.h) for AVX2 CPUs
 * with AVX-VNNI (Alder Lake and later, Zen 5): the 256-bit panel tile of kern_panel_avx2.h with
 * the VEX-encoded vpdpbusd. Compiled with the AVX2 flags plus -mavxvnni (no AVX-512); called
 * only through kern_dispatch.c once it has found the avxvnni CPUID flag. */
#define P2_VNNI 1
#include "kernels/kern_panel_avx2.h"

#include "kernels/kern_packed.h"
#include "util/check.h"

#include <limits.h>

void kern_avxvnni_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                             int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    p2_matmul(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
}

/* kern_packed.h: the per-call panels (kern_panel_avx2.h) */
void kern_avxvnni_panel_run(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    TERN_ASSERT(p2_panel_matmul(wtype) != NULL && n_tok >= 1);
    p2_panel_matmul(wtype)(W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

int kern_avxvnni_panel_min_tok(int wtype)
{
    return p2_panel_matmul(wtype) ? p2_panel_min_tok(wtype) : INT_MAX;
}
