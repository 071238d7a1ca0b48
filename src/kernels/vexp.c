/* vexp.c — the scalar expf of vexp.h (the reference every SIMD path reproduces) and the choice
 * of path. */
#include "kernels/vexp.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

const uint64_t vexp_tab[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline uint64_t f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static inline double bits_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

float vexp_f32(float x)
{
    const uint32_t ux = f32_bits(x);
    if (((ux >> 20) & 0x7ff) >= VEXP_TOP_SPECIAL) {
        if (ux == 0xff800000u) return 0.0f;              /* -inf */
        if (((ux >> 20) & 0x7ff) >= 0x7f8) return x + x; /* +inf, NaN */
        if (x > 0x1.62e42ep6f) return INFINITY;          /* above log(2^128) */
        if (x < -0x1.9fe368p6f) return 0.0f;             /* below log(2^-150) */
        if (x < -0x1.9d1d9ep6f) return 0x1p-149f;        /* rounds to the least subnormal */
    }
    const double xd = (double)x;
    const double z = fma(VEXP_INVLN2N, xd, VEXP_SHIFT); /* k in the low bits, rounded to even */
    const uint64_t ki = f64_bits(z);
    const double kd = z - VEXP_SHIFT;
    const double r = fma(VEXP_INVLN2N, xd, -kd);
    const double s = bits_f64(vexp_tab[ki & 31] + (ki << 47));
    const double p = fma(VEXP_C0, r, VEXP_C1);
    const double r2 = r * r;
    double y = fma(VEXP_C2, r, 1.0);
    y = fma(p, r2, y);
    return (float)(y * s);
}

double vexp_sum_scalar(float *s, int n, float mx)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        s[i] = vexp_f32(s[i] - mx);
        sum += (double)s[i];
    }
    return sum;
}

void vexp_sub_scalar(float *s, int n, float mx)
{
    for (int i = 0; i < n; i++) s[i] = vexp_f32(s[i] - mx);
}

void vexp_silu_mul_scalar(float *g, const float *u, int n)
{
    if (!u) {
        for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + vexp_f32(-g[i]));
        return;
    }
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + vexp_f32(-g[i])) * u[i];
}

void vexp_gelu_mul_scalar(float *g, const float *u, int n)
{
    const float c1 = VEXP_GELU_C1, c2 = VEXP_GELU_C2;
    for (int i = 0; i < n; i++) {
        const float x = g[i];
        const float arg = fmaf(x, c1 * x, 1.0f) * (c2 * x);
        float y = x;
        if (!(arg > 30.0f)) {
            const float e = vexp_f32(arg);
            y = x * (e / (e + 1.0f));
        }
        g[i] = y * u[i];
    }
}

struct vexp_kernels vexp_select(void)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512")) return (struct vexp_kernels){vexp_sum_avx512, vexp_sub_avx512, vexp_silu_mul_avx512, vexp_gelu_mul_avx512, "avx512"};
    if (!strcmp(isa, "avx2")) return (struct vexp_kernels){vexp_sum_avx2, vexp_sub_avx2, vexp_silu_mul_avx2, vexp_gelu_mul_avx2, "avx2"};
#endif
    (void)isa;
    return (struct vexp_kernels){vexp_sum_scalar, vexp_sub_scalar, vexp_silu_mul_scalar, vexp_gelu_mul_scalar, "scalar"};
}
