/* test_multiseq.c — several sequences in one context (tern_decode_batch): a batch mixing three
 * prompts gives each the logits it gets alone, decode steps of three sequences in one pass
 * match single-sequence decoding, tern_kv_seq_copy reproduces a prefix, and bad batches are
 * refused with nothing left behind; random batches, truncations and copies keep every
 * sequence's positions and K/V its own. Where the kernels are batch-invariant (kern_invariant.h: the
 * scalar path; AVX-512 with Q4_0 / Q8_0, checked on a tiny Q4_0 model) the results are
 * bit-identical: every row is computed the same way whatever the batch. Other SIMD paths and formats pick other tile shapes for other batch sizes, so there the
 * bound is a small tolerance (the F16 model). */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_invariant.h"
#include "kernels/kernels.h"

static char model_path[4096], kq_path[4096]; /* F16, Q4_0 (Q8_0 where 32 does not divide) */

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof model_path, "%s/tiny-f16.gguf", test_tmpdir());
    snprintf(kq_path, sizeof kq_path, "%s/tiny-q4_0.gguf", test_tmpdir());
    if (tern_synth_model_write("tiny", "q4_0", 11, kq_path, NULL) != TERN_OK) return -1;
    return tern_synth_model_write("tiny", "f16", 11, model_path, NULL) == TERN_OK ? 0 : -1;
}

enum { N_SEQ = 3, LEN = 13 };

static int32_t prompt_tok(int s, int i) { return (int32_t)((s * 101 + i * 37 + 7) % 256); }

static double max_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* Logits after each prompt alone (its last token decoded on its own), then after one more token
 * `next[s]`. */
static void reference(struct tern_model *m, float *alone, float *alone_next, const int32_t *next)
{
    const int nv = tern_model_n_vocab(m);
    for (int s = 0; s < N_SEQ; s++) {
        struct tern_context_params cp = {.n_ctx = 64, .n_threads = 2};
        struct tern_context *ctx;
        assert_tern_ok(tern_context_create(m, &cp, &ctx));
        int32_t toks[LEN];
        for (int i = 0; i < LEN; i++) toks[i] = prompt_tok(s, i);
        /* the last prompt token alone: a 1-token batch (the decode kernels) where the mixed
         * batch computes it among 39 tokens (the prefill kernels) */
        assert_tern_ok(tern_decode(ctx, toks, LEN - 1, 0, TERN_LOGITS_NONE));
        assert_tern_ok(tern_decode(ctx, toks + LEN - 1, 1, LEN - 1, TERN_LOGITS_LAST));
        memcpy(alone + (size_t)s * nv, tern_context_logits(ctx, 0), sizeof(float) * nv);
        assert_tern_ok(tern_decode(ctx, &next[s], 1, LEN, TERN_LOGITS_LAST));
        memcpy(alone_next + (size_t)s * nv, tern_context_logits(ctx, 0), sizeof(float) * nv);
        tern_context_free(ctx);
    }
}

static void mixed_batches(const char *path, const char *isa, double tol)
{
    if (!kern_force_isa(isa)) {
        print_message("(path %s not available on this CPU)\n", isa);
        return;
    }
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    float *alone = malloc(sizeof(float) * nv * N_SEQ), *alone_next = malloc(sizeof(float) * nv * N_SEQ);
    const int32_t next[N_SEQ] = {65, 66, 67};
    reference(m, alone, alone_next, next);

    struct tern_context_params cp = {.n_ctx = 64, .n_threads = 2, .n_seq = N_SEQ};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    assert_int_equal(tern_context_n_seq(ctx), N_SEQ);
    /* all three prompts interleaved in one batch: token i of every sequence, in turn */
    int32_t toks[N_SEQ * LEN], seq[N_SEQ * LEN];
    bool want[N_SEQ * LEN];
    for (int i = 0; i < LEN; i++)
        for (int s = 0; s < N_SEQ; s++) {
            toks[i * N_SEQ + s] = prompt_tok(s, i);
            seq[i * N_SEQ + s] = s;
            want[i * N_SEQ + s] = i == LEN - 1;
        }
    struct tern_batch b = {.n = N_SEQ * LEN, .tokens = toks, .seq = seq, .logits = want};
    assert_tern_ok(tern_decode_batch(ctx, &b));
    double worst = 0;
    for (int s = 0; s < N_SEQ; s++) {
        assert_int_equal(tern_kv_seq_n_pos(ctx, s), LEN);
        assert_null(tern_context_logits(ctx, s)); /* rows without logits */
        worst = fmax(worst, max_diff(tern_context_logits(ctx, (LEN - 1) * N_SEQ + s), alone + (size_t)s * nv, nv));
    }
    /* one decode step for the three sequences together */
    const int32_t nseq[N_SEQ] = {0, 1, 2};
    const bool all[N_SEQ] = {true, true, true};
    struct tern_batch step = {.n = N_SEQ, .tokens = next, .seq = nseq, .logits = all};
    assert_tern_ok(tern_decode_batch(ctx, &step));
    for (int s = 0; s < N_SEQ; s++)
        worst = fmax(worst, max_diff(tern_context_logits(ctx, s), alone_next + (size_t)s * nv, nv));
    print_message("kernels %s, %s: max |dlogit| mixed batch vs alone %.3g (bound %.3g)\n", isa,
                  strrchr(path, '/') + 1, worst, tol);
    assert_true(worst <= tol);

    /* sequence 1 rewound and given sequence 0's prompt: continuing it equals sequence 0 alone */
    assert_tern_ok(tern_kv_seq_truncate(ctx, 1, 0));
    assert_tern_ok(tern_kv_seq_copy(ctx, 0, 1, LEN));
    const int32_t one = 1;
    struct tern_batch cont = {.n = 1, .tokens = &next[0], .seq = &one, .logits = all};
    assert_tern_ok(tern_decode_batch(ctx, &cont));
    double d = max_diff(tern_context_logits(ctx, 0), alone_next, nv);
    print_message("kernels %s: copied prefix continued: max |dlogit| %.3g\n", isa, d);
    assert_true(d <= tol);

    tern_context_free(ctx);
    tern_model_free(m);
    free(alone);
    free(alone_next);
}

