/* test_attn.c — the SIMD attention loops agree with the scalar reference (model/attn.h) for
 * every head size a path accepts and odd numbers of keys. They differ only in summation order,
 * so the bound is a few float ulps of the magnitude involved. */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/attn.h"
#include "util/fp16.h"

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static void compare_paths(attn_scores_fn sc, attn_wsum_fn ws, int hd, const char *name)
{
    uint64_t seed = 42;
    const int max_keys = 77;
    float *q = malloc(sizeof(float) * hd), *w = malloc(sizeof(float) * max_keys);
    uint16_t *k = malloc(sizeof(uint16_t) * hd * max_keys), *v = malloc(sizeof(uint16_t) * hd * max_keys);
    float *s_ref = malloc(sizeof(float) * max_keys), *s = malloc(sizeof(float) * max_keys);
    float *o_ref = malloc(sizeof(float) * hd), *o = malloc(sizeof(float) * hd);
    for (int j = 0; j < hd; j++) q[j] = fp16_to_f32(fp16_from_f32(frand(&seed) * 3));
    for (int i = 0; i < hd * max_keys; i++) {
        k[i] = fp16_from_f32(frand(&seed) * 2);
        v[i] = fp16_from_f32(frand(&seed));
    }
    for (int p = 0; p < max_keys; p++) w[p] = fp16_to_f32(fp16_from_f32((frand(&seed) + 1) / max_keys));
    for (int n_keys = 1; n_keys <= max_keys; n_keys += 7) {
        attn_scores_scalar(q, k, n_keys, hd, 0.125f, s_ref);
        sc(q, k, n_keys, hd, 0.125f, s);
        for (int p = 0; p < n_keys; p++) assert_true(fabsf(s[p] - s_ref[p]) <= 1e-5f * hd);
        attn_wsum_scalar(w, v, n_keys, hd, o_ref);
        ws(w, v, n_keys, hd, o);
        for (int j = 0; j < hd; j++) assert_true(fabsf(o[j] - o_ref[j]) <= 1e-6f * n_keys);
    }
    print_message("%s hd=%d agrees with scalar\n", name, hd);
    free(q); free(w); free(k); free(v); free(s_ref); free(s); free(o_ref); free(o);
}

static void test_simd_paths(void **state)
{
    (void)state;
    int tested = 0;
#if defined(__x86_64__)
    static const int sizes[] = {16, 32, 64, 128};
    for (int i = 0; i < 4; i++) {
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
            compare_paths(attn_scores_avx2, attn_wsum_avx2, sizes[i], "avx2");
            tested++;
        }
        if (__builtin_cpu_supports("avx512f")) {
            compare_paths(attn_scores_avx512, attn_wsum_avx512, sizes[i], "avx512");
            tested++;
        }
    }
#endif
    if (!tested) {
        print_message("SKIP: no SIMD attention path on this CPU\n");
        skip();
    }
}

static void test_selection_follows_isa(void **state)
{
    (void)state;
    struct attn_kernels a = attn_select(64);
    const char *isa = kern_isa_name();
    if (!strcmp(isa, "scalar")) assert_string_equal(a.name, "scalar");
    else assert_string_equal(a.name, isa);
    /* a head size no SIMD path takes falls back to scalar */
    assert_string_equal(attn_select(6).name, "scalar");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_paths),
        cmocka_unit_test(test_selection_follows_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
