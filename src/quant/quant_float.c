/* quant_float.c — the float formats F32, F16 and BF16: conversion and reference dot products.
 *
 * An F16 (BF16) weight is multiplied with an activation row rounded to F16 (BF16), as ggml-cpu
 * does; products are summed in float. Conversions round to nearest even (util/fp16.h). */
#include "quant/quant.h"

#include "util/fp16.h"

void quant_f32_from_float(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
void quant_f32_to_float(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }

float quant_f32_dot_ref(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

void quant_f16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = fp16_from_f32(x[i]);
}

void quant_f16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_f32(h[i]);
}

float quant_f16_dot_ref(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += fp16_to_f32(x[i]) * fp16_to_f32(y[i]);
    return s;
}

void quant_bf16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = bf16_from_f32(x[i]);
}

void quant_bf16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(h[i]);
}

float quant_bf16_dot_ref(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
    return s;
}
