/* test_vexp.c — vexp (model/vexp.h): the SIMD exp-and-sum, SiLU and GELU kernels give exactly the
 * scalar vexp_f32's bits (a stride through every float bit pattern, plus the special cases:
 * +-0, +-inf, NaN, the overflow and underflow thresholds, subnormal results), and vexp_f32 is
 * within one ulp of libm's expf everywhere (on glibc with FMA it is the same function, so the
 * count of differences printed there is 0). */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vexp.h"

static float from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static bool same(float a, float b) { return to_bits(a) == to_bits(b) || (isnan(a) && isnan(b)); }

/* every 1021st bit pattern (4.2M values) and the edges, in a buffer */
static float *inputs(int *n_out)
{
    static const float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.0f, -88.0f,
                                  0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f,
                                  -0x1.9d1d9ep6f, -0x1.9d1da0p6f, -87.5f, -100.0f, -103.5f,
                                  0x1p-149f, -0x1p-149f, 1e-30f, 1.0f, -1.0f, 0.5f, 30.0f};
    const int n_edge = (int)(sizeof edges / sizeof edges[0]);
    const int n = n_edge + (int)((1ull << 32) / 1021) + 1;
    float *x = test_guarded_alloc(sizeof(float) * (size_t)n, 64);
    memcpy(x, edges, sizeof edges);
    int k = n_edge;
    for (uint64_t b = 0; b < (1ull << 32); b += 1021) x[k++] = from_bits((uint32_t)b);
    *n_out = k;
    return x;
}

/* gelu(x) * u as vexp.h defines it, one element */
static float gelu_ref(float x, float u)
{
    const float arg = fmaf(x, VEXP_GELU_C1 * x, 1.0f) * (VEXP_GELU_C2 * x);
    if (arg > 30.0f) return x * u;
    const float e = vexp_f32(arg);
    return x * (e / (e + 1.0f)) * u;
}

static void check_path(const char *name, vexp_sum_fn sum_fn, vexp_sub_fn sub_fn,
                       vexp_silu_mul_fn silu_fn, vexp_gelu_mul_fn gelu_fn)
{
    int n;
    float *x = inputs(&n);
    float *y = test_guarded_alloc(sizeof(float) * (size_t)n, 64), *u = test_guarded_alloc(sizeof(float) * (size_t)n, 64);
    assert_non_null(y);
    assert_non_null(u);
    /* exp(x - mx) and the ordered double sum, over rows of odd lengths */
    int bad = 0;
    for (int i0 = 0, len, row = 0; i0 < n; i0 += len, row++) {
        len = n - i0 < 1000 - row % 17 ? n - i0 : 1000 - row % 17;
        memcpy(y + i0, x + i0, sizeof(float) * (size_t)len);
        const double s = sum_fn(y + i0, len, 0.0f);
        double ref = 0.0;
        for (int i = i0; i < i0 + len; i++) {
            const float e = vexp_f32(x[i] - 0.0f);
            bad += !same(y[i], e);
            ref += (double)e;
        }
        bad += memcmp(&s, &ref, sizeof s) != 0 && !(isnan(s) && isnan(ref));
    }
    assert_int_equal(bad, 0);
    /* the exponentials without the sum, against a shift mx */
    for (int i0 = 0, len, row = 0; i0 < n; i0 += len, row++) {
        len = n - i0 < 999 - row % 13 ? n - i0 : 999 - row % 13;
        memcpy(y + i0, x + i0, sizeof(float) * (size_t)len);
        sub_fn(y + i0, len, 1.5f);
        for (int i = i0; i < i0 + len; i++) bad += !same(y[i], vexp_f32(x[i] - 1.5f));
    }
    assert_int_equal(bad, 0);
    /* silu(g) * u with u drawn from the same values */
    for (int i = 0; i < n; i++) {
        y[i] = x[i];
        u[i] = x[(int)(((uint64_t)i * 7919u) % (uint64_t)n)];
    }
    for (int i0 = 0; i0 < n; i0 += 4093) silu_fn(y + i0, u + i0, n - i0 < 4093 ? n - i0 : 4093);
    for (int i = 0; i < n; i++) bad += !same(y[i], x[i] / (1.0f + vexp_f32(-x[i])) * u[i]);
    assert_int_equal(bad, 0);
    /* gelu(g) * u, rows of odd lengths so the SIMD tails run */
    memcpy(y, x, sizeof(float) * (size_t)n);
    for (int i0 = 0; i0 < n; i0 += 4093) gelu_fn(y + i0, u + i0, n - i0 < 4093 ? n - i0 : 4093);
    for (int i = 0; i < n; i++) bad += !same(y[i], gelu_ref(x[i], u[i]));
    assert_int_equal(bad, 0);
    print_message("%s: exp, ordered sum, exp without sum, silu and gelu bit-identical to vexp_f32 on %d inputs\n",
                  name, n);
    test_guarded_free(x);
    test_guarded_free(y);
    test_guarded_free(u);
}

static void test_simd_bit_identical(void **state)
{
    (void)state;
    check_path("scalar", vexp_sum_scalar, vexp_sub_scalar, vexp_silu_mul_scalar, vexp_gelu_mul_scalar);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        check_path("avx2", vexp_sum_avx2, vexp_sub_avx2, vexp_silu_mul_avx2, vexp_gelu_mul_avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        check_path("avx512", vexp_sum_avx512, vexp_sub_avx512, vexp_silu_mul_avx512, vexp_gelu_mul_avx512);
#endif
}

static void test_close_to_libm(void **state)
{
    (void)state;
    int n, differ = 0;
    float *x = inputs(&n);
    for (int i = 0; i < n; i++) {
        const float a = vexp_f32(x[i]), b = expf(x[i]);
        if (same(a, b)) continue;
        differ++;
        /* one ulp apart at most: neighbouring bit patterns of the same sign */
        const int64_t d = (int64_t)to_bits(a) - (int64_t)to_bits(b);
        assert_true(d == 1 || d == -1);
    }
    print_message("vexp_f32 vs libm expf: %d of %d inputs differ (by one ulp)\n", differ, n);
    test_guarded_free(x);
}

static void test_special_values(void **state)
{
    (void)state;
    assert_true(vexp_f32(-INFINITY) == 0.0f);
    assert_true(isinf(vexp_f32(INFINITY)) && vexp_f32(INFINITY) > 0);
    assert_true(isnan(vexp_f32(NAN)));
    assert_true(vexp_f32(0.0f) == 1.0f && vexp_f32(-0.0f) == 1.0f);
    assert_true(isinf(vexp_f32(89.0f)));
    assert_true(vexp_f32(-104.0f) == 0.0f);
    assert_true(vexp_f32(-103.5f) == 0x1p-149f);
    assert_true(vexp_f32(-100.0f) > 0.0f && vexp_f32(-100.0f) < 0x1p-126f); /* subnormal */
    assert_true(vexp_f32(1.0f) == 0x1.5bf0a8p+1f);                          /* e, rounded */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_simd_bit_identical),
        cmocka_unit_test(test_close_to_libm),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
