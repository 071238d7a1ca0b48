/* test_attn.c — the SIMD attention loops agree with the scalar reference (model/attn.h) for
 * every head size a path accepts and odd numbers of keys. They differ only in summation order,
 * so the bound is a few float ulps of the magnitude involved. The block kernels must give each
 * query exactly the bits of its ISA's per-query kernels (whatever the block size, the other
 * queries in the block, or where the key tiles end), and the softmax exactly the scalar one's:
 * that is what keeps a token's logits independent of how a batch was cut. */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/attn.h"
#include "util/fp16.h"

/* every buffer ends at an inaccessible page: a SIMD loop reading past it faults
 * (test_guarded_alloc; the sanitized build leaves the SIMD files uninstrumented) */
static void *guarded(size_t n) { return test_guarded_alloc(n, 64); }
static void unguard(void *p) { test_guarded_free(p); }

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static void compare_paths(attn_scores_fn sc, attn_wsum_fn ws, int hd, const char *name)
{
    uint64_t seed = 42;
    const int max_keys = 77;
    float *q = guarded(sizeof(float) * hd), *w = guarded(sizeof(float) * max_keys);
    uint16_t *k = guarded(sizeof(uint16_t) * hd * max_keys), *v = guarded(sizeof(uint16_t) * hd * max_keys);
    float *s_ref = guarded(sizeof(float) * max_keys), *s = guarded(sizeof(float) * max_keys);
    float *o_ref = guarded(sizeof(float) * hd), *o = guarded(sizeof(float) * hd);
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
    unguard(q); unguard(w); unguard(k); unguard(v); unguard(s_ref); unguard(s); unguard(o_ref); unguard(o);
}

static void test_simd_paths(void **state)
{
    (void)state;
    int tested = 0;
#if defined(__x86_64__)
    static const int sizes[] = {16, 32, 64, 128, 96, 256};
    for (int i = 0; i < 6; i++) {
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
        TEST_SKIP("no SIMD attention path on this CPU\n");
    }
}

/* Up to 16 queries of one KV head, each with its own key count (causal: later tokens see more),
 * through the block kernels vs the per-query kernels of the same ISA: bit for bit. */
static void compare_block(const struct attn_kernels *a, int hd, int nq, int g, int base_keys)
{
    uint64_t seed = 1000u + (uint64_t)hd * 31 + (uint64_t)nq * 7 + (uint64_t)base_keys;
    const int max_keys = base_keys + (nq - 1) / g;
    const size_t ss = ((size_t)max_keys + 15) & ~(size_t)15;
    float *q = guarded(sizeof(float) * hd * nq), *tile = guarded(sizeof(float) * ATTN_TILE_KEYS * hd);
    uint16_t *k = guarded(sizeof(uint16_t) * hd * max_keys), *v = guarded(sizeof(uint16_t) * hd * max_keys);
    float *sb = guarded(sizeof(float) * ss * nq), *s1 = guarded(sizeof(float) * max_keys);
    float *ob = guarded(sizeof(float) * hd * nq), *o1 = guarded(sizeof(float) * hd);
    float *outp[16];
    int nk[16];
    for (int i = 0; i < hd * nq; i++) q[i] = fp16_to_f32(fp16_from_f32(frand(&seed) * 3));
    for (int i = 0; i < hd * max_keys; i++) {
        k[i] = fp16_from_f32(frand(&seed) * 2);
        v[i] = fp16_from_f32(frand(&seed));
    }
    for (int i = 0; i < nq; i++) {
        nk[i] = base_keys + i / g; /* query i belongs to token i / g of the block */
        outp[i] = ob + (size_t)i * hd;
    }
    a->bscores(q, nq, k, max_keys, hd, 0.125f, sb, ss, tile);
    /* the block softmax, rows from an offset (a sliding window's first key) and from 0 */
    float *sw = guarded(sizeof(float) * ss * nq);
    memcpy(sw, sb, sizeof(float) * ss * nq);
    int off[16], nw[16];
    const int zero[16] = {0};
    for (int i = 0; i < nq; i++) {
        off[i] = (i * 5) % nk[i];
        nw[i] = nk[i] - off[i];
    }
    a->bsoftmax(sw, ss, off, nw, nq);
    for (int i = 0; i < nq; i++) {
        a->scores(q + (size_t)i * hd, k, nk[i], hd, 0.125f, s1);
        assert_memory_equal(sb + i * ss, s1, sizeof(float) * nk[i]);
        attn_softmax_scalar(s1 + off[i], nw[i]);
        assert_memory_equal(sw + i * ss + off[i], s1 + off[i], sizeof(float) * nw[i]);
        a->scores(q + (size_t)i * hd, k, nk[i], hd, 0.125f, s1);
        a->softmax(s1, nk[i]);
        memcpy(sw + i * ss, s1, sizeof(float) * nk[i]); /* the per-query kernel's weights */
    }
    a->bsoftmax(sb, ss, zero, nk, nq);
    for (int i = 0; i < nq; i++) {
        assert_memory_equal(sb + i * ss, sw + i * ss, sizeof(float) * nk[i]);
        a->scores(q + (size_t)i * hd, k, nk[i], hd, 0.125f, s1);
        attn_softmax_scalar(s1, nk[i]);
        assert_memory_equal(sb + i * ss, s1, sizeof(float) * nk[i]);
    }
    unguard(sw);
    a->bwsum(sb, ss, nk, nq, v, hd, outp);
    for (int i = 0; i < nq; i++) {
        a->wsum(sb + i * ss, v, nk[i], hd, o1);
        assert_memory_equal(ob + (size_t)i * hd, o1, sizeof(float) * hd);
    }
    unguard(q); unguard(tile); unguard(k); unguard(v); unguard(sb); unguard(s1); unguard(ob); unguard(o1);
}

