/* gemm_f32.c — the blocked F32 GEMM driver (packing, loops, threading), its plain-C paths, and
 * the dispatch and threading of every path (the BF16 ones' driver is gemm_bf16.c).
 *
 * Read gemm_f32.h first. Loop order per call (BLIS): for each NC block of columns, for each KC
 * slice of K: pack B (KC x NC, NR-wide panels, so a KC x NR micro-panel stays in L1); for each
 * MC block of rows (in L2): run the MR x NR microkernel over the block. Row-major A is not
 * packed: the microkernel broadcasts straight from it (gemm_f32_micro.h), which saves a copy of
 * the activations per tile; A read down its columns is, and so is row-major A whose rows would
 * share L1's sets (gemm_block). Edge tiles (M or N not a
 * multiple of MR/NR) are computed into a small buffer and copied, so the microkernels only ever
 * see full tiles. The K order of every sum is fixed (KC slices in order, each summed from zero in
 * registers and then added to C), which is what makes the threaded call bit-identical. */
#include "kernels/gemm_f32.h"

#include <stdint.h>
#include <string.h>

#include "kernels/gemm_bf16.h"
#include "kernels/gemm_f32_micro.h"
#include "kernels/kernels.h"
#include "util/check.h"

#define GEMM_KC 512  /* the deepest K slice; a call cuts K into equal slices no deeper */
#define GEMM_MC 96   /* a multiple of every MR (12, 6, 4) */
#define GEMM_NC 512  /* a multiple of every NR (32, 16, 8) */
#define GEMM_MR_MAX 12
#define GEMM_NR_MAX 32

/* ---------------------------------------------------------------- plain-C microkernels */

#define SC_MR 4
#define SC_NR 8

static void micro_scalar(int kc, const float *a, ptrdiff_t ask, ptrdiff_t asr, const float *bp,
                         float *c, ptrdiff_t ldc, bool acc)
{
    float t[SC_MR][SC_NR] = {{0}};
    for (int k = 0; k < kc; k++)
        for (int r = 0; r < SC_MR; r++)
            for (int j = 0; j < SC_NR; j++) t[r][j] += a[k * ask + r * asr] * bp[k * SC_NR + j];
    for (int r = 0; r < SC_MR; r++)
        for (int j = 0; j < SC_NR; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r][j] : t[r][j];
}

static void micro_scalar_t(int kc, const float *a, ptrdiff_t ask, const float *bp, float *c,
                           ptrdiff_t ldc, bool acc)
{
    micro_scalar(kc, a, ask, 1, bp, c, ldc, acc);
}

static void micro_scalar_r(int kc, const float *a, ptrdiff_t asr, const float *bp, float *c,
                           ptrdiff_t ldc, bool acc)
{
    micro_scalar(kc, a, 1, asr, bp, c, ldc, acc);
}

struct gemm_micro {
    int mr, nr;
    gemm_micro_fn t, r; /* A(r, k) at a[k*as + r] / at a[r*as + k] */
};

static struct gemm_micro micro_for(enum kern_gemm_path p)
{
    struct gemm_micro m = {SC_MR, SC_NR, micro_scalar_t, micro_scalar_r};
#if defined(__x86_64__)
    if (p == KERN_GEMM_AVX512) m = (struct gemm_micro){12, 32, gemm_micro_avx512_t, gemm_micro_avx512_r};
    if (p == KERN_GEMM_AVX2) m = (struct gemm_micro){6, 16, gemm_micro_avx2_t, gemm_micro_avx2_r};
#else
    (void)p;
#endif
    return m;
}

/* ---------------------------------------------------------------- dispatch */

bool kern_gemm_path_ok(enum kern_gemm_path p)
{
    switch (p) {
    case KERN_GEMM_AUTO:
    case KERN_GEMM_SCALAR:
        return true;
#if defined(__x86_64__)
    case KERN_GEMM_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KERN_GEMM_AVX512:
        return __builtin_cpu_supports("avx512f");
    case KERN_GEMM_BF16_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512bf16") && !strcmp(kern_isa_name(), "avx512");
#endif
    case KERN_GEMM_BF16_SCALAR:
        return true;
    default:
        return false;
    }
}

