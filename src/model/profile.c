/* profile.c — per-op timing of the forward pass (tern_context_profile) and the fallback check:
 * a matmul on a supported format whose kernel on this CPU is the scalar reference although the
 * CPU runs a SIMD path (kern_isa_name() != "scalar") is a fallback, and is counted. */
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#if defined(__aarch64__)
#include "kernels/kern_neon.h"
#endif
#include "model/context.h"

uint64_t prof_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int prof_matmul_op(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_F32: return TERN_PROF_MATMUL_F32;
    case TERN_TYPE_F16: return TERN_PROF_MATMUL_F16;
    case TERN_TYPE_BF16: return TERN_PROF_MATMUL_BF16;
    case TERN_TYPE_Q8_0: return TERN_PROF_MATMUL_Q8_0;
    case TERN_TYPE_Q4_0: return TERN_PROF_MATMUL_Q4_0;
    case TERN_TYPE_Q5_0: return TERN_PROF_MATMUL_Q5_0;
    case TERN_TYPE_Q5_K: return TERN_PROF_MATMUL_Q5_K;
    case TERN_TYPE_Q5_1: return TERN_PROF_MATMUL_Q5_1;
    case TERN_TYPE_Q4_1: return TERN_PROF_MATMUL_Q4_1;
    case TERN_TYPE_Q4_K: return TERN_PROF_MATMUL_Q4_K;
    default: return TERN_PROF_MATMUL_Q6_K;
    }
}

static const char *matmul_kernel(int wtype)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512") && (kern_avx512_matmul(wtype) || kern_q5_avx512_matmul(wtype)))
        return "avx512";
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) &&
        (kern_avx2_matmul(wtype) || kern_q5_avx2_matmul(wtype)))
        return "avx2";
#elif defined(__aarch64__)
    if (!strcmp(isa, "neon") && kern_neon_matmul_name(wtype)) return kern_neon_matmul_name(wtype);
#else
    (void)wtype;
#endif
    (void)isa;
    return "scalar";
}

bool prof_is_fallback(int wtype)
{
    return strcmp(kern_isa_name(), "scalar") != 0 && !strcmp(matmul_kernel(wtype), "scalar");
}

void tern_context_set_profile(struct tern_context *ctx, bool on) { ctx->profile = on; }

void tern_context_profile_reset(struct tern_context *ctx)
{
    memset(ctx->prof_ns, 0, sizeof ctx->prof_ns);
    memset(ctx->prof_calls, 0, sizeof ctx->prof_calls);
    memset(ctx->prof_fallbacks, 0, sizeof ctx->prof_fallbacks);
}

void tern_context_profile(const struct tern_context *ctx, struct tern_profile_entry *out)
{
    static const char *names[TERN_PROF_COUNT] = {
        "embedding", "rmsnorm+quantize", "quantize", "rope+kv store", "attention", "silu*up",
        "matmul F32", "matmul F16", "matmul BF16", "matmul Q8_0", "matmul Q4_0", "matmul Q4_K",
        "matmul Q6_K", "matmul Q5_0", "matmul Q5_K", "matmul Q5_1", "matmul Q4_1"};
    static const int types[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16, TERN_TYPE_Q8_0,
                                TERN_TYPE_Q4_0, TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q5_0,
                                TERN_TYPE_Q5_K, TERN_TYPE_Q5_1, TERN_TYPE_Q4_1};
    for (int i = 0; i < TERN_PROF_COUNT; i++) {
        const char *kernel = "scalar";
        if (i == TERN_PROF_ATTENTION) kernel = ctx->attn_k.name;
        else if (i == TERN_PROF_FFN_ACT) kernel = ctx->vexp_k.name;
        else if (i >= TERN_PROF_MATMUL_F32) kernel = matmul_kernel(types[i - TERN_PROF_MATMUL_F32]);
        else if (i == TERN_PROF_NORM_QUANT || i == TERN_PROF_QUANT) kernel = kern_isa_name();
        out[i] = (struct tern_profile_entry){names[i], kernel, ctx->prof_ns[i], ctx->prof_calls[i],
                                             ctx->prof_fallbacks[i]};
    }
}
