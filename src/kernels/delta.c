/* delta.c — the scalar DeltaNet head (the reference of delta.h) and the choice of path. */
#include "kernels/delta.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

void delta_head_scalar(const float *S0, float *S, const float *q, const float *k, const float *v,
                       float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                       int hv)
{
    float vp[1024], ov[1024], u[1024];
    for (int j = 0; j < hv; j++) vp[j] = ov[j] = 0.0f;
    if (S0)
        for (int c = 0; c < hk; c++) {
            const float kc = k[c], qc = q[c];
            const float *row = S0 + (size_t)c * hv;
            for (int j = 0; j < hv; j++) {
                vp[j] += row[j] * kc;
                ov[j] += row[j] * qc;
            }
        }
    for (int j = 0; j < hv; j++) {
        u[j] = v[j] * beta - vp[j] * bd;
        out[j] = u[j] * attn + ov[j] * ds;
    }
    for (int c = 0; c < hk; c++) {
        const float kc = k[c];
        const float *row0 = S0 ? S0 + (size_t)c * hv : NULL;
        float *row = S + (size_t)c * hv;
        for (int j = 0; j < hv; j++) {
            const float x = (row0 ? row0[j] * decay : 0.0f) + u[j] * kc;
            row[j] = fminf(fmaxf(x, -1e6f), 1e6f);
        }
    }
}

struct delta_kernels delta_select(int hv)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512") && hv % 16 == 0) return (struct delta_kernels){delta_head_avx512, "avx512"};
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) && hv % 8 == 0)
        return (struct delta_kernels){delta_head_avx2, "avx2"};
#endif
    (void)isa;
    (void)hv;
    return (struct delta_kernels){delta_head_scalar, "scalar"};
}
