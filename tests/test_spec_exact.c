/* test_spec_exact.c — what speculative decoding needs from the model room: exact batches
 * (tern_context_set_exact_batches), the batch-invariance query (tern_model_batch_invariant) and
 * the in-memory quantized copy (tern_model_quantized_copy, the "self:TYPE" drafter).
 *
 * Exact batches: for every fixture model on every kernel path this CPU has, a batch of k tokens
 * decoded with exact batches gives every row's logits with memcmp equal to decoding the same
 * tokens one at a time — the property greedy verification rests on. Without exact batches the
 * same comparison is allowed to differ only where tern_model_batch_invariant says false (it is
 * checked to hold where it says true). The copy: same logits, bit for bit, as the file `tern
 * quantize` writes for the same type (same conversion: dequantize, then llama.cpp's reference
 * quantizer), type and byte accounting as documented, and bad types refused. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

static const char *fixtures[] = {"llama-spm-tiny-f16", "llama-spm-tiny-q8_0", "llama-spm-tiny-q6_k",
                                 "llama-spm-tiny-q4_k_m", "llama-spm-tiny-q4_0", "qwen2-tiny-f16",
                                 "qwen2-tiny-q8_0", "qwen2-tiny-q4_0"};
enum { PROMPT = 37, KMAX = 9 };

static int32_t tok_at(int i, int nv) { return (int32_t)(((uint64_t)i * 7919u + 13) % (uint64_t)(nv - 300) + 259); }

/* Logits of tokens PROMPT..PROMPT+k-1 decoded one at a time into ref (k rows). */
static void one_at_a_time(struct tern_context *ctx, int nv, int k, float *ref)
{
    assert_tern_ok(tern_kv_truncate(ctx, PROMPT));
    for (int i = 0; i < k; i++) {
        const int32_t t = tok_at(PROMPT + i, nv);
        assert_tern_ok(tern_decode(ctx, &t, 1, PROMPT + i, TERN_LOGITS_LAST));
        memcpy(ref + (size_t)i * nv, tern_context_logits(ctx, 0), sizeof(float) * (size_t)nv);
    }
}

/* Rows of a k-token batch (exact or not) that differ from ref. */
static int batch_differs(struct tern_context *ctx, int nv, int k, bool exact, const float *ref)
{
    int32_t toks[KMAX];
    for (int i = 0; i < k; i++) toks[i] = tok_at(PROMPT + i, nv);
    assert_tern_ok(tern_kv_truncate(ctx, PROMPT));
    tern_context_set_exact_batches(ctx, exact);
    assert_tern_ok(tern_decode(ctx, toks, k, PROMPT, TERN_LOGITS_ALL));
    tern_context_set_exact_batches(ctx, false);
    int bad = 0;
    for (int i = 0; i < k; i++)
        bad += memcmp(tern_context_logits(ctx, i), ref + (size_t)i * nv, sizeof(float) * (size_t)nv) != 0;
    return bad;
}

static void exact_on_path(const char *isa)
{
    if (!kern_force_isa(isa)) {
        print_message("(path %s not available on this CPU)\n", isa);
        return;
    }
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/models/%s.gguf", fixtures[f]);
        const char *path = test_shared_path(rel);
        struct tern_model *m;
        assert_tern_ok(tern_model_load(path, NULL, &m));
        const int nv = tern_model_n_vocab(m);
        struct tern_context_params cp = {.n_ctx = 128, .n_threads = 2};
        struct tern_context *ctx;
        assert_tern_ok(tern_context_create(m, &cp, &ctx));
        int32_t prompt[PROMPT];
        for (int i = 0; i < PROMPT; i++) prompt[i] = tok_at(i, nv);
        assert_tern_ok(tern_decode(ctx, prompt, PROMPT, 0, TERN_LOGITS_NONE));
        float *ref = malloc(sizeof(float) * (size_t)nv * KMAX);
        int plain_bad = 0;
        for (int k = 2; k <= KMAX; k++) {
            one_at_a_time(ctx, nv, k, ref);
            assert_int_equal(batch_differs(ctx, nv, k, true, ref), 0);
            plain_bad += batch_differs(ctx, nv, k, false, ref);
        }
        const bool inv = tern_model_batch_invariant(m);
        print_message("%s %s: batch-invariant %d; rows differing without exact batches: %d of %d\n",
                      isa, fixtures[f], inv, plain_bad, (KMAX + 2) * (KMAX - 1) / 2);
        if (inv) assert_int_equal(plain_bad, 0);
        free(ref);
        tern_context_free(ctx);
        tern_model_free(m);
    }
}

