/* kern_dispatch.c — picks the ISA path once per process and routes kern_matmul /
 * kern_quantize_act to it.
 *
 * The choice is a pointer to a static table; kern_init fills it under pthread_once, so the
 * hot calls only read it. TERN_KERNELS=scalar|avx2|avx512|neon overrides detection (a path
 * this CPU cannot run falls back, with a warning on stderr). On AArch64 the "neon" path is
 * chosen; whether its integer kernels use the dot-product instruction is decided inside it
 * (kern_neon.h). Likewise the avx2 path's panel tile over weights repacked at load uses AVX-VNNI's
 * vpdpbusd when CPUID has the avxvnni flag, and vpmaddubsw otherwise; TERN_AVXVNNI=0 (or
 * kern_force_avxvnni) takes the vpmaddubsw tile on a CPU that has both, so both are testable. */
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/kern_packed.h"
#include "kernels/kern_tune.h"
#include "quant/quant.h"
#include "util/check.h"
#include "tern.h"
#if defined(__aarch64__)
#include "kernels/kern_neon.h"
#endif

enum kern_isa { ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2, ISA_NEON = 3, ISA_COUNT_ = 4 };
static const char *const isa_names[] = {"scalar", "avx2", "avx512", "neon"};

struct kern_path {
    kern_matmul_fn matmul[TERN_TYPE_COUNT_];
    kern_quant_fn quant[TERN_TYPE_COUNT_];
};

static struct kern_path paths[ISA_COUNT_];
static enum kern_isa active = ISA_SCALAR;
static bool avx2_vnni; /* the avx2 path's panel tile uses AVX-VNNI */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* clang's __builtin_cpu_supports does not know "f16c"; ask CPUID (leaf 1, ECX) directly. */
static bool x86_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* AVX-VNNI (CPUID leaf 7 subleaf 1, EAX bit 4): VEX-encoded vpdpbusd on ymm, no AVX-512 needed */
static bool x86_has_avxvnni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
#endif

static bool cpu_has(enum kern_isa isa)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    switch (isa) {
    case ISA_SCALAR: return true;
    case ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               x86_has_f16c() && __builtin_cpu_supports("bmi2");
    case ISA_AVX512:
        return cpu_has(ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx512bf16");
    default: return false;
    }
#elif defined(__aarch64__)
    return isa == ISA_SCALAR || (isa == ISA_NEON && kern_neon_available());
#else
    return isa == ISA_SCALAR;
#endif
}

static int isa_from_name(const char *name)
{
    for (int i = 0; i < ISA_COUNT_; i++)
        if (strcmp(name, isa_names[i]) == 0) return i;
    return -1;
}

static void fill_paths(void)
{
    for (int t = 0; t < TERN_TYPE_COUNT_; t++) {
#if defined(__x86_64__)
        paths[ISA_AVX2].matmul[t] = kern_avx2_matmul(t);
        paths[ISA_AVX2].quant[t] = kern_avx2_quant(t);
        paths[ISA_AVX512].matmul[t] = kern_avx512_matmul(t);
        paths[ISA_AVX512].quant[t] = kern_avx512_quant(t);
        if (!paths[ISA_AVX2].matmul[t]) paths[ISA_AVX2].matmul[t] = kern_q5_avx2_matmul(t);
        if (!paths[ISA_AVX512].matmul[t]) paths[ISA_AVX512].matmul[t] = kern_q5_avx512_matmul(t);
        if (!paths[ISA_AVX2].quant[t]) paths[ISA_AVX2].quant[t] = kern_q5_avx2_quant(t);
        if (!paths[ISA_AVX512].quant[t]) paths[ISA_AVX512].quant[t] = kern_q5_avx512_quant(t);
        /* avx512 reuses avx2 kernels for types it has none of its own for */
        if (!paths[ISA_AVX512].matmul[t]) paths[ISA_AVX512].matmul[t] = paths[ISA_AVX2].matmul[t];
        if (!paths[ISA_AVX512].quant[t]) paths[ISA_AVX512].quant[t] = paths[ISA_AVX2].quant[t];
#elif defined(__aarch64__)
        paths[ISA_NEON].matmul[t] = kern_neon_matmul(t);
        paths[ISA_NEON].quant[t] = kern_neon_quant(t);
#endif
    }
}

