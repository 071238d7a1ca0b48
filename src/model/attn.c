/* attn.c — scalar reference attention loops and the run-time choice of path (see attn.h). */
#include "model/attn.h"

#include <string.h>

#include "kernels/kernels.h"
#include "util/fp16.h"
#if defined(__aarch64__)
#include "model/attn_neon.h"
#endif

void attn_scores_scalar(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s)
{
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *kr = k + (size_t)p * hd;
        float dot = 0.0f;
        for (int j = 0; j < hd; j++) dot += q[j] * fp16_to_f32(kr[j]);
        s[p] = dot * scale;
    }
}

void attn_wsum_scalar(const float *w, const uint16_t *v, int n_keys, int hd, float *out)
{
    for (int j = 0; j < hd; j++) out[j] = 0.0f;
    for (int p = 0; p < n_keys; p++) {
        const uint16_t *vr = v + (size_t)p * hd;
        for (int j = 0; j < hd; j++) out[j] += w[p] * fp16_to_f32(vr[j]);
    }
}

struct attn_kernels attn_select(int hd)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512") && hd % 16 == 0)
        return (struct attn_kernels){attn_scores_avx512, attn_wsum_avx512, "avx512"};
    if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) && hd % 8 == 0)
        return (struct attn_kernels){attn_scores_avx2, attn_wsum_avx2, "avx2"};
#elif defined(__aarch64__)
    if (!strcmp(isa, "neon") && hd % 8 == 0)
        return (struct attn_kernels){attn_scores_neon, attn_wsum_neon, "neon"};
#endif
    (void)hd;
    (void)isa;
    return (struct attn_kernels){attn_scores_scalar, attn_wsum_scalar, "scalar"};
}
