/* kern_avx2.c — the AVX2 + FMA + F16C path (compiled with those flags; called only after
 * kern_dispatch.c has checked the CPU). The kernels themselves are in kern_simd_impl.h, shared
 * with the AVX-512 path; here the u8 x s8 dot is maddubs + madd, and tiles are 4 rows x 2
 * tokens (16 vector registers). */
#include "kernels/kernels.h"

#define KERN_VNNI 0
#define KERN_MR 4
#define KERN_MT 2
#include "kernels/kern_simd_impl.h"

kern_matmul_fn kern_avx2_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_F32: return f32_matmul;
    case TERN_TYPE_F16: return f16_matmul;
    case TERN_TYPE_BF16: return bf16_matmul;
    case TERN_TYPE_Q4_0: return q4_0_matmul;
    case TERN_TYPE_Q8_0: return q8_0_matmul;
    case TERN_TYPE_Q4_K: return q4_K_matmul;
    case TERN_TYPE_Q6_K: return q6_K_matmul;
    default: return NULL;
    }
}

kern_quant_fn kern_avx2_quant(int act_type)
{
    switch (act_type) {
    case TERN_TYPE_Q8_0: return q8_0_quant;
    case TERN_TYPE_Q8_K: return q8_K_quant;
    case TERN_TYPE_F16: return f16_quant;
    default: return NULL; /* F32 is a copy, BF16 the scalar conversion */
    }
}