static void init_impl(void)
{
    fill_paths();
    enum kern_isa best = cpu_has(ISA_AVX512) ? ISA_AVX512 : cpu_has(ISA_AVX2) ? ISA_AVX2
                                                                              : ISA_SCALAR;
    if (cpu_has(ISA_NEON)) best = ISA_NEON;
    const char *env = getenv("TERN_KERNELS");
    if (env && *env) {
        int want = isa_from_name(env);
        if (want < 0)
            fprintf(stderr, "tern: TERN_KERNELS=%s is not one of scalar, avx2, avx512, neon; using %s\n",
                    env, isa_names[best]);
        else if (!cpu_has((enum kern_isa)want))
            fprintf(stderr, "tern: TERN_KERNELS=%s: this CPU cannot run it; using %s\n", env,
                    isa_names[best]);
        else
            best = (enum kern_isa)want;
    }
    active = best;
#if defined(__x86_64__)
    const char *vn = getenv("TERN_AVXVNNI");
    avx2_vnni = x86_has_avxvnni() && !(vn && strcmp(vn, "0") == 0);
#endif
}

void kern_init(void) { pthread_once(&init_once, init_impl); }

const char *kern_isa_name(void)
{
    kern_init();
    return isa_names[active];
}

bool kern_force_isa(const char *name)
{
    kern_init();
    int want = name ? isa_from_name(name) : -1;
    if (want < 0 || !cpu_has((enum kern_isa)want)) return false;
    active = (enum kern_isa)want;
    return true;
}

bool kern_avx2_vnni(void)
{
    kern_init();
    return avx2_vnni;
}

bool kern_force_avxvnni(bool on)
{
    kern_init();
#if defined(__x86_64__)
    if (on && !x86_has_avxvnni()) return false;
    avx2_vnni = on;
    return true;
#else
    return !on;
#endif
}

bool kern_cpu_has_avxvnni(void)
{
#if defined(__x86_64__)
    return x86_has_avxvnni();
#else
    return false;
#endif
}

const char *kern_path_name(void)
{
    kern_init();
    return active == ISA_AVX2 && avx2_vnni ? "avx2+avxvnni" : isa_names[active];
}

/* kern_matmul's contract (kernels.h), checked once per call, never per row or block: every
 * path's tiles read whole blocks of k and whole rows of both operands, and write Y[t*ldy + r]. */
static void check_matmul(int wtype, const void *W, size_t w_stride, const void *A, size_t a_stride, int n_tok,
                         int64_t k, int64_t r0, int64_t r1, const float *Y, int64_t ldy)
{
    const struct quant_traits *tr = quant_traits_get(wtype);
    TERN_ASSERT(tr != NULL, "a weight type the quant table knows");
    TERN_ASSERT(k > 0 && k % tr->block_size == 0, "k is a multiple of the block size");
    TERN_ASSERT(n_tok >= 1 && r0 >= 0, "a non-empty token range (rows [r0, r1) may be empty)");
    TERN_ASSERT(n_tok == 1 || r1 <= r0 || ldy >= r1, "token rows of Y do not overlap");
    TERN_ASSERT(W && A && Y);
    TERN_ASSERT(w_stride >= quant_row_bytes(wtype, k), "weight rows hold k elements");
    TERN_ASSERT(n_tok == 1 || a_stride >= quant_row_bytes(tr->vec_dot_type, k),
                "activation rows hold k elements in the weight's vec_dot_type");
}

