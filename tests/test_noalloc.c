/* test_noalloc.c — decoding a token performs no heap allocation. The test binary is linked
 * with -Wl,--wrap=malloc,calloc,realloc (CMakeLists.txt), so every allocation made by libtern
 * goes through the counters of tests/support/alloc_count.c. */
#include "test_support.h"
#include "alloc_count.h"

#include <stdio.h>
#include <stdlib.h>


static void decode_without_allocation(const char *rel, int threads)
{
    TEST_SHARED_OR_SKIP(path, rel);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_context_params cp = {.n_ctx = 128, .n_batch = 32, .n_threads = threads};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_sampler *s;
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.top_p = 0.9f;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    int32_t prompt[8] = {1, 100, 200, 300, 400, 500, 600, 700};
    assert_tern_ok(tern_decode(ctx, prompt, 8, 0, TERN_LOGITS_LAST));

    long before = test_allocations();
    const float *lg = tern_context_logits(ctx, 7);
    for (int i = 0; i < 40; i++) {
        int32_t tok = tern_sampler_sample(s, lg);
        assert_tern_ok(tern_decode(ctx, &tok, 1, 8 + i, TERN_LOGITS_LAST));
        lg = tern_context_logits(ctx, 0);
        assert_non_null(lg);
    }
    long during = test_allocations() - before;
    print_message("%s, %d thread(s): %ld allocations during 40 decode + sample steps\n", rel,
                  threads, during);
    assert_int_equal(during, 0);
    /* the counter works: creating a sampler allocates */
    struct tern_sampler *s2;
    assert_tern_ok(tern_sampler_create(&sp, 10, &s2));
    assert_true(test_allocations() > before);
    tern_sampler_free(s2);
    tern_sampler_free(s);
    tern_context_free(ctx);
    tern_model_free(m);
}

static void test_decode_q8_0(void **state)
{
    (void)state;
    decode_without_allocation("fixtures/models/llama-spm-tiny-q8_0.gguf", 1);
    decode_without_allocation("fixtures/models/llama-spm-tiny-q8_0.gguf", 2);
}

static void test_decode_k_quants(void **state)
{
    (void)state;
    decode_without_allocation("fixtures/models/llama-spm-tiny-q4_k_m.gguf", 2);
}

/* qwen35 (recurrent layers): decoding, a draft batch and its rollback (replayed from the
 * recorded inputs) allocate nothing either. */
static void test_decode_qwen35_with_rollback(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/noalloc-qwen35.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("qwen35-tiny", "q8_0", 5, path, NULL));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_context_params cp = {.n_ctx = 128, .n_batch = 32, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t prompt[8] = {1, 100, 200, 300, 400, 450, 460, 470};
    assert_tern_ok(tern_decode(ctx, prompt, 8, 0, TERN_LOGITS_LAST));
    long before = test_allocations();
    int pos = 8;
    for (int i = 0; i < 10; i++) {
        int32_t draft[5] = {10 + i, 20 + i, 30 + i, 40 + i, 50 + i};
        assert_tern_ok(tern_decode(ctx, draft, 5, pos, TERN_LOGITS_ALL));
        assert_tern_ok(tern_kv_truncate(ctx, pos + 2)); /* keep 2 of 5 */
        pos += 2;
    }
    long during = test_allocations() - before;
    print_message("qwen35-tiny: %ld allocations during 10 draft batches and rollbacks\n", during);
    assert_int_equal(during, 0);
    tern_context_free(ctx);
    tern_model_free(m);
    remove(path);
}

/* With LoRA adapters attached (the A x scratch is allocated when they are attached): a prefill
 * and 40 decode steps allocate nothing; neither does switching back to the plain model and
 * decoding on. */
static void test_decode_with_lora(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    /* rank 8 on every layer's q and ffn_down, and on the output matrix */
    static float a[8 * 512], b[32000 * 8];
    for (size_t i = 0; i < sizeof a / sizeof *a; i++) a[i] = 0.01f * (float)(i % 7) - 0.03f;
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) b[i] = 0.01f * (float)(i % 5) - 0.02f;
    const struct tern_lora_tensor t[5] = {
        {"blk.0.attn_q.weight", 8, 256, 256, a, b}, {"blk.1.attn_q.weight", 8, 256, 256, a, b},
        {"blk.0.ffn_down.weight", 8, 512, 256, a, b}, {"blk.1.ffn_up.weight", 8, 256, 512, a, b},
        {"output.weight", 8, 256, 32000, a, b}};
    char apath[4096];
    snprintf(apath, sizeof apath, "%.4000s/noalloc-lora.gguf", test_tmpdir());
    assert_tern_ok(tern_lora_write(apath, "llama", 16.0f, t, 5, "f16"));
    struct tern_lora *ad;
    assert_tern_ok(tern_lora_load(m, apath, &ad));
    struct tern_context_params cp = {.n_ctx = 128, .n_batch = 32, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    assert_tern_ok(tern_context_set_adapters(ctx, &ad, NULL, 1));
    int32_t prompt[8] = {1, 100, 200, 300, 400, 500, 600, 700};
    long before = test_allocations();
    assert_tern_ok(tern_decode(ctx, prompt, 8, 0, TERN_LOGITS_LAST));
    int32_t tok = 1000;
    for (int i = 0; i < 40; i++) assert_tern_ok(tern_decode(ctx, &tok, 1, 8 + i, TERN_LOGITS_LAST));
    long during = test_allocations() - before;
    assert_tern_ok(tern_context_set_adapters(ctx, NULL, NULL, 0));
    before = test_allocations();
    for (int i = 0; i < 8; i++) assert_tern_ok(tern_decode(ctx, &tok, 1, 48 + i, TERN_LOGITS_LAST));
    during += test_allocations() - before;
    print_message("llama-spm-tiny-q8_0 with a LoRA adapter: %ld allocations during a prefill, 40 "
                  "decode steps, then 8 plain ones\n", during);
    assert_int_equal(during, 0);
    tern_context_free(ctx);
    tern_lora_free(ad);
    tern_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_q8_0),
        cmocka_unit_test(test_decode_k_quants),
        cmocka_unit_test(test_decode_qwen35_with_rollback),
        cmocka_unit_test(test_decode_with_lora),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