static void test_exact_batches(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models");
    (void)dir;
    char keep[16];
    snprintf(keep, sizeof keep, "%s", kern_isa_name());
    exact_on_path("scalar");
    exact_on_path("avx2");
    exact_on_path("avx512");
    exact_on_path("neon");
    kern_force_isa(keep);
}

/* On the scalar path every type sums one reference dot per output: the query must say so. */
static void test_invariance_query(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-f16.gguf");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const char *before = kern_isa_name();
    char keep[16];
    snprintf(keep, sizeof keep, "%s", before);
    assert_true(kern_force_isa("scalar"));
    assert_true(tern_model_batch_invariant(m));
    if (kern_force_isa("avx512")) assert_false(tern_model_batch_invariant(m)); /* F16 */
    kern_force_isa(keep);
    tern_model_free(m);
}

static void test_quantized_copy(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-f16.gguf");
    char qpath[4096];
    snprintf(qpath, sizeof qpath, "%s/spm-q4_0-pure.gguf", test_tmpdir());
    assert_tern_ok(tern_quantize_model(path, qpath, "q4_0", NULL));
    struct tern_model *m, *file, *copy;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    assert_tern_ok(tern_model_load(qpath, NULL, &file));
    assert_tern_ok(tern_model_quantized_copy(m, "q4_0", 2, &copy));
    const struct tern_model_info *in = tern_model_get_info(copy);
    assert_int_equal(in->n_vocab, tern_model_get_info(m)->n_vocab);
    /* every 2-D weight converted: what the forward pass reads equals the quantized file's bytes */
    assert_true(in->repacked_bytes > 0);
    assert_int_equal(in->weight_bytes, tern_model_get_info(file)->weight_bytes);
    const int nv = in->n_vocab;
    struct tern_context_params cp = {.n_ctx = 64, .n_threads = 2};
    struct tern_context *a, *b;
    assert_tern_ok(tern_context_create(file, &cp, &a));
    assert_tern_ok(tern_context_create(copy, &cp, &b));
    int32_t toks[20];
    for (int i = 0; i < 20; i++) toks[i] = tok_at(i, nv);
    assert_tern_ok(tern_decode(a, toks, 20, 0, TERN_LOGITS_ALL));
    assert_tern_ok(tern_decode(b, toks, 20, 0, TERN_LOGITS_ALL));
    for (int i = 0; i < 20; i++)
        assert_memory_equal(tern_context_logits(a, i), tern_context_logits(b, i), sizeof(float) * (size_t)nv);
    tern_context_free(a);
    tern_context_free(b);
    tern_model_free(copy);
    /* the same type as the source shares the weights: nothing converted */
    assert_tern_ok(tern_model_quantized_copy(file, "q4_0", 1, &copy));
    assert_int_equal(tern_model_get_info(copy)->repacked_bytes, 0);
    tern_model_free(copy);
    /* types that cannot hold weights, and unknown names */
    assert_int_equal(tern_model_quantized_copy(m, "q8_k", 1, &copy), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "Q8_K"));
    assert_int_equal(tern_model_quantized_copy(m, "q3_x", 1, &copy), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "q3_x"));
    tern_model_free(file);
    tern_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_batches),
        cmocka_unit_test(test_invariance_query),
        cmocka_unit_test(test_quantized_copy),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
