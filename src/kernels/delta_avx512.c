/* delta_avx512.c — the DeltaNet run of delta.h, 16 value components per vector. In a long run a
 * block of 64 columns (4 vectors; 32 KB of a 128 x 128 head's state, in the work buffer) goes
 * through every token: per token one pass over its rows writes the new state and accumulates
 * the next token's v' and o (8 independent FMA chains); blocks of 16 take the rest. A short run
 * (decode) goes token by token over whole rows of the state. */
#include <immintrin.h>
#include <stdbool.h>

#include "kernels/delta.h"

/* The block's rows W + c * nb after a token: W = clamp(W * decay + u k^T), and with next the
 * next token's v' and o (vp, ov) from the rows as they are written. The work buffer's zeros
 * stand for a NULL S0: 0 * decay + u k gives the bits of u k, and sums of zero products are 0. */
static inline __attribute__((always_inline)) void
update_rows(float *W, const float *k, const float *kn, const float *qn, const __m512 *u, __m512 vdec,
            __m512 *vp, __m512 *ov, int hk, const int nv, const bool next)
{
    const __m512 lo = _mm512_set1_ps(-1e6f), hi = _mm512_set1_ps(1e6f);
    for (int c = 0; c < hk; c++) {
        const __m512 kc = _mm512_set1_ps(k[c]), knc = _mm512_set1_ps(kn[c]), qnc = _mm512_set1_ps(qn[c]);
        float *row = W + (size_t)c * 16 * nv;
        for (int b = 0; b < nv; b++) {
            const __m512 s0 = _mm512_mul_ps(_mm512_load_ps(row + 16 * b), vdec);
            const __m512 x = _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(u[b], kc, s0), lo), hi);
            _mm512_store_ps(row + 16 * b, x);
            if (next) {
                vp[b] = _mm512_fmadd_ps(x, knc, vp[b]);
                ov[b] = _mm512_fmadd_ps(x, qnc, ov[b]);
            }
        }
    }
}

/* 16 * nv columns from j0 through every token of the run, in the work buffer. */
static inline __attribute__((always_inline)) void
run_block(const struct delta_run *run, int j0, const int nv)
{
    const int hk = run->hk;
    float *W = run->work;
    __m512 vp[4], ov[4], u[4];
    for (int b = 0; b < nv; b++) vp[b] = ov[b] = _mm512_setzero_ps();
    const float *q = run->qkv + run->rows[0] * run->qkv_stride + run->q_off;
    const float *k = run->qkv + run->rows[0] * run->qkv_stride + run->k_off;
    for (int c = 0; c < hk; c++) {
        const float *row = W + (size_t)c * 16 * nv;
        const __m512 kc = _mm512_set1_ps(k[c]), qc = _mm512_set1_ps(q[c]);
        for (int b = 0; b < nv; b++) {
            const __m512 s = _mm512_load_ps(row + 16 * b);
            vp[b] = _mm512_fmadd_ps(s, kc, vp[b]);
            ov[b] = _mm512_fmadd_ps(s, qc, ov[b]);
        }
    }
    for (int i = 0; i < run->m; i++) {
        const size_t r = (size_t)run->rows[i];
        const float *v = run->qkv + r * run->qkv_stride + run->v_off + j0;
        const float *p = run->par + r * run->par_stride;
        const __m512 vbeta = _mm512_set1_ps(p[0]), vbd = _mm512_set1_ps(p[1]);
        const __m512 vdec = _mm512_set1_ps(p[2]), vattn = _mm512_set1_ps(p[3]), vds = _mm512_set1_ps(p[4]);
        float *out = run->out + r * run->out_stride + j0;
        k = run->qkv + r * run->qkv_stride + run->k_off;
        for (int b = 0; b < nv; b++) {
            u[b] = _mm512_fmsub_ps(_mm512_loadu_ps(v + 16 * b), vbeta, _mm512_mul_ps(vp[b], vbd));
            _mm512_storeu_ps(out + 16 * b, _mm512_fmadd_ps(u[b], vattn, _mm512_mul_ps(ov[b], vds)));
            vp[b] = ov[b] = _mm512_setzero_ps();
        }
        if (i + 1 < run->m) {
            const size_t rn = (size_t)run->rows[i + 1];
            const float *kn = run->qkv + rn * run->qkv_stride + run->k_off;
            const float *qn = run->qkv + rn * run->qkv_stride + run->q_off;
            update_rows(W, k, kn, qn, u, vdec, vp, ov, hk, nv, true);
        } else {
            update_rows(W, k, k, k, u, vdec, vp, ov, hk, nv, false);
        }
        delta_keep_cols(run, i, W, (size_t)(16 * nv), j0, 16 * nv);
    }
}