enum kern_gemm_path kern_gemm_best(void)
{
    /* TERN_KERNELS (kern_isa_name) caps the choice, so one switch selects every kernel family. */
    const char *isa = kern_isa_name();
    if (!strcmp(isa, "avx512") && kern_gemm_path_ok(KERN_GEMM_AVX512)) return KERN_GEMM_AVX512;
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) && kern_gemm_path_ok(KERN_GEMM_AVX2))
        return KERN_GEMM_AVX2;
    return KERN_GEMM_SCALAR;
}

const char *kern_gemm_path_name(enum kern_gemm_path p)
{
    if (p == KERN_GEMM_AUTO) p = kern_gemm_best();
    switch (p) {
    case KERN_GEMM_AVX512: return "avx512";
    case KERN_GEMM_AVX2: return "avx2";
    case KERN_GEMM_BF16_AVX512: return "avx512-bf16";
    case KERN_GEMM_BF16_SCALAR: return "scalar-bf16";
    default: return "scalar";
    }
}

bool kern_gemm_path_bf16(enum kern_gemm_path p)
{
    return p == KERN_GEMM_BF16_AVX512 || p == KERN_GEMM_BF16_SCALAR;
}

size_t kern_gemm_ws_floats(void)
{
    /* A block + B block + one edge tile, each rounded to a cache line */
    size_t a = (size_t)GEMM_MC * GEMM_KC, b = (size_t)GEMM_KC * GEMM_NC;
    size_t t = GEMM_MR_MAX * GEMM_NR_MAX;
    const size_t f32 = a + b + t + 48, bf16 = gemm_bf16_ws_floats();
    return f32 > bf16 ? f32 : bf16;
}

/* ---------------------------------------------------------------- packing */

/* n floats from s to d, n a tile width (MR or NR of some path): constant sizes for the widths
 * the paths use, so the compiler inlines each copy as a few vector moves (a variable-size
 * memcpy, a call or a byte loop, took ~8 % of a training step on Zen 3) */
static inline void copy_width(float *d, const float *s, int n)
{
    switch (n) {
    case 6: memcpy(d, s, 6 * sizeof *s); break;
    case 8: memcpy(d, s, 8 * sizeof *s); break;
    case 12: memcpy(d, s, 12 * sizeof *s); break;
    case 16: memcpy(d, s, 16 * sizeof *s); break;
    case 32: memcpy(d, s, 32 * sizeof *s); break;
    default: memcpy(d, s, (size_t)n * sizeof *s); break;
    }
}

/* Rows of a source read row after row at a stride of whole rows (a few KiB: one row per 4 KiB
 * page or close to it) defeat the hardware prefetchers, which stop at page boundaries: the
 * packing loops spent most of their time waiting for each row from L3 (8 % of a training step
 * on Zen 4, 6 % with this). They fetch the row PACK_AHEAD rows ahead: n floats from p, every line. */
#define PACK_AHEAD 16
static inline void prefetch_row(const float *p, int n)
{
    const char *b = (const char *)p, *e = (const char *)(p + n - 1);
    for (; b <= e; b += 64) __builtin_prefetch(b, 0, 3);
    __builtin_prefetch(e, 0, 3);
}

/* A rows [i0, i0+mc) x k [k0, k0+kc) into MR-tall panels: panel p holds, for each k, MR values
 * (rows p*MR .. p*MR+MR-1, zero past mc). */
