/* vexp.h — expf with the same bits on every path, scalar and SIMD, for the places the forward
 * pass needs it in bulk: the softmax exponentials (attn*.c), SiLU(gate) * up and GELU(gate) * up.
 *
 * vexp_f32 is the ARM optimized-routines expf algorithm (the one glibc and musl ship, MIT
 * licensed): x * 32/ln2 split into k + r, 2^(k/32) from a 32-entry table, a cubic in r, all in
 * double, every multiply-add fused. With the fused operations spelled out (fma()) the result is
 * defined by the code, not by whichever libm and compiler built the caller; on x86-64 with FMA
 * it is bit-identical to glibc's expf (checked over all 2^32 inputs when this was written), so
 * logits did not move when tern stopped calling libm here. The SIMD versions evaluate the same
 * operations lane-wise (test_attn compares them bit for bit on many inputs and all special
 * cases: +-inf, NaN, overflow, underflow, subnormal results). */
#ifndef TERN_KERNELS_VEXP_H
#define TERN_KERNELS_VEXP_H

#include <stdint.h>

/* Table and constants of the algorithm (vexp.c): 2^(i/32) bits minus i << 47, and the scaled
 * coefficients. */
extern const uint64_t vexp_tab[32];
#define VEXP_INVLN2N 0x1.71547652b82fep+5
#define VEXP_SHIFT 0x1.8p+52
#define VEXP_C0 0x1.c6af84b912394p-20
#define VEXP_C1 0x1.ebfce50fac4f3p-13
#define VEXP_C2 0x1.62e42ff0c52d6p-6
/* |x| at or above 88 (top 12 bits 0x42b) takes the special-case path of vexp_f32. */
#define VEXP_TOP_SPECIAL 0x42bu

float vexp_f32(float x);

/* s[i] = vexp_f32(s[i] - mx) for i < n, and their sum in double, added in index order (the
 * softmax of attn.h; the order of the sum is part of its numerics). */
typedef double (*vexp_sum_fn)(float *s, int n, float mx);
/* The same exponentials without the sum (the attention backward recomputes probabilities from
 * the saved log-sum-exp and needs no sum): the sum's serial double additions cost about as much
 * as the exponentials. */
typedef void (*vexp_sub_fn)(float *s, int n, float mx);
/* g[i] = g[i] / (1 + vexp_f32(-g[i])) * u[i]: SiLU(gate) * up, in float, as llama.cpp's
 * reference writes it; u NULL: SiLU alone, g[i] / (1 + vexp_f32(-g[i])). */
typedef void (*vexp_silu_mul_fn)(float *g, const float *u, int n);

/* g[i] = gelu(g[i]) * u[i] (gemma3's FFN) with GELU's tanh form evaluated as llama.cpp's AVX-512
 * path does: 0.5 (1 + tanh(a)) = e^2a / (e^2a + 1) with 2a = fma(x, C1 x, 1) * (C2 x), and
 * gelu(x) = x where 2a > 30. Same signature as SiLU's. */
typedef vexp_silu_mul_fn vexp_gelu_mul_fn;
#define VEXP_GELU_C1 0.044715f
#define VEXP_GELU_C2 (2.0f * 0.79788456080286535587989211986876f)

struct vexp_kernels {
    vexp_sum_fn exp_sum;
    vexp_sub_fn exp_sub;
    vexp_silu_mul_fn silu_mul;
    vexp_gelu_mul_fn gelu_mul;
    const char *name;
};

/* The kernels for this CPU (kern_isa_name(): avx512, avx2, else scalar). */
struct vexp_kernels vexp_select(void);

double vexp_sum_scalar(float *s, int n, float mx);
void vexp_sub_scalar(float *s, int n, float mx);
void vexp_silu_mul_scalar(float *g, const float *u, int n);
void vexp_gelu_mul_scalar(float *g, const float *u, int n);
double vexp_sum_avx2(float *s, int n, float mx);
void vexp_sub_avx2(float *s, int n, float mx);
void vexp_silu_mul_avx2(float *g, const float *u, int n);
void vexp_gelu_mul_avx2(float *g, const float *u, int n);
double vexp_sum_avx512(float *s, int n, float mx);
void vexp_sub_avx512(float *s, int n, float mx);
void vexp_silu_mul_avx512(float *g, const float *u, int n);
void vexp_gelu_mul_avx512(float *g, const float *u, int n);

#endif