/* One token on the state directly, columns [j0, j1): v' and o for 64 columns at a time (8 FMA
 * chains), then the update streams whole rows. A run this short reads each row once or twice
 * anyway, and whole rows are what the prefetchers follow. */
static void token_direct(const struct delta_run *run, int i, const float *S0, float *S, int j0, int j1)
{
    float u[1024] __attribute__((aligned(64)));
    const int hk = run->hk, hv = run->hv;
    const size_t r = (size_t)run->rows[i];
    const float *q = run->qkv + r * run->qkv_stride + run->q_off;
    const float *k = run->qkv + r * run->qkv_stride + run->k_off;
    const float *v = run->qkv + r * run->qkv_stride + run->v_off;
    const float *p = run->par + r * run->par_stride;
    float *out = run->out + r * run->out_stride;
    const __m512 vbeta = _mm512_set1_ps(p[0]), vbd = _mm512_set1_ps(p[1]);
    const __m512 vattn = _mm512_set1_ps(p[3]), vds = _mm512_set1_ps(p[4]);
    for (int j = j0; j < j1;) {
        const int nv = j1 - j >= 64 ? 4 : 1;
        __m512 vp[4], ov[4];
        for (int b = 0; b < nv; b++) vp[b] = ov[b] = _mm512_setzero_ps();
        if (S0)
            for (int c = 0; c < hk; c++) {
                const float *row = S0 + (size_t)c * hv + j;
                const __m512 kc = _mm512_set1_ps(k[c]), qc = _mm512_set1_ps(q[c]);
                for (int b = 0; b < nv; b++) {
                    const __m512 s = _mm512_loadu_ps(row + 16 * b);
                    vp[b] = _mm512_fmadd_ps(s, kc, vp[b]);
                    ov[b] = _mm512_fmadd_ps(s, qc, ov[b]);
                }
            }
        for (int b = 0; b < nv; b++, j += 16) {
            const __m512 uu = _mm512_fmsub_ps(_mm512_loadu_ps(v + j), vbeta, _mm512_mul_ps(vp[b], vbd));
            _mm512_store_ps(u + j, uu);
            _mm512_storeu_ps(out + j, _mm512_fmadd_ps(uu, vattn, _mm512_mul_ps(ov[b], vds)));
        }
    }
    const __m512 vdec = _mm512_set1_ps(p[2]), lo = _mm512_set1_ps(-1e6f), hi = _mm512_set1_ps(1e6f);
    for (int c = 0; c < hk; c++) {
        const __m512 kc = _mm512_set1_ps(k[c]);
        const float *row0 = S0 ? S0 + (size_t)c * hv : NULL;
        float *row = S + (size_t)c * hv;
        for (int j = j0; j < j1; j += 16) {
            const __m512 s0 = row0 ? _mm512_mul_ps(_mm512_loadu_ps(row0 + j), vdec) : _mm512_setzero_ps();
            const __m512 x = _mm512_fmadd_ps(_mm512_load_ps(u + j), kc, s0);
            _mm512_storeu_ps(row + j, _mm512_min_ps(_mm512_max_ps(x, lo), hi));
        }
    }
    delta_keep_cols(run, i, S + j0, (size_t)hv, j0, j1 - j0);
}

void delta_run_avx512(const struct delta_run *run, const float *S0, float *S, int j0, int j1)
{
    if (!run->work || run->m <= DELTA_WORK_MIN) {
        for (int i = 0; i < run->m; i++, S0 = S) token_direct(run, i, S0, S, j0, j1);
        return;
    }
    for (int j = j0; j < j1;) {
        const int nv = j1 - j >= 64 ? 4 : 1;
        delta_work_in(run, S0, j, 16 * nv);
        if (nv == 4) run_block(run, j, 4);
        else run_block(run, j, 1);
        delta_work_out(run, S, j, 16 * nv);
        j += 16 * nv;
    }
}

void delta_conv_avx512(const float *const *x, int k, const float *w, size_t ws, float *y, int n)
{
    for (int c = 0; c < n; c += 16) {
        const __mmask16 m = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1);
        __m512 s = _mm512_setzero_ps();
        for (int j = 0; j < k; j++)
            s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x[j] + c),
                                               _mm512_maskz_loadu_ps(m, w + (size_t)j * ws + c)));
        _mm512_mask_storeu_ps(y + c, m, s);
    }
}
