/* vec.h — the plain F32 vector steps of the LoRA deltas (src/model/lora_apply.c): a dot product
 * (A x, one rank row against one token) and an axpy (y += c * row k of B^T), in the widest
 * vectors the CPU has. Each path sums in one fixed order whatever the caller's batch or
 * threads, so a token gets the same delta in any batch on a given path; paths differ from each
 * other in the last bits (their lanes split the sums differently). */
#ifndef TERN_KERNELS_VEC_H
#define TERN_KERNELS_VEC_H

#include <stdint.h>

struct kern_vec {
    float (*dot)(const float *a, const float *b, int64_t n);
    void (*axpy)(float c, const float *x, float *y, int64_t n);
    /* the same with the first operand stored as F16 (an adapter file's own type): the values
     * are converted in registers and summed in the F32 order above, so the results equal the
     * F32 steps' on the same (F16-exact) values, bit for bit, at half the bytes read */
    float (*dot_f16)(const uint16_t *a, const float *b, int64_t n);
    void (*axpy_f16)(float c, const uint16_t *x, float *y, int64_t n);
    const char *name;
};

/* The best path for this CPU (capped by TERN_KERNELS as the other kernels are). */
struct kern_vec kern_vec_select(void);

float kern_vec_dot_scalar(const float *a, const float *b, int64_t n);
void kern_vec_axpy_scalar(float c, const float *x, float *y, int64_t n);
float kern_vec_dot_f16_scalar(const uint16_t *a, const float *b, int64_t n);
void kern_vec_axpy_f16_scalar(float c, const uint16_t *x, float *y, int64_t n);
#if defined(__x86_64__)
float kern_vec_dot_avx2(const float *a, const float *b, int64_t n);
void kern_vec_axpy_avx2(float c, const float *x, float *y, int64_t n);
float kern_vec_dot_f16_avx2(const uint16_t *a, const float *b, int64_t n);
void kern_vec_axpy_f16_avx2(float c, const uint16_t *x, float *y, int64_t n);
float kern_vec_dot_avx512(const float *a, const float *b, int64_t n);
void kern_vec_axpy_avx512(float c, const float *x, float *y, int64_t n);
float kern_vec_dot_f16_avx512(const uint16_t *a, const float *b, int64_t n);
void kern_vec_axpy_f16_avx512(float c, const uint16_t *x, float *y, int64_t n);
#endif

#endif
