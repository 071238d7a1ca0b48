/* kern_neon_base.c — the parts of the NEON path that run on any ARMv8.0 core: the float
 * kernels (F32, F16, BF16), the activation quantizers, the integer kernels without the
 * dot-product instruction, and the CPU detection that picks between those and kern_neon.c.
 * Compiled with the target's default flags (no -march), so nothing here can fault on an
 * older core.
 *
 * Read first: kern_neon.h, kern_neon_impl.h. The quantizers are bit-identical to the scalar
 * from_float of quant_q8.c / quant_float.c: same float operations per element, and FCVTNS /
 * FCVTN round half to even like nearbyintf / quant_nearest_int / fp16_from_f32. */
#include "kernels/kern_neon.h"

#if defined(__aarch64__)

#include <math.h>
#include <pthread.h>

#if defined(__APPLE__)
#include <sys/types.h>
#include <sys/sysctl.h>
#elif defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

#include "kernels/kern_kquant.h"
#include "util/fp16.h"

#define KERN_DOTPROD 0
#include "kernels/kern_neon_impl.h"

/* ------------------------------------------------------------------ CPU detection */
static bool has_dotprod;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
#if defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    has_dotprod = sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &len, NULL, 0) == 0 && v;
#elif defined(__linux__)
    has_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    has_dotprod = false; /* no portable way to ask: the ARMv8.0 kernels are always safe */
#endif
}

bool kern_neon_available(void)
{
#if defined(__linux__) && !defined(__APPLE__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
    return true; /* Advanced SIMD is mandatory in AArch64 */
#endif
}

bool kern_neon_has_dotprod(void)
{
    pthread_once(&detect_once, detect);
    return has_dotprod;
}

/* ------------------------------------------------------------------ float formats
 * 4 elements per vector; small tiles (decode) keep 4 accumulator sets over consecutive
 * vectors so the FMA chains overlap. The activation vectors are converted once per tile. */
KN_INLINE float32x4_t kn_load_f32(const uint8_t *p, int64_t e)
{
    return vld1q_f32((const float *)p + e);
}
KN_INLINE float32x4_t kn_load_f16(const uint8_t *p, int64_t e)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + e)));
}
KN_INLINE float32x4_t kn_load_bf16(const uint8_t *p, int64_t e)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + e), 16));
}
/* kern_tile.h's float tile; full tiles keep 2 accumulator sets */
#define KN_FLOAT_TILE(fmt, load) KERN_TILE_FLOAT(fmt, load, KN_MR, KN_MT, 2)

KN_FLOAT_TILE(f32, kn_load_f32)
KN_FLOAT_TILE(f16, kn_load_f16)
KN_FLOAT_TILE(bf16, kn_load_bf16)

kern_matmul_fn kern_neon_base_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_F32: return f32_matmul;
    case TERN_TYPE_F16: return f16_matmul;
    case TERN_TYPE_BF16: return bf16_matmul;
    default: return kn_int_matmul(wtype);
    }
}

kern_matmul_fn kern_neon_matmul(int wtype)
{
    kern_matmul_fn fn = kern_neon_has_dotprod() ? kern_neon_dot_matmul(wtype) : NULL;
    return fn ? fn : kern_neon_base_matmul(wtype);
}

const char *kern_neon_matmul_name(int wtype)
{
    if (kern_neon_has_dotprod() && kern_neon_dot_matmul(wtype)) return "neon-dotprod";
    return kern_neon_base_matmul(wtype) ? "neon" : NULL;
}

/* ------------------------------------------------------------------ activation quantizers */

/* 16 int32 (already in int8 range) -> 16 int8 in element order */
KN_INLINE int8x16_t kn_narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d)
{
    const int16x8_t lo = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    const int16x8_t hi = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
    return vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi));
}

/* largest |x| of n floats (n % 16 == 0); maxnm ignores NaN like fmaxf */
KN_INLINE float kn_amax(const float *x, int n)
{
    float32x4_t m = vdupq_n_f32(0);
    for (int j = 0; j < n; j += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxnmvq_f32(m);
}

static void q8_0_quant(const float *x, void *vy, int64_t n)
{
    struct quant_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK8_0; b++, x += QUANT_QK8_0) {
        const float amax = kn_amax(x, QUANT_QK8_0);
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[b].d = fp16_from_f32(d);
        int32x4_t q[8];
        for (int u = 0; u < 8; u++) q[u] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * u), id));
        vst1q_s8(y[b].qs, kn_narrow16(q[0], q[1], q[2], q[3]));
        vst1q_s8(y[b].qs + 16, kn_narrow16(q[4], q[5], q[6], q[7]));
    }
}

static void q8_K_quant(const float *x, void *vy, int64_t n)
{
    struct quant_block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QUANT_QK_K; b++, x += QUANT_QK_K) {
        const float amax = kn_amax(x, QUANT_QK_K);
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float max = kern_q8k_first_max(x, QUANT_QK_K, amax);
        const float iscale = -127.f / max;
        const int32x4_t lim = vdupq_n_s32(127);
        for (int j = 0; j < QUANT_QK_K; j += 16) {
            int32x4_t q[4];
            for (int u = 0; u < 4; u++)
                q[u] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * u), iscale)), lim);
            const int8x16_t v = kn_narrow16(q[0], q[1], q[2], q[3]);
            vst1q_s8(y[b].qs + j, v);
            y[b].bsums[j / 16] = (int16_t)vaddlvq_s8(v);
        }
        y[b].d = 1 / iscale;
    }
}

static void f16_quant(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = fp16_from_f32(x[i]);
}

/* round to nearest even on the top 16 bits; NaN stays a quiet NaN (bf16_from_f32) */
static void bf16_quant(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
        const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
        const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7fff))), 16);
        const uint32x4_t nan = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
        const uint32x4_t is_nan =
            vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
        vst1_u16(y + i, vmovn_u32(vbslq_u32(is_nan, nan, rounded)));
    }
    for (; i < n; i++) y[i] = bf16_from_f32(x[i]);
}

kern_quant_fn kern_neon_quant(int act_type)
{
    switch (act_type) {
    case TERN_TYPE_Q8_0: return q8_0_quant;
    case TERN_TYPE_Q8_K: return q8_K_quant;
    case TERN_TYPE_F16: return f16_quant;
    case TERN_TYPE_BF16: return bf16_quant;
    default: return NULL; /* F32 is a copy */
    }
}

#else
typedef int kern_neon_base_unused_on_this_target; /* ISO C wants a declaration in every file */
#endif
