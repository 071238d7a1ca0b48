/* kern_avx512.c — the AVX-512 path (F, BW, VL, DQ, VNNI, BF16; compiled with those flags,
 * called only after kern_dispatch.c has checked the CPU). It compiles the shared kernels of
 * kern_simd_impl.h with vpdpbusd as the u8 x s8 dot and 4 x 4 tiles (32 vector registers);
 * BF16 uses vdpbf16ps (below).
 * Types it returns NULL for use the AVX2 kernels. */
#include "kernels/kernels.h"

#define KERN_VNNI 1
#define KERN_MR 4
#define KERN_MT 4
#include "kernels/kern_simd_impl.h"

/* BF16 x BF16 with vdpbf16ps: 16 elements per instruction, pairs summed into float lanes
 * (products of two bf16 are exact in float; denormal inputs are flushed to zero, which only
 * matters below 1e-38). */
KS_INLINE void bf16dp_tile(const uint8_t *W, size_t ws, const uint8_t *A, size_t as, int64_t k,
                           int nr, int nt, float *out)
{
    __m256 acc[4][KERN_MR][KERN_MT];
    const int nacc = nr * nt >= 4 ? 1 : 4;
    for (int u = 0; u < nacc; u++)
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < nt; j++) acc[u][i][j] = _mm256_setzero_ps();
    const int64_t step = 16 * nacc;
    int64_t e = 0;
    for (; e + step <= k; e += step) {
        for (int u = 0; u < nacc; u++) {
            __m256bh a[KERN_MT];
            for (int j = 0; j < nt; j++)
                a[j] = (__m256bh)_mm256_loadu_si256(
                    (const __m256i *)((const uint16_t *)(A + j * as) + e + 16 * u));
            for (int i = 0; i < nr; i++) {
                const __m256bh w = (__m256bh)_mm256_loadu_si256(
                    (const __m256i *)((const uint16_t *)(W + i * ws) + e + 16 * u));
                for (int j = 0; j < nt; j++) acc[u][i][j] = _mm256_dpbf16_ps(acc[u][i][j], w, a[j]);
            }
        }
    }
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nt; j++) {
            __m256 v = acc[0][i][j];
            for (int u = 1; u < nacc; u++) v = _mm256_add_ps(v, acc[u][i][j]);
            float s = ks_hsum(v);
            for (int64_t t = e; t < k; t++) /* tail shorter than a step */
                s += kern_bf16_elem(W + i * ws, t) * kern_bf16_elem(A + j * as, t);
            out[i * nt + j] = s;
        }
}
KS_DEFINE_MATMUL(bf16dp)

/* F16 in 512-bit vectors: 16 elements per FMA, 4 x 4 tiles of 16 accumulators; small
 * tiles split k over 2-4 accumulator sets (FMA latency). The k tail is a zero-masked load, so
 * no scalar loop. F16 x F16 products are exact in float. F16 prefill, 896 x 4864 x 512 tokens,
 * 1 thread: 119-136 GFLOP/s with the 256-bit tiles, 205-218 here. F32 keeps the 256-bit tiles
 * and BF16 bf16dp above: 512-bit versions measured the same for prefill, slower for decode. */
/* m: lanes to load (the rest zero); m == 0 means all, as a plain load */
KS_INLINE __m512 kz_load_f16(const uint8_t *p, int64_t e, __mmask32 m)
{
    if (!m) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + e)));
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)m, (const uint16_t *)p + e));
}
KS_INLINE __m512 kz_fma_f(__m512 acc, __m512 w, __m512 a) { return _mm512_fmadd_ps(w, a, acc); }

