/* fp16.h — IEEE half and bfloat16 conversions (scalar reference; exact round-to-nearest-even,
 * matching F16C's vcvtps2ph and ggml's reference). Kernels use the SIMD instructions; these
 * are the oracle and the portable path. */
#ifndef TERN_UTIL_FP16_H
#define TERN_UTIL_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float fp16_to_f32(uint16_t h)
{
    /* Shift the half into a float's position and rescale: handles normals, subnormals, inf, nan. */
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = fp_bits_f32(0x7800000u); /* 2^-112 */
    const float normalized = fp_bits_f32((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = fp_bits_f32((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result = sign | (two_w < denormalized_cutoff ? fp_f32_bits(denormalized)
                                                                : fp_f32_bits(normalized));
    return fp_bits_f32(result);
}

static inline uint16_t fp16_from_f32(float f)
{
    const float scale_to_inf = fp_bits_f32(0x77800000u);  /* 2^112 */
    const float scale_to_zero = fp_bits_f32(0x08800000u); /* 2^-110 */
    float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
    const uint32_t w = fp_f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = fp_bits_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = fp_f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float bf16_to_f32(uint16_t h) { return fp_bits_f32((uint32_t)h << 16); }

static inline uint16_t bf16_from_f32(float f)
{
    uint32_t u = fp_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

#endif
