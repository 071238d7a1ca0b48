/* test_sampler_masked.c — tern_sampler_sample_masked against its reference: tern_sampler_sample
 * on the same logits with every refused token set to -inf (what the grammar's apply writes).
 * Two samplers with one seed are fed the same positions; they must pick the same token at every
 * draw, for greedy decoding (ties included), temperature with top-k / top-p / min-p, the
 * repetition penalty (penalized tokens inside and outside the mask), masks from a handful of
 * tokens to nearly all, padding ids past n_allow, and an empty mask. Also greedy
 * tern_sampler_sample itself (read in place, without candidates) against a plain scan, and
 * sampling from NaN logits: a NaN token is never drawn, and with no finite logit at all the
 * first candidate is (no read outside the candidates, whatever the filters). */
#include "test_support.h"
#include "test_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NV 5000

static void fill_logits(float *l, uint64_t *rng, bool ties)
{
    for (int i = 0; i < NV; i++) l[i] = ties ? (float)(int)(4.0 * test_rand_uniform(rng)) : 3.0f * test_rand_normal(rng);
}

/* density: the share of tokens allowed; n_allow: ids at or past it are refused whatever the bits */
static void fill_mask(uint32_t *m, uint64_t *rng, double density)
{
    memset(m, 0, (NV + 31) / 32 * sizeof *m);
    for (int i = 0; i < NV; i++)
        if (test_rand_uniform(rng) < density) m[i >> 5] |= 1u << (i & 31);
}

static void run(const struct tern_sampler_params *sp, double density, int n_allow, bool ties, uint64_t seed)
{
    struct tern_sampler *a, *b;
    assert_tern_ok(tern_sampler_create(sp, NV, &a));
    assert_tern_ok(tern_sampler_create(sp, NV, &b));
    float *l = malloc(NV * sizeof *l), *masked = malloc(NV * sizeof *masked);
    uint32_t *m = malloc((NV + 31) / 32 * sizeof *m);
    uint64_t rng = seed;
    for (int step = 0; step < 60; step++) {
        fill_logits(l, &rng, ties);
        fill_mask(m, &rng, density);
        int allowed = 0;
        for (int i = 0; i < NV; i++) {
            bool ok = i < n_allow && ((m[i >> 5] >> (i & 31)) & 1);
            masked[i] = ok ? l[i] : -INFINITY;
            allowed += ok;
        }
        int32_t want = tern_sampler_sample(a, allowed ? masked : l);
        int32_t got = tern_sampler_sample_masked(b, l, m, n_allow);
        if (want != got)
            fail_msg("temp %g top_k %d top_p %g min_p %g penalty %g density %g n_allow %d step %d: masked %d, reference %d",
                     (double)sp->temperature, sp->top_k, (double)sp->top_p, (double)sp->min_p, (double)sp->repeat_penalty,
                     density, n_allow, step, got, want);
        if (allowed) assert_true(got < n_allow && ((m[got >> 5] >> (got & 31)) & 1));
    }
    free(l);
    free(masked);
    free(m);
    tern_sampler_free(a);
    tern_sampler_free(b);
}

static void test_same_choice(void **state)
{
    (void)state;
    struct tern_sampler_params base = tern_sampler_default_params();
    const struct { float temp; int top_k; float top_p, min_p, pen; } ps[] = {
        {0.0f, 0, 1.0f, 0.0f, 1.0f},   {0.0f, 0, 1.0f, 0.0f, 1.3f},  {0.8f, 0, 1.0f, 0.0f, 1.0f},
        {1.0f, 5, 1.0f, 0.0f, 1.0f},   {1.0f, 40, 1.0f, 0.0f, 1.2f}, {0.7f, 1000, 0.9f, 0.0f, 1.0f},
        {1.0f, 0, 0.9f, 0.0f, 1.0f},   {1.0f, 0, 0.5f, 0.05f, 1.0f}, {1.2f, 20, 0.95f, 0.02f, 1.1f},
        {1.0f, 4999, 1.0f, 0.0f, 1.0f},
    };
    const double dens[] = {0.001, 0.02, 0.3, 0.999};
    uint64_t seed = 1;
    for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++) {
        struct tern_sampler_params sp = base;
        sp.temperature = ps[p].temp;
        sp.top_k = ps[p].top_k;
        sp.top_p = ps[p].top_p;
        sp.min_p = ps[p].min_p;
        sp.repeat_penalty = ps[p].pen;
        sp.repeat_last_n = 8;
        for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++) {
            sp.seed = seed++;
            run(&sp, dens[d], NV, false, sp.seed * 7919);
            run(&sp, dens[d], NV - 123, true, sp.seed * 104729); /* padding rows, ties */
        }
    }
}