static void pack_a(const struct kern_gemm *g, int i0, int mc, int k0, int kc, int mr, float *dst)
{
    /* the A part of the workspace holds GEMM_MC rows of GEMM_KC */
    TERN_ASSERT(mc >= 1 && (mc + mr - 1) / mr * mr <= GEMM_MC && kc >= 1 && kc <= GEMM_KC && i0 + mc <= g->M);
    if (g->ars == 1 && g->acs != 1) {
        /* A read down its columns: row k of the source holds the block's mc values side by side,
         * so each is read once, in order, and dealt to the panels (a pass per panel would
         * re-read every line from L2, the kc lines n_out*4 bytes apart not staying in L1) */
        for (int k = 0; k < kc; k++) {
            const float *s = g->A + (ptrdiff_t)(k0 + k) * g->acs + i0;
            if (k + PACK_AHEAD < kc) prefetch_row(s + (ptrdiff_t)PACK_AHEAD * g->acs, mc);
            int p = 0;
            for (; p + mr <= mc; p += mr) copy_width(dst + (size_t)p * kc + (size_t)k * mr, s + p, mr);
            for (; p < mc; p += mr) {
                const int rows = mc - p < mr ? mc - p : mr;
                float *d = dst + (size_t)p * kc + (size_t)k * mr;
                for (int r = 0; r < rows; r++) d[r] = s[p + r];
                for (int r = rows; r < mr; r++) d[r] = 0.0f;
            }
        }
        return;
    }
    for (int p = 0; p < mc; p += mr) {
        const int rows = mc - p < mr ? mc - p : mr;
        float *d = dst + (size_t)p * kc;
#if defined(__x86_64__)
        if (mr == 12 && g->acs == 1) { /* the AVX-512 path's row-major A */
            gemm_pack_a12_avx512(g->A + (ptrdiff_t)(i0 + p) * g->ars + k0, g->ars, rows, kc, d);
            continue;
        }
#endif
        if (g->acs == 1) {
            for (int r = 0; r < rows; r++) {
                const float *s = g->A + (ptrdiff_t)(i0 + p + r) * g->ars + k0;
                for (int k = 0; k < kc; k++) d[k * mr + r] = s[k];
            }
        } else {
            for (int k = 0; k < kc; k++) {
                const float *s = g->A + (ptrdiff_t)(k0 + k) * g->acs + (ptrdiff_t)(i0 + p) * g->ars;
                for (int r = 0; r < rows; r++) d[k * mr + r] = s[r * g->ars];
            }
        }
        for (int r = rows; r < mr; r++)
            for (int k = 0; k < kc; k++) d[k * mr + r] = 0.0f;
    }
}

/* B k [k0, k0+kc) x cols [j0, j0+nc) into NR-wide panels (zero past nc). */
static void pack_b(const struct kern_gemm *g, int k0, int kc, int j0, int nc, int nr, float *dst)
{
    /* the B part of the workspace holds GEMM_NC columns (padded to nr) of GEMM_KC */
    TERN_ASSERT(nc >= 1 && (nc + nr - 1) / nr * nr <= GEMM_NC && kc >= 1 && kc <= GEMM_KC && k0 + kc <= g->K);
#if defined(__x86_64__)
    if (nr == 32 && g->brs == 1 && g->bcs != 1) { /* the AVX-512 path's transposed B */
        gemm_pack_bt_avx512(g->B + (ptrdiff_t)j0 * g->bcs + k0, g->bcs, kc, nc, dst);
        return;
    }
    if (nr == 16 && g->brs == 1 && g->bcs != 1) { /* the AVX2 path's */
        gemm_pack_bt_avx2(g->B + (ptrdiff_t)j0 * g->bcs + k0, g->bcs, kc, nc, dst);
        return;
    }
#endif
    for (int p = 0; p < nc; p += nr) {
        const int cols = nc - p < nr ? nc - p : nr;
        float *d = dst + (size_t)p * kc;
        if (g->bcs == 1 && cols == nr) { /* a full panel */
            for (int k = 0; k < kc; k++) {
                const float *s = g->B + (ptrdiff_t)(k0 + k) * g->brs + j0 + p;
                if (k + PACK_AHEAD < kc) prefetch_row(s + (ptrdiff_t)PACK_AHEAD * g->brs, nr);
                copy_width(d + k * nr, s, nr);
            }
        } else if (g->bcs == 1) {
            for (int k = 0; k < kc; k++) {
                const float *s = g->B + (ptrdiff_t)(k0 + k) * g->brs + j0 + p;
                memcpy(d + k * nr, s, (size_t)cols * sizeof *s);
                for (int j = cols; j < nr; j++) d[k * nr + j] = 0.0f;
            }
        } else {
            for (int j = 0; j < cols; j++) {
                const float *s = g->B + (ptrdiff_t)(j0 + p + j) * g->bcs + (ptrdiff_t)k0 * g->brs;
                for (int k = 0; k < kc; k++) d[k * nr + j] = s[k * g->brs];
            }
            for (int j = cols; j < nr; j++)
                for (int k = 0; k < kc; k++) d[k * nr + j] = 0.0f;
        }
    }
}

/* ---------------------------------------------------------------- driver */

