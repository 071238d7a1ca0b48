/* delta_simd_impl.h — the DeltaNet run and conv of delta.h, written once and compiled twice: by
 * delta_avx512.c (16 lanes, work blocks of 64 columns) and delta_avx2.c (8 lanes, work blocks of
 * 16: 16 registers hold u, the next v' and o and the constants). Include only from those files,
 * after defining:
 *   DV, DL       the float vector type and its lanes
 *   D(op)        the intrinsic _mm512_op / _mm256_op
 *   DELTA_NV     vectors per work block
 *   DELTA_DIRECT_NV  vectors of columns a decode step sums at once (>= 4)
 *   DELTA_FN(n)  the exported name n_avx512 / n_avx2
 *
 * In a long run a block of DELTA_NV vectors of columns (in the work buffer) goes through every
 * token: per token one pass over its rows writes the new state and accumulates the next token's
 * v' and o (2 * DELTA_NV independent FMA chains); blocks of one vector take the rest. A short run
 * (decode) goes token by token over whole rows of the state, 4 vectors of columns at a time for
 * v' and o (8 FMA chains). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/delta.h"
#include "util/check.h"

/* The block's rows W + c * nb after a token: W = clamp(W * decay + u k^T), and with next the
 * next token's v' and o (vp, ov) from the rows as they are written. The work buffer's zeros
 * stand for a NULL S0: 0 * decay + u k gives the bits of u k, and sums of zero products are 0. */
static inline __attribute__((always_inline)) void
update_rows(float *W, const float *k, const float *kn, const float *qn, const DV *u, DV vdec,
            DV *vp, DV *ov, int hk, const int nv, const bool next)
{
    const DV lo = D(set1_ps)(-1e6f), hi = D(set1_ps)(1e6f);
    for (int c = 0; c < hk; c++) {
        const DV kc = D(set1_ps)(k[c]), knc = D(set1_ps)(kn[c]), qnc = D(set1_ps)(qn[c]);
        float *row = W + (size_t)c * DL * nv;
        for (int b = 0; b < nv; b++) {
            const DV s0 = D(mul_ps)(D(load_ps)(row + DL * b), vdec);
            const DV x = D(min_ps)(D(max_ps)(D(fmadd_ps)(u[b], kc, s0), lo), hi);
            D(store_ps)(row + DL * b, x);
            if (next) {
                vp[b] = D(fmadd_ps)(x, knc, vp[b]);
                ov[b] = D(fmadd_ps)(x, qnc, ov[b]);
            }
        }
    }
}

/* DL * nv columns from j0 through every token of the run, in the work buffer. */
static inline __attribute__((always_inline)) void
run_block(const struct delta_run *run, int j0, const int nv)
{
    const int hk = run->hk;
    float *W = run->work;
    DV vp[DELTA_NV], ov[DELTA_NV], u[DELTA_NV];
    for (int b = 0; b < nv; b++) vp[b] = ov[b] = D(setzero_ps)();
    const float *q = run->qkv + run->rows[0] * run->qkv_stride + run->q_off;
    const float *k = run->qkv + run->rows[0] * run->qkv_stride + run->k_off;
    for (int c = 0; c < hk; c++) {
        const float *row = W + (size_t)c * DL * nv;
        const DV kc = D(set1_ps)(k[c]), qc = D(set1_ps)(q[c]);
        for (int b = 0; b < nv; b++) {
            const DV s = D(load_ps)(row + DL * b);
            vp[b] = D(fmadd_ps)(s, kc, vp[b]);
            ov[b] = D(fmadd_ps)(s, qc, ov[b]);
        }
    }
    for (int i = 0; i < run->m; i++) {
        const size_t r = (size_t)run->rows[i];
        const float *v = run->qkv + r * run->qkv_stride + run->v_off + j0;
        const float *p = run->par + r * run->par_stride;
        const DV vbeta = D(set1_ps)(p[0]), vbd = D(set1_ps)(p[1]);
        const DV vdec = D(set1_ps)(p[2]), vattn = D(set1_ps)(p[3]), vds = D(set1_ps)(p[4]);
        float *out = run->out + r * run->out_stride + j0;
        k = run->qkv + r * run->qkv_stride + run->k_off;
        for (int b = 0; b < nv; b++) {
            u[b] = D(fmsub_ps)(D(loadu_ps)(v + DL * b), vbeta, D(mul_ps)(vp[b], vbd));
            D(storeu_ps)(out + DL * b, D(fmadd_ps)(u[b], vattn, D(mul_ps)(ov[b], vds)));
            vp[b] = ov[b] = D(setzero_ps)();
        }
        if (i + 1 < run->m) {
            const size_t rn = (size_t)run->rows[i + 1];
            const float *kn = run->qkv + rn * run->qkv_stride + run->k_off;
            const float *qn = run->qkv + rn * run->qkv_stride + run->q_off;
            update_rows(W, k, kn, qn, u, vdec, vp, ov, hk, nv, true);
        } else {
            update_rows(W, k, k, k, u, vdec, vp, ov, hk, nv, false);
        }
        delta_keep_cols(run, i, W, (size_t)(DL * nv), j0, DL * nv);
    }
}

