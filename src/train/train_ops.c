/* train_ops.c — forward/backward of RMSNorm, RoPE, SwiGLU, packed causal attention and masked
 * cross-entropy (read train_ops.h first).
 *
 * Attention is computed one block of ATTN_QB queries at a time with the F32 GEMM, recomputing
 * the probabilities in the backward from the saved log-sum-exp (as flash attention does), so no
 * T x T matrix outlives a block: the saved state per head is o and lse. A block reads keys from
 * the earliest document start among its queries to its last query; entries outside a query's
 * own [start, i] range are masked to probability zero. */
#include "train/train_ops.h"

#include "kernels/vexp.h"
#include "util/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- RMSNorm */

void train_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd, int n, int d,
                       float eps)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / d);
        const float s = 1.0f / sqrtf(mean + eps);
        rstd[r] = s;
        for (int i = 0; i < d; i++) yr[i] = (xr[i] * s) * w[i];
    }
}

void train_rmsnorm_bwd(const float *x, const float *w, const float *rstd, const float *dy,
                       float *dx, float *dw, int n, int d)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d, *dyr = dy + (size_t)r * d;
        float *dxr = dx + (size_t)r * d;
        const float s = rstd[r];
        /* y_i = x_i s w_i, s = (mean(x^2) + eps)^-1/2, ds/dx_j = -s^3 x_j / d */
        float dot = 0.0f;
        for (int i = 0; i < d; i++) dot += dyr[i] * w[i] * xr[i];
        const float k = dot * s * s * s / (float)d;
        for (int i = 0; i < d; i++) {
            dxr[i] += dyr[i] * w[i] * s - xr[i] * k;
            dw[i] += dyr[i] * xr[i] * s;
        }
    }
}

/* ---------------------------------------------------------------- RoPE */

float *train_rope_table(int n_pos, int n_rot, float base)
{
    const int half = n_rot / 2;
    float *cs = malloc((size_t)n_pos * half * 2 * sizeof *cs);
    if (!cs) return NULL;
    /* the same float recurrence as src/model/forward.c (rope_cache_row): bit-equal angles */
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (int p = 0; p < n_pos; p++) {
        float theta = (float)p;
        float *row = cs + (size_t)p * half * 2;
        for (int i = 0; i < half; i++) {
            row[2 * i] = cosf(theta);
            row[2 * i + 1] = sinf(theta);
            theta *= theta_scale;
        }
    }
    return cs;
}

void train_rope(float *x, int n, int ld, int n_head, int hd, const int32_t *pos, const float *cs,
                bool neox, bool inverse)
{
    const int half = hd / 2;
    for (int r = 0; r < n; r++) {
        const float *c = cs + (size_t)pos[r] * half * 2;
        for (int h = 0; h < n_head; h++) {
            float *v = x + (size_t)r * ld + (size_t)h * hd;
            for (int i = 0; i < half; i++) {
                const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                const float co = c[2 * i], si = inverse ? -c[2 * i + 1] : c[2 * i + 1];
                const float x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * co - x1 * si;
                v[i1] = x0 * si + x1 * co;
            }
        }
    }
}

/* ---------------------------------------------------------------- SwiGLU */

void train_swiglu_fwd(const float *g, const float *u, float *h, size_t n)
{
    /* the inference forward's SiLU kernel (same bits), on a copy: g is kept for the backward */
    memcpy(h, g, n * sizeof *h);
    const struct vexp_kernels vx = vexp_select();
    for (size_t i = 0; i < n; i += 1 << 20) {
        const size_t m = n - i < (1u << 20) ? n - i : (1u << 20);
        vx.silu_mul(h + i, u + i, (int)m);
    }
}