/* VL: elements per vector step (16) */
#define KZ_FLOAT_TILE(fmt, load, fma, VL)                                                       \
    KS_INLINE void fmt##_tile(const uint8_t *W, size_t ws, const uint8_t *A, size_t as,         \
                              int64_t k, int nr, int nt, float *out)                            \
    {                                                                                           \
        __m512 acc[4][KERN_MR][KERN_MT];                                                        \
        const int nacc = nr * nt >= 8 ? 1 : nr * nt >= 4 ? 2 : 4;                               \
        const __mmask32 all = 0;                                                                \
        for (int u = 0; u < nacc; u++)                                                          \
            for (int i = 0; i < nr; i++)                                                        \
                for (int j = 0; j < nt; j++) acc[u][i][j] = _mm512_setzero_ps();                \
        int64_t e = 0;                                                                          \
        for (; e + VL * nacc <= k; e += VL * nacc)                                              \
            for (int u = 0; u < nacc; u++) {                                                    \
                __m512 a[KERN_MT];                                                              \
                for (int j = 0; j < nt; j++) a[j] = load(A + j * as, e + VL * u, all);          \
                for (int i = 0; i < nr; i++) {                                                  \
                    const __m512 w = load(W + i * ws, e + VL * u, all);                         \
                    for (int j = 0; j < nt; j++) acc[u][i][j] = fma(acc[u][i][j], w, a[j]);     \
                }                                                                               \
            }                                                                                   \
        for (; e < k; e += VL) { /* < nacc steps left, the last one masked */                  \
            const __mmask32 m = k - e >= VL ? all : (__mmask32)((1ull << (k - e)) - 1);         \
            __m512 a[KERN_MT];                                                                  \
            for (int j = 0; j < nt; j++) a[j] = load(A + j * as, e, m);                         \
            for (int i = 0; i < nr; i++) {                                                      \
                const __m512 w = load(W + i * ws, e, m);                                        \
                for (int j = 0; j < nt; j++) acc[0][i][j] = fma(acc[0][i][j], w, a[j]);         \
            }                                                                                   \
        }                                                                                       \
        for (int i = 0; i < nr; i++)                                                            \
            for (int j = 0; j < nt; j++) {                                                      \
                __m512 v = acc[0][i][j];                                                        \
                for (int u = 1; u < nacc; u++) v = _mm512_add_ps(v, acc[u][i][j]);              \
                out[i * nt + j] = _mm512_reduce_add_ps(v);                                      \
            }                                                                                   \
    }                                                                                           \
    KS_DEFINE_MATMUL(fmt)

KZ_FLOAT_TILE(f16z, kz_load_f16, kz_fma_f, 16)

/* Panel thresholds (KS_ROUTE), from bench_smallm (256 MB of weights, k = 896 and 4864, one
 * thread, CPU time): with the panels' whole-panel packing the panels beat the decode kernel
 * from 2 tokens on for Q8_0 (k = 896: 12.8 against 13.6 ms; k = 4864: even) and from 3 for
 * Q4_0 (19.9 against 25.0 ms), and the 256-bit tiles from 2 for Q4_K (17.8 / 19.4 against
 * 21.9 / 21.2 ms). Q6_K's whole-panel packing is dearer: at 4 tokens the tiles still win at
 * k = 896 (28.0 against 33.5 ms) and lose at k = 4864 (53.0 against 30.6), so 5.
 * Q4_K and Q6_K have no decode kernel on the route: kern_avx512_decode_kquant (kernels.h) loses
 * bandwidth to these tiles on DRAM-resident weights. */
KS_ROUTE(q8_0, TERN_TYPE_Q8_0, 2, kern_avx512_decode_matmul)
KS_ROUTE(q4_0, TERN_TYPE_Q4_0, 3, kern_avx512_decode_matmul)
KS_ROUTE(q4_K, TERN_TYPE_Q4_K, 2, NULL)
KS_ROUTE(q6_K, TERN_TYPE_Q6_K, 5, NULL)

kern_matmul_fn kern_avx512_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_F32: return f32_matmul; /* a 512-bit tile: same prefill, slower decode */
    case TERN_TYPE_F16: return f16z_matmul;
    case TERN_TYPE_BF16: return bf16dp_matmul;
    case TERN_TYPE_Q4_0: return q4_0_route;
    case TERN_TYPE_Q8_0: return q8_0_route;
    case TERN_TYPE_Q4_K: return q4_K_route;
    case TERN_TYPE_Q6_K: return q6_K_route;
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