/* The depth of the K slices: K cut into as few slices as GEMM_KC allows, of equal depth (a
 * multiple of 8), so that no thin last slice costs a whole extra pass over C (K = 384 in one
 * slice, not 256 + 128). Depends on K only, which keeps the summation order independent of
 * the tiling. */
static int gemm_kc(int K)
{
    const int n = (K + GEMM_KC - 1) / GEMM_KC;
    const int kc = ((K + n - 1) / n + 7) / 8 * 8;
    return kc < GEMM_KC ? kc : GEMM_KC;
}

/* C rows [i0, i1) x cols [j0, j1) of the product. Row-major A is read in place, so only B is
 * packed, once per KC x NC block; A is packed for the last rows of a block when they do not fill
 * an MR tile, and whole when it is not row-major. */
static void gemm_block(const struct kern_gemm *g, struct gemm_micro um, float *ws, int i0, int i1,
                       int j0, int j1)
{
    float *bpack = ws;
    float *apack = ws + (size_t)GEMM_KC * GEMM_NC;
    float *tile = apack + (size_t)GEMM_MC * GEMM_KC;
    const int mr = um.mr, nr = um.nr;
    /* Row-major A is read in place unless its rows are a multiple of 2 KiB apart and the tile is
     * 12 rows tall (AVX-512): then the 12 rows' lines fall in one or two of L1's sets (sets repeat
     * every 4 KiB), more than its 8 ways hold beside B's panel, and each line was fetched again
     * from L2 for every 16 k (the down projection's X and the output layer's dY ran at 64-69 % of
     * the F32 peak, 89-93 % packed on Zen 4; a 16 x 16 transpose packs 12 rows at little cost). */
    const bool a_rows = g->acs == 1 && !(mr == 12 && g->ars % 512 == 0);
    if (g->K == 0) {
        if (!g->accumulate)
            for (int i = i0; i < i1; i++) memset(g->C + (ptrdiff_t)i * g->ldc + j0, 0,
                                                 (size_t)(j1 - j0) * sizeof(float));
        return;
    }
    const int kc_max = gemm_kc(g->K);
    /* the workspace is laid out for GEMM_KC x GEMM_NC of B and GEMM_MC x GEMM_KC of A */
    TERN_ASSERT(kc_max >= 1 && kc_max <= GEMM_KC && mr >= 1 && mr <= GEMM_MC && nr >= 1 && nr <= GEMM_NC);
    TERN_ASSERT(i0 >= 0 && i0 < i1 && i1 <= g->M && j0 >= 0 && j0 < j1 && j1 <= g->N);
    for (int jc = j0; jc < j1; jc += GEMM_NC) {
        const int nc = j1 - jc < GEMM_NC ? j1 - jc : GEMM_NC;
        for (int pc = 0; pc < g->K; pc += kc_max) {
            const int kc = g->K - pc < kc_max ? g->K - pc : kc_max;
            const bool acc = g->accumulate || pc > 0;
            pack_b(g, pc, kc, jc, nc, nr, bpack);
            for (int ic = i0; ic < i1; ic += GEMM_MC) {
                const int mc = i1 - ic < GEMM_MC ? i1 - ic : GEMM_MC;
                /* rows read in place: only from row-major A. A read down its columns (the weight
                 * gradient's dY^T, a stride of n_out floats) is packed: in place, each k of a tile
                 * reads a line n_out * 4 bytes past the last, and at 4 KiB multiples (n_out 1024,
                 * 4096) those lines fall in one L1 set, which halved the dW products' speed; the
                 * copy costs 1 / (2 nc) of the block's flops and gives the same sums. */
                const int full = a_rows ? mc / mr * mr : 0;
                if (mc > full) pack_a(g, ic + full, mc - full, pc, kc, mr, apack + (size_t)full * kc);
                for (int jr = 0; jr < nc; jr += nr) {
                    const int nn = nc - jr < nr ? nc - jr : nr;
                    const float *bp = bpack + (size_t)jr * kc;
                    for (int ir = 0; ir < mc; ir += mr) {
                        const int mm = mc - ir < mr ? mc - ir : mr;
                        float *c = g->C + (ptrdiff_t)(ic + ir) * g->ldc + jc + jr;
                        gemm_micro_fn fn = um.t;
                        const float *a;
                        ptrdiff_t as;
                        if (ir >= full) {
                            a = apack + (size_t)ir * kc;
                            as = mr;
                        } else {
                            fn = um.r;
                            a = g->A + (ptrdiff_t)(ic + ir) * g->ars + pc;
                            as = g->ars;
                        }
                        if (mm == mr && nn == nr) {
                            fn(kc, a, as, bp, c, g->ldc, acc);
                        } else {
                            fn(kc, a, as, bp, tile, nr, false);
                            for (int r = 0; r < mm; r++)
                                for (int j = 0; j < nn; j++)
                                    c[r * g->ldc + j] =
                                        acc ? c[r * g->ldc + j] + tile[r * nr + j] : tile[r * nr + j];
                        }
                    }
                }
            }
        }
    }
}

