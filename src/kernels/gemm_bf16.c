/* gemm_bf16.c — the blocked BF16 GEMM driver and its plain-C packers and microkernel.
 *
 * Read gemm_f32.h, then gemm_bf16.h (the packed layouts). The loops are gemm_f32.c's (BLIS:
 * NC columns, KC slices of K, MC rows, then MR x NR tiles), but here both operands are always
 * packed, because packing is where they are rounded to BF16: B once per KC x NC block, A once
 * per MC x KC block (A is the activations: converting a block costs about 1/N of the products
 * it feeds). Edge tiles are computed into a buffer and copied, as in the F32 driver. The sum of
 * every C element runs over the K slices in order (each slice's pairs in order, from zero in
 * registers, then added to C), and the slices depend only on K, so the result is the same for
 * any tiling and thread count.
 *
 * The plain-C path rounds with bf16_from_f32 (nearest even) and adds each pair's products as
 * the Intel manual describes vdpbf16ps (the odd k's product first, each addition rounded to
 * F32; a product of two BF16 is exact in F32); it checks the driver on any CPU, and the
 * AVX512-BF16 path against it within the rounding tolerance (tests/test_train_ops.c). */
#include "kernels/gemm_bf16.h"

#include <string.h>

#include "util/check.h"
#include "util/fp16.h"

#define BF_KC 512  /* deepest K slice (a multiple of 8: pairs, and gemm_f32.c's rule) */
#define BF_MC 96   /* a multiple of MR */
#define BF_NC 512  /* a multiple of NR */
#define MR GEMM_BF16_MR
#define NR GEMM_BF16_NR

size_t gemm_bf16_ws_floats(void)
{
    /* B block + A block (words, 4 bytes like a float) + one edge tile */
    return (size_t)BF_KC / 2 * BF_NC + (size_t)BF_MC * (BF_KC / 2) + MR * NR;
}

/* K slices of equal depth, at most BF_KC deep (as gemm_f32.c's gemm_kc: no thin last slice). */
static int bf_kc(int K)
{
    const int n = (K + BF_KC - 1) / BF_KC;
    const int kc = ((K + n - 1) / n + 7) / 8 * 8;
    return kc < BF_KC ? kc : BF_KC;
}

static inline uint32_t pair(float lo, float hi)
{
    return (uint32_t)bf16_from_f32(lo) | (uint32_t)bf16_from_f32(hi) << 16;
}

/* ---------------------------------------------------------------- plain-C packers */

static void pack_b_scalar(const struct kern_gemm *g, int k0, int kc, int j0, int nc, uint32_t *dst)
{
    TERN_ASSERT(nc >= 1 && (nc + NR - 1) / NR * NR <= BF_NC && kc >= 1 && kc <= BF_KC, "B's pairs fit the workspace");
    const int kcp = (kc + 1) / 2;
    for (int q = 0; q < nc; q += NR) {
        uint32_t *d = dst + (size_t)q * kcp;
        for (int p = 0; p < kcp; p++)
            for (int j = 0; j < NR; j++) {
                const int col = q + j, k = 2 * p;
                float lo = 0.0f, hi = 0.0f;
                if (col < nc) {
                    const float *s = g->B + (ptrdiff_t)(j0 + col) * g->bcs + (ptrdiff_t)(k0 + k) * g->brs;
                    lo = s[0];
                    if (k + 1 < kc) hi = s[g->brs];
                }
                d[p * NR + j] = pair(lo, hi);
            }
    }
}

/* A(i, k) of rows [i0, i0+mc), k [k0, k0+kc) as the word of pair p of row r; zero outside */
static inline uint32_t a_word(const struct kern_gemm *g, int i0, int mc, int k0, int kc, int r, int p)
{
    if (r >= mc) return 0;
    const float *s = g->A + (ptrdiff_t)(i0 + r) * g->ars + (ptrdiff_t)(k0 + 2 * p) * g->acs;
    return pair(s[0], 2 * p + 1 < kc ? s[g->acs] : 0.0f);
}

static void pack_a_rows_scalar(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                               uint32_t *dst)
{
    const int kcp = (kc + 1) / 2, mpad = (mc + MR - 1) / MR * MR;
    TERN_ASSERT(mc >= 1 && mpad <= BF_MC && kc >= 1 && kc <= BF_KC, "A's rows fit the workspace");
    for (int r = 0; r < mpad; r++)
        for (int p = 0; p < kcp; p++) dst[(size_t)r * kcp + p] = a_word(g, i0, mc, k0, kc, r, p);
}

static void pack_a_panels_scalar(const struct kern_gemm *g, int i0, int mc, int k0, int kc,
                                 uint32_t *dst)
{
    TERN_ASSERT(mc >= 1 && (mc + MR - 1) / MR * MR <= BF_MC && kc >= 1 && kc <= BF_KC, "A's panels fit the workspace");
    const int kcp = (kc + 1) / 2;
    for (int q = 0; q < mc; q += MR)
        for (int p = 0; p < kcp; p++)
            for (int r = 0; r < MR; r++)
                dst[(size_t)q * kcp + p * MR + r] = a_word(g, i0, mc, k0, kc, q + r, p);
}

/* ---------------------------------------------------------------- plain-C microkernel */

