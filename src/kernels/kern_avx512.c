/* kern_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels (compiled with those flags;
 * called only after kern_dispatch.c has checked the CPU). Returns NULL for the types it has no
 * kernel for (the dispatcher then uses the AVX2 one, or scalar). */
#include "kernels/kernels.h"

kern_matmul_fn kern_avx512_matmul(int wtype)
{
    (void)wtype;
    return NULL;
}

kern_quant_fn kern_avx512_quant(int act_type)
{
    (void)act_type;
    return NULL;
}