static void test_mixed_scalar_exact(void **state)
{
    (void)state;
    mixed_batches(model_path, "scalar", 0.0);
    mixed_batches(kq_path, "scalar", 0.0);
}

static void test_mixed_native(void **state)
{
    (void)state;
    /* the best SIMD path of this CPU, whatever it is */
    if (!kern_force_isa("avx512") && !kern_force_isa("avx2") && !kern_force_isa("neon")) {
        TEST_SKIP("no SIMD kernel path on this CPU\n");
    }
    mixed_batches(model_path, kern_isa_name(), 2e-3);
    /* the tiny Q4_0 model: exact where every format in it is batch-invariant on this path */
    const bool exact = kern_batch_invariant(TERN_TYPE_Q4_0) && kern_batch_invariant(TERN_TYPE_Q8_0);
    mixed_batches(kq_path, kern_isa_name(), exact ? 0.0 : 2e-3);
}

static void test_bad_batches(void **state)
{
    (void)state;
    kern_force_isa("scalar");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(model_path, NULL, &m));
    struct tern_context_params cp = {.n_ctx = 16, .n_batch = 8, .n_threads = 1, .n_seq = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t toks[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seq[10] = {0}, pos[10] = {0, 1, 2, 4};
    struct tern_batch gap = {.n = 4, .tokens = toks, .seq = seq, .pos = pos};
    assert_int_equal(tern_decode_batch(ctx, &gap), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "continues at 3"));
    assert_int_equal(tern_kv_seq_n_pos(ctx, 0), 0); /* nothing left behind */
    seq[1] = 2;
    struct tern_batch badseq = {.n = 2, .tokens = toks, .seq = seq};
    assert_int_equal(tern_decode_batch(ctx, &badseq), TERN_ERR_ARG);
    struct tern_batch big = {.n = 10, .tokens = toks};
    assert_int_equal(tern_decode_batch(ctx, &big), TERN_ERR_RANGE);
    toks[0] = 1 << 30;
    struct tern_batch badtok = {.n = 1, .tokens = toks};
    assert_int_equal(tern_decode_batch(ctx, &badtok), TERN_ERR_ARG);
    assert_int_equal(tern_kv_seq_copy(ctx, 0, 0, 0), TERN_ERR_ARG);
    assert_int_equal(tern_kv_seq_copy(ctx, 0, 1, 5), TERN_ERR_ARG); /* seq 0 holds 0 */
    assert_int_equal(tern_kv_seq_truncate(ctx, 5, 0), TERN_ERR_ARG);
    assert_int_equal(tern_kv_seq_n_pos(ctx, 7), -1);
    /* a full sequence refuses more, the other still has room */
    int32_t fill[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct tern_batch f8 = {.n = 8, .tokens = fill};
    assert_tern_ok(tern_decode_batch(ctx, &f8));
    assert_tern_ok(tern_decode_batch(ctx, &f8));
    assert_int_equal(tern_decode_batch(ctx, &(struct tern_batch){.n = 1, .tokens = fill}), TERN_ERR_RANGE);
    const int32_t s1 = 1;
    assert_tern_ok(tern_decode_batch(ctx, &(struct tern_batch){.n = 1, .tokens = fill, .seq = &s1}));
    assert_int_equal(tern_kv_seq_n_pos(ctx, 1), 1);
    tern_context_free(ctx);
    tern_model_free(m);
}

/* 160 random decode batches, truncations and copies over three sequences of a small context (so
 * sequences fill up and refusals happen), against a shadow of every sequence's tokens: after
 * each call the positions match the shadow, refused calls change nothing, and at the end each
 * sequence's next logits equal those of a fresh context fed its shadow tokens (scalar kernels:
 * exact), so every token's K/V went to its own sequence's rows. In TERN_CHECKS builds the
 * position asserts of context.c and kv_cache.h run on every step. */
static void test_seq_ops_random(void **state)
{
    (void)state;
    kern_force_isa("scalar");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(model_path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    enum { NS = 3, CTX = 24, NB = 8 };
    struct tern_context_params cp = {.n_ctx = CTX, .n_batch = NB, .n_threads = 1, .n_seq = NS};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t shadow[NS][CTX];
    int len[NS] = {0};
    unsigned rng = 777;
#define RND(n) ((int)((rng = rng * 1103515245u + 12345u) >> 16) % (n))
    int n_ok = 0, n_refused = 0;
    for (int it = 0; it < 160; it++) {
        const int op = RND(4);
        tern_status want = TERN_OK, got;
        if (op <= 1) {
            int32_t toks[NB], seq[NB], pos[NB], next[NS];
            const int n = 1 + RND(NB);
            const bool given = RND(2), wrong = given && RND(8) == 0;
            memcpy(next, len, sizeof next);
            for (int i = 0; i < n; i++) {
                seq[i] = RND(NS);
                toks[i] = RND(256);
                pos[i] = next[seq[i]] + (wrong && i == n - 1 ? 1 : 0);
                if (!want && pos[i] != next[seq[i]]) want = TERN_ERR_ARG;
                else if (!want && next[seq[i]] >= CTX) want = TERN_ERR_RANGE;
                next[seq[i]]++;
            }
            struct tern_batch b = {.n = n, .tokens = toks, .seq = seq, .pos = given ? pos : NULL};
            got = tern_decode_batch(ctx, &b);
            if (!got)
                for (int i = 0; i < n; i++) shadow[seq[i]][len[seq[i]]++] = toks[i];
        } else if (op == 2) {
            const int s = RND(NS), n = RND(len[s] + 2);
            want = n <= len[s] ? TERN_OK : TERN_ERR_ARG;
            got = tern_kv_seq_truncate(ctx, s, n);
            if (!got) len[s] = n;
        } else {
            const int src = RND(NS), dst = RND(NS), n = RND(len[src] + 2);
            want = src != dst && n <= len[src] ? TERN_OK : TERN_ERR_ARG;
            got = tern_kv_seq_copy(ctx, src, dst, n);
            if (!got) {
                memcpy(shadow[dst], shadow[src], sizeof(int32_t) * n);
                len[dst] = n;
            }
        }
        if (got != want)
            fail_msg("step %d (op %d): %s, expected %s: %s", it, op, tern_status_name(got),
                     tern_status_name(want), tern_last_error());
        if (got) n_refused++; else n_ok++;
        for (int s = 0; s < NS; s++) assert_int_equal(tern_kv_seq_n_pos(ctx, s), len[s]);
    }
#undef RND
    print_message("%d calls done, %d refused; final lengths %d %d %d\n", n_ok, n_refused, len[0],
                  len[1], len[2]);
    assert_true(n_refused > 20 && n_ok > 100);

    float *ref = malloc(sizeof(float) * nv);
    for (int s = 0; s < NS; s++) {
        if (len[s] == 0 || len[s] == CTX) continue;
        const int32_t tok = 42, ss = s;
        const bool yes = true;
        struct tern_batch b = {.n = 1, .tokens = &tok, .seq = &ss, .logits = &yes};
        assert_tern_ok(tern_decode_batch(ctx, &b));
        struct tern_context_params c1 = {.n_ctx = CTX, .n_batch = NB, .n_threads = 1};
        struct tern_context *alone;
        assert_tern_ok(tern_context_create(m, &c1, &alone));
        assert_tern_ok(tern_decode(alone, shadow[s], len[s], 0, TERN_LOGITS_NONE));
        assert_tern_ok(tern_decode(alone, &tok, 1, len[s], TERN_LOGITS_LAST));
        memcpy(ref, tern_context_logits(alone, 0), sizeof(float) * nv);
        const double d = max_diff(tern_context_logits(ctx, 0), ref, nv);
        print_message("sequence %d (%d positions): max |dlogit| vs alone %.3g\n", s, len[s], d);
        assert_true(d == 0.0);
        tern_context_free(alone);
    }
    free(ref);
    tern_context_free(ctx);
    tern_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_scalar_exact),
        cmocka_unit_test(test_mixed_native),
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_seq_ops_random),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