/* A's word of (row r, pair p) at a[p*ask + r*asr] */
static void micro_scalar(int kcp, const uint32_t *a, ptrdiff_t ask, ptrdiff_t asr,
                         const uint32_t *bp, float *c, ptrdiff_t ldc, bool acc)
{
    float t[MR][NR];
    memset(t, 0, sizeof t);
    for (int p = 0; p < kcp; p++)
        for (int r = 0; r < MR; r++) {
            const uint32_t wa = a[p * ask + r * asr];
            const float alo = bf16_to_f32((uint16_t)wa), ahi = bf16_to_f32((uint16_t)(wa >> 16));
            for (int j = 0; j < NR; j++) {
                const uint32_t wb = bp[p * NR + j];
                float s = t[r][j];
                s += ahi * bf16_to_f32((uint16_t)(wb >> 16));
                s += alo * bf16_to_f32((uint16_t)wb);
                t[r][j] = s;
            }
        }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r][j] : t[r][j];
}

/* ---------------------------------------------------------------- driver */

void gemm_bf16_block(const struct kern_gemm *g, bool simd, float *ws, int i0, int i1, int j0,
                     int j1)
{
#if !defined(__x86_64__)
    (void)simd; /* the SIMD BF16 path is x86's (AVX512-BF16); elsewhere only the plain-C one */
#endif
    uint32_t *bpack = (uint32_t *)ws;
    uint32_t *apack = bpack + (size_t)BF_KC / 2 * BF_NC;
    float *tile = (float *)(apack + (size_t)BF_MC * (BF_KC / 2));
    if (g->K == 0) {
        if (!g->accumulate)
            for (int i = i0; i < i1; i++)
                memset(g->C + (ptrdiff_t)i * g->ldc + j0, 0, (size_t)(j1 - j0) * sizeof(float));
        return;
    }
    const bool rows_form = g->acs == 1;
    const int kc_max = bf_kc(g->K);
    /* the workspace holds BF_KC x BF_NC of B and BF_MC x BF_KC of A, as pairs */
    TERN_ASSERT(kc_max >= 1 && kc_max <= BF_KC && ((uintptr_t)ws & 63) == 0);
    TERN_ASSERT(i0 >= 0 && i0 < i1 && i1 <= g->M && j0 >= 0 && j0 < j1 && j1 <= g->N);
    for (int jc = j0; jc < j1; jc += BF_NC) {
        const int nc = j1 - jc < BF_NC ? j1 - jc : BF_NC;
        for (int pc = 0; pc < g->K; pc += kc_max) {
            const int kc = g->K - pc < kc_max ? g->K - pc : kc_max, kcp = (kc + 1) / 2;
            const bool acc = g->accumulate || pc > 0;
#if defined(__x86_64__)
            if (simd) gemm_bf16_pack_b_avx512(g, pc, kc, jc, nc, bpack);
            else
#endif
                pack_b_scalar(g, pc, kc, jc, nc, bpack);
            for (int ic = i0; ic < i1; ic += BF_MC) {
                const int mc = i1 - ic < BF_MC ? i1 - ic : BF_MC;
#if defined(__x86_64__)
                if (simd && rows_form) gemm_bf16_pack_a_rows_avx512(g, ic, mc, pc, kc, apack);
                else if (simd && g->ars == 1) gemm_bf16_pack_a_panels_avx512(g, ic, mc, pc, kc, apack);
                else
#endif
                if (rows_form) pack_a_rows_scalar(g, ic, mc, pc, kc, apack);
                else pack_a_panels_scalar(g, ic, mc, pc, kc, apack);
                for (int jr = 0; jr < nc; jr += NR) {
                    const int nn = nc - jr < NR ? nc - jr : NR;
                    const uint32_t *bp = bpack + (size_t)jr * kcp;
                    for (int ir = 0; ir < mc; ir += MR) {
                        const int mm = mc - ir < MR ? mc - ir : MR;
                        /* row ir of the rows form and panel ir/MR of the panel form both start
                         * at word ir * kcp */
                        const uint32_t *a = apack + (size_t)ir * kcp;
                        float *c = g->C + (ptrdiff_t)(ic + ir) * g->ldc + jc + jr;
                        const bool full = mm == MR && nn == NR;
                        float *dst = full ? c : tile;
                        const ptrdiff_t ldd = full ? g->ldc : NR;
                        const bool acc_d = full && acc;
#if defined(__x86_64__)
                        if (simd && rows_form) gemm_bf16_micro_avx512_r(kcp, a, kcp, bp, dst, ldd, acc_d);
                        else if (simd) gemm_bf16_micro_avx512_t(kcp, a, bp, dst, ldd, acc_d);
                        else
#endif
                        if (rows_form) micro_scalar(kcp, a, 1, kcp, bp, dst, ldd, acc_d);
                        else micro_scalar(kcp, a, MR, 1, bp, dst, ldd, acc_d);
                        if (!full)
                            for (int r = 0; r < mm; r++)
                                for (int j = 0; j < nn; j++)
                                    c[r * g->ldc + j] =
                                        acc ? c[r * g->ldc + j] + tile[r * NR + j] : tile[r * NR + j];
                    }
                }
            }
        }
    }
}