void train_swiglu_bwd(const float *g, const float *u, const float *dh, float *dg, float *du,
                      size_t n)
{
    /* exp(-g) in blocks with the SIMD exponential (the bits of vexp_f32, which are glibc's expf
     * on x86-64), not one libm call per element */
    const struct vexp_kernels vx = vexp_select();
    float e[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        const int m = n - i0 < 256 ? (int)(n - i0) : 256;
        for (int i = 0; i < m; i++) e[i] = -g[i0 + i];
        vx.exp_sub(e, m, 0.0f);
        for (int k = 0; k < m; k++) {
            const size_t i = i0 + (size_t)k;
            const float sg = 1.0f / (1.0f + e[k]);
            const float silu = g[i] * sg;
            du[i] += dh[i] * silu;
            dg[i] += dh[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
        }
    }
}

/* ---------------------------------------------------------------- attention */

#define ATTN_QB 64

size_t train_attn_ws_floats(int T)
{
    /* scores and dP, ATTN_QB x T each, plus the row sums of dO * O; a multiple of 16 floats so
     * the GEMM workspace after it stays 64-byte aligned */
    return (2 * (size_t)ATTN_QB * (size_t)T + ATTN_QB + 15) & ~(size_t)15;
}

/* Key range [k0, i1) of the query block [i0, i1). */
static int block_k0(const struct train_attn *a, int i0, int i1)
{
    int k0 = a->start[i0];
    for (int i = i0 + 1; i < i1; i++)
        if (a->start[i] < k0) k0 = a->start[i];
    return k0;
}

/* S (qb, nk) = Q[i0..i1) . K[k0..i1)^T */
static void block_scores(const struct train_attn *a, int i0, int qb, int k0, int nk, float *S,
                         float *gws)
{
    struct kern_gemm g = {qb, nk, a->hd, a->q + (size_t)i0 * a->ldq, a->ldq, 1,
                          a->k + (size_t)k0 * a->ldk, 1, a->ldk, S, nk, false};
    kern_gemm_f32(&g, a->path, gws);
}

void train_attn_fwd(const struct train_attn *a, float *ws)
{
    const struct vexp_kernels vx = vexp_select();
    float *S = ws, *gws = ws + train_attn_ws_floats(a->T);
    for (int i0 = 0; i0 < a->T; i0 += ATTN_QB) {
        const int i1 = i0 + ATTN_QB < a->T ? i0 + ATTN_QB : a->T, qb = i1 - i0;
        const int k0 = block_k0(a, i0, i1), nk = i1 - k0;
        block_scores(a, i0, qb, k0, nk, S, gws);
        for (int r = 0; r < qb; r++) {
            const int i = i0 + r, lo = a->start[i] - k0, hi = i - k0; /* valid [lo, hi] */
            float *s = S + (size_t)r * nk;
            float mx = -INFINITY;
            for (int j = lo; j <= hi; j++) {
                s[j] *= a->scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < lo; j++) s[j] = 0.0f;
            for (int j = hi + 1; j < nk; j++) s[j] = 0.0f;
            const float sum = (float)vx.exp_sum(s + lo, hi - lo + 1, mx);
            const float inv = 1.0f / sum;
            for (int j = lo; j <= hi; j++) s[j] *= inv;
            if (a->f16_probs)
                for (int j = lo; j <= hi; j++) s[j] = fp16_to_f32(fp16_from_f32(s[j]));
            a->lse[(size_t)i * a->ldl] = mx + logf(sum);
        }
        /* O = P . V */
        struct kern_gemm g = {qb, a->hd, nk, S, nk, 1, a->v + (size_t)k0 * a->ldk, a->ldk, 1,
                              a->o + (size_t)i0 * a->ldq, a->ldq, false};
        kern_gemm_f32(&g, a->path, gws);
    }
}

void train_attn_bwd(const struct train_attn *a, const float *do_, float *dq, float *dk, float *dv,
                    float *ws)
{
    const struct vexp_kernels vx = vexp_select();
    float *S = ws, *dP = ws + (size_t)ATTN_QB * a->T, *D = dP + (size_t)ATTN_QB * a->T;
    float *gws = ws + train_attn_ws_floats(a->T);
    for (int i0 = 0; i0 < a->T; i0 += ATTN_QB) {
        const int i1 = i0 + ATTN_QB < a->T ? i0 + ATTN_QB : a->T, qb = i1 - i0;
        const int k0 = block_k0(a, i0, i1), nk = i1 - k0;
        block_scores(a, i0, qb, k0, nk, S, gws);
        /* dP = dO . V^T */
        struct kern_gemm g1 = {qb, nk, a->hd, do_ + (size_t)i0 * a->ldq, a->ldq, 1,
                               a->v + (size_t)k0 * a->ldk, 1, a->ldk, dP, nk, false};
        kern_gemm_f32(&g1, a->path, gws);
        for (int r = 0; r < qb; r++) {
            const int i = i0 + r, lo = a->start[i] - k0, hi = i - k0;
            const float *dor = do_ + (size_t)i * a->ldq, *orow = a->o + (size_t)i * a->ldq;
            float dd = 0.0f;
            for (int c = 0; c < a->hd; c++) dd += dor[c] * orow[c];
            D[r] = dd;
            const float l = a->lse[(size_t)i * a->ldl];
            float *s = S + (size_t)r * nk, *dp = dP + (size_t)r * nk;
            for (int j = lo; j <= hi; j++) s[j] *= a->scale;
            vx.exp_sub(s + lo, hi - lo + 1, l); /* P = exp(S - lse) */
            for (int j = 0; j < lo; j++) s[j] = dp[j] = 0.0f;
            for (int j = hi + 1; j < nk; j++) s[j] = dp[j] = 0.0f;
            for (int j = lo; j <= hi; j++) dp[j] = s[j] * (dp[j] - dd) * a->scale; /* dS, scaled */
        }
        /* dQ = dS . K */
        struct kern_gemm g2 = {qb, a->hd, nk, dP, nk, 1, a->k + (size_t)k0 * a->ldk, a->ldk, 1,
                               dq + (size_t)i0 * a->ldq, a->ldq, false};
        kern_gemm_f32(&g2, a->path, gws);
        /* dK += dS^T . Q ; dV += P^T . dO */
        struct kern_gemm g3 = {nk, a->hd, qb, dP, 1, nk, a->q + (size_t)i0 * a->ldq, a->ldq, 1,
                               dk + (size_t)k0 * a->ldq, a->ldq, true};
        kern_gemm_f32(&g3, a->path, gws);
        struct kern_gemm g4 = {nk, a->hd, qb, S, 1, nk, do_ + (size_t)i0 * a->ldq, a->ldq, 1,
                               dv + (size_t)k0 * a->ldq, a->ldq, true};
        kern_gemm_f32(&g4, a->path, gws);
    }
}

/* ---------------------------------------------------------------- cross-entropy */

double train_xent(float *logits, const int32_t *target, const float *weight, int n, int V,
                  double scale)
{
    double total = 0.0;
    for (int r = 0; r < n; r++) {
        float *l = logits + (size_t)r * V;
        const float w = weight[r];
        if (!(w > 0.0f)) {
            memset(l, 0, (size_t)V * sizeof *l);
            continue;
        }
        float mx = l[0];
        for (int j = 1; j < V; j++)
            if (l[j] > mx) mx = l[j];
        const float lt = l[target[r]];
        const double sum = vexp_select().exp_sum(l, V, mx);
        total += (double)w * ((double)mx + log(sum) - (double)lt);
        const float k = (float)(w * scale);
        const float kn = (float)(w * scale / sum);
        for (int j = 0; j < V; j++) l[j] *= kn;
        l[target[r]] -= k;
    }
    return total;
}
