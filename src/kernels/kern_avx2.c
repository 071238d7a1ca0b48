/* kern_avx2.c — AVX2 + FMA + F16C kernels (compiled with those flags; called only after
 * kern_dispatch.c has checked the CPU). Returns NULL for the types it has no kernel for yet. */
#include "kernels/kernels.h"

kern_matmul_fn kern_avx2_matmul(int wtype)
{
    (void)wtype;
    return NULL;
}

kern_quant_fn kern_avx2_quant(int act_type)
{
    (void)act_type;
    return NULL;
}