void kern_matmul(int wtype, const void *W, size_t w_stride, const void *A, size_t a_stride,
                 int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    kern_init();
    check_matmul(wtype, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
#if defined(__x86_64__)
    if (active == ISA_AVX2 && wtype >= 0 &&
        n_tok >= (avx2_vnni ? kern_avxvnni_panel_min_tok(wtype) : kern_avx2_panel_min_tok(wtype))) {
        if (avx2_vnni)
            kern_avxvnni_panel_run(wtype, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
        else
            kern_avx2_panel_run(wtype, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
        return;
    }
#endif
    kern_matmul_fn fn = (wtype >= 0 && wtype < TERN_TYPE_COUNT_) ? paths[active].matmul[wtype]
                                                                  : NULL;
    if (fn)
        fn(W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
    else
        kern_matmul_scalar(wtype, W, w_stride, A, a_stride, n_tok, k, r0, r1, Y, ldy);
}

void kern_quantize_act(int act_type, const float *x, void *y, int64_t k)
{
    kern_init();
    const struct quant_traits *tr = quant_traits_get(act_type);
    TERN_ASSERT(tr && k > 0 && k % tr->block_size == 0 && x && y, "a whole number of activation blocks");
    kern_quant_fn fn = (act_type >= 0 && act_type < TERN_TYPE_COUNT_)
                           ? paths[active].quant[act_type]
                           : NULL;
    if (fn)
        fn(x, y, k);
    else
        kern_quantize_act_scalar(act_type, x, y, k);
}

/* ---------------------------------------------------------------- packed copies (kern_packed.h)
 * avx512 and avx2 share the layout (kern_pack.c); the copy is read while either is active. */

#if defined(__x86_64__)
static bool packed_path(void) { return active == ISA_AVX512 || active == ISA_AVX2; }
#endif

size_t kern_packed_size(int wtype, int64_t rows, int64_t k)
{
    kern_init();
#if defined(__x86_64__)
    if (packed_path()) return kern_panel_packed_size(wtype, rows, k);
#endif
    (void)wtype, (void)rows, (void)k;
    return 0;
}

void kern_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
               int64_t r1, void *P)
{
    /* threads pack disjoint whole panels: r0 on a panel boundary, r1 on one or at the end */
    TERN_ASSERT(r0 >= 0 && r0 % 16 == 0 && r0 <= r1 && r1 <= rows && (r1 % 16 == 0 || r1 == rows));
    TERN_ASSERT(((uintptr_t)P & 63) == 0, "the packed copy is 64-byte aligned");
#if defined(__x86_64__)
    kern_panel_pack(wtype, W, ws, rows, k, r0, r1, P);
#else
    (void)wtype, (void)W, (void)ws, (void)rows, (void)k, (void)r0, (void)r1, (void)P;
#endif
}

/* Both tiles read the copy from 1 token on (kern_avx512_packed_min_tok; the 256-bit tile's
 * decode figures are in docs/results/kernels-2026-11.md "Repacked at load"). */
bool kern_packed_replaces(int wtype)
{
    kern_init();
#if defined(__x86_64__)
    return packed_path() && kern_panel_packed_size(wtype, 1, 256) > 0 &&
           kern_avx512_packed_min_tok(wtype) <= 1;
#else
    (void)wtype;
    return false;
#endif
}

void kern_matmul_packed(int wtype, const void *W, size_t ws, const void *P, const void *A,
                        size_t as, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                        int64_t ldy)
{
    kern_init();
    check_matmul(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
    TERN_ASSERT(!P || ((uintptr_t)P & 63) == 0, "the packed copy is 64-byte aligned");
#if defined(__x86_64__)
    if (P && packed_path() && n_tok >= kern_avx512_packed_min_tok(wtype)) {
        if (kern_tile_class(n_tok) >= 0) { /* 1-3 tokens: the tile measured fastest (kern_tune.h) */
            kern_matmul_packed_tile(kern_tile_for(wtype, k, n_tok), wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
            return;
        }
        if (active == ISA_AVX512)
            kern_avx512_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
        else if (avx2_vnni)
            kern_avxvnni_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
        else
            kern_avx2_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy);
        return;
    }
#else
    (void)P; /* no packed copies off x86: kern_packed_size is 0 there */
#endif
    kern_matmul(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}
