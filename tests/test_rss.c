/* test_rss.c — weights are mapped, not copied: after loading a model (every page touched),
 * creating a context and decoding a few tokens, the process's resident memory grew by about
 * the file size plus the KV cache (within 10 %), not twice the file size. Also for a Q8_0 file,
 * whose matrices are repacked at load on AVX-512 (model_repack.c): the copy replaces the file
 * rows it came from (their pages are released), so it costs no second copy of them. */
#include "test_support.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb * 1024;
}

static void rss_after_load(const char *rel)
{
    TEST_SHARED_OR_SKIP(path, rel);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    long before = rss_bytes();
    assert_true(before > 0);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, &(struct tern_model_params){.prefault = true}, &m));
    struct tern_context_params cp = {.n_ctx = 2048, .n_batch = 64, .n_threads = 1};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_tern_ok(tern_decode(ctx, toks, 8, 0, TERN_LOGITS_LAST));
    long grown = rss_bytes() - before;
    double expect = (double)st.st_size + (double)tern_model_kv_bytes(m, 2048);
    print_message("%s: file %lld bytes (%llu repacked at load) + KV %llu bytes = %.0f; RSS grew by "
                  "%ld bytes (%.1f %%)\n", rel, (long long)st.st_size,
                  (unsigned long long)tern_model_get_info(m)->repacked_bytes, (unsigned long long)tern_model_kv_bytes(m, 2048), expect,
                  grown, 100.0 * grown / expect);
    assert_true(grown <= 1.10 * expect);
    assert_true(grown >= 0.80 * (double)st.st_size); /* the weights really are resident */
    tern_context_free(ctx);
    tern_model_free(m);
}

static void test_rss_after_load(void **state)
{
    (void)state;
    rss_after_load("fixtures/models/llama-spm-tiny-f16.gguf");
}

static void test_rss_repacked(void **state)
{
    (void)state;
    rss_after_load("fixtures/models/llama-spm-tiny-q8_0.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rss_after_load),
                                       cmocka_unit_test(test_rss_repacked)};
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