/* nothing allowed: the unmasked draw (the caller's matcher then refuses it) */
static void test_empty_mask(void **state)
{
    (void)state;
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *a, *b;
    assert_tern_ok(tern_sampler_create(&sp, NV, &a));
    assert_tern_ok(tern_sampler_create(&sp, NV, &b));
    float *l = malloc(NV * sizeof *l);
    uint32_t m[(NV + 31) / 32] = {0};
    uint64_t rng = 5;
    fill_logits(l, &rng, false);
    m[0] = 1; /* token 0, but n_allow 0 refuses it */
    assert_int_equal(tern_sampler_sample_masked(b, l, m, 0), tern_sampler_sample(a, l));
    free(l);
    tern_sampler_free(a);
    tern_sampler_free(b);
}

/* The plain scan greedy decoding means: the first id of the highest logit, NaNs never beating
 * anything (so a NaN at id 0 stays the choice: the scan starts there). */
static int32_t greedy_scan(const float *l, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

static void test_greedy_in_place(void **state)
{
    (void)state;
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0.0f;
    static const int sizes[] = {1, 7, 8, 9, 4999, NV};
    uint64_t rng = 11;
    float *l = malloc(NV * sizeof *l);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        struct tern_sampler *a;
        assert_tern_ok(tern_sampler_create(&sp, n, &a));
        for (int step = 0; step < 200; step++) {
            for (int i = 0; i < n; i++) l[i] = (float)(int)(3.0 * test_rand_uniform(&rng)) - 1.0f;
            const int kind = step % 5; /* ties only; -inf; NaNs inside; NaN at 0; all -inf */
            for (int i = 0; i < n && kind; i++) {
                const double u = test_rand_uniform(&rng);
                if (kind == 1 && u < 0.3) l[i] = -INFINITY;
                if (kind == 2 && u < 0.2) l[i] = NAN;
                if (kind == 4) l[i] = -INFINITY;
            }
            if (kind == 3) l[0] = NAN;
            const int32_t want = greedy_scan(l, n), got = tern_sampler_sample(a, l);
            if (want != got) fail_msg("n %d step %d kind %d: %d, the scan %d", n, step, kind, got, want);
        }
        tern_sampler_free(a);
    }
    free(l);
}

/* Temperature with every filter over logits with NaNs: never a NaN token; all NaN (or NaN and
 * -inf): the lowest candidate id, masked or not. Before, min-p kept no candidate there and the
 * draw read the slot before the array. */
static void test_nan_logits(void **state)
{
    (void)state;
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0.8f;
    sp.min_p = 0.1f;
    sp.top_k = 40;
    sp.top_p = 0.9f;
    float *l = malloc(NV * sizeof *l);
    uint32_t m[(NV + 31) / 32];
    uint64_t rng = 23;
    for (int step = 0; step < 300; step++) {
        struct tern_sampler *a;
        sp.seed = (uint32_t)step;
        assert_tern_ok(tern_sampler_create(&sp, NV, &a));
        const int kind = step % 3; /* some NaN; all NaN; NaN and -inf only */
        for (int i = 0; i < NV; i++) {
            const double u = test_rand_uniform(&rng);
            l[i] = kind == 0 ? (u < 0.3 ? NAN : 3.0f * test_rand_normal(&rng)) : kind == 1 || u < 0.5 ? NAN : -INFINITY;
        }
        for (int w = 0; w < (NV + 31) / 32; w++) m[w] = (uint32_t)(test_rand_uniform(&rng) * 4294967295.0) | 0x100u;
        const int32_t t = tern_sampler_sample(a, l), tm = tern_sampler_sample_masked(a, l, m, NV);
        if (kind == 0) {
            assert_false(isnan(l[t]));
            assert_false(isnan(l[tm]));
            assert_true((m[tm / 32] >> (tm % 32)) & 1u);
        } else {
            int first = 0;
            while (!((m[first / 32] >> (first % 32)) & 1u)) first++;
            assert_int_equal(t, 0);
            assert_int_equal(tm, first);
        }
        tern_sampler_free(a);
    }
    free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_in_place),
        cmocka_unit_test(test_same_choice),
        cmocka_unit_test(test_empty_mask),
        cmocka_unit_test(test_nan_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