/* C rows [i0, i1) x cols [j0, j1) on path p (resolved) */
static void gemm_tile(const struct kern_gemm *g, enum kern_gemm_path p, float *ws, int i0, int i1,
                      int j0, int j1)
{
    if (kern_gemm_path_bf16(p)) gemm_bf16_block(g, p == KERN_GEMM_BF16_AVX512, ws, i0, i1, j0, j1);
    else gemm_block(g, micro_for(p), ws, i0, i1, j0, j1);
}

void kern_gemm_f32(const struct kern_gemm *g, enum kern_gemm_path path, float *ws)
{
    if (path == KERN_GEMM_AUTO) path = kern_gemm_best();
    if (g->M <= 0 || g->N <= 0) return;
    TERN_ASSERT(g->K >= 0 && (g->K == 0 || (g->A && g->B)) && g->C && (g->M == 1 || g->ldc >= g->N),
                "C's rows do not overlap");
    TERN_ASSERT(ws && ((uintptr_t)ws & 63) == 0, "the packing workspace is 64-byte aligned");
    TERN_ASSERT(kern_gemm_path_ok(path), "a path this CPU runs");
    gemm_tile(g, path, ws, 0, g->M, 0, g->N);
}

struct gemm_mt {
    const struct kern_gemm *g;
    enum kern_gemm_path path;
    float *ws;
    size_t ws_floats;
    int pm, pn;      /* tiles down M and across N */
};

/* Row (or column) bound of part i of n over `total`, cut at multiples of `unit`: the parts differ
 * by at most one unit, where rounding one part size up left the last one short (M 1024 in four
 * tiles of 288 was 288, 288, 288 and 160: one thread 22 % idle at the end of every call). */
static int gemm_part(int total, int unit, int n, int i)
{
    const long long units = (total + unit - 1) / unit;
    const long long b = units * i / n * unit;
    return b < total ? (int)b : total;
}

static void gemm_mt_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)n_chunks;
    struct gemm_mt *t = arg;
    const int bi = chunk / t->pn, bj = chunk % t->pn;
    const int i0 = gemm_part(t->g->M, 48, t->pm, bi), i1 = gemm_part(t->g->M, 48, t->pm, bi + 1);
    const int j0 = gemm_part(t->g->N, 32, t->pn, bj), j1 = gemm_part(t->g->N, 32, t->pn, bj + 1);
    /* gemm_grid takes at most one part per unit, so no part is empty */
    TERN_ASSERT(i0 < i1 && j0 < j1);
    gemm_tile(t->g, t->path, t->ws + (size_t)tid * t->ws_floats, i0, i1, j0, j1);
}

/* The grid of a threaded call, pm x pn tiles: at least `want` tiles (two per thread, so a
 * thread that the machine's load delays leaves some of its share to the others), of the shape
 * that reads the least: each tile reads its rows of A and packs its columns of B over the whole
 * K, so the traffic is (M / pm + N / pn) * K per tile, and long thin tiles (all M rows by 64
 * columns, which re-read a 6144-row A six times) lose to blocks of rows that span all columns.
 * Rows are cut in multiples of 48 (every MR), columns in multiples of 32 (every NR), into
 * near-equal parts (gemm_part). */
