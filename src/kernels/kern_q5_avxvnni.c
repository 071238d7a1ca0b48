/* kern_q5_avxvnni.c — the Q5_0 / Q5_1 decode kernel of kern_q5_decode_avx2.h with the VEX-encoded
 * vpdpbusd, for avx2 CPUs with AVX-VNNI. Compiled with the AVX2 flags plus -mavxvnni (no AVX-512);
 * called only through kern_q5_avx2.c's route once kern_dispatch.c has found the avxvnni flag. */
#define Q5D_VNNI 1
#include "kernels/kern_q5_decode_avx2.h"

#include "kernels/kernels.h"

bool kern_avxvnni_q5_decode(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    return q5d_decode(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}
