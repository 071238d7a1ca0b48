/* kern_avx512.c — the AVX-512 path (F, BW, VL, DQ, VNNI, BF16; compiled with those flags,
 * called only after kern_dispatch.c has checked the CPU). It compiles the shared kernels of
 * kern_simd_impl.h with vpdpbusd as the u8 x s8 dot and 4 x 4 tiles (32 vector registers).
 * Types it returns NULL for use the AVX2 kernels. */
#include "kernels/kernels.h"

#define KERN_VNNI 1
#define KERN_MR 4
#define KERN_MT 4
#include "kernels/kern_simd_impl.h"

kern_matmul_fn kern_avx512_matmul(int wtype)
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

kern_quant_fn kern_avx512_quant(int act_type)
{
    switch (act_type) {
    case TERN_TYPE_Q8_0: return q8_0_quant;
    case TERN_TYPE_Q8_K: return q8_K_quant;
    case TERN_TYPE_F16: return f16_quant;
    default: return NULL;
    }
}