static void gemm_grid(int M, int N, int want, int *pm_out, int *pn_out)
{
    const int row_units = (M + 47) / 48, col_units = (N + 31) / 32;
    double best = -1;
    long long best_tiles = 0;
    *pm_out = 1, *pn_out = 1;
    for (int pn = 1; pn <= col_units && pn <= want; pn++) {
        int pm = (want + pn - 1) / pn;
        if (pm > row_units) pm = row_units;
        const long long tiles = (long long)pm * pn;
        const double cost = (double)tiles * ((double)M / pm + (double)N / pn);
        /* enough tiles first (a small product may have fewer: then the most), then traffic */
        const bool better = best < 0 ||
                            (tiles >= want ? best_tiles < want || cost < best : tiles > best_tiles);
        if (better) best = cost, best_tiles = tiles, *pm_out = pm, *pn_out = pn;
    }
}

void kern_gemm_f32_mt(const struct kern_gemm *g, enum kern_gemm_path path, float *ws,
                      struct tp *tp)
{
    if (path == KERN_GEMM_AUTO) path = kern_gemm_best();
    if (g->M <= 0 || g->N <= 0) return;
    const int nth = tp ? tp_n_threads(tp) : 1;
    struct gemm_mt t = {g, path, ws, kern_gemm_ws_floats(), 1, 1};
    TERN_ASSERT(ws && ((uintptr_t)ws & 63) == 0 && nth >= 1, "one 64-byte aligned workspace per thread");
    gemm_grid(g->M, g->N, 2 * nth, &t.pm, &t.pn);
    TERN_ASSERT(t.pm >= 1 && t.pn >= 1);
    const int n_tiles = t.pm * t.pn;
    if (nth == 1 || n_tiles == 1) {
        gemm_tile(g, path, ws, 0, g->M, 0, g->N);
        return;
    }
    tp_run(tp, gemm_mt_chunk, &t, n_tiles);
}

/* Two independent products side by side: the pool's threads split in two groups, each product
 * cut over its group alone (rows of C in near-equal parts), so with two threads each runs one
 * product whole. A product cut over both threads packs its B once per thread and meets the
 * other thread at its end; a linear layer's two backward products (dX = dY W and dW = dY^T X,
 * the same FLOPs) run 0-12 % faster side by side at 1024 tokens on an AMD Zen 4, a whole
 * training step (those and the forward's gate and up) about 2 %. Every sum is the same as in
 * kern_gemm_f32 (the order depends on K only). */
struct gemm_pair {
    const struct kern_gemm *g[2];
    enum kern_gemm_path path;
    float *ws;
    size_t ws_floats;
    int parts[2];
};

static void gemm_pair_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)n_chunks;
    const struct gemm_pair *t = arg;
    const int which = chunk >= t->parts[0], part = which ? chunk - t->parts[0] : chunk;
    const struct kern_gemm *g = t->g[which];
    const int i0 = gemm_part(g->M, 48, t->parts[which], part), i1 = gemm_part(g->M, 48, t->parts[which], part + 1);
    if (i0 < i1) gemm_tile(g, t->path, t->ws + (size_t)tid * t->ws_floats, i0, i1, 0, g->N);
}

void kern_gemm_f32_mt2(const struct kern_gemm *a, const struct kern_gemm *b, enum kern_gemm_path path,
                       float *ws, struct tp *tp)
{
    if (path == KERN_GEMM_AUTO) path = kern_gemm_best();
    const int nth = tp ? tp_n_threads(tp) : 1;
    if (nth == 1 || a->M <= 0 || a->N <= 0 || b->M <= 0 || b->N <= 0) {
        kern_gemm_f32_mt(a, path, ws, tp);
        kern_gemm_f32_mt(b, path, ws, tp);
        return;
    }
    TERN_ASSERT(ws && ((uintptr_t)ws & 63) == 0, "one 64-byte aligned workspace per thread");
    struct gemm_pair t = {{a, b}, path, ws, kern_gemm_ws_floats(), {nth / 2, nth - nth / 2}};
    tp_run(tp, gemm_pair_chunk, &t, nth);
}

void kern_gemm_f32_ref(const struct kern_gemm *g)
{
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            double s = 0.0;
            for (int k = 0; k < g->K; k++)
                s += (double)g->A[i * g->ars + k * g->acs] * (double)g->B[k * g->brs + j * g->bcs];
            float *c = &g->C[i * g->ldc + j];
            *c = g->accumulate ? (float)(*c + s) : (float)s;
        }
}
