/* delta.c — the scalar DeltaNet run (the reference of delta.h), the parts every path shares, and
 * the choice of path. */
#include "kernels/delta.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/check.h"

void delta_keep_cols(const struct delta_run *run, int i, const float *S, size_t ld, int j0, int nb)
{
    for (int e = 0; e < 2; e++) {
        float *dst = run->keep ? run->keep[2 * i + e] : NULL;
        if (!dst) continue;
        dst += run->keep_off + (size_t)j0;
        for (int c = 0; c < run->hk; c++)
            memcpy(dst + (size_t)c * run->hv, S + (size_t)c * ld, sizeof(float) * (size_t)nb);
    }
}

void delta_work_in(const struct delta_run *run, const float *S0, int j0, int nb)
{
    for (int c = 0; c < run->hk; c++) {
        float *w = run->work + (size_t)c * nb;
        if (S0) memcpy(w, S0 + (size_t)c * run->hv + j0, sizeof(float) * (size_t)nb);
        else memset(w, 0, sizeof(float) * (size_t)nb);
    }
}

void delta_work_out(const struct delta_run *run, float *S, int j0, int nb)
{
    for (int c = 0; c < run->hk; c++)
        memcpy(S + (size_t)c * run->hv + j0, run->work + (size_t)c * nb, sizeof(float) * (size_t)nb);
}

/* nb <= DELTA_BLOCK columns from j0, the state's rows at S0 + c * ld0 before the first token and
 * S + c * ld after each (S0 NULL: zeros). Each statement is one rounding, in the SIMD paths'
 * order. */
static void run_block(const struct delta_run *run, const float *S0, size_t ld0, float *S, size_t ld,
                      int j0, int nb)
{
    const int hk = run->hk;
    float vp[DELTA_BLOCK], ov[DELTA_BLOCK], u[DELTA_BLOCK];
    const float *q = run->qkv + run->rows[0] * run->qkv_stride + run->q_off;
    const float *k = run->qkv + run->rows[0] * run->qkv_stride + run->k_off;
    for (int j = 0; j < nb; j++) vp[j] = ov[j] = 0.0f;
    if (S0)
        for (int c = 0; c < hk; c++) {
            const float *row = S0 + (size_t)c * ld0;
            for (int j = 0; j < nb; j++) {
                vp[j] += row[j] * k[c];
                ov[j] += row[j] * q[c];
            }
        }
    for (int i = 0; i < run->m; i++) {
        const size_t r = (size_t)run->rows[i];
        const float *v = run->qkv + r * run->qkv_stride + run->v_off + j0;
        const float *p = run->par + r * run->par_stride;
        const float beta = p[0], bd = p[1], decay = p[2], attn = p[3], ds = p[4];
        float *out = run->out + r * run->out_stride + j0;
        k = run->qkv + r * run->qkv_stride + run->k_off;
        for (int j = 0; j < nb; j++) {
            u[j] = v[j] * beta - vp[j] * bd;
            out[j] = u[j] * attn + ov[j] * ds;
        }
        /* the next token's v' and o come from the rows as they are written */
        const size_t rn = (size_t)run->rows[i + 1 < run->m ? i + 1 : i];
        const float *kn = run->qkv + rn * run->qkv_stride + run->k_off;
        const float *qn = run->qkv + rn * run->qkv_stride + run->q_off;
        for (int j = 0; j < nb; j++) vp[j] = ov[j] = 0.0f;
        for (int c = 0; c < hk; c++) {
            const float kc = k[c];
            const float *row0 = S0 ? S0 + (size_t)c * ld0 : NULL;
            float *row = S + (size_t)c * ld;
            for (int j = 0; j < nb; j++) {
                const float x = (row0 ? row0[j] * decay : 0.0f) + u[j] * kc;
                row[j] = fminf(fmaxf(x, -1e6f), 1e6f);
                vp[j] += row[j] * kn[c];
                ov[j] += row[j] * qn[c];
            }
        }
        delta_keep_cols(run, i, S, ld, j0, nb);
        S0 = S;
        ld0 = ld;
    }
}

void delta_run_scalar(const struct delta_run *run, const float *S0, float *S, int j0, int j1)
{
    const size_t hv = (size_t)run->hv;
    TERN_ASSERT(j0 >= 0 && j0 <= j1 && j1 <= run->hv && run->m >= 1 && run->hk >= 1);
    for (int j = j0; j < j1; j += DELTA_BLOCK) {
        const int nb = j1 - j < DELTA_BLOCK ? j1 - j : DELTA_BLOCK;
        if (run->work && run->m > DELTA_WORK_MIN) {
            delta_work_in(run, S0, j, nb);
            run_block(run, run->work, (size_t)nb, run->work, (size_t)nb, j, nb);
            delta_work_out(run, S, j, nb);
        } else {
            run_block(run, S0 ? S0 + j : NULL, hv, S + j, hv, j, nb);
        }
    }
}

void delta_conv_scalar(const float *const *x, int k, const float *w, size_t ws, float *y, int n)
{
    TERN_ASSERT(k >= 1 && n >= 0);
    for (int c = 0; c < n; c++) {
        float s = 0.0f;
        for (int j = 0; j < k; j++) {
            const float p = x[j][c] * w[(size_t)j * ws + c];
            s = s + p;
        }
        y[c] = s;
    }
}

struct delta_kernels delta_select(int hv)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512") && hv % 16 == 0)
        return (struct delta_kernels){delta_run_avx512, delta_conv_avx512, "avx512"};
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) && hv % 8 == 0)
        return (struct delta_kernels){delta_run_avx2, delta_conv_avx2, "avx2"};
#endif
    (void)isa;
    (void)hv;
    return (struct delta_kernels){delta_run_scalar, delta_conv_scalar, "scalar"};
}
