/* vec.c — the scalar vector steps and the choice of path (vec.h). */
#include "kernels/vec.h"

#include <string.h>

#include "kernels/kernels.h"
#include "util/check.h"
#include "util/fp16.h"

/* Eight running lanes (which the compiler keeps in vector registers), summed pairwise. */
float kern_vec_dot_scalar(const float *a, const float *b, int64_t n)
{
    TERN_ASSERT(n >= 0);
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void kern_vec_axpy_scalar(float c, const float *x, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0 && (n == 0 || x == y || x + n <= y || y + n <= x), "y does not partly overlap x");
    for (int64_t i = 0; i < n; i++) y[i] += c * x[i];
}

float kern_vec_dot_f16_scalar(const uint16_t *a, const float *b, int64_t n)
{
    TERN_ASSERT(n >= 0);
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += fp16_to_f32(a[i + j]) * b[i + j];
    for (; i < n; i++) acc[i & 7] += fp16_to_f32(a[i]) * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void kern_vec_axpy_f16_scalar(float c, const uint16_t *x, float *y, int64_t n)
{
    TERN_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] += c * fp16_to_f32(x[i]);
}

struct kern_vec kern_vec_select(void)
{
    const char *isa = kern_isa_name();
#if defined(__x86_64__)
    if (!strcmp(isa, "avx512"))
        return (struct kern_vec){kern_vec_dot_avx512, kern_vec_axpy_avx512, kern_vec_dot_f16_avx512,
                                 kern_vec_axpy_f16_avx512, "avx512"};
    if (!strcmp(isa, "avx2"))
        return (struct kern_vec){kern_vec_dot_avx2, kern_vec_axpy_avx2, kern_vec_dot_f16_avx2,
                                 kern_vec_axpy_f16_avx2, "avx2"};
#endif
    (void)isa;
    return (struct kern_vec){kern_vec_dot_scalar, kern_vec_axpy_scalar, kern_vec_dot_f16_scalar,
                             kern_vec_axpy_f16_scalar, "scalar"};
}