static void test_block_kernels(void **state)
{
    (void)state;
    struct attn_kernels paths[3];
    int n_paths = 0;
    paths[n_paths++] = (struct attn_kernels){attn_scores_scalar, attn_wsum_scalar,
        attn_softmax_scalar, attn_bscores_scalar, attn_bwsum_scalar, attn_bsoftmax_scalar,
        attn_round_f16_scalar, "scalar"};
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        paths[n_paths++] = (struct attn_kernels){attn_scores_avx2, attn_wsum_avx2,
            attn_softmax_avx2, attn_bscores_avx2, attn_bwsum_avx2, attn_bsoftmax_avx2,
            attn_round_f16_avx2, "avx2"};
    if (__builtin_cpu_supports("avx512f"))
        paths[n_paths++] = (struct attn_kernels){attn_scores_avx512, attn_wsum_avx512,
            attn_softmax_avx512, attn_bscores_avx512, attn_bwsum_avx512, attn_bsoftmax_avx512,
            attn_round_f16_avx512, "avx512"};
#endif
    /* (queries, heads per token): GQA groups 1, 4, 7, 8 times 1..16 tokens, and ragged blocks */
    static const int shapes[][2] = {{1, 1}, {16, 1}, {4, 4}, {16, 4}, {7, 7}, {14, 7}, {8, 8},
                                    {16, 8}, {13, 4}, {5, 2}};
    static const int sizes[] = {64, 128, 16, 32, 96, 256}; /* 96, 256: dot_ab from memory */
    static const int keys[] = {1, 2, 15, 16, 17, 33, 100};
    for (int pi = 0; pi < n_paths; pi++) {
        int runs = 0;
        for (int zi = 0; zi < 6; zi++)
            for (int si = 0; si < 10; si++)
                for (int ki = 0; ki < 7; ki++) {
                    compare_block(&paths[pi], sizes[zi], shapes[si][0], shapes[si][1], keys[ki]);
                    runs++;
                }
        print_message("%s: block kernels bit-identical to per-query kernels in %d cases\n",
                      paths[pi].name, runs);
    }
}

/* The query's rounding to F16 precision: every path gives the scalar oracle's bits (fp16.h), on
 * ties, values past the F16 range, F16 subnormals, zeros and infinities, and at every length's
 * tail. */
static void test_round_f16(void **state)
{
    (void)state;
    struct attn_kernels paths[3];
    int n_paths = 0;
    paths[n_paths++] = attn_select(64);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        paths[n_paths].round_f16 = attn_round_f16_avx2, paths[n_paths++].name = "avx2";
    if (__builtin_cpu_supports("avx512f"))
        paths[n_paths].round_f16 = attn_round_f16_avx512, paths[n_paths++].name = "avx512";
#endif
    enum { N = 75 };
    float x[N], want[N], got[N];
    uint64_t seed = 77;
    for (int i = 0; i < N; i++) x[i] = frand(&seed) * 1000.0f;
    x[0] = 1.0f + 1.0f / 2048; /* a tie: rounds to even (1.0) */
    x[1] = 1.0f + 3.0f / 2048; /* a tie: rounds to even (1 + 2/1024) */
    x[2] = 70000.0f;           /* past 65504: infinity */
    x[3] = -65520.0f;          /* rounds to -infinity */
    x[4] = 3e-6f;              /* an F16 subnormal */
    x[5] = -1e-9f;             /* below the smallest F16 subnormal: -0 */
    x[6] = 0.0f;
    x[7] = INFINITY;
    x[8] = -INFINITY;
    x[9] = 65504.0f;
    for (int i = 0; i < N; i++) want[i] = fp16_to_f32(fp16_from_f32(x[i]));
    for (int pi = 0; pi < n_paths; pi++)
        for (int n = 1; n <= N; n += 7) {
            memset(got, 0x55, sizeof got);
            paths[pi].round_f16(x, got, n);
            assert_memory_equal(got, want, sizeof(float) * (size_t)n);
            for (int i = n; i < N; i++) assert_true(((const uint8_t *)&got[i])[0] == 0x55); /* nothing past n */
        }
    print_message("query rounding to F16: %d paths give the scalar bits\n", n_paths);
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
        cmocka_unit_test(test_block_kernels),
        cmocka_unit_test(test_round_f16),
        cmocka_unit_test(test_selection_follows_isa),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
