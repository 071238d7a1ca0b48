/* kern_q5_avx2.c — Q5_0 x Q8_0 and Q5_K x Q8_K on the AVX2 path (compiled with the AVX2/FMA/F16C flags, called
 * only after kern_dispatch.c has checked the CPU): the shared tile driver of kern_simd_impl.h
 * with the Q5 steps of kern_q5_simd.h, 4 rows x 2 tokens per tile as in kern_avx2.c.
 *
 * A file of its own so the Q5 formats do not touch the other formats' files; the other kernels
 * of kern_simd_impl.h are compiled in kern_avx2.c and unused here. */
#include "kernels/kernels.h"

#define KERN_VNNI 0
#define KERN_MR 4
#define KERN_MT 2
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/kern_simd_impl.h"
#include "kernels/kern_q5_simd.h"
#pragma GCC diagnostic pop

kern_quant_fn kern_q5_avx2_quant(int act_type)
{
    return act_type == TERN_TYPE_Q8_1 ? q8_1_quant : NULL;
}

kern_matmul_fn kern_q5_avx2_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q5_0: return q5_0_matmul;
    case TERN_TYPE_Q5_1: return q5_1_matmul;
    case TERN_TYPE_Q5_K: return q5_K_matmul;
    default: return NULL;
    }
}