/* One token on the state directly, columns [j0, j1): v' and o for DELTA_DIRECT_NV vectors of
 * columns at a time (2 x that many FMA chains; AVX-512: 8, a whole row of a 128-wide head, so
 * the state is read in one sequential sweep), then the update streams whole rows. A run this
 * short reads each row once or twice anyway, and whole rows are what the prefetchers follow. */
static void token_direct(const struct delta_run *run, int i, const float *S0, float *S, int j0, int j1)
{
    float u[1024] __attribute__((aligned(4 * DL)));
    const int hk = run->hk, hv = run->hv;
    const size_t r = (size_t)run->rows[i];
    const float *q = run->qkv + r * run->qkv_stride + run->q_off;
    const float *k = run->qkv + r * run->qkv_stride + run->k_off;
    const float *v = run->qkv + r * run->qkv_stride + run->v_off;
    const float *p = run->par + r * run->par_stride;
    float *out = run->out + r * run->out_stride;
    const DV vbeta = D(set1_ps)(p[0]), vbd = D(set1_ps)(p[1]);
    const DV vattn = D(set1_ps)(p[3]), vds = D(set1_ps)(p[4]);
    for (int j = j0; j < j1;) {
        const int nv = j1 - j >= DELTA_DIRECT_NV * DL ? DELTA_DIRECT_NV : j1 - j >= 4 * DL ? 4 : 1;
        DV vp[DELTA_DIRECT_NV], ov[DELTA_DIRECT_NV];
        for (int b = 0; b < nv; b++) vp[b] = ov[b] = D(setzero_ps)();
        if (S0)
            for (int c = 0; c < hk; c++) {
                const float *row = S0 + (size_t)c * hv + j;
                const DV kc = D(set1_ps)(k[c]), qc = D(set1_ps)(q[c]);
                for (int b = 0; b < nv; b++) {
                    const DV s = D(loadu_ps)(row + DL * b);
                    vp[b] = D(fmadd_ps)(s, kc, vp[b]);
                    ov[b] = D(fmadd_ps)(s, qc, ov[b]);
                }
            }
        for (int b = 0; b < nv; b++, j += DL) {
            const DV uu = D(fmsub_ps)(D(loadu_ps)(v + j), vbeta, D(mul_ps)(vp[b], vbd));
            D(store_ps)(u + j, uu);
            D(storeu_ps)(out + j, D(fmadd_ps)(uu, vattn, D(mul_ps)(ov[b], vds)));
        }
    }
    const DV vdec = D(set1_ps)(p[2]), lo = D(set1_ps)(-1e6f), hi = D(set1_ps)(1e6f);
    for (int c = 0; c < hk; c++) {
        const DV kc = D(set1_ps)(k[c]);
        const float *row0 = S0 ? S0 + (size_t)c * hv : NULL;
        float *row = S + (size_t)c * hv;
        for (int j = j0; j < j1; j += DL) {
            const DV s0 = row0 ? D(mul_ps)(D(loadu_ps)(row0 + j), vdec) : D(setzero_ps)();
            const DV x = D(fmadd_ps)(D(load_ps)(u + j), kc, s0);
            D(storeu_ps)(row + j, D(min_ps)(D(max_ps)(x, lo), hi));
        }
    }
    delta_keep_cols(run, i, S + j0, (size_t)hv, j0, j1 - j0);
}

void DELTA_FN(delta_run)(const struct delta_run *run, const float *S0, float *S, int j0, int j1)
{
    /* delta_select chose this path for hv % DL == 0: whole vectors, no tail */
    TERN_ASSERT(j0 >= 0 && j0 <= j1 && j1 <= run->hv && (j1 - j0) % DL == 0 && run->m >= 1);
    TERN_ASSERT(!run->work || ((uintptr_t)run->work & 63) == 0, "the work block is 64-byte aligned");
    if (!run->work || run->m <= DELTA_WORK_MIN) {
        for (int i = 0; i < run->m; i++, S0 = S) token_direct(run, i, S0, S, j0, j1);
        return;
    }
    for (int j = j0; j < j1;) {
        const int nv = j1 - j >= DELTA_NV * DL ? DELTA_NV : 1;
        delta_work_in(run, S0, j, DL * nv);
        if (nv == DELTA_NV) run_block(run, j, DELTA_NV);
        else run_block(run, j, 1);
        delta_work_out(run, S, j, DL * nv);
        j += DL * nv;
    }
}

void DELTA_FN(delta_conv)(const float *const *x, int k, const float *w, size_t ws, float *y, int n)
{
    int c = 0;
    for (; c + DL <= n; c += DL) {
        DV s = D(setzero_ps)();
        for (int j = 0; j < k; j++)
            s = D(add_ps)(s, D(mul_ps)(D(loadu_ps)(x[j] + c), D(loadu_ps)(w + (size_t)j * ws + c)));
        D(storeu_ps)(y + c, s);
    }
    if (c == n) return;
    const float *xt[64];
    TERN_ASSERT(k >= 1 && k <= 64, "xt holds a tap per kernel position");
    for (int j = 0; j < k; j++) xt[j] = x[j] + c;
    delta_conv_scalar(xt, k, w + c, ws, y + c, n - c);
}
