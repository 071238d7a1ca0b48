/* kern_packed_ymm_avx512.c — the 256-bit VNNI tile of kern_panel_avx2.h over weights repacked at
 * load, on CPUs with AVX-512: the same tile as kern_packed_avxvnni.c with the EVEX-encoded
 * vpdpbusd (AVX512-VNNI + VL), which every AVX-512 CPU tern runs on has, where AVX-VNNI's VEX form
 * is missing on some (Zen 4). Compiled with the AVX-512 flags.
 *
 * Why a 256-bit tile on an AVX-512 CPU: which width streams the copy fastest for one token
 * depends on the core (Zen 4 executes 512-bit instructions as two 256-bit halves), so it is one
 * of the candidates kern_tune.h times at load. Its results are the AVX-512 tile's bits (same
 * float operations lane for lane, exact integer dots). */
#define P2_VNNI 2
#include "kernels/kern_panel_avx2.h"

#include "kernels/kern_packed.h"

void kern_ymm512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    p2_matmul(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
}
